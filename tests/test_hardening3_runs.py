"""Hardening, third round (issue 44): settings files, run files, trials under way, merges, shards, the
protocol scripts, pooled stores and bounds. Each test fails on the main before the round."""

import json
import signal
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_runs import _data, _oracle

from rawreact import DataError, RunFile, read_run
from rawreact.agents.prompts import read_instruction
from rawreact.agents.reflexion import cut_to_fit
from rawreact.cli.app import main
from rawreact.cli.reproduce import reproduce
from rawreact.config.files import manifest_settings, read_settings
from rawreact.config.settings import PATHS, Settings
from rawreact.core.errors import PromptError
from rawreact.core.text import whole_number
from rawreact.environments.env import PassageEnv
from rawreact.environments.reference import ReferenceEnv
from rawreact.environments.store import PassageStore
from rawreact.runs.records import trials_path
from rawreact.tasks.loading import load_collection

RAWREACT = [sys.executable, "-m", "rawreact"]

# Stand-ins in the layout of the Reflexion code's prompts.py and fewshots.py (not its text).
TEMPLATE = 'TEMPLATE = """Improve.\n{examples}\nPrevious trial:\nQuestion: {question}{scratchpad}\n\nReflection:"""\n'
EXAMPLES = 'EXAMPLES = """\nPrevious Trial:\nQuestion: q\nReflection: r\n"""\n'


def _reflexion_files(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompts.py").write_text(TEMPLATE)
    (folder / "fewshots.py").write_text(EXAMPLES)


# Item 1: every setting that names a file is one kind of value.

# The settings that are strings but name no file. A new string setting must be put here or declared a file.
NOT_FILES = {"method", "loop", "model", "key", "grammar", "repeats", "backoff_key", "strategy", "evaluator"}
NOT_FILES |= {"context", "reflect_key", "question", "answer", "shard", "host", "threads", "env", "ray"}


def test_every_string_setting_is_declared_a_file_or_known_not_to_be_one():
    strings = {f.name for f in fields(Settings) if "str" in str(f.type)}
    assert strings - NOT_FILES == set(PATHS)
    assert {"reflect_prompt", "reflect_instruction", "data", "passages", "grammar_file"} <= set(PATHS)


@pytest.mark.parametrize("key", PATHS)
def test_each_file_setting_of_a_toml_file_is_read_beside_the_file(key, tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    value = "prompts.py#TEMPLATE" if key in ("instruction", "backoff_instruction", "reflect_instruction") else "x.txt"
    (tmp_path / "conf" / "run.toml").write_text(f'{key} = "{value}"\n')
    monkeypatch.chdir(tmp_path / "conf")
    here = read_settings("run.toml")[key]
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    there = read_settings(tmp_path / "conf" / "run.toml")[key]
    file, _, name = value.partition("#")
    assert Path(here.partition("#")[0]) == Path(file) and Path(there.partition("#")[0]) == tmp_path / "conf" / file
    assert there.partition("#")[2] == name  # a Python file's #NAME is kept


def test_a_reflexion_run_reruns_from_its_manifest_in_another_folder(rows, tmp_path, monkeypatch):
    """Before: reflect_prompt and reflect_instruction were recorded relative, so --config RUN from elsewhere
    could not find them (or read another file of that name)."""
    _reflexion_files(tmp_path / "a")
    data = _data(rows, tmp_path / "a", 1)
    script = tmp_path / "a" / "script.json"
    question = rows[0]["question"]
    script.write_text(json.dumps({"questions": {question: [" t\nAction 1: Finish[nobody]"]}, "reflection": " r."}))
    monkeypatch.chdir(tmp_path / "a")
    args = ["run", data.name, "--model", "scripted:script.json", "--method", "react-reflexion", "--trials", "2"]
    args += ["--reflect-prompt", "fewshots.py", "--reflect-key", "EXAMPLES"]
    args += ["--reflect-instruction", "prompts.py#TEMPLATE", "--out", "run.jsonl", "-q"]
    assert main(args) == 0
    manifest = read_run("run.jsonl")[0]
    assert manifest["settings"]["reflect_prompt"] == str(tmp_path / "a" / "fewshots.py")
    assert manifest["settings"]["reflect_instruction"] == f"{tmp_path / 'a' / 'prompts.py'}#TEMPLATE"
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "b")
    assert main(["run", "--config", str(tmp_path / "a" / "run.jsonl"), "--out", "again.jsonl", "-q"]) == 0
    again = read_run("again.jsonl")[0]
    assert again["config"]["reflect_prompt_sha256"] == manifest["config"]["reflect_prompt_sha256"]
    recorded = manifest_settings(Settings(**read_settings(tmp_path / "a" / "run.jsonl")))
    assert recorded["reflect_instruction"] == manifest["settings"]["reflect_instruction"]


# Item 2: a run file with trials kept beside it is not new.


def _reflexion_script(tmp_path: Path, question: str, seconds: float = 0.3) -> Path:
    script = tmp_path / "script.json"
    steps = [" I look.\nAction 1: Search[Nowhere]", " So it is x.\nAction 2: Finish[x]"]
    script.write_text(json.dumps({"questions": {question: steps}, "reflection": " Look elsewhere.",
                                  "seconds_per_call": seconds}))  # fmt: skip
    return script


def _killed_after_a_trial(args: list, out: Path) -> None:
    run = subprocess.Popen([*RAWREACT, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = trials_path(out)
    while not log.exists() or log.read_text().count("\n") < 1:
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)


def test_a_run_killed_in_its_first_question_is_not_started_over_without_resume(rows, tmp_path):
    data, out = _data(rows, tmp_path, 1), tmp_path / "run.jsonl"
    script = _reflexion_script(tmp_path, rows[0]["question"])
    args = ["run", data, "--model", f"scripted:{script}", "--method", "react-reflexion", "--trials", "3", "--out", out]
    _killed_after_a_trial([*args, "-q"], out)
    kept = trials_path(out).read_bytes()
    assert out.stat().st_size == 0 and kept  # no finished question, one trial kept
    again = subprocess.run([*RAWREACT, *map(str, args), "-q"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "keeps the trials of one under way; pass --resume" in again.stderr
    assert trials_path(out).read_bytes() == kept  # before: deleted without a word, the trials run again
    with pytest.raises(DataError, match="pass --resume"):
        RunFile(out, {})


# Item 3: merge carries the shards' trials under way.


def test_merge_carries_the_trials_under_way_and_resume_continues_them(rows, tmp_path):
    data = _data(rows, tmp_path, 2)
    questions = [load_collection(data).questions[k].question for k in range(2)]
    script = _reflexion_script(tmp_path, questions[0])
    steps = json.loads(script.read_text())
    steps["questions"][questions[1]] = steps["questions"][questions[0]]
    script.write_text(json.dumps(steps))
    common = ["--model", f"scripted:{script}", "--method", "react-reflexion", "--trials", "3"]
    first, second = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    done = subprocess.run([*RAWREACT, "run", data, *common, "--shard", "1/2", "--out", first, "-q"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _killed_after_a_trial(["run", data, *common, "--shard", "2/2", "--out", second, "-q"], second)
    kept = trials_path(second).read_text().splitlines()
    merged = tmp_path / "all.jsonl"
    joined = subprocess.run([*RAWREACT, "merge", first, second, "--out", merged], capture_output=True, text=True)
    assert joined.returncode == 0, joined.stderr
    assert "under way carried into all.jsonl.trials" in joined.stderr
    assert trials_path(merged).read_text().splitlines() == kept
    resumed = subprocess.run([*RAWREACT, "run", data, *common, "--out", merged, "--resume", "-q"],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    record = next(r for r in read_run(merged)[1] if r["question"] == questions[1])
    entry = json.loads(kept[0])
    assert record["trials"][0]["trajectory"] == entry["trajectory"]  # kept, not run again (its timings too)
    assert len(record["trials"]) == 3 and not trials_path(merged).exists()


# Item 7: Reflexion's em evaluator and a question without a gold answer.


def test_a_question_without_a_gold_answer_is_refused_before_the_model_loads(rows, tmp_path, capsys):
    questions = [dict(row) for row in rows[:3]]
    questions[1]["answer"] = ""
    data = tmp_path / "dev.json"
    data.write_text(json.dumps(questions))
    missing = tmp_path / "no-such-model.gguf"  # were the model loaded first, this would be the error
    code = main(["run", str(data), "--model", str(missing), "--method", "react-reflexion", "--out",
                 str(tmp_path / "run.jsonl")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"question {questions[1]['_id']} has no gold answer" in err and "no-such-model" not in err
    assert not (tmp_path / "run.jsonl").exists()
    assert main(["run", str(data), "--model", str(missing), "--method", "react-reflexion", "--evaluator",
                 "supported", "-q"]) == 2  # fmt: skip
    assert "no-such-model.gguf does not exist" in capsys.readouterr().err  # the supported evaluator needs none


# Item 8: digits that are not ASCII digits.


@pytest.mark.parametrize("shard", ["²/3", "1/³", "٣/4", "1/ 2x"])
def test_a_shard_with_other_digits_is_the_usual_one_line_refusal(shard, capsys):
    assert main(["run", "--shard", shard, "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be K/N with 1 <= K <= N" in err and "internal error" not in err


@given(st.text(max_size=8))
def test_a_whole_number_is_ascii_digits_or_nothing(text):
    found = whole_number(text)
    assert found is None or (text.strip().isascii() and text.strip().isdigit() and found == int(text))


def test_an_observation_label_with_another_script_s_digit_is_cut_without_a_crash():
    text = "Thought 1: t\nObservation ²: " + "long " * 50 + "\nObservation 2: short"
    shown, cut = cut_to_fit(text, 10, lambda t: len(t.split()))
    assert cut == [0, 2] and "long" not in shown


# Item 9: the protocol scripts read their options as `rawreact run` does.


def test_the_protocol_script_takes_out_with_an_equals_sign(rows, tmp_path, monkeypatch):
    data, model = _data(rows, tmp_path, 2), _oracle(rows[:2], tmp_path / "oracle.json")
    monkeypatch.chdir(tmp_path)
    code = reproduce("qa", [str(data), "--model", model, f"--out={tmp_path / 'mine.jsonl'}", "--limit", "2"], "usage")
    assert code == 0 and len(read_run(tmp_path / "mine.jsonl")[1]) == 2
    assert not (tmp_path / "hotpotqa-500.jsonl").exists()  # before: --out=FILE was not seen, this was written


# Item 10: a pooled store built from other data.


def test_a_pooled_store_from_other_data_is_built_again(rows, tmp_path, monkeypatch, capsys):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first, model = _data(rows, tmp_path / "a", 2), _oracle(rows[:4], tmp_path / "oracle.json")
    second = _data(rows[2:], tmp_path / "b", 2)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run.jsonl"
    assert reproduce("qa", [str(first), "--model", model, "--out", str(out), "--pooled", "--limit", "2"], "u") == 0
    store = Path(f"{out}.pooled.sqlite")
    assert [s["sha256"] for s in PassageStore(store).info["sources"]] == [load_collection(first).sha256]
    capsys.readouterr()
    out2 = tmp_path / "run2.jsonl"
    store.rename(f"{out2}.pooled.sqlite")  # the store of other data, where the second run looks
    assert reproduce("qa", [str(second), "--model", model, "--out", str(out2), "--pooled", "--limit", "2"], "u") == 0
    said = capsys.readouterr().out
    assert "was built from other data" in said and "building it again" in said
    rebuilt = PassageStore(f"{out2}.pooled.sqlite").info["sources"]
    assert [s["sha256"] for s in rebuilt] == [load_collection(second).sha256]
    assert all(r["em"] == 1 for r in read_run(out2)[1])  # its questions' gold pages are in the store
    capsys.readouterr()
    assert reproduce("qa", [str(second), "--model", model, "--out", str(out2), "--pooled", "--limit", "2"], "u") == 0
    assert "building it again" not in capsys.readouterr().out  # the same data: the store is kept


# Item 11 and 12e: bounds named before any model loads.


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--drafts", "100000"], r"drafts=100000 \(--drafts\) must be at most 16"),
        (["--method", "react-reflexion", "--trials", "101"], r"trials=101 \(--trials\) must be at most 100"),
    ],
)
def test_counts_past_their_bound_are_refused_before_the_model_loads(flags, message, tmp_path, capsys):
    missing = tmp_path / "no-such-model.gguf"
    assert main(["run", "--model", str(missing), *flags, "-q"]) == 2
    err = capsys.readouterr().err
    assert pytest.importorskip("re").search(message, err) and "no-such-model" not in err


# Item 12b: a Python file named without the string to read from it.


def test_a_python_instruction_without_its_name_is_refused(tmp_path):
    (tmp_path / "prompts.py").write_text(TEMPLATE)
    with pytest.raises(PromptError, match=r"prompts.py is code; name the string it assigns"):
        read_instruction(str(tmp_path / "prompts.py"))
    assert read_instruction(f"{tmp_path / 'prompts.py'}#TEMPLATE").startswith("Improve.")


# Item 12c: reflection settings under a strategy that writes no reflections.


@pytest.mark.parametrize("strategy", ["base", "last_trial"])
def test_reflection_prompt_settings_under_a_strategy_without_reflections_are_refused(strategy, capsys):
    code = main(["run", "--method", "react-reflexion", "--strategy", strategy, "--reflect-prompt", "missing.py", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"strategy {strategy} writes no reflections; drop it" in err


# Item 12d: hand-edited manifests say so.


def _finished(rows, tmp_path) -> tuple[list[str], Path]:
    data, model = _data(rows, tmp_path, 2), _oracle(rows[:2], tmp_path / "oracle.json")
    out = tmp_path / "run.jsonl"
    args = ["run", str(data), "--model", model, "--out", str(out), "-q"]
    assert main(args) == 0
    return args, out


@pytest.mark.parametrize(
    "edit, command, message",
    [
        (lambda m: [], "config", "a manifest is a JSON object; was it edited?"),
        (lambda m: m | {"settings": []}, "config", "its 'settings' must be a JSON object; was it edited?"),
        (lambda m: m | {"resumes": "x"}, "resume", "its 'resumes' must be a list; was it edited?"),
        (lambda m: m | {"config": m["config"] | {"max_steps": "7"}}, "resume",
         "max_steps is '7', where rawreact writes 7: was the manifest edited?"),
    ],
)  # fmt: skip
def test_a_hand_edited_manifest_is_named_as_edited(edit, command, message, rows, tmp_path, capsys):
    args, out = _finished(rows, tmp_path)
    manifest = Path(f"{out}.manifest.json")
    manifest.write_text(json.dumps(edit(json.loads(manifest.read_text()))))
    if command == "config":
        code = main(["run", "--config", str(out), "--out", str(tmp_path / "again.jsonl"), "-q"])
    else:
        code = main([*args, "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "runs made before" not in err and "mix two different runs" not in err


# Item 15: a store built from {"title", "text"} gives the page text memory gives.


def test_a_store_of_texts_keeps_line_breaks_and_white_pages_as_memory_does(tmp_path):
    pages = {
        "Orlo": "Orlo is a fishing village. It lies on Lake Veshna.\nIts festival is held in October.",
        "Veshna Lake": "Lake Veshna is a lake in Calvora.\n\n  It is fed by the river Tam, since 1901.  ",
        "Blank": "   \n  ",
        "One": "A single sentence without a break",
    }
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in pages.items()))
    assert main(["index", str(corpus), "--out", str(tmp_path / "pages.sqlite")]) == 0
    store = PassageStore(tmp_path / "pages.sqlite")
    assert len(store) == len(pages)  # before: the page of white space was dropped
    for title, text in pages.items():
        assert store.passage(title) == text  # before: split into sentences, its line breaks lost
        for n_first in (1, 5):
            for action in (f"search[{title}]", "lookup[Lake]", "lookup[river]"):
                memory, stored = ReferenceEnv(pages, n_first), ReferenceEnv(store, n_first)
                memory.step(f"search[{title}]"), stored.step(f"search[{title}]")
                assert memory.step(action) == stored.step(action)
                ours, theirs = PassageEnv(pages, n_first), PassageEnv(store, n_first)
                ours.step(f"search[{title}]"), theirs.step(f"search[{title}]")
                assert ours.step(action) == theirs.step(action)
