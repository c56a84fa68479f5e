"""`rawreact report --inspect` (issue 43 item 11): a run as an inspect-ai log, written without inspect-ai and read
back here by inspect-ai itself, as `inspect view` reads it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import log as inspect_log  # the test extra's; rawreact itself never imports it

from rawreact.runs.records import read_run

RAWREACT = [str(Path(sys.executable).parent / "rawreact")]
ROWS = [
    {"_id": "q1", "question": "Who won the race?", "answer": "Tam", "type": "bridge", "level": "easy",
     "supporting_facts": [["Tam", 0]], "context": [["Tam", ["Tam won the race in 1901."]]]},
    {"_id": "q2", "question": "Where is Orlo?", "answer": "Calvora", "type": "bridge", "level": "easy",
     "supporting_facts": [["Orlo", 0]], "context": [["Orlo", ["Orlo is a town in Calvora."]]]},
]  # fmt: skip
SCRIPT = {
    "Who won the race?": [" I look it up.\nAction 1: Search[Tam]\n", " Tam won.\nAction 2: Finish[Tam]\n"],
    "Where is Orlo?": [" I look it up.\nAction 1: Search[Orlo]\n", " It is in Lisk.\nAction 2: Finish[Lisk]\n"],
}


def _run(tmp_path: Path, *options: str) -> Path:
    (tmp_path / "q.json").write_text(json.dumps(ROWS), encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps({"questions": SCRIPT}), encoding="utf-8")
    done = subprocess.run(
        [*RAWREACT, "run", "q.json", "--model", "scripted:s.json", "--out", "run.jsonl", "-q", *options],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tmp_path / "run.jsonl"


def test_inspect_ai_reads_the_log_of_a_run_with_its_scores_and_transcripts(tmp_path):
    run = _run(tmp_path)
    done = subprocess.run([*RAWREACT, "report", run, "--inspect", "logs"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "rawreact: wrote 1 inspect log to logs; open them with `inspect view --log-dir logs`" in done.stderr
    [path] = (tmp_path / "logs").glob("*.json")
    log = inspect_log.read_eval_log(str(path))
    manifest, records = read_run(run)
    data = Path(manifest["data"]).stem  # the task type and the data's name tell runs apart (issue 60 item 8)
    assert (log.status, log.eval.task) == ("success", f"rawreact/qa/{data}/react")
    assert log.eval.model == f"rawreact/{manifest['model_name']}"
    assert log.eval.metadata["rawreact_config"] == manifest["config"]  # traced back to the run's inputs
    assert [s.id for s in log.samples] == ["q1", "q2"] and [s.target for s in log.samples] == ["Tam", "Calvora"]
    assert [s.scores["em"].value for s in log.samples] == [1.0, 0.0] == [r["em"] for r in records]
    assert log.samples[1].scores["em"].answer == "Lisk" and log.samples[1].output.completion == "Lisk"
    means = {score.name: score.metrics["mean"].value for score in log.results.scores}
    assert means == {"em": 0.5, "f1": pytest.approx(sum(r["f1"] for r in records) / 2)}
    messages = log.samples[0].messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0].text.startswith(records[0]["trajectory"]["prompt"][:200])  # the few-shot prompt
    assert messages[2].text == "Thought 1: I look it up.\nAction 1: Search[Tam]"
    assert messages[3].text.startswith("Observation 1: Tam won the race in 1901.")


def test_a_reasoning_method_s_reply_is_its_one_turn(tmp_path):
    (tmp_path / "q.json").write_text(json.dumps(ROWS[:1]), encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps(["Tam won it, so the answer is Tam."]), encoding="utf-8")
    done = subprocess.run(
        [*RAWREACT, "run", "q.json", "--method", "cot", "--model", "scripted:s.json", "--out", "cot.jsonl", "-q"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert subprocess.run([*RAWREACT, "report", "cot.jsonl", "--inspect", "logs"], cwd=tmp_path).returncode == 0
    [path] = (tmp_path / "logs").glob("*.json")
    sample = inspect_log.read_eval_log(str(path)).samples[0]
    assert sample.messages[-1].role == "assistant" and sample.messages[-1].text == "Tam won it, so the answer is Tam."
    assert sample.scores["em"].value == 1.0 and log_task(path).startswith("rawreact/qa/")
    assert log_task(path).endswith("/cot")


def log_task(path: Path) -> str:
    return json.loads(path.read_text())["eval"]["task"]


def test_an_inspect_folder_that_is_a_file_or_an_input_is_refused(tmp_path):
    run = _run(tmp_path)
    (tmp_path / "taken").write_text("x")
    for target, said in (("taken", "is a file; give a folder for the logs"), (str(run), "this command reads")):
        command = [*RAWREACT, "report", run, "--inspect", target]
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "taken").read_text() == "x"


def test_rawreact_never_imports_inspect_ai():
    """The logs are written from rawreact's own code: no module of the package names inspect-ai."""
    package = Path(__file__).resolve().parent.parent / "src" / "rawreact"
    assert [p.name for p in package.rglob("*.py") if "import inspect_ai" in p.read_text() or "from inspect_ai" in
            p.read_text()] == []  # fmt: skip
