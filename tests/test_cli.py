"""The `rawreact` command: runs on the scripted and the real model, and fails cleanly on bad input."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rawreact.cli.app import main

CONSOLE_SCRIPT = Path(sys.executable).with_name("rawreact")  # the console script of this environment


def _script(tmp_path, texts):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(texts))
    return f"scripted:{path}"


def test_run_a_question_on_the_scripted_model(tmp_path, capsys):
    model = _script(tmp_path, [" I need Dallow.\nAction 1: Search[Dallow]", " Found it.\nAction 2: Finish[Petra Lind]"])
    out = tmp_path / "run.jsonl"
    code = main(
        [
            "run",
            "--model",
            model,
            "--question",
            "Who founded the observatory in Dallow?",
            "--answer",
            "Petra Lind",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert (
        "Question: Who founded the observatory in Dallow?\nThought 1: I need Dallow.\nAction 1: Search[Dallow]\n"
        in printed
    )
    assert "Observation 1: Dallow is a market town on the river Tam in western Calvora." in printed
    assert "result [1/1] question-1: correct (EM 1, F1 1.00) answer 'Petra Lind'" in printed
    assert "1 question: EM 1.000, F1 1.000, finished 1/1" in printed
    [line] = out.read_text().splitlines()
    record = json.loads(line)
    assert record["prediction"] == "Petra Lind" and record["em"] == 1.0 and record["model_calls"] == 2
    assert record["trajectory"]["steps"][0]["action"] == ["search", "Dallow"]


def test_run_the_demo_collection_quietly(tmp_path, capsys):
    model = _script(tmp_path, [" t\nAction 1: Finish[Tam]"] * 2)
    assert main(["run", "--model", model, "--limit", "2", "-q", "-k", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "(1 exemplar)" in lines[0] and "Thought" not in "\n".join(lines)
    assert lines[1].startswith("result [1/2] calvora-1: wrong") and lines[2].startswith(
        "result [2/2] calvora-2: correct"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--model", "nope"], "unknown model 'nope'"),
        (["run", "missing.json"], "missing.json: cannot read the question file"),
        (["run", "BAD"], "BAD line 1 column 2: not valid JSON"),
        (["run", "NOQ"], "has no questions; add some, or ask one with --question"),
        (["run", "NOANSWER"], "questions[0] needs a string 'answer'"),
        (["run", "-k", "9"], "k=9 exemplars asked for"),
        (["run", "--prompt", "missing.txt"], "missing.txt: cannot read the prompt file"),
        (["run", "--out", "S/run.jsonl", "--model", "scripted:S"], "S/run.jsonl: S is a file, not a folder"),
        (["run", "--passages", "NOPE"], "NOPE: no such file; --passages takes a store built by `rawreact index`"),
        (["run", "--passages", "BAD"], "BAD line 1 column 2: not valid JSON"),
        (["run", "--key", "x"], "--key 'x' applies to a reference JSON prompt file"),
    ],
)
def test_bad_input_is_one_clear_line_and_a_nonzero_exit(tmp_path, args, message):
    (tmp_path / "BAD").write_text("{oops")
    (tmp_path / "S").write_text('[" t\\nAction 1: Finish[x]"]')
    (tmp_path / "NOQ").write_text('{"passages": {"A": "a."}}')
    (tmp_path / "NOANSWER").write_text('{"passages": {"A": "a."}, "questions": [{"question": "q"}]}')
    result = subprocess.run([sys.executable, "-m", "rawreact", *args], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.startswith("rawreact: error: ")
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("option", ["--n-first", "--max-steps", "--max-tokens", "--limit", "--n-ctx"])
def test_counts_must_be_positive(option, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["run", option, "0"])
    assert exit.value.code == 2 and f"argument {option}: 0 must be at least 1" in capsys.readouterr().err


def test_console_script_runs_the_real_model(tmp_path):
    result = subprocess.run(
        [str(CONSOLE_SCRIPT), "run", "--limit", "1", "--max-steps", "3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "model gemma3-270m" in result.stdout and "Thought 1:" in result.stdout and "Action 1:" in result.stdout
    assert "result [1/1] calvora-1:" in result.stdout
    # llama.cpp's own logging is kept off the terminal: stderr holds rawreact's lines alone (what loads, what the
    # first question took, where the run is kept).
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("rawreact: ") for line in lines), result.stderr
    assert lines[0] == "rawreact: loading gemma3-270m ..." and lines[1].startswith("rawreact: loaded gemma3-270m in ")
    assert any(line.startswith("rawreact: the run is kept in ") for line in lines)


def test_ctrl_c_finishes_the_current_question_and_keeps_every_finished_one(tmp_path):
    """SIGINT during a real run: the question under way finishes and is written, then exit 130.

    Its output and its messages share one unbuffered pipe, so their order is the order they were written: on
    a busy machine the signal may be handled a question later than it was sent, and what is checked is what
    the run did once it handled it."""
    out = tmp_path / "run.jsonl"
    run = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "run", "-q", "--out", str(out)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    first = ""
    while not first.startswith("result [1/7]"):
        first = run.stdout.readline()
        assert first, run.stdout.read()
    run.send_signal(signal.SIGINT)
    rest, _ = run.communicate(timeout=600)
    assert run.returncode == 130 and "Traceback" not in rest
    lines = [first.rstrip("\n"), *rest.splitlines()]
    results = [line for line in lines if line.startswith("result [")]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [f"calvora-{n}" for n in range(1, len(results) + 1)]  # each finished one
    stopping = lines.index("rawreact: stopping after the current question (again to stop now)")
    assert len([line for line in lines[stopping:] if line.startswith("result [")]) <= 1  # the one under way
    assert len(results) < 7
    assert lines[-1] == f"rawreact: stopped early; {len(results)} of 7 questions are in {out}, --resume finishes"
