"""The second hardening round, files: outputs that never replace inputs, stores built and opened
safely, run lines checked where they are read, and what every reader takes of what `run` wrote
(audit items 1-3, 9, 15-17, 19, 21-24)."""

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_audit_runfiles import _record
from test_runs import _data, _oracle

from rawreact import DataError, PassageEnv, RunFile, read_run
from rawreact.environments.build import build_store, remove_stale_builds
from rawreact.environments.store import PassageStore
from rawreact.runs.records import manifest_path
from rawreact.tasks.corpus import read_sources

RAWREACT = [sys.executable, "-m", "rawreact"]


def _cli(*args, **options) -> subprocess.CompletedProcess:
    return subprocess.run([*RAWREACT, *map(str, args)], capture_output=True, text=True, timeout=300, **options)


@pytest.fixture
def run_file(rows, tmp_path) -> Path:
    """A finished run of three invented questions on a scripted oracle."""
    data, out = _data(rows, tmp_path, 3), tmp_path / "run.jsonl"
    done = _cli("run", data, "--model", _oracle(rows, tmp_path / "o.json", wrong_every=2), "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# Item 1: export and report --html never replace what they read, nor an existing file without --force.


def test_export_and_report_refuse_to_write_over_the_run_they_read(run_file):
    folder = run_file.parent
    before = _snapshot(folder)
    manifest = manifest_path(run_file)
    for args in (
        ("export", run_file, "--out", run_file),
        ("export", run_file, "--out", manifest),
        ("export", run_file, "--out", run_file, "--force"),
        ("report", run_file, "--html", run_file),
        ("report", run_file, "--html", manifest, "--force"),
    ):
        done = _cli(*args)
        assert done.returncode == 2 and "this command reads" in done.stderr, (args, done.stderr)
    assert _snapshot(folder) == before


def test_export_and_report_overwrite_an_existing_file_only_with_force(run_file, tmp_path):
    for args, out in (
        (("export", run_file, "--min-f1", "0", "--out"), tmp_path / "ex.jsonl"),
        (("report", run_file, "--html"), tmp_path / "page.html"),
    ):
        out.write_text("keep me\n")
        done = _cli(*args, out)
        assert done.returncode == 2 and f"{out} exists" in done.stderr and "--force" in done.stderr
        assert out.read_text() == "keep me\n"
        assert _cli(*args, out, "--force").returncode == 0
        assert out.read_text() != "keep me\n"


# Items 2, 3 and 22: index never replaces a store another build wrote, nor its sources; killed builds are cleaned.


def _corpus(path: Path, pages: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as file:
        for n in range(pages):
            words = " ".join(rng.choice(("amber", "tide", "lantern", "vale", "orlo", "mara")) for _ in range(6))
            file.write(json.dumps({"title": f"Page {n} {words[:12]}", "text": f"{words}. It is page {n}."}) + "\n")
    return path


def test_a_build_that_finishes_second_never_replaces_the_first_ones_store(tmp_path):
    out = tmp_path / "s.sqlite"
    source = _corpus(tmp_path / "c.jsonl", 50)

    def pages_then_a_rival():  # another build of the same --out finishes while this one reads
        yield from read_sources([source])
        out.write_bytes(b"the other build's store")

    with pytest.raises(DataError, match="written by another build while this one ran"):
        build_store(pages_then_a_rival(), out)
    assert out.read_bytes() == b"the other build's store"
    assert not list(tmp_path.glob(".s.sqlite.building-*"))
    build_store(read_sources([source]), out, replace=True)  # --force replaces it
    assert len(PassageStore(out)) == 50


def test_two_index_commands_of_one_out_leave_one_store_and_one_error(tmp_path):
    source = _corpus(tmp_path / "c.jsonl", 20_000)
    out = tmp_path / "s.sqlite"
    command = [*RAWREACT, "index", str(source), "--out", str(out)]
    both = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    finished = [(p.wait(timeout=300), p.stderr.read()) for p in both]
    assert sorted(code for code, _ in finished) == [0, 2], finished
    loser = next(err for code, err in finished if code == 2)
    assert f"{out}" in loser and "--force" in loser and "Traceback" not in loser
    assert len(PassageStore(out)) == 20_000
    assert not list(tmp_path.glob(".s.sqlite.building-*"))


def test_index_refuses_an_out_that_is_one_of_its_sources(tmp_path):
    source = _corpus(tmp_path / "c.jsonl", 5)
    before = source.read_bytes()
    done = _cli("index", source, "--out", source, "--force")
    assert done.returncode == 2 and "this command reads" in done.stderr
    folder = tmp_path / "wiki"
    folder.mkdir()
    _corpus(folder / "part.jsonl", 5)
    done = _cli("index", folder, "--out", folder / "wiki.sqlite")
    assert done.returncode == 2 and "a folder this command reads" in done.stderr
    assert source.read_bytes() == before and not (folder / "wiki.sqlite").exists()


def test_stale_partial_builds_are_removed_and_a_live_ones_kept(tmp_path):
    out = tmp_path / "s.sqlite"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = tmp_path / f".s.sqlite.building-{dead.pid}"
        live = tmp_path / f".s.sqlite.building-{sleeper.pid}"
        for path in (stale, live):
            path.write_bytes(b"x" * 1000)
        done = _cli("index", _corpus(tmp_path / "c.jsonl", 5), "--out", out)
        assert done.returncode == 0, done.stderr
        assert not stale.exists() and live.exists() and len(PassageStore(out)) == 5
        assert remove_stale_builds(out) == []
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sigterm_during_a_build_leaves_no_partial_file(tmp_path):
    source = _corpus(tmp_path / "c.jsonl", 400_000)
    out = tmp_path / "s.sqlite"
    build = subprocess.Popen([*RAWREACT, "index", str(source), "--out", str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".s.sqlite.building-*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    build.send_signal(signal.SIGTERM)
    assert build.wait(timeout=120) == 128 + signal.SIGTERM, build.stderr.read()
    assert "was not written" in build.stderr.read()
    assert not out.exists() and not list(tmp_path.glob(".s.sqlite.building-*"))


# Item 9: whatever `run` writes (a lone surrogate from the model included), every reader takes.


def test_a_lone_surrogate_from_the_model_is_read_by_every_reader_and_leaves_no_temporary_file(rows, tmp_path):
    data, row = _data(rows, tmp_path, 1), rows[0]
    script = tmp_path / "s.json"  # ASCII JSON: the surrogate is an escape, as a model's output would come
    script.write_text(json.dumps({"questions": {row["question"]: [" It is Ab\ud800c.\nAction 1: Finish[Ab\ud800c]"]}}))
    out = tmp_path / "run.jsonl"
    done = _cli("run", data, "--model", f"scripted:{script}", "--out", out)
    assert done.returncode == 0, done.stderr
    record = read_run(out)[1][0]
    assert record["prediction"] == "Ab\ud800c"
    assert _cli("export", out, "--out", tmp_path / "ex.jsonl", "--min-f1", "0").returncode == 0
    assert "Ab\\ud800c" in (tmp_path / "ex.jsonl").read_text()  # JSON's escape: the same string
    assert json.loads((tmp_path / "ex.jsonl").read_text().splitlines()[0])["completion"].endswith("Ab\ud800c]")
    assert _cli("report", out, "--html", tmp_path / "page.html").returncode == 0
    assert "Ab\\ud800c" in (tmp_path / "page.html").read_text(encoding="utf-8")
    shown = _cli("show", out, "--id", record["id"])
    assert shown.returncode == 0 and "Ab\\ud800c" in shown.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# Item 15: a damaged store is refused when opened, and any later SQLite error names the store.


def _store(tmp_path, pages: int = 40, name: str = "s.sqlite") -> Path:
    build_store(read_sources([_corpus(tmp_path / f"{name}.jsonl", pages)]), tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize(
    "damage",
    [
        "DROP TABLE pages",
        "UPDATE pages SET sentences = 'not json' WHERE id = 1",
        "UPDATE pages SET sentences = '[1, 2]' WHERE id = (SELECT max(id) FROM pages)",
        "DELETE FROM meta WHERE name = 'content_sha256'",
        "DROP TABLE terms",
    ],
)
def test_a_damaged_store_is_refused_when_it_is_opened(tmp_path, damage):
    path = _store(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute(damage)
    with pytest.raises(DataError, match=rf"{path}: .*(damaged|not a rawreact)"):
        PassageStore(path)


def test_random_damage_is_an_error_naming_the_store_never_an_internal_error(tmp_path, rows):
    path = _store(tmp_path, 30_000)
    size = path.stat().st_size
    assert size > 400_000
    with open(path, "r+b") as file:
        file.seek(200_000)
        file.write(random.Random(7).randbytes(size - 200_000 - 4096))
    try:
        env = PassageEnv(PassageStore(path))
        for n in range(0, 30_000, 97):
            env.step(f"Search[Page {n}]")
            env.step(f"Search[orlo lantern {n}]")
    except DataError as error:
        assert str(path) in str(error) and "rawreact index" in str(error)
    else:
        pytest.fail("a store damaged over most of its pages answered every search")
    done = _cli("run", _data(rows, tmp_path, 2), "--passages", path, "--model", "scripted:none.json")
    assert done.returncode == 2 and str(path) in done.stderr and "internal error" not in done.stderr


def test_a_store_search_of_any_length_never_raises(tmp_path):
    env = PassageEnv(PassageStore(_store(tmp_path)))
    many = " ".join(f"w{n}" for n in range(260_000))
    observation, done = env.step(f"Search[{many}]")
    assert observation.startswith("Could not find") and not done
    assert env.step("Search[Page 3 amber]")[0]  # the store still answers


# Item 16: every field a reader uses is checked where lines are read; the error names the file and line.


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.pop("prediction"),
        lambda r: r.pop("question"),
        lambda r: r.pop("answer"),
        lambda r: r.update(question=5),
        lambda r: r.update(prediction=None),
        lambda r: r.update(repeats="2"),
        lambda r: r.update(searches="2"),
        lambda r: r.update(em="1"),
        lambda r: r.update(supported="yes"),
        lambda r: r["trajectory"]["steps"][0].update(i="1"),
        lambda r: r["trajectory"]["steps"][0]["calls"][0].update(prompt_tokens=-3),
        lambda r: r["trajectory"]["steps"][0].update(action=["finish"]),
    ],
)
def test_every_reader_names_the_line_of_a_hand_edited_run_file(tmp_path, edit, capsys):
    """In process (`main`, which the console script calls): 72 reads, each a second slower as a subprocess."""
    from rawreact.cli.app import main

    out = tmp_path / "run.jsonl"
    good, bad = _record("q1"), _record("q2")
    edit(bad)
    sink = RunFile(out, {})
    sink.append(good)
    sink.append(bad)
    sink.close()
    for args in (
        ("report", out),
        ("report", out, "--html", tmp_path / "page.html"),
        ("show", out),
        ("show", out, "--id", "q1"),
        ("compare-runs", out, f"again={out}"),
        ("export", out, "--out", tmp_path / "ex.jsonl"),
    ):
        code, err = main([str(arg) for arg in args]), capsys.readouterr().err
        assert code == 2 and f"{out} line 2 " in err, (args, err)
        assert "internal error" not in err
    assert not (tmp_path / "page.html").exists() and not (tmp_path / "ex.jsonl").exists()


# Item 17: the page writes no unchecked value, and its policy allows no base, form or outside load.


@pytest.mark.parametrize("field", ["repeat_of", "prompt_tokens", "completion_tokens", "evaluated_tokens"])
def test_markup_in_a_numeric_field_is_refused_before_the_page_is_written(tmp_path, field):
    record = _record("q1")
    step = record["trajectory"]["steps"][0]
    injected = '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/">'
    (step if field == "repeat_of" else step["calls"][0])[field] = injected
    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {})
    sink.append(record)
    sink.close()
    done = _cli("report", out, "--html", tmp_path / "page.html")
    assert done.returncode == 2 and f"{out} line 1 has a trajectory that cannot be read (step 1 " in done.stderr
    assert f"'{field}' = \"<meta" in done.stderr
    assert not (tmp_path / "page.html").exists()


def test_the_pages_policy_names_no_base_and_no_form_target(run_file, tmp_path):
    assert _cli("report", run_file, "--html", tmp_path / "page.html").returncode == 0
    page = (tmp_path / "page.html").read_text()
    policy = page.split('http-equiv="Content-Security-Policy" content="')[1].split('"')[0]
    assert "default-src 'none'" in policy and "base-uri 'none'" in policy and "form-action 'none'" in policy
    assert page.count("<meta http-equiv") == 1


# Item 19: a corpus line no UTF-8 can hold is skipped and counted, not an internal error.


def test_a_lone_surrogate_in_a_corpus_is_skipped_and_counted(tmp_path):
    source = tmp_path / "c.jsonl"
    lines = [json.dumps({"title": "Orlo", "text": "Orlo is a village."})]
    lines.append('{"title": "Bad", "text": "A lone \\ud800 here."}')
    lines.append(json.dumps({"title": "Dallow", "text": "Dallow is a town."}))
    source.write_text("\n".join(lines) + "\n")
    done = _cli("index", source, "--out", tmp_path / "s.sqlite")
    assert done.returncode == 0, done.stderr
    assert "1 page with text no UTF-8 can hold skipped" in done.stdout
    store = PassageStore(tmp_path / "s.sqlite")
    assert len(store) == 2 and store.sentences("Bad") is None and store.info["sources"][0]["unreadable"] == 1


# Item 21: what a file is, said by what it holds, not by the length of its first line or one key.


def test_corpus_lines_are_a_corpus_whatever_their_first_line(tmp_path):
    big = tmp_path / "big.jsonl"
    long_text = "Orlo is a village. " * 250_000  # a first line of about 4.75 MB
    big.write_text(json.dumps({"title": "Orlo", "text": long_text}) + "\n" + json.dumps({"title": "B", "text": "B."}))
    keyed = tmp_path / "keyed.jsonl"
    keyed.write_text(json.dumps({"title": "Orlo", "text": "Orlo is a village.", "context": "geography"}) + "\n")
    for source in (big, keyed):
        description, _ = next(read_sources([source]))
        assert description["path"] == str(source) and "format" not in description  # not read as a question file
        done = _cli("index", source, "--out", tmp_path / f"{source.stem}.sqlite")
        assert done.returncode == 0, done.stderr
    assert len(PassageStore(tmp_path / "big.sqlite")) == 2


def test_passages_named_sqlite_that_are_not_say_what_they_are_not(tmp_path, rows):
    fake = tmp_path / "wiki.sqlite"
    fake.write_text("this is no database\n")
    done = _cli("run", _data(rows, tmp_path, 1), "--passages", fake, "--model", "scripted:none.json")
    assert done.returncode == 2 and f"{fake}: not an SQLite file, so not a passage store" in done.stderr


# Item 23: counts that add up, an empty run, a run file that would replace its data.


def test_export_counts_add_up_to_the_questions_read(tmp_path):
    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {})
    sink.append(_record("good"))
    invalid = _record("invalid")  # right, but its only step's action could not be carried out
    invalid["trajectory"]["steps"][0]["error"] = "no action"
    sink.append(invalid)
    wrong = _record("wrong")
    wrong.update(em=0.0, f1=0.0)
    sink.append(wrong)
    sink.close()
    done = _cli("export", out, "--out", tmp_path / "ex.jsonl")
    assert done.returncode == 0, done.stderr
    assert "1 example (completion) from 1 of 3 questions" in done.stderr
    assert "1 not selected, 0 with no steps for this layout" in done.stderr
    assert "1 selected with no step to learn from" in done.stderr


def test_show_first_wrong_on_an_empty_run_says_it_is_empty(tmp_path):
    out = tmp_path / "run.jsonl"
    RunFile(out, {}).close()
    done = _cli("show", out, "--first-wrong")
    assert done.returncode == 2 and "holds no finished question yet" in done.stderr


def test_run_refuses_an_out_that_is_its_own_data(rows, tmp_path):
    data = _data(rows, tmp_path, 2)
    before = data.read_bytes()
    done = _cli("run", data, "--out", data, "--model", _oracle(rows, tmp_path / "o.json"))
    assert done.returncode == 2 and f"{data} is an input this command reads" in done.stderr
    assert data.read_bytes() == before and not manifest_path(data).exists()


# Item 24: compare checks every variant before it writes anything.


@pytest.mark.parametrize("bad", ["passages=missing.sqlite", "model=missing.gguf"])
def test_compare_writes_nothing_when_a_later_variant_is_bad(rows, tmp_path, bad):
    data, folder = _data(rows, tmp_path, 2), tmp_path / "cmp"
    oracle = _oracle(rows, tmp_path / "o.json")
    done = _cli("compare", data, "--variant", f"a=model={oracle}", "--variant", f"b={bad}", "--out", folder)
    assert done.returncode == 2 and "missing" in done.stderr and "internal error" not in done.stderr
    assert not folder.exists() or not list(folder.iterdir())
