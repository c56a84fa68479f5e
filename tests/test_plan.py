"""A run is one plan, made in one place (`runs.plan`): every refusal of `rawreact run` is raised while the plan is
made, before a model loads, a JVM or a server starts, Ray starts or a socket connects. The stand-ins below fail
the test if any of those happens; each case's error must have come out of `plan_command`, word for word as the
command printed it."""

import json
import shutil
import socket
import subprocess

import pytest

import rawreact.cli.run
import rawreact.runs.plan
from rawreact.cli.app import main
from rawreact.core.resources import resource
from rawreact.environments import scienceworld
from rawreact.models import llama
from rawreact.runs import cluster


class Started(AssertionError):
    """Something a plan must never start was started."""


def _never(what: str):
    def started(*args, **kwargs):
        raise Started(f"{what} started while the plan was made")

    return started


@pytest.fixture
def stand_ins(monkeypatch):
    """Every way a run starts something, replaced by a stand-in that fails; the errors `plan_command` raised."""
    monkeypatch.setattr(rawreact.runs.plan, "load_model", _never("a model"))
    monkeypatch.setattr(llama.LlamaModel, "__init__", _never("llama.cpp"))
    monkeypatch.setattr(scienceworld, "_import", _never("ScienceWorld's JVM"))
    monkeypatch.setattr(cluster, "import_ray", _never("Ray"))
    monkeypatch.setattr(cluster.Cluster, "__init__", _never("a Ray cluster"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _never("a process (a server, a JVM, Ray)"))
    monkeypatch.setattr(socket.socket, "connect", _never("a connection to a server"))
    raised = []
    made = rawreact.cli.run.plan_command

    def plan_command(*args, **kwargs):
        try:
            return made(*args, **kwargs)
        except Exception as error:
            raised.append(error)
            raise

    monkeypatch.setattr(rawreact.cli.run, "plan_command", plan_command)
    return raised


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The files the cases name: the demo's questions, a script, a finished run, a settings file, bad files."""
    folder = tmp_path_factory.mktemp("plan")
    data = folder / "demo.json"
    shutil.copy(resource("envs", "demo.json"), data)
    rows = json.loads(data.read_text(encoding="utf-8"))["questions"]
    scripts = {row["question"]: [f" So.\nAction 1: Finish[{row['answer']}]"] for row in rows}
    script = folder / "script.json"
    script.write_text(json.dumps({"questions": scripts}), encoding="utf-8")
    finished = folder / "finished.jsonl"
    assert main(["run", str(data), "--model", f"scripted:{script}", "--out", str(finished), "-q", "--limit", "2"]) == 0
    unlisted = folder / "unlisted.jsonl"  # results without the manifest a resume checks them against
    unlisted.write_bytes(finished.read_bytes())
    kept = folder / "kept.jsonl"  # a Reflexion run killed in its first question: only its trials file
    kept.write_text("")
    (folder / "kept.jsonl.trials").write_text('{"id": "x"}\n')
    unanswered = folder / "unanswered.jsonl"
    unanswered.write_text(json.dumps({"id": "q1", "question": "Who?"}) + "\n", encoding="utf-8")
    (folder / "run.toml").write_text("max_steps = 3\n", encoding="utf-8")
    (folder / "typo.toml").write_text("max_step = 3\n", encoding="utf-8")
    (folder / "bad.gbnf").write_text("root ::= (\n", encoding="utf-8")
    (folder / "cache.sqlite").write_text("not a database, but text\n", encoding="utf-8")
    (folder / "a-file").write_text("")
    return {"folder": folder, "data": data, "script": f"scripted:{script}", "finished": finished}


# (what is refused, the command line after `run`, a piece of its message); {name} is a path of `files`.
CASES = [
    ("resume without out", ["{data}", "--resume"], "--resume continues the run file given with --out"),
    ("out a folder", ["{data}", "--out", "{folder}"], "is a folder; give --out a file name"),
    ("out under a file", ["{data}", "--out", "{folder}/a-file/run.jsonl"], "a-file"),
    ("out the settings file", ["{data}", "--config", "{folder}/run.toml", "--out", "{folder}/run.toml"],
     "the settings file this command reads"),
    ("out the data", ["{data}", "--out", "{data}"], "is an input this command reads"),
    ("cache the data", ["{data}", "--cache", "{data}"], "--cache would add a table to it"),
    ("a bad cache file", ["{data}", "--model", "{script}", "--cache", "{folder}/cache.sqlite", "--out",
                          "{folder}/new1.jsonl"], "cache.sqlite"),
    ("a settings file's typo", ["{data}", "--config", "{folder}/typo.toml"], "unknown setting 'max_step'"),
    ("settings apart", ["{data}", "--method", "cot", "--grammar", "step"], "method cot writes none"),
    ("a missing data file", ["{folder}/none.json"], "none.json"),
    ("a missing prompt", ["{data}", "--prompt", "{folder}/none-prompt.json"], "none-prompt.json"),
    ("a bad grammar file", ["{data}", "--grammar-file", "{folder}/bad.gbnf"], "bad.gbnf"),
    ("missing passages", ["{data}", "--passages", "{folder}/none.sqlite"], "none.sqlite"),
    ("threads", ["{data}", "--threads", "100000"], "100000"),
    ("questions a Reflexion trial cannot judge", ["{folder}/unanswered.jsonl", "--method", "react-reflexion",
                                                  "--evaluator", "em"], "answer"),
    ("a model no load finds", ["{data}", "--model", "nope"], "unknown model 'nope'"),
    ("a missing model file", ["{data}", "--model", "{folder}/none.gguf"], "none.gguf does not exist"),
    ("Ollama with a grammar", ["{data}", "--model", "ollama:qwen2.5:3b", "--grammar", "step"],
     "model ollama:qwen2.5:3b cannot apply a grammar; drop --grammar"),
    ("a server with a bad prompt", ["{data}", "--model", "vllm:http://127.0.0.1:9/v1", "--prompt",
                                    "{folder}/none-prompt.json"], "none-prompt.json"),
    ("Ray with a bad prompt", ["{data}", "--ray", "--prompt", "{folder}/none-prompt.json"], "none-prompt.json"),
    ("Ray with a cache", ["{data}", "--ray", "--cache", "{folder}/calls.sqlite"], "--cache is one SQLite file"),
    ("a user's environment that is not there", ["{data}", "--env", "no_such_module_here:make"], "no_such_module_here"),
    ("a game by a method that cannot play", ["scienceworld:test_mini:boil:1", "--method", "cot"],
     "games are played by react or act"),
    ("a game with passages", ["scienceworld:test_mini:boil:1", "--passages", "{folder}/none.sqlite"],
     "a game is its own environment"),
    ("a game spelled wrong", ["scienceworld:test_mini:boil:x:y:z"], "scienceworld:test_mini:boil:x:y:z"),
    ("results without --resume", ["{data}", "--model", "{script}", "--out", "{finished}", "--limit", "2"],
     "already holds results; pass --resume"),
    ("a resume of other settings", ["{data}", "--model", "{script}", "--out", "{finished}", "--limit", "2",
                                    "--resume", "--max-steps", "3"], "--resume would mix two different runs"),
    ("a resume without a manifest", ["{data}", "--model", "{script}", "--out", "{folder}/unlisted.jsonl",
                                     "--resume"], "has no manifest"),
    ("trials under way", ["{data}", "--model", "{script}", "--out", "{folder}/kept.jsonl", "--method",
                          "react-reflexion"], "keeps the trials of one under way"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "argv", "said"), CASES, ids=[case[0] for case in CASES])
def test_every_refusal_of_a_run_is_raised_while_its_plan_is_made(files, stand_ins, capsys, case, argv, said):
    names = {key: str(value) for key, value in files.items()}
    code = main(["run", *(part.format(**names) for part in argv), "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(stand_ins) == 1, f"{case}: the refusal did not come out of the plan: {err}"
    assert f"rawreact: error: {stand_ins[0]}" in err
    assert said.format(**names) in err


def test_a_good_plan_starts_nothing_and_holds_the_run(files, stand_ins, tmp_path):
    """The plan of a run that will go: its settings, questions, prompt, run file and manifest config, made with
    nothing started; then its model loads (here a script), as `rawreact run` loads it."""
    from rawreact.cli.given import plan_command
    from rawreact.cli.parser import parser
    from rawreact.runs.plan import make_plan

    out = tmp_path / "run.jsonl"
    args = parser().parse_args(["run", str(files["data"]), "--max-steps", "4", "--limit", "2", "--out", str(out)])
    plan = plan_command(args)
    assert [q.id for q in plan.questions] == [q.id for q in plan.collection.questions[:2]]
    assert plan.settings.max_steps == 4 and plan.out == out and not plan.resume and not plan.kept
    assert plan.parts.config["max_steps"] == 4 and plan.prompt.exemplars > 0
    assert not out.exists()  # the plan writes nothing: the run file is made once the model has loaded
    assert stand_ins == []
    again = make_plan(plan.settings, plan.collection, list(plan.questions), out=out)
    assert again.parts.config == plan.parts.config


def test_a_plan_goes_to_ray_without_its_open_cache(files, tmp_path):
    """Ray's actors are sent the plan itself: it pickles, leaving the driver's open cache behind."""
    import pickle

    from rawreact import Settings, load_collection
    from rawreact.runs.plan import make_plan

    settings = Settings(model=files["script"], cache=str(tmp_path / "calls.sqlite"))
    plan = make_plan(settings, load_collection(str(files["data"])))
    assert plan.calls is not None
    sent = pickle.loads(pickle.dumps(plan))
    assert sent.calls is None and sent.parts == plan.parts and sent.questions == plan.questions
    plan.calls.close()


def test_a_plan_run_from_python_writes_the_run_the_command_writes(files, tmp_path):
    """`make_plan(...).run()` is `rawreact run`: the same records and the same manifest config, from Settings."""
    from rawreact import Settings, load_collection, make_plan, read_run

    by_command = tmp_path / "command.jsonl"
    argv = ["run", str(files["data"]), "--model", files["script"], "--limit", "3", "--out", str(by_command), "-q"]
    assert main(argv) == 0
    from_python = tmp_path / "python.jsonl"
    plan = make_plan(Settings(model=files["script"], limit=3), load_collection(str(files["data"])), out=from_python)
    results = list(plan.run())
    assert [r.question.id for r in results] == [q.id for q in load_collection(str(files["data"])).questions[:3]]
    command, python = read_run(by_command), read_run(from_python)
    assert python[0]["config"] == command[0]["config"]
    said = lambda records: [(r["id"], r["answer"], r["em"], r["steps"]) for r in records]  # noqa: E731
    assert said(python[1]) == said(command[1]) and len(python[1]) == 3
