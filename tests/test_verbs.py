"""Verbs as data (issue 41 part 1): a verb of the user's is read by the parser, constrained by the grammar,
listed in the prompt, offered as a tool, watched by the guardrails and answered by the environment."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact import (
    PASSAGE_VERBS,
    Action,
    EnvironmentSetupError,
    PassageEnv,
    ScriptedModel,
    Verb,
    load_grammar,
    load_prompt,
    parse_action,
    react,
    verb_of,
)
from rawreact.agents.guardrails import Guard
from rawreact.agents.prompts import with_actions
from rawreact.agents.record import Step
from rawreact.agents.tools import check_call, shipped_tools, tools_for
from rawreact.models.base import ToolCall
from rawreact.models.gbnf import check_grammar

PAGES = {"Orlo": "Orlo is a fishing village. It was founded in 1852."}


def calculate(expression: str) -> str:
    """works out an arithmetic expression and shows the result."""
    left, _, right = expression.partition("-")
    return str(int(left) - int(right))


def inventory():
    """lists what you carry."""
    return "a lantern"


def test_a_function_becomes_a_verb_by_its_name_docstring_and_argument():
    verb = verb_of(calculate)
    assert (verb.name, verb.shown, verb.arg, verb.parameter) == ("calculate", "Calculate", "bracket", "expression")
    assert verb.description == "works out an arithmetic expression and shows the result."
    assert verb.listed() == "Calculate[expression] works out an arithmetic expression and shows the result."
    none = verb_of(inventory)
    assert (none.name, none.arg, none.form("x")) == ("inventory", "none", "Inventory[]")

    def word_count(text: str) -> str:
        """counts words."""
        return str(len(text.split()))

    assert verb_of(word_count).shown == "WordCount"  # `_` is markdown the parser drops: the name is camel-cased


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((calculate, calculate), "two verbs named .Calculate.; give each verb its own name"),
        ((lambda x: x,), "not a named function"),
        ((Verb("finish", "Finish"),), "shadows finish"),
        ((Verb("search", "Search"),), "already an action of this environment"),
    ],
)
def test_a_declaration_that_cannot_work_is_an_error_before_any_model(extra, message):
    with pytest.raises(EnvironmentSetupError, match=message):
        PassageEnv(PAGES).with_verbs(*extra)


def test_a_name_the_parser_cannot_hold_is_refused_with_a_name_it_can():
    with pytest.raises(EnvironmentSetupError, match="name it 'WordCount'"):
        Verb("word_count", "Word_count")
    with pytest.raises(EnvironmentSetupError, match="letters and digits"):
        Verb("calc[", "Calc[")

    def two(a: str, b: str) -> str:
        """two arguments."""
        return a + b

    def typed(n: int) -> str:
        """an int."""
        return str(n)

    def bare(x: str) -> str:
        return x

    with pytest.raises(EnvironmentSetupError, match="needs 2 arguments"):
        verb_of(two)
    with pytest.raises(EnvironmentSetupError, match="a verb's argument is a str"):
        verb_of(typed)
    with pytest.raises(EnvironmentSetupError, match="give it a docstring"):
        verb_of(bare)


def test_the_parser_reads_the_verbs_of_the_set_it_is_given():
    verbs = PASSAGE_VERBS.plus(calculate, inventory)
    assert parse_action("Action 2: Calculate[2000-1852]", verbs=verbs) == Action("calculate", "2000-1852")
    assert parse_action("Calculate[2000-1852]") is None  # the passage set alone has no such verb
    assert parse_action("Action 3: Inventory", verbs=verbs) == Action("inventory", "")
    assert parse_action("**Inventory[]**", verbs=verbs) == Action("inventory", "")
    assert parse_action("Search[Orlo]", verbs=verbs) == Action("search", "Orlo")


@given(st.text(max_size=60))
def test_the_extended_parser_never_raises_and_reads_only_its_verbs(text):
    verbs = PASSAGE_VERBS.plus(calculate, inventory)
    action = parse_action(text, verbs=verbs)
    assert action is None or action.name in verbs


def test_the_environment_answers_a_users_verb_and_turns_its_failure_into_an_observation():
    def broken(x: str) -> str:
        """always fails."""
        raise KeyError(x)

    def silent(x: str) -> None:
        """says nothing."""

    env = PassageEnv(PAGES).with_verbs(calculate, broken, silent)
    assert env.step("Calculate[2000-1852]") == ("148", False)
    assert env.step("Calculate[oops]") == (
        "Calculate[oops] failed: ValueError: invalid literal for int() with base 10: 'oops'",
        False,
    )
    assert env.step("Broken[k]") == ("Broken[k] failed: KeyError: 'k'", False)
    assert env.step("Silent[x]") == ("Silent[x] gave nothing.", False)
    assert env.step("Search[Orlo]")[0] == "Orlo is a fishing village. It was founded in 1852."
    assert env.fresh().verbs == env.verbs  # a fresh environment of a question keeps the verbs


def test_the_grammar_holds_exactly_the_declared_verbs_and_llama_cpp_parses_it():
    verbs = PASSAGE_VERBS.plus(calculate, inventory)
    text = load_grammar("step").for_step(1, verbs=verbs)
    assert '"Calculate[" arg "]"' in text and '"Inventory[]"' in text and '"Search[" arg "]"' in text
    check_grammar(text, source="test")  # raises on a grammar llama.cpp would not take
    titles = load_grammar("titles").for_step(1, ["Orlo"], verbs)
    assert '"Search[" title "]"' in titles and '"Calculate[" arg "]"' in titles  # titles bind the search alone
    assert load_grammar("step").for_step(1) == load_grammar("step").for_step(1, verbs=PASSAGE_VERBS)


def test_the_prompt_lists_a_new_verb_once_and_leaves_the_passage_set_alone():
    prompt = load_prompt(k=1).text
    assert with_actions(prompt, PASSAGE_VERBS) == prompt  # byte for byte
    verbs = PASSAGE_VERBS.plus(calculate)
    listed = with_actions(prompt, verbs)
    lines = listed.splitlines()
    assert "An Action is one of four kinds:" in lines[0]
    assert lines[4] == "(4) Calculate[expression] works out an arithmetic expression and shows the result."
    assert listed.replace(lines[4] + "\n", "").replace("four kinds", "three kinds") == prompt
    assert with_actions(listed, verbs) == listed
    bare = with_actions("Question: x\n", verbs)
    assert bare.startswith("You may also take these actions:\n- Calculate[expression] works out")


def test_the_tools_schemas_come_from_the_declaration():
    verbs = PASSAGE_VERBS.plus(calculate)
    tools = tools_for(verbs)
    assert [t["function"]["name"] for t in tools] == ["search", "lookup", "finish", "calculate"]
    assert tools[:3] == tuple(
        sorted(shipped_tools(), key=lambda t: ["search", "lookup", "finish"].index(t["function"]["name"]))
    )
    calc = tools[3]["function"]
    assert calc["parameters"]["required"] == ["expression"] and calc["description"].startswith("works out")
    call = ToolCall("c1", "calculate", json.dumps({"expression": "9-2"}))
    assert check_call(call, tools) == (Action("calculate", "9-2"), "")


def test_a_verb_that_moves_on_repeats_only_when_it_sees_the_same():
    verbs = PASSAGE_VERBS.plus(Verb("next", "Next", moves_on=True, description="the next line."))
    guard = Guard("stop", None, verbs)
    steps = [Step(i, "t", Action("next", "a"), "Next[a]", obs, []) for i, obs in ((1, "one"), (2, "two"), (3, "two"))]
    assert [guard.check(step) for step in steps] == [False, False, True]


def test_a_react_episode_takes_the_users_verb_end_to_end():
    env = PassageEnv(PAGES).with_verbs(calculate)
    model = ScriptedModel(
        [
            " Orlo was founded in 1852, so I work out 2000-1852.\nAction 1: Calculate[2000-1852]\n",
            " It is 148 years.\nAction 2: Finish[148]\n",
        ]
    )
    traj = react("How many years before 2000 was Orlo founded?", env, model, load_prompt(k=1), grammar="step")
    assert [s.action_text for s in traj.steps] == ["Calculate[2000-1852]", "Finish[148]"]
    assert traj.steps[0].observation == "148" and traj.answer == "148"
    assert "Calculate[" in model.history[0]["grammar"]  # the grammar each call got holds the verb
    assert "(4) Calculate[expression]" in model.history[0]["prompt"]
    assert traj.searches == 0 and traj.evidence == []  # a verb is no search unless it says so


VERBS_MODULE = '''
def calculate(expression: str) -> str:
    """works out an arithmetic expression and shows the result."""
    left, _, right = expression.partition("-")
    return str(int(left) - int(right))


def with_calculate(env):
    return env.with_verbs(calculate)


def twice(env):
    return env.with_verbs(calculate, calculate)


def not_an_env(env):
    return 42
'''


def _cli(tmp_path, monkeypatch, *args):
    from rawreact.cli.app import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "myverbs.py").write_text(VERBS_MODULE)
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([" I work it out.\nAction 1: Calculate[2000-1852]\n", " So.\nAction 2: Finish[148]\n"])
    )
    question = ["--question", "How many years before 2000 was Orlo founded?", "--answer", "148"]
    return main(["run", "--model", f"scripted:{script}", *question, *args])


def test_the_cli_takes_a_verb_by_import_path_and_records_it(tmp_path, monkeypatch, capsys):
    code = _cli(tmp_path, monkeypatch, "--env", "myverbs:with_calculate", "--grammar", "--out", "run.jsonl")
    assert code == 0, capsys.readouterr().err
    [record] = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [s["action_text"] for s in record["trajectory"]["steps"]] == ["Calculate[2000-1852]", "Finish[148]"]
    assert record["trajectory"]["steps"][0]["observation"] == "148" and record["em"] == 1.0
    config = json.loads((tmp_path / "run.jsonl.manifest.json").read_text())["config"]
    assert config["env"] == "myverbs:with_calculate"
    assert config["verbs"][-1] == {
        "name": "calculate",
        "shown": "Calculate",
        "arg": "bracket",
        "description": "works out an arithmetic expression and shows the result.",
    }
    import hashlib

    assert config["env_sha256"] == hashlib.sha256((tmp_path / "myverbs.py").read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "nosuchmodule:f"], "--env nosuchmodule:f: no module nosuchmodule in the current folder"),
        (["--env", "myverbs:nothing"], "myverbs has no function nothing; its functions are calculate, with_calculate"),
        (["--env", "myverbs"], "must be an import path, package.module:factory"),
        (["--env", "myverbs:twice"], "two verbs named 'Calculate'"),
        (["--env", "myverbs:not_an_env"], "returned int, which has no verbs, step, reset, fresh"),
        (["--env", "myverbs:with_calculate", "--loop", "reference"], "run --env in the tolerant loop"),
        (["--env", "myverbs:with_calculate", "--method", "cot"], "method cot takes none; drop --env"),
    ],
)
def test_a_bad_env_is_one_line_before_any_model_loads(tmp_path, monkeypatch, capsys, args, message):
    code = _cli(tmp_path, monkeypatch, *args, "--out", "run.jsonl")
    err = capsys.readouterr().err
    assert code != 0 and message in err and "Traceback" not in err
    assert not (tmp_path / "run.jsonl").exists()  # refused before the run file is made


def test_the_environment_page_s_example_runs_as_it_says(capsys):
    """docs/environments.md: an environment of another kind (no passages, verbs of its own), as written."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "environments.md").read_text(encoding="utf-8")
    blocks = [part.split("\n```", 1)[0] for part in text.split("```python\n")[1:]]
    [block] = [b for b in blocks if "class " in b]  # the other block is the verb of your own (test_packaging)
    exec(block, {})
    assert capsys.readouterr().out.splitlines() == [
        "October ['Orlo: a fishing village that holds a lantern festival every October.', 'Episode finished.']",
        "True",
    ]
