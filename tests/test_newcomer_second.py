"""A newcomer's second afternoon (issue 60): the counters and messages that misled them, each checked."""

import json
import subprocess
import sys
from pathlib import Path

from plugins import install_plugin

from rawreact import PassageEnv, ScriptedModel, react, read_run
from rawreact.cli.app import main
from rawreact.environments.build import build_store
from rawreact.reports.inspect_log import inspect_log
from rawreact.tasks.corpus import read_sources

CONSOLE = Path(sys.executable).with_name("rawreact")


def test_an_answer_found_only_in_a_failed_searchs_echo_is_not_seen():
    """Item 3: `Could not find 2000.` echoes the model's own query; it is no evidence for the answer 2000."""
    env = PassageEnv({"Orlo": "Orlo is a fishing village founded in 1850."})
    model = ScriptedModel([" Look.\nAction 1: Search[2000]\n", " So.\nAction 2: Finish[2000]\n"])
    traj = react("When?", env, model, max_steps=3)
    assert traj.steps[0].observation.startswith("Could not find 2000.")
    assert traj.evidence == [] and traj.searches == 1 and traj.search_hits == 0
    model = ScriptedModel([" Look.\nAction 1: Search[Orlo]\n", " So.\nAction 2: Finish[1850]\n"])
    assert react("When?", env, model, max_steps=3).evidence == ["Orlo is a fishing village founded in 1850."]


def test_a_game_whose_model_writes_the_same_cut_thought_again_counts_repeats():
    """Item 3: the same `think:` line, cut at the token limit each time, written five times is four repeats (it
    counted 0: a cut line holds no action to compare); a thought written whole again counts as before."""
    from rawreact.agents.game import play
    from rawreact.environments.game import GAME_VERBS

    class Room:
        verbs, style, answer, admissible, won, lost, reward = GAME_VERBS, "commands", None, ["look"], False, False, 0.0

        def reset(self):
            self.opening = "Find the key.\nYou are in a room."

        def fresh(self):
            return Room()

        @property
        def done(self):
            return False

        def step(self, action):
            return "You see nothing.", False

    long = " think: " + " ".join(["maybe"] * 30)
    traj = play(Room(), ScriptedModel([long] * 5), "", max_tokens=10, max_steps=5)
    assert [s.error for s in traj.steps] == ["truncated"] * 5
    assert [s.repeat_of for s in traj.steps] == [None, 1, 2, 3, 4] and traj.repeats == 4  # each, the one before
    traj = play(Room(), ScriptedModel([" think: where?", " look", " think: where?"]), "", max_steps=3)
    assert [s.repeat_of for s in traj.steps] == [None, None, 1] and traj.repeats == 1


def test_the_reference_loop_counts_the_steps_the_model_took(tmp_path, capsys):
    """Item 3: seven steps at the limit are "after 7 steps", not 8 (the closing `finish[]` is logged, not taken)."""
    (tmp_path / "s.json").write_text(json.dumps([f" Hm.\nAction {i}: Search[Nowhere]\n" for i in range(1, 8)]))
    out = tmp_path / "r.jsonl"
    args = ["run", "--question", "Where?", "--loop", "reference", "--model", f"scripted:{tmp_path / 's.json'}"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ended by max_steps after 7 steps, 7 calls" in printed and "after 8 steps" not in printed
    [record] = read_run(out)[1]
    assert record["steps"] == 7 and len(record["trajectory"]["steps"]) == 8


def test_the_papers_own_data_file_says_what_it_holds_and_runs_over_passages(tmp_path):
    """Item 5: the reference's `hotpot_*_simplified.json` rows hold questions only; said in one line, and they
    run over passages given with --passages."""
    rows = [{"question": "Which village holds the lantern festival?", "answer": "Orlo", "type": "bridge"}]
    data = tmp_path / "hotpot_dev_v1_simplified.json"  # the layout of the paper's file, written here
    data.write_text(json.dumps(rows))
    (tmp_path / "s.json").write_text(json.dumps([" Look.\nAction 1: Search[Orlo]\n", " So.\nAction 2: Finish[Orlo]\n"]))
    done = subprocess.run([str(CONSOLE), "run", data, "--model", "scripted:s.json", "--out", "a.jsonl"],
                          cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "holds a question without them, as the ReAct paper's own data files do" in done.stderr
    assert "--passages" in done.stderr and "distractor file" in done.stderr
    from rawreact.core.resources import resource

    build_store(read_sources([resource("envs", "demo.json")]), tmp_path / "wiki.sqlite")
    done = subprocess.run([str(CONSOLE), "run", data, "--passages", "wiki.sqlite", "--model", "scripted:s.json",
                           "--out", "b.jsonl", "-q"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [record] = read_run(tmp_path / "b.jsonl")[1]
    assert record["em"] == 1.0 and record["kind"] == "bridge"


def test_a_question_run_and_a_game_run_are_told_apart_and_the_header_lists_the_own_verbs(tmp_path):
    """Item 8: inspect-ai names each run by its task type and data as well as its method; the header of an --env
    run lists the verbs it adds to the passage set."""
    records = [{"id": "q1", "question": "q", "answer": "a", "prediction": "a", "em": 1.0, "f1": 1.0, "ended": "finish",
                "steps": 1, "model_calls": 1, "invalid_actions": 0, "seconds": 0.1, "tokens": {}}]  # fmt: skip
    game = [dict(records[0], task="game", success=1.0, reward=1.0, em=None, f1=None)]
    qa_log = inspect_log("a", {"data": "dev.json", "config": {"method": "react"}}, records)
    game_log = inspect_log("b", {"data": "games", "config": {"method": "react"}}, game)
    assert (qa_log["eval"]["task"], game_log["eval"]["task"]) == ("rawreact/qa/dev/react", "rawreact/game/games/react")
    (tmp_path / "myverbs.py").write_text(
        'def calculate(expression: str) -> str:\n    """works it out."""\n    return expression\n\n\n'
        "def with_calc(env):\n    return env.with_verbs(calculate)\n"
    )
    (tmp_path / "s.json").write_text(json.dumps([" x.\nAction 1: Finish[1]\n"]))
    done = subprocess.run([str(CONSOLE), "run", "--question", "q", "--env", "myverbs:with_calc", "--model",
                           "scripted:s.json", "--out", "r.jsonl", "-q"], cwd=tmp_path, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(", with the verbs of --env myverbs:with_calc: Calculate")


def test_compare_says_what_the_cache_did_and_why_a_rerun_reads_nothing(tmp_path, rows):
    """Item 4: `compare --cache` says, variant by variant, how many calls came from the cache, and a compare run
    again into the same folder says that nothing was computed, so the cache was not read."""
    from test_runs import _data, _oracle

    data, model = _data(rows, tmp_path, 2), _oracle(rows[:2], tmp_path / "oracle.json")
    args = [str(CONSOLE), "compare", data, "--model", model, "--variant", "a=k=1", "--variant", "b=k=2",
            "--cache", "c.sqlite", "-q"]  # fmt: skip
    first = subprocess.run([*args, "--out", "one"], cwd=tmp_path, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    calls = sum(len(s["calls"]) for r in read_run(tmp_path / "one" / "a.jsonl")[1] for s in r["trajectory"]["steps"])
    assert f"rawreact: variant a: 0 of {calls} model calls came from the cache c.sqlite" in first.stderr
    again = subprocess.run([*args, "--out", "one"], cwd=tmp_path, capture_output=True, text=True)
    assert (
        again.returncode == 0 and "every question was already in one/a.jsonl, so nothing was computed" in again.stderr
    )
    elsewhere = subprocess.run([*args, "--out", "two"], cwd=tmp_path, capture_output=True, text=True)
    assert f"rawreact: variant a: {calls} of {calls} model calls came from the cache c.sqlite" in elsewhere.stderr


def test_a_question_the_cache_answered_draws_no_busy_cores_warning(monkeypatch, capsys):
    """Item 4: the first question's busy-cores warning is about its decoding; a question whose every call came from
    the cache decoded nothing, so it says nothing of the machine."""
    from rawreact.agents.methods import Outcome
    from rawreact.agents.record import Step, Trajectory
    from rawreact.cli import lines
    from rawreact.models.base import Completion
    from rawreact.runs.run import Result
    from rawreact.tasks.collection import Question

    monkeypatch.setattr(lines.cores, "busy_elsewhere", lambda before, after: 2.0)  # a machine kept busy
    monkeypatch.setattr(lines.cores, "busy_line", lambda elsewhere, threads, cores: "cores were busy")

    def result(cached: bool) -> Result:
        call = Completion("x", "stop", 1, 1, 0 if cached else 1, 0.0, cached=cached)
        traj = Trajectory("q", "", [Step(1, None, None, "x", "y", [call], None, 0.0)])
        return Result(Question("q1", "q", "a"), Outcome("react", "react", trajectory=traj))

    class Fixed:
        n_threads = 2

    lines.say_first(result(cached=True), (0.0, None), Fixed(), quiet=True)
    assert "warning" not in capsys.readouterr().err
    lines.say_first(result(cached=False), (0.0, None), Fixed(), quiet=True)
    assert "rawreact: warning: cores were busy" in capsys.readouterr().err


PLUGIN_MODULE = '''
from pathlib import Path

from rawreact import PassageEnv


def make(env, row):
    """A glossary of the question's own row, as an installed plugin declares it."""
    return PassageEnv(row["glossary"])
'''


def test_an_installed_plugin_is_listed_and_runs_by_its_name_with_its_package_recorded(tmp_path):
    """Item 1: a package declares an environment under the entry-point group rawreact.environments; pip installs
    it; `rawreact plugins` lists it (importing nothing), `--env NAME` runs it, and the manifest records its
    package and version. A file of the same module name in the current folder is not what runs."""
    installed = install_plugin(tmp_path, PLUGIN_MODULE)  # a package as a registry serves it, made here
    work = tmp_path / "work"
    work.mkdir()
    (work / "glossary_plugin.py").write_text("raise SystemExit('the local file ran')\n")  # must not be imported
    rows = [
        {"id": "g1", "question": "What is Orlo?", "answer": "a village", "glossary": {"Orlo": "Orlo is a village."}}
    ]
    (work / "q.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (work / "s.json").write_text(
        json.dumps([" Look.\nAction 1: Search[Orlo]\n", " So.\nAction 2: Finish[a village]\n"])
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(installed)}
    listed = subprocess.run([str(CONSOLE), "plugins"], cwd=work, capture_output=True, text=True, env=env)
    assert listed.returncode == 0 and "the local file ran" not in listed.stderr
    assert ["glossary", "glossary_plugin:make", "glossary-plugin", "1.2.0"] in [
        line.split() for line in listed.stdout.splitlines()
    ]
    run = [str(CONSOLE), "run", "q.jsonl", "--env", "glossary", "--model", "scripted:s.json", "--out", "r.jsonl", "-q"]
    done = subprocess.run(run, cwd=work, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    [record] = read_run(work / "r.jsonl")[1]
    assert record["em"] == 1.0 and record["trajectory"]["steps"][0]["observation"] == "Orlo is a village."
    config = json.loads((work / "r.jsonl.manifest.json").read_text())["config"]
    assert config["env"] == "glossary"
    assert config["env_plugin"] == {"name": "glossary", "package": "glossary-plugin", "version": "1.2.0"}
    (work / "conf").mkdir()  # a settings file in another folder names the plugin by its name, as the command line
    (work / "conf" / "run.toml").write_text('env = "glossary"\ndata = "../q.jsonl"\nmodel = "scripted:../s.json"\n')
    done = subprocess.run([str(CONSOLE), "run", "--config", "conf/run.toml", "--out", "t.jsonl", "-q"], cwd=work,
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "rawreact: conf/run.toml names env glossary: importing glossary_plugin from " in done.stderr
    rerun = [str(CONSOLE), "run", "--config", "r.jsonl", "--out", "again.jsonl"]
    refused = subprocess.run(rerun, cwd=work, capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "add --env glossary" in refused.stderr  # a manifest imports nothing itself
    missing = subprocess.run([*run[:4], "nothing-here", *run[5:8], "x.jsonl"], cwd=work, capture_output=True,
                             text=True, env=env)  # fmt: skip
    assert (
        missing.returncode == 2 and "no installed plugin is named nothing-here (installed: glossary" in missing.stderr
    )
