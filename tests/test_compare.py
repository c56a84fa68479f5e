"""Prompt experiments: variants on the same questions, bootstrap statistics, resume, CLI, ablations."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from test_runs import _data, _oracle

from rawreact import DataError, Variant, compare, compare_runs, load_collection, read_run
from rawreact.core.stats import Interval, bootstrap, paired
from rawreact.experiments.variants import ablation, parse_variant

RAWREACT = [sys.executable, "-m", "rawreact"]


def _scripted(rows, tmp_path, name, **script) -> str:
    return _oracle(rows, tmp_path / f"{name}.json", **script)


def _direct(values, seed, resamples):
    """The percentile bootstrap written out with numpy, to check stats.py against."""
    values = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    return np.quantile(values[draws].mean(axis=1), [0.025, 0.975])


def test_identical_variants_differ_by_exactly_zero(rows, tmp_path):
    data = _data(rows, tmp_path, 15)
    model = _scripted(rows, tmp_path, "mixed", wrong_every=3)
    result = compare(data, [Variant("a", model=model), Variant("b", model=model)], tmp_path / "cmp")
    for metric in ("em", "f1"):
        diff = result.difference("b", metric)
        assert diff == Interval(0.0, 0.0, 0.0) and 0.0 in diff
    assert result.interval("a", "em") == result.interval("b", "em")
    assert result.interval("a", "em").mean == pytest.approx(10 / 15)


def test_always_right_against_always_wrong_differs_by_one(rows, tmp_path):
    data = _data(rows, tmp_path, 12)
    wrong, right = _scripted(rows, tmp_path, "wrong", wrong_every=1), _scripted(rows, tmp_path, "right")
    result = compare(data, [Variant("wrong", model=wrong), Variant("right", model=right)], tmp_path / "cmp")
    assert result.difference("right", "em") == Interval(1.0, 1.0, 1.0)
    # A share gets Wilson's interval (issue 43 item 6): 0 of 12 right is not "exactly 0", it is up to 0.242.
    assert result.interval("wrong", "em") == Interval(0.0, 0.0, pytest.approx(0.2425, abs=1e-4))
    assert result.interval("right", "em") == Interval(1.0, pytest.approx(0.7575, abs=1e-4), 1.0)
    assert result.interval("right", "f1") == Interval(1.0, 1.0, 1.0)  # F1 is no share: the bootstrap
    rows = {row["variant"]: row for row in result.rows()}
    assert rows["right"]["ΔEM"] == "+1.000 [+1.000, +1.000]" and rows["wrong"]["ΔEM"] == "base"


def test_intervals_are_reproducible_and_match_numpy(rows, tmp_path):
    data = _data(rows, tmp_path, 24)
    every3, every2 = (
        _scripted(rows, tmp_path, "w3", wrong_every=3),
        _scripted(rows, tmp_path, "w2", wrong_every=2),
    )
    variants = [Variant("w3", model=every3), Variant("w2", model=every2)]
    result = compare(data, variants, tmp_path / "cmp", resamples=3000, stats_seed=11)
    base, other = result.scores("w3", "em"), result.scores("w2", "em")
    assert sum(base) == 16 and sum(other) == 12 and len(result.ids) == 24
    mean = result.interval("w2", "em")  # a share: Wilson's score interval, 12 of 24 at z = 1.96
    assert (mean.mean, round(mean.low, 4), round(mean.high, 4)) == (0.5, 0.3143, 0.6857)
    f1 = result.interval("w2", "f1")  # F1 is not a share here (partial credit): the percentile bootstrap
    if not set(result.scores("w2", "f1")) <= {0.0, 1.0}:
        assert [f1.low, f1.high] == list(_direct(result.scores("w2", "f1"), 11, 3000))
    diff = result.difference("w2", "em")
    assert diff.mean == pytest.approx(-4 / 24) and diff.low < diff.mean < diff.high
    assert [diff.low, diff.high] == list(_direct(np.subtract(other, base), 11, 3000))
    again = compare_runs(
        {"w3": tmp_path / "cmp" / "w3.jsonl", "w2": tmp_path / "cmp" / "w2.jsonl"}, resamples=3000, seed=11
    )
    assert again.difference("w2", "em") == diff and again.table("markdown") == result.table("markdown")
    other_seed = compare_runs({"w3": tmp_path / "cmp" / "w3.jsonl", "w2": tmp_path / "cmp" / "w2.jsonl"}, seed=12)
    assert other_seed.difference("w2", "em").mean == diff.mean


def test_the_bootstrap_functions_refuse_what_they_cannot_compute():
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap([])
    with pytest.raises(ValueError, match="same questions"):
        paired([1, 0], [1])
    assert bootstrap([1, 1, 0, 0], resamples=1).mean == 0.5


def test_variants_run_the_same_questions_into_ordinary_run_files_that_resume(rows, tmp_path):
    data = _data(rows, tmp_path, 20)
    script = tmp_path / "o.json"
    model = _oracle(rows, script, wrong_every=4)
    variants = [Variant("a", model=model, k=1), Variant("b", model=model, k=3, n_first=5)]
    first = compare(data, variants, tmp_path / "cmp", limit=8, shuffle=True, shuffle_seed=233)
    ids = [r["id"] for r in read_run(tmp_path / "cmp" / "a.jsonl")[1]]
    assert [r["id"] for r in read_run(tmp_path / "cmp" / "b.jsonl")[1]] == ids == first.ids and len(ids) == 8
    manifest = read_run(tmp_path / "cmp" / "b.jsonl")[0]
    assert manifest["config"]["exemplars"] == 3 and manifest["config"]["n_first"] == 5 and manifest["variant"] == "b"
    grown = compare(data, variants, tmp_path / "cmp", limit=12, shuffle=True, shuffle_seed=233)  # resumes, adds 4
    assert grown.ids[:8] == ids and len(grown.ids) == 12
    script.unlink()  # a finished comparison loads no model and asks nothing
    assert compare(data, variants, tmp_path / "cmp", limit=12, shuffle=True, shuffle_seed=233).ids == grown.ids
    changed = [Variant("a", model=model, k=1, max_steps=5), variants[1]]
    with pytest.raises(DataError, match=r"a\.jsonl: max_steps was 7, now 5"):
        compare(data, changed, tmp_path / "cmp", limit=12, shuffle=True, shuffle_seed=233)


def test_variant_specs_and_ablations():
    base = Variant("base", model="smollm2-135m", max_steps=5)
    variant = parse_variant("k2s=k=2,grammar=titles,n-first=3,temperature=0.5", base)
    assert variant == Variant(
        "k2s", model="smollm2-135m", max_steps=5, k=2, grammar="titles", n_first=3, temperature=0.5
    )
    assert parse_variant("off=grammar=off", Variant("x", grammar="step")).grammar is None
    assert parse_variant("plain=").name == "plain"
    with pytest.raises(
        DataError, match=r"'steps=3' is not key=value with a known key; the keys are method, loop, model, prompt"
    ):
        parse_variant("a=steps=3")
    with pytest.raises(DataError, match=r"k='two' is not a whole number"):
        parse_variant("a=k=two")
    with pytest.raises(DataError, match="variant name 'a/b'"):
        parse_variant("a/b=k=1")
    assert [v.k for v in ablation("exemplars", base)] == [0, 1, 2, 3, 4]
    orders = ablation("orders", base, orders=2)
    assert [(v.name, v.order) for v in orders] == [("file-order", None), ("order1", 1), ("order2", 2)]
    assert [v.load_prompt().text for v in orders][0] != orders[1].load_prompt().text
    lines = [sorted(v.load_prompt().text.splitlines()) for v in orders]
    assert lines[0] == lines[1] == lines[2]  # the same exemplars, in another order
    assert [v.name for v in ablation("instructions", base)] == ["instruction", "instruction-brief"]
    assert [v.grammar for v in ablation("grammar", base)] == [None, "step", "titles"]


def test_the_embedded_model_compares_grammar_off_and_on(tmp_path):
    demo = load_collection()
    variants = [Variant("off", k=1, max_steps=2), Variant("step", k=1, max_steps=2, grammar="step")]
    result = compare(demo, variants, tmp_path / "cmp", limit=2, resamples=1000)
    assert result.ids == [q.id for q in demo.questions[:2]]
    rows = {row["variant"]: row for row in result.rows()}
    assert rows["step"]["invalid/q"] == "0.00" and rows["step"]["n"] == "2"
    for name in ("off", "step"):
        records = read_run(tmp_path / "cmp" / f"{name}.jsonl")[1]
        assert all(r["model_calls"] >= r["steps"] >= 1 and r["tokens"]["completion"] > 0 for r in records)
        assert result.interval(name, "f1").low <= result.interval(name, "f1").mean <= result.interval(name, "f1").high


def _compare(*args, **options):
    return subprocess.run([*RAWREACT, "compare", *map(str, args)], capture_output=True, text=True, **options)


def test_the_cli_writes_markdown_and_csv_tables(rows, tmp_path):
    data = _data(rows, tmp_path, 10)
    right, wrong = _scripted(rows, tmp_path, "right"), _scripted(rows, tmp_path, "w2", wrong_every=2)
    out = tmp_path / "cmp"
    done = _compare(data, "--variant", f"right=model={right}", "--variant", f"half=model={wrong}", "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[:7] == ["variant", "method", "n", "EM", "ΔEM", "F1", "ΔF1"]
    assert "Δ is paired against right" in done.stderr
    assert (
        "only 10 questions: the intervals are wide, and a difference whose interval holds 0 says nothing" in done.stderr
    )
    markdown = (out / "comparison.md").read_text().splitlines()
    assert markdown[0].startswith("| variant | method | n | EM | ΔEM |") and markdown[2].startswith(
        "| right | react | 10 | 1.000 [0.722, 1.000] | base |"  # 10 of 10: Wilson's, not a zero width
    )
    assert markdown[3].startswith("| half | react | 10 | 0.500 [")
    rows = (out / "comparison.csv").read_text().splitlines()
    assert rows[0].startswith("variant,method,n,em,em_low,em_high,dem_mean,dem_low,dem_high,f1,")
    assert rows[2].split(",")[:4] == ["half", "react", "10", "0.500000"] and rows[2].split(",")[6] == "-0.500000"


def test_the_cli_explains_bad_variants_and_resumes_after_ctrl_c(rows, tmp_path):
    data = _data(rows, tmp_path, 16)
    bad = _compare(data, "--variant", "a=k=9", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "k=9 exemplars asked for" in bad.stderr and "Traceback" not in bad.stderr
    none = _compare(data, "--out", tmp_path / "none")
    assert none.returncode == 2 and "--variant NAME=SPEC" in none.stderr
    slow = _oracle(rows, tmp_path / "slow.json", wrong_every=2, seconds_per_call=0.05)
    out = tmp_path / "cmp"
    args = [*RAWREACT, "compare", str(data), "--variant", f"a=model={slow}", "--variant", f"b=model={slow},k=2"]
    run = subprocess.Popen([*args, "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (out / "a.jsonl").exists() or (out / "a.jsonl").read_text().count("\n") < 3:
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130 and "run the same command again" in stderr and "Traceback" not in stderr
    assert 3 <= len(read_run(out / "a.jsonl")[1]) < 16 and not (out / "comparison.md").exists()
    again = subprocess.run([*args, "--out", str(out), "-q"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "variant a: " in again.stderr and "questions already in its run file" in again.stderr
    for name in ("a", "b"):
        ids = [json.loads(line)["id"] for line in (out / f"{name}.jsonl").read_text().splitlines()]
        assert len(ids) == len(set(ids)) == 16
    assert "| a | react | 16 | 0.500 [" in (out / "comparison.md").read_text()
