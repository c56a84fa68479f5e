"""Fine-tuning export: which episodes and steps become examples, and that each example is exactly the
text the model saw and wrote, in both layouts."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_htmlreport import runs  # noqa: F401 (the run files both modules read)
from test_runs import _data, _oracle

from rawreact import read_run
from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action
from rawreact.models.base import Completion
from rawreact.reports.export import chat_example, completion_examples, export, fireact_examples, trl_examples

RAWREACT = [sys.executable, "-m", "rawreact"]


def _call(text: str) -> Completion:
    return Completion(text, "stop", 10, len(text.split()), 10, 0.1)


def _step(i, thought, action, text, observation, **extra) -> Step:
    return Step(i, thought, action, text, observation, [_call(f" {thought}\nAction {i}: {text}")], **extra)


def _episode() -> Trajectory:
    """A ReAct episode with a good search, a step without an action, a repeat and a finish."""
    steps = [
        _step(1, "Find A.", Action("search", "A"), "Search[A]", "A is in B."),
        _step(2, "Hmm.", None, "", "Invalid action: write one.", error="no action"),
        _step(3, "Again.", Action("search", "A"), "Search[A]", "A is in B.", repeat_of=1, note=" (Note: seen.)"),
        _step(4, "So B.", Action("finish", "B"), "Finish[B]", "Episode finished."),
    ]
    return Trajectory("Where is A?", "EXEMPLARS\n\n", steps, "B", "finish")


def test_a_completion_example_is_the_transcript_up_to_the_cue_and_the_step_that_followed():
    traj = _episode()
    examples = completion_examples(traj)
    assert [e["completion"] for e in examples] == [" Find A.\nAction 1: Search[A]", " So B.\nAction 4: Finish[B]"]
    full = traj.transcript()
    for example, k in zip(examples, (0, 3), strict=True):
        assert example["prompt"].startswith("Question: Where is A?\n") and example["prompt"].endswith(
            f"Thought {k + 1}:"
        )
        assert ("EXEMPLARS\n\n" + example["prompt"] + example["completion"] + f"\nObservation {k + 1}: ").startswith(
            traj.transcript(k)
        )
        assert full.startswith("EXEMPLARS\n\n" + example["prompt"] + example["completion"] + "\nObservation")
    # The invalid and repeated steps stay in the later prompt, since the model saw them.
    assert (
        "Action 2: \nObservation 2: Invalid action" in examples[1]["prompt"]
        and "(Note: seen.)" in examples[1]["prompt"]
    )
    assert [e["prompt"] for e in completion_examples(traj, with_prompt=True)] == [
        "EXEMPLARS\n\n" + e["prompt"] for e in examples
    ]


def test_an_act_episode_cues_the_action_and_the_reference_closing_step_is_no_target():
    steps = [
        Step(1, None, Action("search", "A"), "Search[A]", "A is in B.", [_call(" Search[A]")]),
        Step(2, None, None, "finish[]", "Episode finished.", []),  # the reference loop's closing finish[]
    ]
    traj = Trajectory("Where is A?", "", steps, "", "max_steps")
    assert completion_examples(traj) == [{"prompt": "Question: Where is A?\nAction 1:", "completion": " Search[A]"}]
    assert chat_example(traj)["messages"] == [
        {"role": "user", "content": "Question: Where is A?"},
        {"role": "assistant", "content": "Action 1: Search[A]"},
    ]


def test_a_chat_example_is_the_episode_as_turns_with_weight_zero_on_the_steps_not_to_learn():
    traj = _episode()
    messages = chat_example(traj, with_prompt=True)["messages"]
    assert messages[0] == {"role": "system", "content": "EXEMPLARS"}
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user"] + ["assistant", "user"] * 3 + ["assistant"]
    assert [m.get("weight") for m in messages if m["role"] == "assistant"] == [None, 0, 0, None]
    # The turns, joined by line breaks, are the transcript after the few-shot prompt.
    joined = "\n".join(m["content"] for m in messages[1:]) + "\nObservation 4: Episode finished.\n"
    assert joined == traj.transcript()[len(traj.prompt) :]


def test_a_run_exports_its_correct_episodes_and_the_manifest_names_the_run(runs, tmp_path):  # noqa: F811
    out = tmp_path / "train.jsonl"
    records = read_run(runs["crafted"])[1]
    done = export([runs["crafted"]], out)
    right = [r for r in records if r["em"] == 1]
    assert done.questions == len(right) >= 1 and done.not_selected == len(records) - len(right)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    expected = [e for r in right for e in completion_examples(Trajectory.from_dict(r["trajectory"]))]
    assert lines == expected and done.examples == len(expected)
    for record in right:  # here the model's own text was clean, so each completion is what it wrote
        calls = [s["calls"][0]["text"] for s in record["trajectory"]["steps"]]
        assert [e["completion"] for e in completion_examples(Trajectory.from_dict(record["trajectory"]))] == calls
    manifest = json.loads((tmp_path / "train.jsonl.manifest.json").read_text())
    assert manifest["sources"] == [
        {"run_file": str(runs["crafted"]), "sha256": hashlib.sha256(runs["crafted"].read_bytes()).hexdigest()}
    ]
    assert manifest["selection"] == "em == 1" and manifest["examples"] == done.examples
    loose = export([runs["crafted"]], tmp_path / "all.jsonl", layout="chat", min_f1=0.0)
    assert loose.questions == len(records) and loose.examples == len(records) and loose.not_selected == 0


def test_answers_without_a_trajectory_are_counted_apart(rows, tmp_path):
    data = _data(rows, tmp_path, 4)
    script = {"questions": {r["question"]: [f" {r['answer']}"] for r in rows[:4]}}
    (tmp_path / "s.json").write_text(json.dumps(script))
    out = tmp_path / "standard.jsonl"
    done = subprocess.run(
        [
            *RAWREACT,
            "run",
            data,
            "--method",
            "standard",
            "--model",
            f"scripted:{tmp_path / 's.json'}",
            "--out",
            out,
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert {r["em"] for r in read_run(out)[1]} == {1.0}
    result = export([out], tmp_path / "t.jsonl")
    assert (result.examples, result.no_trajectory, result.not_selected) == (0, 4, 0)


def test_the_cli_exports_says_what_it_did_and_explains_bad_input(runs, tmp_path):  # noqa: F811
    out = tmp_path / "chat.jsonl"
    args = [*RAWREACT, "export", runs["crafted"], runs["oracle"], "--out", out, "--layout", "chat", "--min-f1", "0.5"]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    records = read_run(runs["crafted"])[1] + read_run(runs["oracle"])[1]
    chosen = sum(r["f1"] >= 0.5 for r in records)
    assert f"from {chosen} of {len(records)} questions (F1 at least 0.5)" in done.stderr
    assert len(out.read_text().splitlines()) == chosen
    out.write_text("kept")
    for bad, message in (
        (["--min-f1", "1.5"], "argument --min-f1: '1.5' is not a number from 0 to 1"),
        (["--layout", "sharegpt"], "argument --layout: invalid choice"),
    ):
        failed = subprocess.run(
            [*RAWREACT, "export", runs["crafted"], "--out", out, *bad], capture_output=True, text=True
        )
        assert failed.returncode == 2 and message in failed.stderr
    gone = subprocess.run([*RAWREACT, "export", tmp_path / "gone.jsonl", "--out", out], capture_output=True, text=True)
    assert gone.returncode == 2 and "gone.jsonl" in gone.stderr and "Traceback" not in gone.stderr
    assert out.read_text() == "kept"


@pytest.mark.parametrize("layout", ["completion", "chat"])
def test_an_empty_selection_writes_nothing_fails_and_says_why(rows, tmp_path, layout):
    data = _data(rows, tmp_path, 3)
    run = tmp_path / "wrong.jsonl"
    model = _oracle(rows[:3], tmp_path / "w.json", wrong_every=1)
    made = subprocess.run(
        [*RAWREACT, "run", data, "--model", model, "--out", run, "-q"], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [*RAWREACT, "export", run, "--out", tmp_path / "t.jsonl", "--layout", layout], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--min-f1 0.5" in done.stderr
    assert "no example to export from 3 questions: 3 not selected (EM 1), 0 with no steps" in done.stderr
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "t.jsonl.manifest.json").exists()


def test_the_docs_examples_are_what_export_writes():
    readme = (Path(__file__).resolve().parent.parent / "docs" / "reports.md").read_text(encoding="utf-8")
    section = readme.split("## Fine-tuning data", 1)[1]
    completion, chat = (json.loads(block.split("\n  ```", 1)[0]) for block in section.split("```json\n  ")[1:3])
    question = completion["prompt"].removeprefix("Question: ").removesuffix("\nThought 1:")
    turns = chat["messages"]
    thought, action = completion["completion"].removeprefix(" ").split("\nAction 1: ")
    finish = turns[3]["content"].split("\nAction 2: ")
    steps = [
        _step(1, thought, Action("search", "Dornach-on-Lee"), action, turns[2]["content"].split(": ", 1)[1]),
        _step(2, finish[0].removeprefix("Thought 2: "), Action("finish", "Lee"), finish[1], "Episode finished."),
    ]
    traj = Trajectory(question, "", steps, "Lee", "finish")
    assert completion_examples(traj)[0] == completion and chat_example(traj) == chat


def test_the_trl_layout_trains_on_exactly_the_turns_the_chat_layout_weighs_one():
    """Issue 29 item 12: TRL reads no weight, so a weight-0 turn is never a completion there; the schema is
    TRL's conversational prompt-completion one (messages in, one assistant message out)."""
    traj = _episode()
    chat = chat_example(traj, with_prompt=True)["messages"]
    trained = [m["content"] for m in chat if m["role"] == "assistant" and m.get("weight", 1) != 0]
    examples = trl_examples(traj, with_prompt=True)
    assert [e["completion"] for e in examples] == [[{"role": "assistant", "content": c}] for c in trained]
    for example in examples:
        assert set(example) == {"prompt", "completion"} and example["prompt"][-1]["role"] in ("user", "system")
        assert all(set(m) == {"role", "content"} for m in example["prompt"] + example["completion"])
        # the prompt is the conversation before the turn, untrained turns included (the model saw them)
        k = next(
            i
            for i, m in enumerate(chat)
            if m["role"] == "assistant" and m["content"] == example["completion"][0]["content"]
        )
        assert example["prompt"] == [{r: v for r, v in m.items() if r != "weight"} for m in chat[:k]]
    assert len(examples) == len(completion_examples(traj)) == 2


def test_the_fireact_layout_is_one_json_array_of_alpaca_examples(runs, tmp_path):  # noqa: F811
    traj = _episode()
    alpaca = fireact_examples(traj)
    assert alpaca == [
        {"instruction": e["prompt"], "input": "", "output": e["completion"]} for e in completion_examples(traj)
    ]
    out = tmp_path / "fireact.json"
    done = export([runs["crafted"]], out, layout="fireact", min_f1=0.0)
    written = json.loads(out.read_text(encoding="utf-8"))  # one JSON document, as FireAct's scripts load it
    assert isinstance(written, list) and len(written) == done.examples > 0
    assert all(
        set(e) == {"instruction", "input", "output"} and all(isinstance(v, str) for v in e.values()) for e in written
    )
    trl = tmp_path / "trl.jsonl"
    assert export([runs["crafted"]], trl, layout="trl", min_f1=0.0).examples == done.examples  # one per trained step
    assert all("weight" not in json.dumps(json.loads(line)) for line in trl.read_text().splitlines())


@pytest.mark.parametrize("layout", ["completion", "chat", "trl", "fireact"])
def test_each_layout_loads_with_hugging_face_datasets_as_its_trainer_loads_it(runs, tmp_path, layout, monkeypatch):  # noqa: F811
    """Issue 29 item 12: `datasets.load_dataset("json", ...)`, the loader of TRL's and FireAct's scripts, reads
    each file whole, one row per example, with the columns its trainer takes and every value as written. TRL
    itself (torch, several GB) does not install here: its rule for a conversational example (a prompt and a
    completion that are lists of role/content messages) is checked on the loaded rows instead."""
    datasets = pytest.importorskip("datasets")  # a test dependency: pip install -e '.[test]'
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out = tmp_path / ("fireact.json" if layout == "fireact" else f"{layout}.jsonl")
    done = export([runs["crafted"]], out, layout=layout, min_f1=0.0)
    loaded = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
    text = out.read_text(encoding="utf-8")
    written = json.loads(text) if layout == "fireact" else [json.loads(line) for line in text.splitlines()]
    assert loaded.num_rows == done.examples == len(written) > 0
    columns = {
        "completion": ["prompt", "completion"],
        "chat": ["messages"],
        "trl": ["prompt", "completion"],
        "fireact": ["instruction", "input", "output"],
    }[layout]
    assert sorted(loaded.column_names) == sorted(columns)
    rows = loaded.to_list()
    if layout == "chat":  # datasets gives every message each key any message has: weight is None where absent
        rows = [{"messages": [{k: v for k, v in m.items() if v is not None} for m in r["messages"]]} for r in rows]
    assert rows == written
    if layout == "trl":
        for row in rows:
            assert all(isinstance(row[key], list) and row[key] for key in ("prompt", "completion"))
            assert all(set(m) == {"role", "content"} for m in row["prompt"] + row["completion"])
            assert [m["role"] for m in row["completion"]] == ["assistant"]
