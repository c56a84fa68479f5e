"""Run files that rawreact must always read back, lock, keep apart, and check on resume (audit items 8-16)."""

import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_runs import _data, _oracle

from rawreact import DataError, RunFile, ScriptedModel, load_collection, load_prompt, read_run, run_questions
from rawreact.runs.records import manifest_path

RAWREACT = [sys.executable, "-m", "rawreact"]


def _run(*args, timeout: float = 300, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RAWREACT, "run", *map(str, args)], capture_output=True, text=True, timeout=timeout, **options
    )


def _record(id: str, text: str = "x", prompt: str = "Instruction.\n\n") -> dict:
    """A result line as `Result.to_dict` writes it, with `text` in every free-text field."""
    step = {
        "i": 1,
        "thought": text,
        "action": ["finish", text],
        "action_text": f"Finish[{text}]",
        "observation": "Episode finished.",
        "error": None,
        "finish_reason": "stop",
        "tokens": {"prompt": 3, "evaluated": 3, "completion": 2},
        "seconds": 0.1,
        "calls": [
            {
                "text": text,
                "finish_reason": "stop",
                "prompt_tokens": 3,
                "completion_tokens": 2,
                "evaluated_tokens": 3,
                "seconds": 0.1,
            }
        ],
    }
    trajectory = {"question": text, "prompt": prompt, "answer": text, "ended": "finish", "model_calls": 1}
    return {
        "id": id,
        "question": text,
        "answer": text,
        "prediction": text,
        "em": 1.0,
        "f1": 1.0,
        "ended": "finish",
        "steps": 1,
        "model_calls": 1,
        "invalid_actions": 0,
        "searches": 0,
        "search_hits": 0,
        "tokens": {"prompt": 3, "evaluated": 3, "completion": 2},
        "seconds": 0.1,
        "trajectory": {**trajectory, "steps": [step]},
    }


# Item 8: the few-shot prompt is stored once per run.


def test_the_prompt_is_stored_once_in_the_manifest_and_put_back_on_reading(rows, tmp_path):
    data, out = _data(rows, tmp_path, 4), tmp_path / "run.jsonl"
    assert _run(data, "--model", _oracle(rows, tmp_path / "o.json"), "--out", out, "-q").returncode == 0
    prompt = load_prompt().text
    lines = out.read_text().splitlines()
    assert all(prompt not in line and '"prompt_sha256"' in line for line in lines)
    manifest = json.loads(manifest_path(out).read_text())
    assert list(manifest["prompts"].values()) == [prompt] and manifest["config"]["prompt_sha256"] in manifest["prompts"]
    assert all(r["trajectory"]["prompt"] == prompt for r in read_run(out)[1])
    assert sum(map(len, lines)) < 4 * len(prompt)  # before: every line carried the whole prompt
    shown = subprocess.run([*RAWREACT, "show", out, "--id", "case000", "--prompt"], capture_output=True, text=True)
    assert shown.stdout.split("\n\n", 1)[1].startswith(prompt)


def test_a_run_file_of_rawreact_0_1_still_reads_and_resumes(rows, tmp_path):
    """Old run files: the prompt inside every line, and the manifest named RUN.manifest.json."""
    data, out = _data(rows, tmp_path, 4), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    assert _run(data, "--model", model, "--out", out, "-q", "--limit", "2").returncode == 0
    manifest = json.loads(manifest_path(out).read_text())
    prompt = manifest.pop("prompts").popitem()[1]
    for key in ("model_sha256", "grammar_sha256", "shuffle_seed"):  # settings 0.1 did not record
        del manifest["config"][key]
    manifest_path(out).unlink()
    (tmp_path / "run.manifest.json").write_text(json.dumps(manifest))
    old_lines = []
    for line in out.read_text().splitlines():
        record = json.loads(line)
        del record["trajectory"]["prompt_sha256"]
        record["trajectory"]["prompt"] = prompt
        old_lines.append(json.dumps(record))
    out.write_text("\n".join(old_lines) + "\n")
    assert [r["trajectory"]["prompt"] for r in read_run(out)[1]] == [prompt, prompt]
    resumed = _run(data, "--model", model, "--out", out, "-q", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["id"] for r in read_run(out)[1]] == ["case000", "case001", "case002", "case003"]
    assert json.loads(manifest_path(out).read_text())["run_file"] == "run.jsonl"


# Item 9: line separators inside strings.


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_whatever_text_a_record_holds_is_read_back_as_written(tmp_path, text):
    out = tmp_path / f"run-{abs(hash(text))}.jsonl"
    out.unlink(missing_ok=True)
    manifest_path(out).unlink(missing_ok=True)
    sink = RunFile(out, {"model": "x"})
    written = [_record("a", text), _record("b", "\u2028\u2029\x85\x0b\x0c\x1c" + text)]
    for record in written:
        sink.append(record)
    sink.close()
    assert read_run(out)[1] == written
    RunFile(out, {"model": "x"}, resume=True).close()  # and a resume reads it too


def test_questions_with_line_separators_load_from_jsonl(rows, tmp_path):
    row = dict(rows[0], question="Is it one\u2028line\x85or two?")
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n" + json.dumps(rows[1]) + "\n", encoding="utf-8")
    assert [q.question for q in load_collection(path).questions] == [row["question"], rows[1]["question"]]


# Item 10: one writer per run file.


def test_a_run_file_open_for_writing_is_refused_to_a_second_writer(tmp_path):
    out = tmp_path / "run.jsonl"
    first = RunFile(out, {"model": "x"})
    with pytest.raises(DataError, match=r"run\.jsonl is being written by another rawreact process; wait for it"):
        RunFile(out, {"model": "x"}, resume=True)
    first.close()
    RunFile(out, {"model": "x"}, resume=True).close()  # free again once the first has closed it


def test_two_runs_started_at_the_same_moment_write_one_run(rows, tmp_path):
    data, out = _data(rows, tmp_path, 6), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json", seconds_per_call=0.05)
    command = [*RAWREACT, "run", str(data), "--model", model, "--out", str(out), "-q", "--resume"]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [run.communicate(timeout=120) for run in runs]
    codes = sorted(run.returncode for run in runs)
    assert codes == [0, 2], done
    refused = next(err for run, (_, err) in zip(runs, done, strict=True) if run.returncode == 2)
    assert "is being written by another rawreact process" in refused
    assert [r["id"] for r in read_run(out)[1]] == [f"case{n:03d}" for n in range(6)]


def test_a_writer_refused_leaves_the_file_another_process_created_after_it_looked(tmp_path, monkeypatch):
    # The race CI once met: two runs found no run file, the other created and locked it (still empty: no question had
    # finished), and the refused one then removed it as its own, so the winner wrote into a file no longer there.
    import fcntl

    import rawreact.runs.runfile as runfile

    out, other = tmp_path / "run.jsonl", []

    def open_after_the_other(path, mode):
        held = builtins_open(path, "ab")  # the other process: creates the file and holds its lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.append(held)
        return builtins_open(path, mode)

    builtins_open = open
    monkeypatch.setattr(runfile, "open", open_after_the_other, raising=False)
    with pytest.raises(DataError, match="is being written by another rawreact process"):
        RunFile(out, {"model": "x"}, resume=True)
    monkeypatch.undo()
    assert out.is_file() and other[0].fileno() >= 0
    other[0].write(b"{}\n")
    other[0].close()
    assert out.read_bytes() == b"{}\n"  # what the other process wrote is in the file at that name


# Item 11: each run file has a manifest of its own.


def test_run_files_that_share_a_stem_keep_their_own_manifests(rows, tmp_path):
    data = _data(rows, tmp_path, 2)
    a, b = _oracle(rows, tmp_path / "a.json"), _oracle(rows, tmp_path / "b.json", wrong_every=1)
    assert _run(data, "--model", a, "--out", tmp_path / "res.jsonl", "-q").returncode == 0
    assert _run(data, "--model", b, "--out", tmp_path / "res.json", "-q").returncode == 0
    assert read_run(tmp_path / "res.jsonl")[0]["config"]["model"] == a
    assert read_run(tmp_path / "res.json")[0]["config"]["model"] == b
    mixed = _run(data, "--model", b, "--out", tmp_path / "res.jsonl", "-q", "--resume")
    assert mixed.returncode == 2 and "--resume would mix two different runs" in mixed.stderr


# Item 12: a lone surrogate.


def test_a_question_with_a_lone_surrogate_is_refused_when_loaded(rows, tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([rows[0], dict(rows[1], question="smile \ud83d please")]))
    with pytest.raises(DataError, match=r"question 'case001' holds a lone surrogate escape .*fix or remove"):
        load_collection(path)
    run = _run(path, "--model", _oracle(rows, tmp_path / "o.json"), "--out", tmp_path / "r.jsonl")
    assert run.returncode == 2 and "lone surrogate" in run.stderr and "Traceback" not in run.stderr


def test_a_record_with_a_lone_surrogate_is_still_written_and_read_back(tmp_path):
    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {"model": "x"})
    sink.append(_record("a", "half \ud83d"))
    sink.close()
    assert read_run(out)[1][0]["prediction"] == "half \ud83d"


# Item 13: non-finite numbers.


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_temperature_that_is_not_a_finite_number_is_refused_before_anything_is_written(value, tmp_path):
    out = tmp_path / "run.jsonl"
    run = _run("--temperature", value, "--out", out, "--model", "scripted:none.json")
    assert run.returncode == 2 and f"temperature={float(value)} must be a finite number of at least 0" in run.stderr
    assert not out.exists() and not manifest_path(out).exists()


# Item 14: files are checked by content on resume.


def test_resume_checks_files_by_content_not_by_path(rows, tmp_path):
    data, out = _data(rows, tmp_path, 4), tmp_path / "run.jsonl"
    script = tmp_path / "o.json"
    model = _oracle(rows, script)
    grammar = tmp_path / "g.gbnf"
    grammar.write_text(_step_grammar())
    assert _run(data, "--model", model, "--out", out, "-q", "--limit", "2", "--grammar-file", grammar).returncode == 0
    grammar.write_text(_step_grammar() + "\n# edited\n")
    edited = _run(data, "--model", model, "--out", out, "-q", "--resume", "--grammar-file", grammar)
    assert edited.returncode == 2 and "grammar_sha256 was" in edited.stderr
    grammar.write_text(_step_grammar())
    script.write_text(script.read_text().replace('"seconds_per_call": 0.0', '"seconds_per_call": 0'))
    changed = _run(data, "--model", model, "--out", out, "-q", "--resume", "--grammar-file", grammar)
    assert changed.returncode == 2 and "model_sha256 was" in changed.stderr
    script.write_text(script.read_text().replace('"seconds_per_call": 0', '"seconds_per_call": 0.0'))
    copy = tmp_path / "copy.json"
    copy.write_text(script.read_text())
    moved = _run(data, "--model", f"scripted:{copy}", "--out", out, "-q", "--resume", "--grammar-file", grammar)
    assert moved.returncode == 0, moved.stderr  # the same content under another path is the same run
    assert len(read_run(out)[1]) == 4


def _step_grammar() -> str:
    from rawreact.core.resources import resource

    return resource("prompts", "grammars/step.gbnf").read_text(encoding="utf-8")


# Item 15: resumes are recorded.


def test_each_resume_is_recorded_in_the_manifest(rows, tmp_path):
    data, out = _data(rows, tmp_path, 6), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    assert _run(data, "--model", model, "--out", out, "-q", "--limit", "2").returncode == 0
    assert _run(data, "--model", model, "--out", out, "-q", "--resume", "--limit", "4").returncode == 0
    assert (
        _run(data, "--model", model, "--out", out, "-q", "--resume", "--limit", "6", "--workers", "2").returncode == 0
    )
    manifest = read_run(out)[0]
    assert manifest["limit"] == 6 and manifest["workers"] == 2
    assert [(r["done"], r["limit"], r["workers"]) for r in manifest["resumes"]] == [(2, 4, 1), (4, 6, 2)]


# Item 16: hand-edited run files.


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r.pop("em"), "has no 'em'"),
        (lambda r: r.update(em="1"), "has 'em' = \"1\", which is not a number"),
        (lambda r: r.update(id=None), "has 'id' = null, which is not a string"),
        (lambda r: r.update(id=["a"]), "has 'id' = [\"a\"], which is not a string"),
        (lambda r: r["trajectory"]["steps"][0].update(action=["", "x"]), "has a trajectory that cannot be read"),
        (lambda r: r["trajectory"].pop("steps"), "has a trajectory that cannot be read"),
        (lambda r: r.update(tokens={"prompt": "many"}), "has 'tokens' that are not whole numbers"),
    ],
)
def test_a_hand_edited_line_is_a_clear_error_naming_it(edit, message, tmp_path):
    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {"model": "x"})
    sink.append(_record("a"))
    sink.append(_record("b"))
    sink.close()
    lines = out.read_text().splitlines()
    record = json.loads(lines[1])
    edit(record)
    out.write_text(lines[0] + "\n" + json.dumps(record) + "\n")
    with pytest.raises(DataError, match=re.escape(f"run.jsonl line 2 {message}")):
        read_run(out)
    for command in (["report", str(out)], ["show", str(out)]):
        shown = subprocess.run([*RAWREACT, *command], capture_output=True, text=True)
        assert shown.returncode == 2 and "internal error" not in shown.stderr and "line 2" in shown.stderr


def test_a_manifest_whose_config_is_not_an_object_is_a_clear_error(tmp_path):
    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {"model": "x"})
    sink.append(_record("a"))
    sink.close()
    manifest_path(out).write_text('{"config": ["model"]}')
    with pytest.raises(DataError, match=r"run\.jsonl\.manifest\.json: its 'config' must be a JSON object"):
        read_run(out)
    with pytest.raises(DataError, match="its 'config' must be a JSON object"):
        RunFile(out, {"model": "x"}, resume=True)


def test_run_questions_from_python_store_the_prompt_once_too(rows, tmp_path):
    data = load_collection(_data(rows, tmp_path, 3))
    model = ScriptedModel([f" t\nAction 1: Finish[{row['answer']}]" for row in rows[:3]])
    out = tmp_path / "py.jsonl"
    results = list(run_questions(data.questions, data.env, model, load_prompt(k=1), out=out))
    assert [r.em for r in results] == [1.0] * 3
    assert [r["trajectory"]["prompt"] for r in read_run(out)[1]] == [load_prompt(k=1).text] * 3


# Which code made a run: the version number names many commits.


def _fingerprint(monkeypatch, package):
    from rawreact.core import resources

    monkeypatch.setattr(resources, "_PACKAGE", package)
    resources.source_fingerprint.cache_clear()
    try:
        return resources.source_fingerprint()
    finally:
        resources.source_fingerprint.cache_clear()


def test_the_source_fingerprint_changes_with_a_byte_of_the_code_and_names_a_checkouts_commit(monkeypatch, tmp_path):
    package = tmp_path / "rawreact"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n")
    (package / "core" / "a.py").write_text("y = 2\n")
    first = _fingerprint(monkeypatch, package)
    assert first["files"] == 2 and re.fullmatch(r"[0-9a-f]{64}", first["sha256"]) and "commit" not in first
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0compiled")
    assert _fingerprint(monkeypatch, package) == first  # compiled files are not the code
    (package / "core" / "a.py").write_text("y = 3\n")
    edited = _fingerprint(monkeypatch, package)
    assert edited["sha256"] != first["sha256"]
    (package / "core" / "a.py").rename(package / "a.py")  # the same bytes under another path
    moved = _fingerprint(monkeypatch, package)
    assert moved["sha256"] != edited["sha256"] and moved["files"] == 2

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert _fingerprint(monkeypatch, package) == moved | {"commit": head, "changed": False}
    (package / "a.py").write_text("y = 4\n")
    assert _fingerprint(monkeypatch, package)["changed"] is True


def test_a_resume_by_other_code_is_recorded_and_said(monkeypatch, tmp_path):
    from rawreact.core.resources import source_fingerprint, source_named
    from rawreact.runs import runfile

    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {"model": "x"})
    assert sink.manifest["source"] == source_fingerprint() and sink.other_source is None
    sink.append(_record("a", "t"))
    sink.close()
    same = RunFile(out, {"model": "x"}, resume=True)
    same.close()
    assert same.other_source is None  # the same code: nothing to say

    other = {"sha256": "f" * 64, "files": 1, "commit": "a" * 40, "changed": True}
    monkeypatch.setattr(runfile, "source_fingerprint", lambda: other)
    resumed = RunFile(out, {"model": "x"}, resume=True)
    resumed.close()
    assert resumed.other_source == (
        f"{out}'s 1 finished records were written by other rawreact code ({source_named(source_fingerprint())}) "
        "than this sitting runs (commit aaaaaaaaaaaa with changes); its manifest lists both"
    )
    manifest = read_run(out)[0]
    assert [r["source"] for r in manifest["resumes"]] == [source_fingerprint(), other]
    assert manifest["source"] == source_fingerprint()  # the start's, kept
