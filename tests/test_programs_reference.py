"""Programs under a repository's rules (issue 69): Reflexion's programming runs and LATS's `programming/mcts.py`,
call for call with a scripted model. Each rule is restated here in this test's own words (the calls each run
makes, in order: the prompt, its ChatML turns or completion text, its temperature and token limit; the feedback
its executor writes), and scripted episodes with quirky replies are replayed: no function, the wrong name, a
markdown fence, text around the code, a syntax error, a test that hangs. The stand-in checkouts hold prompts in
this test's words, laid out as the repositories' `generators/py_generate.py` are."""

import json
import random
from pathlib import Path

import pytest

import rawreact.agents.prompts
from rawreact.agents import programs, programs_reference
from rawreact.agents.programs import ProgramPrompts
from rawreact.agents.programs_reference import ProgramReference
from rawreact.cli.app import main
from rawreact.config.paper import LATS_FILE, REFLEXION_FILE
from rawreact.environments import programs as program_env
from rawreact.environments.programs import ProgramEnv
from rawreact.models.scripted import ScriptedModel
from rawreact.runs.records import read_run

pytestmark = pytest.mark.usefixtures("programs_box")  # they run model-written programs

STRINGS = {
    "PY_SIMPLE_COMPLETION_INSTRUCTION": "# Fill in the body.",
    "PY_REFLEXION_COMPLETION_INSTRUCTION": "Improve the function below.\n---",
    "PY_SELF_REFLECTION_COMPLETION_INSTRUCTION": "Say why the function fails.\n---",
    "USE_PYTHON_CODEBLOCK_INSTRUCTION": "Answer in a python fence.",
    "PY_SIMPLE_CHAT_INSTRUCTION": "Write the whole function.",
    "PY_REFLEXION_CHAT_INSTRUCTION": "Write a better function.",
    "PY_REFLEXION_FEW_SHOT_ADD": "Example: a fix.\n",
    "PY_SELF_REFLECTION_CHAT_INSTRUCTION": "Explain the failure.",
    "PY_SELF_REFLECTION_FEW_SHOT": "Example: an explanation.",
    "PY_TEST_GENERATION_FEW_SHOT": "Example tests:\nassert one() == 1\n",
    "PY_TEST_GENERATION_CHAT_INSTRUCTION": "Write unit tests.",
}
TESTS_COMPLETION = "Write unit tests.\n\n{PY_TEST_GENERATION_FEW_SHOT}"  # an f-string there


def _checkout(folder: Path, inner: str) -> Path:
    path = folder / inner / "generators" / "py_generate.py"
    path.parent.mkdir(parents=True)
    code = "".join(f"{name} = {text!r}\n" for name, text in STRINGS.items())
    code += f'PY_TEST_GENERATION_COMPLETION_INSTRUCTION = f"""{TESTS_COMPLETION}"""\n'
    path.write_text(code, encoding="utf-8")
    return folder


PROBLEM = {
    "task_id": "Toy/0",
    "prompt": 'def add(a: int, b: int) -> int:\n    """The sum of a and b."""\n',
    "entry_point": "add",
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
}
SIG = PROBLEM["prompt"]


# The repositories' rules, restated.


def turns(*messages: tuple[str, str]) -> str:
    """Chat messages as the model's ChatML template lays them out, for the assistant's turn."""
    return "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in messages) + "<|im_start|>assistant\n"


def fenced(code) -> str:
    return "```python\n" + str(code) + "\n```"


def asked_tests(chat: bool, lats: bool) -> str:
    s = STRINGS
    if not chat:
        made = TESTS_COMPLETION.replace("{PY_TEST_GENERATION_FEW_SHOT}", s["PY_TEST_GENERATION_FEW_SHOT"])
        return made + "\n\nfunc signature:\n" + SIG + "\nunit tests:"
    if lats:  # LATS puts the examples in the system turn
        return turns(("system", s["PY_TEST_GENERATION_CHAT_INSTRUCTION"] + "\n\n" + s["PY_TEST_GENERATION_FEW_SHOT"]),
                     ("user", "[func signature]:\n" + SIG + "\n\n[unit tests]:"))  # fmt: skip
    return turns(
        ("system", s["PY_TEST_GENERATION_CHAT_INSTRUCTION"]),
        ("user", s["PY_TEST_GENERATION_FEW_SHOT"] + "\n\n[func signature]:\n" + SIG + "\n\n[unit tests]:"),
    )


def first_asked(chat: bool) -> str:
    s = STRINGS
    if chat:
        return turns(("system", s["PY_SIMPLE_CHAT_INSTRUCTION"] + "\n" + s["USE_PYTHON_CODEBLOCK_INSTRUCTION"]),
                     ("user", SIG))  # fmt: skip
    return s["PY_SIMPLE_COMPLETION_INSTRUCTION"] + "\n" + SIG + "\n" + s["USE_PYTHON_CODEBLOCK_INSTRUCTION"]


def reflect_asked(chat: bool, code, said: str) -> str:
    s = STRINGS
    if chat:
        user = s["PY_SELF_REFLECTION_FEW_SHOT"] + "\n\n[function impl]:\n" + fenced(code) + "\n\n[unit test results]:\n"
        return turns(
            ("system", s["PY_SELF_REFLECTION_CHAT_INSTRUCTION"]), ("user", user + said + "\n\n[self-reflection]:")
        )
    return s["PY_SELF_REFLECTION_COMPLETION_INSTRUCTION"] + "\n" + fenced(code) + "\n\n" + said + "\n\nExplanation:"


def improved_asked(chat: bool, code, said: str, reflection: str) -> str:
    s = STRINGS
    if chat:
        return turns(("system", s["PY_REFLEXION_CHAT_INSTRUCTION"] + "\n" + s["USE_PYTHON_CODEBLOCK_INSTRUCTION"]),
                     ("user", s["PY_REFLEXION_FEW_SHOT_ADD"]), ("assistant", fenced(code)),
                     ("user", f"[unit test results from previous impl]:\n{said}\n\n[reflection on previous impl]:"),
                     ("assistant", reflection), ("user", "[improved impl]:\n" + SIG))  # fmt: skip
    return (
        s["PY_REFLEXION_COMPLETION_INSTRUCTION"]
        + "\n"
        + fenced(code)
        + "\n\nunit tests:\n"
        + said
        + "\n\nhint:\n"
        + reflection
        + "\n\n# improved implementation\n"
        + SIG
        + "\n"
        + s["USE_PYTHON_CODEBLOCK_INSTRUCTION"]
    )


def accumulated_asked(chat: bool, solution: str, feedbacks: list[str], reflections: list[str]) -> str:
    """mcts.py hands the node's solution (a string) where a list of implementations belongs: one character each."""
    s = STRINGS
    rows = list(zip(solution, feedbacks, reflections, strict=False))
    if chat:
        messages = [("system", s["PY_REFLEXION_CHAT_INSTRUCTION"] + "\n" + s["USE_PYTHON_CODEBLOCK_INSTRUCTION"]),
                    ("user", s["PY_REFLEXION_FEW_SHOT_ADD"])]  # fmt: skip
        for char, said, reflection in rows:
            messages += [
                ("assistant", fenced(char)),
                (
                    "user",
                    "[unit test results from previous impl]:\n"
                    + said
                    + "\n\n[reflection on previous impl]:\n"
                    + reflection,
                ),
            ]
        return turns(*messages, ("user", "[improved impl]:\n" + SIG))
    context = "\n\n".join(
        f"[previous impl {i}]:\n{fenced(c)}\n[unit test results from previous impl {i}]:\n{f}\n"
        f"[reflection on previous impl {i}]:\n{r}"
        for i, (c, f, r) in enumerate(rows, 1)
    )
    return (
        s["PY_REFLEXION_COMPLETION_INSTRUCTION"]
        + "\n"
        + context
        + "\n\n# improved implementation\n"
        + SIG
        + "\n"
        + s["USE_PYTHON_CODEBLOCK_INSTRUCTION"]
    )


def said(passed: list[str], failed: list[tuple[str, str]]) -> str:
    """The executor's feedback."""
    return ("Tested passed:" + "".join("\n" + t for t in passed) + "\n\nTests failed:"
            + "".join(f"\n{t} # output: {o}" for t, o in failed))  # fmt: skip


def syntax_message(code: str) -> str:
    try:
        compile("from typing import *\n" + code, "<string>", "exec")
    except SyntaxError as error:
        return str(error)
    raise AssertionError("the code compiles")


def call(prompt: str, temperature: float) -> tuple:
    """A call as the scripted model records it: greedy calls carry no temperature."""
    return (prompt, temperature)


def sent(model: ScriptedModel) -> list[tuple]:
    assert all(h["max_tokens"] == 1024 for h in model.history)
    return [(h["prompt"], h.get("temperature", 0.0)) for h in model.history]


@pytest.fixture(autouse=True)
def _quick_timeouts(monkeypatch):
    monkeypatch.setattr(program_env, "REFERENCE_SECONDS", 1.0)  # the executors' 5 s a test, shortened here


# Reflexion's programming runs.


@pytest.mark.parametrize("chat", [False, True], ids=["completion", "chat"])
def test_reflexions_run_is_replayed_call_for_call_with_quirky_replies(tmp_path, chat):
    reference = ProgramReference.load(_checkout(tmp_path, "programming_runs") / REFLEXION_FILE,
                                      chat=chat)  # fmt: skip
    test = "assert add(1, 2) == 3"
    wrong_name = "Here it is:\ndef plus(a, b):\n    return a + b\n\nThat adds."  # text around, the wrong name
    hangs = "```python\ndef add(a, b):\n    while True:\n        pass\n```"  # a fence; its test hangs
    replies = [f"{test}\nassert add(0, 0) == 0 and\nprint(1)", wrong_name, "Wrong name.", hangs, "It loops.",
               "no code at all"]  # fmt: skip
    model = ScriptedModel(replies)
    env = ProgramEnv(PROBLEM)
    trajectory, record = programs_reference.reflexion(env, model, reference, iterations=3, tests=1)

    first = "def plus(a, b):\n    return a + b\n"  # parse_first_func: from the def to the blank line after a return
    said_1 = said([], [(test, "name 'add' is not defined")])
    looping = "def add(a, b):\n    while True:\n        pass"
    # F1 (issue 91 item 12): a test that runs out of time says what their thread helper raises, never TIMEOUT
    said_2 = said([], [(test, "'PropagatingThread' object has no attribute 'ret'")])
    tests_t, reflect_t = (0.2, 0.2) if chat else (0.0, 0.0)
    assert sent(model) == [
        call(asked_tests(chat, lats=False), tests_t),
        call(first_asked(chat), 0.0),
        call(reflect_asked(chat, first, said_1), reflect_t),
        call(improved_asked(chat, first, said_1, "Wrong name."), 0.0),
        call(reflect_asked(chat, looping, said_2), reflect_t),
        call(improved_asked(chat, looping, said_2, "It loops."), 0.0),
    ]
    stops = [h["stop"] for h in model.history]
    assert stops == [["<|im_end|>", "<|endoftext|>"] if chat else []] * 6
    assert record["tests"] == [test]  # the line that does not parse is dropped, and the one without assert
    assert [s.action_text for s in trajectory.steps] == [first, looping, ""]  # no code: an empty implementation
    assert record["hidden_runs"] == 1 and record["counted"] is False and trajectory.ended == "failed"


def test_reflexion_judges_a_first_implementation_that_passes_its_tests_and_counts_the_hidden_verdict(tmp_path):
    reference = ProgramReference.load(_checkout(tmp_path, "programming_runs") / REFLEXION_FILE,
                                      chat=True)  # fmt: skip
    tests = ["assert add(1, 1) == 2", "assert add(2, 2) == 4", "assert add(0, 0) == 0"]
    model = ScriptedModel(["\n".join(tests), "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```"])
    trajectory, record = programs_reference.reflexion(ProgramEnv(PROBLEM), model, reference, iterations=2, tests=1,
                                                      seed=7)  # fmt: skip
    assert record["tests"] == random.Random(7).sample(tests, 1)  # one drawn at random (seeded here, P3)
    assert len(model.history) == 2 and trajectory.ended == "passed" and record["counted"] is True
    assert trajectory.steps[0].observation.startswith(said(record["tests"], []))


def test_reflexions_simple_strategy_sends_one_call_and_judges_it(tmp_path):
    reference = ProgramReference.load(_checkout(tmp_path, "programming_runs") / REFLEXION_FILE,
                                      chat=False)  # fmt: skip
    model = ScriptedModel(["```\ndef add(a, b):\n    return a + b\n```\nDone."])  # a bare fence
    trajectory, record = programs_reference.simple(ProgramEnv(PROBLEM), model, reference)
    assert sent(model) == [call(first_asked(False), 0.0)]
    assert trajectory.answer == "def add(a, b):\n    return a + b" and trajectory.ended == "passed"


def test_reflexions_simple_judges_in_a_namespace_with_typings_list_alone_and_the_searches_with_all_of_it(tmp_path):
    """F2 (issue 91 item 13): `run_simple` judges before any test has run in the executor's namespace, where of
    `typing` only the module's own `List` is defined: a program using `Optional` without importing it fails there
    (and passed here), while in Reflexion's and LATS's searches `execute` has put all of typing's names there."""
    reference = ProgramReference.load(_checkout(tmp_path, "programming_runs") / REFLEXION_FILE,
                                      chat=False)  # fmt: skip
    optional = "```python\ndef add(a: int, b: Optional[int]) -> int:\n    return a + b\n```"
    listed = "```python\ndef add(a: int, b: int) -> List[int]:\n    return a + b\n```"
    trajectory, record = programs_reference.simple(ProgramEnv(PROBLEM), ScriptedModel([optional]), reference)
    assert trajectory.ended == "failed" and "NameError" in record["hidden"]["reason"] + record["hidden"]["stderr"]
    trajectory, _ = programs_reference.simple(ProgramEnv(PROBLEM), ScriptedModel([listed]), reference)
    assert trajectory.ended == "passed"
    tests = "assert add(1, 1) == 2"
    trajectory, _ = programs_reference.reflexion(ProgramEnv(PROBLEM), ScriptedModel([tests, optional]), reference,
                                                 iterations=1, tests=1)  # fmt: skip
    assert trajectory.ended == "passed"


def test_a_test_out_of_time_says_what_the_repositories_executor_says_not_timeout():
    """F1 (issue 91 item 12): their `function_with_timeout` never reaches its TIMEOUT: `PropagatingThread.join`
    returns `self.ret`, never set while the thread runs, so the test's output is that AttributeError's text."""
    looping = "def add(a, b):\n    while True:\n        pass\n"
    passing, feedback, tried = ProgramEnv(PROBLEM).try_reference(looping, ["assert add(1, 2) == 3"])
    said_there = "'PropagatingThread' object has no attribute 'ret'"
    assert not passing and [t.output for t in tried] == [said_there]
    assert feedback == said([], [("assert add(1, 2) == 3", said_there)]) and "TIMEOUT" not in feedback


def test_the_reference_hidden_tests_have_the_repositories_ten_wall_seconds():
    """F3 (issue 91 item 14): their `evaluate(..., timeout=10)` is 10 wall seconds; rawreact's own rules give 20."""
    env, limits = ProgramEnv(PROBLEM), []
    env._run = lambda program, tests, given, name=None: limits.append(given)
    env.judge_reference("def add(a, b):\n    return a + b\n")
    env.judge("def add(a, b):\n    return a + b\n")
    assert [(given.seconds, given.cpu_seconds) for given in limits] == [(10.0, 10), (20.0, 10)]


# LATS's mcts.py.


def test_lats_search_is_replayed_call_for_call(tmp_path):
    """max_iters 2, n 2: the tests are drawn again each iteration; after each child made, every child of the node
    is tried again and each failing one reflected on again, the reward of the last one tried backed up; at the last
    iteration the first child tried is judged by the hidden tests, and the search ends when it passes them."""
    reference = ProgramReference.load(_checkout(tmp_path, "programming") / LATS_FILE, chat=True)
    t1, t2, t3 = "assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(5, 0) == 5"
    minus = "def add(a, b):\n    return a - b"
    broken = "def add(a, b)\n    return a + b"  # a syntax error
    times = "def add(a, b):\n    return a * b"  # right on t2 only
    plus = "def add(a: int, b: int) -> int:\n    return a + b"
    drawn = random.Random(0).sample([t2, t3], 1)[0]  # iteration 1's tests: two written, one kept (seeded, P3)
    root_said = said([], [(t1, "-1")])
    broken_said = said([], [(drawn, syntax_message(broken))])
    times_said = said([t2], []) if drawn == t2 else said([], [(t3, "0")])
    times_reflection = [] if drawn == t2 else ["Multiplies."]
    model = ScriptedModel([t1, fenced(minus), "Subtracts.", f"{t2}\n{t3}", broken, "Syntax.", fenced(times),
                           "Syntax again.", *times_reflection, t1, fenced(plus)])  # fmt: skip
    trajectory, record = programs_reference.lats(ProgramEnv(PROBLEM), model, reference, iterations=2, tests=1,
                                                 children=2, seed=0)  # fmt: skip

    # Iteration 2 expands the child of highest UCT: `times` where its test held (value 1), else `broken` (a tie at
    # value 0, the first child wins), with the context gathered up the tree, zipped with its solution's letters.
    if drawn == t2:
        chosen, feedbacks, reflections = times, [root_said, times_said], ["Subtracts."]
    else:
        chosen, feedbacks, reflections = broken, [root_said, broken_said], ["Subtracts.", "Syntax again."]
    first_context = accumulated_asked(True, minus, [root_said], ["Subtracts."])
    expected = [
        call(asked_tests(True, lats=True), 0.2),
        call(first_asked(True), 0.8),
        call(reflect_asked(True, minus, root_said), 0.2),
        call(asked_tests(True, lats=True), 0.2),  # iteration 1
        call(first_context, 0.8),
        call(
            reflect_asked(
                True, broken, "Tested passed:\n\nTests failed:\n" + drawn + " # output: " + syntax_message(broken)
            ),
            0.2,
        ),  # fmt: skip
        call(first_context, 0.8),
        call(reflect_asked(True, broken, broken_said), 0.2),  # both children tried again
        *([call(reflect_asked(True, times, times_said), 0.2)] if times_reflection else []),
        call(asked_tests(True, lats=True), 0.2),  # iteration 2
        call(accumulated_asked(True, chosen, feedbacks, reflections), 0.8),
    ]
    assert sent(model) == expected
    assert [h["seed"] for h in model.history] == list(range(1, len(expected) + 1))  # each sample its own seed
    assert trajectory.ended == "passed" and trajectory.answer == plus and record["counted"] is True
    assert record["hidden_runs"] == 2 + (drawn == t2)  # plus; `times` too where its test held; the final check


def test_lats_counts_a_first_implementation_that_passes_its_own_tests_whatever_the_hidden_tests_say(tmp_path):
    reference = ProgramReference.load(_checkout(tmp_path, "programming") / LATS_FILE, chat=False)
    model = ScriptedModel(["assert add(1, 1) == 2", fenced("def add(a, b):\n    return 2")])  # right on its test only
    trajectory, record = programs_reference.lats(ProgramEnv(PROBLEM), model, reference, iterations=4, tests=2)
    assert len(model.history) == 2
    assert record["counted"] is True and trajectory.ended == "failed"  # the repository counts it; the tests do not


def test_the_executors_feedback_and_reward_are_the_repositories():
    env = ProgramEnv(PROBLEM)
    passing, text, tried = env.try_reference(
        "def add(a, b):\n    return [a, b][b]", ["assert add(1, 1) == 2", "assert add(1, 0) == 1", "assert add(1, 2)"]
    )
    assert not passing
    assert text == said(["assert add(1, 0) == 1"], [("assert add(1, 1) == 2", "1"),
                                                     ("assert add(1, 2)", "list index out of range")])  # fmt: skip
    assert programs_reference.internal_reward(text, 3) == pytest.approx(1 / 3)


# Through the CLI.


def test_reference_dir_runs_reflexion_on_problems_and_records_it(tmp_path, capsys, monkeypatch):
    checkout = _checkout(tmp_path / "reflexion", "programming_runs")
    read = []  # every file the prompts are read from: the repository's py_generate.py is parsed once
    monkeypatch.setattr(rawreact.agents.prompts, "read_text", lambda path: read.append(path) or Path(path).read_text())
    whole = rawreact.agents.prompts.read_bytes_and_text  # the bytes the manifest hashes, and their text, read once
    monkeypatch.setattr(rawreact.agents.prompts, "read_bytes_and_text", lambda path: read.append(path) or whole(path))
    data = tmp_path / "toy.jsonl"
    data.write_text(json.dumps(PROBLEM) + "\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["assert add(1, 2) == 3", fenced("def add(a, b):\n    return a + b")]))
    out = tmp_path / "run.jsonl"
    assert main(["run", str(data), "--method", "reflexion", "--reference", str(checkout), "--prompt", "chat",
                 "--model", f"scripted:{script}", "--out", str(out)]) == 0  # fmt: skip
    said_ = capsys.readouterr()
    assert "Reflexion's setup from" in said_.out and "reflexion.py, call for call" in said_.out
    assert "the repository's rules, call for call" in said_.out
    header = next(line for line in said_.out.splitlines() if line.startswith("rawreact 0"))
    assert "(chat messages as ChatML turns), grammar off" in header
    assert "exemplar" not in header
    assert [Path(p).name for p in read] == ["py_generate.py"]
    _, records = read_run(out)
    assert records[0]["success"] == 1 and records[0]["program"]["counted"] is True
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["settings"]["loop"] == "reference" and manifest["config"]["iterations"] == 2
    assert list(manifest["reference"]["files"]) == [REFLEXION_FILE]
    assert manifest["config"]["program_tests"] == 1 and manifest["config"]["program_prompts"].endswith(
        "(chat messages as ChatML turns)"
    )


@pytest.mark.parametrize(
    ("argv", "said_"),
    [
        (["--method", "lats"], "no programming/generators/py_generate.py there"),
        (["--method", "reflexion", "--prompt", "mine.txt"], "--prompt chat sends its chat messages"),
        (["--method", "simple", "--number-of-tests", "3"], "writes no tests of its own"),
    ],
)
def test_reference_settings_that_cannot_run_are_refused(tmp_path, capsys, argv, said_):
    checkout = _checkout(tmp_path / "reflexion", "programming_runs")
    code = main(["run", "humaneval:0", "--reference", str(checkout), *argv, "--model", "scripted:none.json",
                 "--out", str(tmp_path / "r.jsonl")])  # fmt: skip
    assert code == 2 and said_ in capsys.readouterr().err


# rawreact's own LATS over implementations.


def test_lats_over_implementations_samples_children_together_and_never_shows_the_hidden_tests():
    prompts = ProgramPrompts.load()
    tests = "assert add(1, 2) == 3\nassert add(0, 0) == 0"
    replies = [tests, "    return a - b\n", "It subtracts.", "    return a * b\n", "    return a + b\n"]
    model = ScriptedModel(replies)
    trajectory, record = programs.lats(ProgramEnv(PROBLEM), model, prompts, iterations=3, children=2, seed=5)
    history = model.history
    assert [h.get("temperature") for h in history] == [None, None, None, 0.8, 0.8]
    assert [h.get("seed") for h in history[3:]] == [5, 6]  # the children: one call's samples
    assert history[3]["prompt"] == history[4]["prompt"] and "It subtracts." in history[3]["prompt"]
    assert all("candidate(-1, 1)" not in h["prompt"] for h in history)  # the hidden tests are never shown
    assert trajectory.ended == "passed" and trajectory.answer.endswith("    return a + b\n")
    assert record["tests"] == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
    assert [bool(s.calls) for s in trajectory.steps] == [True, True, True, False]  # 3 made; the chosen, judged
    assert "Chosen: implementation 3 of 3, the first of highest reward" in trajectory.steps[-1].observation


def test_the_cli_runs_lats_over_problems_with_the_repositorys_settings(tmp_path):
    data = tmp_path / "toy.jsonl"
    data.write_text(json.dumps(PROBLEM) + "\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["assert add(1, 2) == 3", "    return a - b\n", "Wrong sign."]
                                 + ["    return a + b\n"] * 5))  # fmt: skip
    out = tmp_path / "run.jsonl"
    assert main(["run", str(data), "--method", "lats", "--model", f"scripted:{script}", "--out", str(out), "-q"]) == 0
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["config"]["iterations"] == 8 and manifest["config"]["program_children"] == 5
    assert manifest["config"]["program_temperature"] == 0.8 and manifest["config"]["temperature"] == 0.0
    _, records = read_run(out)
    assert records[0]["success"] == 1 and records[0]["program"]["hidden"]["passed"] is True
