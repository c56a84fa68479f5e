"""Hardening, sixth round (issue 91), the inputs a run is handed: prompt and exemplar files that are not small
regular files (a FIFO, `/dev/zero`, a file outside a plugin's folder), and a namespace package beside an `--env`
module. Each test failed on the main before the round."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plugins import install_plugin

from rawreact.core.files import PROMPT_LIMIT, read_whole

CONSOLE = Path(sys.executable).with_name("rawreact")
QUESTION = ["--question", "What is Orlo?", "--answer", "a village"]


def _rawreact(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # a bound of minutes: a FIFO read as a prompt waited for a writer for ever
    return subprocess.run([str(CONSOLE), *args], cwd=folder, capture_output=True, text=True, timeout=120, env=env)


def test_a_fifo_as_the_prompt_file_is_refused_at_once_not_waited_on(tmp_path):
    """Item 7: `--prompt FIFO` hung the run (the FIFO was opened for reading, which waits for a writer)."""
    fifo = tmp_path / "prompt.txt"
    os.mkfifo(fifo)
    (tmp_path / "s.json").write_text(json.dumps([" So.\nAction 1: Finish[a village]\n"]))
    for option in (["--prompt", str(fifo)], ["--grammar-file", str(fifo)]):
        done = _rawreact(tmp_path, "run", *QUESTION, "--model", "scripted:s.json", *option, "--out", "r.jsonl")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"{fifo}: cannot read the" in done.stderr and "a FIFO, not a regular file" in done.stderr
        assert not (tmp_path / "r.jsonl").exists()


def test_a_prompt_file_is_read_only_as_a_regular_file_of_bounded_size(tmp_path):
    """Item 7: `/dev/zero` as a prompt grew the process to 17.8 GB; a file over the bound is refused unread."""
    big = tmp_path / "big.txt"
    with big.open("wb") as file:
        file.truncate(PROMPT_LIMIT + 1)
    with pytest.raises(OSError, match=f"more than {PROMPT_LIMIT:,} bytes"):
        read_whole(big)
    with pytest.raises(OSError, match="a character device, not a regular file"):
        read_whole("/dev/zero")
    with pytest.raises(IsADirectoryError):
        read_whole(tmp_path)
    (tmp_path / "fine.txt").write_bytes(b"Question: x\n")
    assert read_whole(tmp_path / "fine.txt") == b"Question: x\n"


PLUGIN = """
from rawreact import PassageEnv


def make(env, row):
    return PassageEnv(row["glossary"])


make.exemplars = {path!r}
"""
EXEMPLARS = "Question: What is Tam?\nThought 1: I look.\nAction 1: Search[Tam]\nObservation 1: A river.\n" \
    "Thought 2: So.\nAction 2: Finish[a river]\n"  # fmt: skip


@pytest.mark.parametrize(
    "path", ["/dev/zero", "../../secret.txt", "prompts/link.txt"], ids=["device", "relative-out", "link-out"]
)
def test_a_plugin_s_exemplars_outside_its_folder_are_refused_without_a_byte_of_them(tmp_path, path):
    """Item 7: `make.exemplars = "/dev/zero"` filled the memory; a path out of the plugin's folder was read, and the
    first line of a file only root could read was echoed in the refusal."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET first line\n")
    installed = install_plugin(tmp_path, PLUGIN.format(path=path), data={"prompts/exemplars.txt": EXEMPLARS})
    (installed / "glossary_plugin" / "prompts" / "link.txt").symlink_to(secret)
    work = tmp_path / "work"
    work.mkdir()
    row = {"id": "g1", "question": "What is Orlo?", "answer": "a village", "glossary": {"Orlo": ["Orlo is a village."]}}
    (work / "q.jsonl").write_text(json.dumps(row) + "\n")
    (work / "s.json").write_text(json.dumps([" So.\nAction 1: Finish[a village]\n"]))
    env = {**os.environ, "PYTHONPATH": str(installed)}
    done = _rawreact(work, "run", "q.jsonl", "--env", "glossary", "--model", "scripted:s.json", "--out", "r.jsonl",
                     env=env)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"--env glossary: its exemplars {path!r} is outside its module's folder" in done.stderr
    assert "TOP SECRET" not in done.stderr and not (work / "r.jsonl").exists()


HELPERS = '''
from tools import sums


def add(expression: str) -> str:
    """adds two numbers."""
    return sums.add(expression)


def with_add(env):
    return env.with_verbs(add)
'''
SUMS = "def add(expression):\n    left, _, right = expression.partition('+')\n    return str(int(left) + int(right))\n"


def test_a_namespace_package_beside_an_env_module_is_in_its_digest(tmp_path):
    """Item 9: `tools/sums.py` (a folder without `__init__.py`) escaped the digest: changed after the run, it ran on
    `--resume` and `--config`. Now the manifest names it, and a change to it is refused naming it."""
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "sums.py").write_text(SUMS)
    (tmp_path / "script.json").write_text(json.dumps([" I add.\nAction 1: Add[2+3]\n", " So.\nAction 2: Finish[5]\n"]))
    asked = ["--question", "What is 2+3?", "--answer", "5", "--env", "helpers:with_add"]
    made = _rawreact(tmp_path, "run", "--model", "scripted:script.json", *asked, "--out", "run.jsonl", "-q")
    assert made.returncode == 0, made.stderr
    config = json.loads((tmp_path / "run.jsonl.manifest.json").read_text())["config"]
    assert set(config["env_files"]) == {"helpers.py", "tools/sums.py"}
    (tmp_path / "tools" / "sums.py").write_text(SUMS.replace("int(left) + int(right)", "int(left) * int(right)"))
    again = _rawreact(tmp_path, "run", "--config", "run.jsonl", "--env", "helpers:with_add", "--out", "b.jsonl")
    assert again.returncode == 2 and "tools/sums.py in " in again.stderr and "is not the code" in again.stderr
    resumed = _rawreact(tmp_path, "run", "--model", "scripted:script.json", *asked, "--out", "run.jsonl", "--resume")
    assert resumed.returncode == 2 and "tools/sums.py in " in resumed.stderr and not (tmp_path / "b.jsonl").exists()


TOY = {"task_id": "Own/0", "prompt": 'def add(a, b):\n    """Sum."""\n', "entry_point": "add",
       "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({"test": "def test(candidate):\n    pass\n"}, "its test defines no check(candidate)"),
        ({"test": "def check(candidate:\n"}, "its test is not Python (line 1: '(' was never closed)"),
        ({"test": "def check(candidate):\n    assert " + "-" * 50_000 + "1\n"}, "its test is not Python (line 1: "),
        ({"entry_point": "plus"}, "its prompt defines no function plus (its entry_point)"),
        (
            {"test": "def check(candidate):\n    pass\n\ncheck = 5\n"},
            "its test's check is not a function of the candidate",
        ),
    ],
    ids=["no-check", "syntax-error", "nested-too-deep", "entry-point-undefined", "check-is-5"],
)
def test_a_problem_whose_tests_fail_every_program_is_refused_naming_it(tmp_path, capsys, changed, said):
    """Item 11: such a file was accepted and scored as every program failing, with no word."""
    from rawreact.cli.app import main

    data, script = tmp_path / "own.jsonl", tmp_path / "s.json"
    data.write_text(json.dumps(TOY) + "\n" + json.dumps(TOY | {"task_id": "Own/1"} | changed) + "\n")
    script.write_text(json.dumps(["    return a + b\n"] * 2))
    code = main(["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out",
                 str(tmp_path / "r.jsonl"), "-q"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"{data} line 2: problem 'Own/1': {said}" in err and "every program would be judged" in err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.usefixtures("programs_box")
@pytest.mark.parametrize(
    ("solution", "test", "said"),
    [
        ("    return a - b\n", TOY["test"], "(AssertionError)"),
        ("    return a + b\n", "def check(candidate):\n    while True:\n        pass\n", "(CPU limit of 1 s"),
    ],
    ids=["fails", "hangs"],
)
def test_a_problem_whose_canonical_solution_fails_its_tests_is_refused_before_the_model_loads(
    tmp_path, capsys, monkeypatch, solution, test, said
):
    """Item 11: a test that fails (or hangs on) the solution the file ships with failed every program, each after
    its whole limit ("timed out after 20 s" for each). Checked once, in the box, before any model loads, under the
    hidden tests' limits (cut to 1 CPU second here, so that the hang costs 1 s, not 10; the wall limit stays wide, so
    that on a busy machine the CPU limit still ends it first)."""
    from rawreact.cli.app import main
    from rawreact.environments import programs
    from rawreact.environments.sandbox import Limits

    monkeypatch.setattr(programs, "HIDDEN", Limits(seconds=60.0, cpu_seconds=1))

    data, script = tmp_path / "own.jsonl", tmp_path / "s.json"
    good = TOY | {"canonical_solution": "    return a + b\n"}
    data.write_text(json.dumps(good) + "\n" + json.dumps(good | {"task_id": "Own/1", "canonical_solution": solution,
                                                                 "test": test}) + "\n")  # fmt: skip
    script.write_text(json.dumps(["    return a + b\n"] * 2))
    out = tmp_path / "r.jsonl"
    code = main(["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"{data}: problem 'Own/1': its canonical solution fails its own tests {said}" in err
    assert not out.exists()
    data.write_text(json.dumps(good) + "\n")  # the same file without it runs
    assert main(["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(out), "-q"]) == 0
