"""Hardening, fourth round (issue 55): the user's code. What a rerun, a resume and a settings file import,
verbs that fail in new ways or never return, and the messages of `--env`. Each test failed on the main
before the round."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rawreact import PassageEnv, ScriptedModel, Verb, react
from rawreact.cli.app import main
from rawreact.core.errors import EnvironmentSetupError
from rawreact.core.verbs import verb_of
from rawreact.environments.env import bound_verbs, run_verb

CONSOLE = Path(sys.executable).with_name("rawreact")

# A module of the user's with top-level code that leaves a mark, so a test sees whether it was imported.
HELPERS = '''
from pathlib import Path

Path(__file__).with_name("imported.mark").write_text("imported")


def calc(expression: str) -> str:
    """works out a difference."""
    left, _, right = expression.partition("-")
    return str(int(left) - int(right))


def with_calc(env):
    return env.with_verbs(calc)
'''
REPLIES = [" I work it out.\nAction 1: Calc[2000-1852]\n", " So.\nAction 2: Finish[148]\n"]
QUESTION = ["--question", "How many years before 2000 was Orlo founded?", "--answer", "148"]


def _folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "helpers.py").write_text(HELPERS)
    (folder / "script.json").write_text(json.dumps(REPLIES))
    return folder


def _rawreact(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """The command in its own process, from `folder`: each test imports its own `helpers`."""
    return subprocess.run([str(CONSOLE), *args], cwd=folder, capture_output=True, text=True, timeout=300)


def _first_run(tmp_path: Path) -> Path:
    """A run made with --env helpers:with_calc in a folder `made`; that folder copied to `shared`, as a run
    is passed around, without the mark of its import."""
    made = _folder(tmp_path / "made")
    done = _rawreact(made, "run", "--model", "scripted:script.json", *QUESTION, "--env", "helpers:with_calc",
                     "--out", "run.jsonl", "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    shared = tmp_path / "shared"
    shutil.copytree(made, shared)
    (shared / "imported.mark").unlink()
    return shared


def test_a_rerun_imports_no_code_its_manifest_names_unless_the_command_line_names_it(tmp_path):
    shared = _first_run(tmp_path)
    done = _rawreact(shared, "run", "--config", "run.jsonl", "--out", "mine.jsonl")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert "was run with --env helpers:with_calc" in line and str(shared / "helpers.py") in line
    assert "add --env helpers:with_calc" in line
    assert not (shared / "imported.mark").exists() and not (shared / "mine.jsonl").exists()
    # compare reads a manifest the same way
    done = _rawreact(shared, "compare", "--config", "run.jsonl", "--variant", "a=k=1", "--variant", "b=k=2",
                     "--out", "cmp")  # fmt: skip
    assert done.returncode == 2 and "add --env helpers:with_calc" in done.stderr
    assert not (shared / "imported.mark").exists()
    # named on the command line, the same code runs, and the rerun is the run
    done = _rawreact(shared, "run", "--config", "run.jsonl", "--env", "helpers:with_calc", "--out", "mine.jsonl")
    assert done.returncode == 0, done.stderr
    assert (shared / "imported.mark").exists()
    [record] = [json.loads(line) for line in (shared / "mine.jsonl").read_text().splitlines()]
    assert record["em"] == 1.0 and record["trajectory"]["steps"][0]["observation"] == "148"


def test_a_rerun_or_resume_refuses_changed_code_before_importing_it(tmp_path):
    shared = _first_run(tmp_path)
    (shared / "helpers.py").write_text(HELPERS + "\n# changed\n")
    done = _rawreact(shared, "run", "--config", "run.jsonl", "--env", "helpers:with_calc", "--out", "mine.jsonl")
    assert done.returncode == 2 and "is not the code" in done.stderr and "SHA-256 differs" in done.stderr
    assert not (shared / "imported.mark").exists()
    done = _rawreact(shared, "run", "--model", "scripted:script.json", *QUESTION, "--env", "helpers:with_calc",
                     "--out", "run.jsonl", "--resume")  # fmt: skip
    assert done.returncode == 2 and "is not the code" in done.stderr
    assert not (shared / "imported.mark").exists()


def test_an_edited_manifest_naming_an_installed_module_imports_nothing(tmp_path):
    shared = _first_run(tmp_path)
    manifest = shared / "run.jsonl.manifest.json"
    data = json.loads(manifest.read_text())
    data["settings"]["env"] = "this:nothing"  # the standard library's `this` prints a poem when imported
    manifest.write_text(json.dumps(data))
    done = _rawreact(shared, "run", "--config", "run.jsonl", "--out", "mine.jsonl")
    assert done.returncode == 2 and "add --env this:nothing" in done.stderr
    assert "Zen of Python" not in done.stdout + done.stderr


def test_a_settings_files_env_is_found_beside_it_and_named_before_it_is_imported(tmp_path):
    conf = _folder(tmp_path / "conf")
    (conf / "run.toml").write_text(
        'env = "helpers:with_calc"\nmodel = "scripted:script.json"\nquestion = "How many?"\nanswer = "148"\n'
    )
    done = _rawreact(tmp_path, "run", "--config", "conf/run.toml", "--out", "run.jsonl", "-q")
    assert done.returncode == 0, done.stderr
    assert (
        f"rawreact: conf/run.toml names env conf/helpers:with_calc: importing helpers from {conf / 'helpers.py'}"
        in (done.stderr.splitlines())
    )
    assert (conf / "imported.mark").exists()
    [record] = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert record["trajectory"]["steps"][0]["observation"] == "148"


@pytest.mark.parametrize("spec", ["helpers.py:with_calc", "./helpers:with_calc", "tools/helpers:with_calc"])
def test_env_takes_a_file_or_a_folder_before_the_module(tmp_path, spec):
    folder = _folder(tmp_path)
    if spec.startswith("tools/"):
        _folder(tmp_path / "tools")
        (folder / "helpers.py").unlink()
    done = _rawreact(folder, "run", "--model", "scripted:script.json", *QUESTION, "--env", spec,
                     "--out", "run.jsonl", "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [record] = [json.loads(line) for line in (folder / "run.jsonl").read_text().splitlines()]
    assert record["em"] == 1.0


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("import sys\nsys.exit(3)\n", "importing quits ("),
        (
            "import argparse\nargparse.ArgumentParser().parse_args()\n",
            "called sys.exit(2), after printing 'rawreact: error: unrecognized arguments",
        ),
        ("def make(env):\n    raise SystemExit(4)\n", "--env quits:make called sys.exit(4)"),
    ],
)
def test_code_that_exits_while_imported_or_called_is_one_line_naming_the_module(tmp_path, source, said):
    folder = _folder(tmp_path)
    (folder / "quits.py").write_text(source + "\ndef make(env):\n    return env\n" * ("def make" not in source))
    done = _rawreact(folder, "run", "--model", "scripted:script.json", *QUESTION, "--env", "quits:make",
                     "--out", "run.jsonl")  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("rawreact: error: --env quits:make") and said in line
    assert not (folder / "run.jsonl").exists()


def test_env_spec_mistakes_say_what_to_give(tmp_path, monkeypatch, capsys):
    folder = _folder(tmp_path)
    monkeypatch.chdir(folder)
    code = main(["run", "--model", "scripted:script.json", *QUESTION, "--env", "nothere.py:f", "--out", "r.jsonl"])
    err = capsys.readouterr().err
    assert code == 2 and "no module nothere in the folder ." in err and ".py.py" not in err
    code = main(["run", "--model", "scripted:script.json", *QUESTION, "--env", "my-verbs:f", "--out", "r.jsonl"])
    assert code == 2 and "'my-verbs' is not a module's name" in capsys.readouterr().err


def test_a_command_verb_among_bracketed_verbs_is_refused():
    env = PassageEnv({"Orlo": "Orlo is a village."})
    with pytest.raises(EnvironmentSetupError, match="either as `Name\\[...\\]` or as command lines"):
        env.with_verbs(Verb("command", "", arg="command", description="is a command."))


class Unprintable:
    def __str__(self) -> str:
        raise ValueError("no text")


def shout(text: str) -> object:
    """returns what cannot be shown."""
    return Unprintable()


def fails(text: str) -> str:
    """raises."""
    raise ValueError("no text")


def test_a_verb_whose_result_cannot_be_shown_fails_as_one_that_raises():
    assert run_verb(verb_of(shout), "x") == "Shout[x] failed: ValueError: no text"
    assert run_verb(verb_of(fails), "x") == "Fails[x] failed: ValueError: no text"
    env = PassageEnv({"Orlo": "Orlo is a village."}).with_verbs(shout)
    model = ScriptedModel([" Try.\nAction 1: Shout[x]\n", " Done.\nAction 2: Finish[x]\n"])
    traj = react("q?", env, model, max_steps=3)
    assert traj.steps[0].observation == "Shout[x] failed: ValueError: no text" and traj.answer == "x"


def hangs(text: str) -> str:
    """never answers."""
    time.sleep(3600)
    return text


def test_a_verb_that_hangs_is_answered_as_failed_after_its_bound():
    bound_verbs(0.3)
    try:
        started = time.monotonic()
        said = run_verb(verb_of(hangs), "x")
    finally:
        bound_verbs(None)
    assert said == "Hangs[x] failed: no answer within 0.3 seconds (--verb-timeout)"
    assert time.monotonic() - started < 60  # bounded (the verb itself would take an hour)


SLOW = '''
import time
from pathlib import Path


def wait(seconds: str) -> str:
    """waits."""
    Path("waiting.mark").write_text("waiting")
    time.sleep(float(seconds))
    return "waited"


def with_wait(env):
    return env.with_verbs(wait)
'''


def test_a_hung_verb_becomes_an_observation_the_run_goes_on_and_ctrl_c_names_it(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    replies = [" Wait.\nAction 1: Wait[3600]\n", " Done.\nAction 2: Finish[148]\n"]
    (tmp_path / "script.json").write_text(json.dumps(replies))
    common = ["run", "--model", "scripted:script.json", *QUESTION, "--env", "slow:with_wait"]
    done = _rawreact(tmp_path, *common, "--verb-timeout", "1", "--out", "bounded.jsonl", "-q")
    assert done.returncode == 0, done.stderr
    [record] = [json.loads(line) for line in (tmp_path / "bounded.jsonl").read_text().splitlines()]
    observation = record["trajectory"]["steps"][0]["observation"]
    assert observation == "Wait[3600] failed: no answer within 1 seconds (--verb-timeout)" and record["em"] == 1.0
    config = json.loads((tmp_path / "bounded.jsonl.manifest.json").read_text())["config"]
    assert config["verb_timeout"] == 1.0
    # Under the default bound, the first Ctrl-C says what the run waits on; the second stops it.
    (tmp_path / "waiting.mark").unlink()
    run = subprocess.Popen([str(CONSOLE), *common, "--out", "waits.jsonl", "-q"], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    for _ in range(600):
        if (tmp_path / "waiting.mark").exists():
            break
        time.sleep(0.1)
    run.send_signal(signal.SIGINT)
    time.sleep(1.0)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130
    assert "stopping after the current question; waiting on your verb Wait[3600] (" in stderr
    assert "bounded by --verb-timeout" in stderr


def by_keyword(*, text: str) -> str:
    """takes its text by keyword."""
    return text


def café(text: str) -> str:
    """orders a coffee."""
    return text


def test_verbs_that_would_fail_every_call_or_lose_their_name_are_refused():
    with pytest.raises(EnvironmentSetupError, match="its argument text is keyword-only"):
        verb_of(by_keyword)
    with pytest.raises(EnvironmentSetupError, match="function café: a verb's name is ASCII") as refused:
        verb_of(café)
    assert "Verb('cafe', 'Cafe', run=café" in str(refused.value)
