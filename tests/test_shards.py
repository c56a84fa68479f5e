"""Shards and merge (issue 31, item 3): `--shard K/N` runs a fixed part of the chosen questions, and
`rawreact merge` joins the parts' run files into one that scores, reports and resumes as a single run's."""

import csv
import io
import json
import shutil
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st
from test_runs import _data, _oracle, _scores

from rawreact import read_run
from rawreact.config.settings import in_shard

RAWREACT = [sys.executable, "-m", "rawreact"]


def _rawreact(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*RAWREACT, *map(str, args)], capture_output=True, text=True)


def _setup(rows, tmp_path, n=7):
    data = _data(rows, tmp_path, n)
    model = _oracle(rows[:n], tmp_path / "oracle.json", wrong_every=3)  # every third answer wrong
    return data, model


def _shards(data, model, tmp_path, n=3, *extra) -> list:
    outs = []
    for k in range(1, n + 1):
        out = tmp_path / f"s{k}.jsonl"
        workers = ["--workers", "2"] if k == 2 else []  # the partition does not depend on --workers
        done = _rawreact("run", data, "--model", model, "--shard", f"{k}/{n}", "--out", out, "-q", *workers, *extra)
        assert done.returncode == 0, done.stderr
        outs.append(out)
    return outs


def _report(path) -> list[dict]:
    done = _rawreact("report", path, "--format", "csv")
    assert done.returncode == 0, done.stderr
    return list(csv.DictReader(io.StringIO(done.stdout)))


def test_three_shards_merged_score_report_and_resume_as_one_run(rows, tmp_path):
    data, model = _setup(rows, tmp_path)
    single = tmp_path / "single.jsonl"
    assert _rawreact("run", data, "--model", model, "--out", single, "-q").returncode == 0
    order = [r["id"] for r in read_run(single)[1]]  # one worker: the questions' order
    outs = _shards(data, model, tmp_path)
    for k, out in enumerate(outs, 1):
        manifest, records = read_run(out)
        assert sorted(r["id"] for r in records) == sorted(order[k - 1 :: 3])
        assert manifest["config"]["shard"] == f"{k}/3" and manifest["questions"] == len(order[k - 1 :: 3])
    merged = tmp_path / "all" / "merged.jsonl"
    done = _rawreact("merge", *outs, "--out", merged)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == f"{merged}: 7 questions from 3 run files\n"
    ids = [r["id"] for r in read_run(merged)[1]]
    assert len(ids) == len(set(ids)) == 7 and set(ids) == set(order)
    assert _scores(merged) == _scores(single)  # each question's prediction, EM, F1, ending and steps
    same = ("n", "scored", "EM", "F1", "finished", "steps", "invalid", "search hits")
    mine, theirs = _report(merged)[0], _report(single)[0]
    assert {k: mine[k] for k in same if k in mine} == {k: theirs[k] for k in same if k in theirs}
    assert mine["EM"] == theirs["EM"] == f"{5 / 7:.3f}"  # 2 of 7 wrong: questions 3 and 6
    manifest = json.loads((merged.parent / "merged.jsonl.manifest.json").read_text())
    assert manifest["config"]["shard"] is None and manifest["questions"] == 7
    assert [m["shard"] for m in manifest["merged"]] == ["1/3", "2/3", "3/3"]
    assert sum(m["kept"] for m in manifest["merged"]) == 7
    # --resume with the unsharded command takes the merged file as its own run: nothing is left to run.
    before = merged.read_bytes()
    done = _rawreact("run", data, "--model", model, "--out", merged, "--resume", "-q")
    assert done.returncode == 0, done.stderr
    assert "7 already in" in done.stdout and merged.read_bytes() == before
    for command in (["show", merged], ["compare-runs", single, merged], ["export", merged, "--out", tmp_path / "x"]):
        done = _rawreact(*command)
        assert done.returncode == 0, (command, done.stderr)
    assert "+0.000" in _rawreact("compare-runs", single, merged).stdout  # paired difference of the same scores


def test_a_merged_manifest_counts_the_cached_calls_of_every_shard(rows, tmp_path):
    """Shards run over a cache that a whole run filled: each shard's manifest counts its own calls, and the
    merged one counts them all again from the merged records."""
    data, model = _setup(rows, tmp_path)
    cache = tmp_path / "calls.sqlite"
    whole = tmp_path / "whole.jsonl"
    done = _rawreact("run", data, "--model", model, "--cache", cache, "--out", whole, "-q")
    assert done.returncode == 0, done.stderr
    calls = read_run(whole)[0]["cache"]["made"]
    outs = _shards(data, model, tmp_path, 3, "--cache", cache)
    parts = [read_run(out)[0]["cache"] for out in outs]
    assert [p["made"] for p in parts] == [0, 0, 0] and sum(p["hits"] for p in parts) == calls > 7
    merged = tmp_path / "merged.jsonl"
    assert _rawreact("merge", *outs, "--out", merged).returncode == 0
    manifest = read_run(merged)[0]
    assert manifest["cache"] == {"file": str(cache), "sampled": False, "hits": calls, "made": 0}
    assert "endpoints" not in manifest  # no fleet, no counts per server


def test_a_shard_not_given_is_reported_and_resume_runs_its_questions(rows, tmp_path):
    data, model = _setup(rows, tmp_path)
    outs = _shards(data, model, tmp_path)
    merged = tmp_path / "merged.jsonl"
    done = _rawreact("merge", outs[0], outs[2], "--out", merged)
    assert done.returncode == 0
    assert done.stderr.startswith("rawreact: shard 2/3 not given: their questions are missing")
    assert len(read_run(merged)[1]) == 5
    done = _rawreact("run", data, "--model", model, "--out", merged, "--resume", "-q")
    assert done.returncode == 0, done.stderr
    assert len(read_run(merged)[1]) == 7 and "5 already in" in done.stdout


def test_bad_merges_are_one_clear_line_each_and_write_nothing(rows, tmp_path):
    data, model = _setup(rows, tmp_path)
    outs = _shards(data, model, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    steps = _shards(data, model, other, 3, "--max-steps", "3")
    (tmp_path / "halves").mkdir()
    halves = _shards(data, model, tmp_path / "halves", 2)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(outs[0], copy)
    shutil.copy(outs[0].with_name("s1.jsonl.manifest.json"), tmp_path / "copy.jsonl.manifest.json")
    text = tmp_path / "notes.txt"
    text.write_text("not a run\n")
    out = tmp_path / "merged.jsonl"
    cases = [
        ([outs[0], steps[1], outs[2]], "is not a part of the same run: max_steps is 7 in"),
        ([outs[0], copy], "is in both"),
        ([outs[0], tmp_path / "missing.jsonl"], "missing.jsonl: no such run file"),
        ([outs[0], text], "notes.txt has no manifest"),
        ([outs[0], halves[1]], "the files are parts of different partitions"),
        ([outs[0], out], "is both an input and --out"),
    ]
    for files, message in cases:
        done = _rawreact("merge", *files, "--out", out)
        assert done.returncode == 2 and message in done.stderr, (files, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert not out.exists() and not out.with_name("merged.jsonl.manifest.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rawreact-merge-")]  # nothing staged is left
    # The same question twice is merged when asked to keep the first file's record, and said so.
    done = _rawreact("merge", outs[0], copy, outs[1], outs[2], "--out", out, "--duplicates", "first")
    assert done.returncode == 0 and "3 records of a question already given left out" in done.stderr
    manifest, records = read_run(out)
    assert len(records) == 7 and manifest["questions"] == 7  # shard 1/3, given twice, counted once
    done = _rawreact("merge", *outs, "--out", out)
    assert done.returncode == 2 and "already exists; merge writes a new run file" in done.stderr


def test_a_bad_shard_is_one_line():
    for shard in ("0/3", "4/3", "x", "1/0", "2"):
        done = _rawreact("run", "--model", "scripted:nowhere.json", "--shard", shard)
        assert done.returncode == 2 and f"shard={shard!r} (--shard) must be K/N" in done.stderr, done.stderr


@given(st.lists(st.integers(), max_size=40), st.integers(min_value=1, max_value=9))
def test_the_shards_hold_every_question_once_and_differ_in_size_by_one_at_most(items, n):
    parts = [in_shard(items, (k, n)) for k in range(1, n + 1)]
    assert sorted(x for part in parts for x in part) == sorted(items)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert in_shard(items, None) == items


def test_resume_of_a_shard_refuses_another_shard(rows, tmp_path):
    data, model = _setup(rows, tmp_path)
    first = _shards(data, model, tmp_path)[0]
    before = first.read_bytes()
    done = _rawreact("run", data, "--model", model, "--shard", "2/3", "--out", first, "--resume")
    assert done.returncode == 2 and "shard was '1/3', now '2/3'" in done.stderr, done.stderr
    assert first.read_bytes() == before
