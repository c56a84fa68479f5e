"""Grammars: llama.cpp is the judge of what they admit, and what they admit is what the parser reads."""

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rawreact import VERBS, Action, GrammarError, ScriptedModel, format_action, load_grammar, parse_step, react
from rawreact.core.actions import parse_action
from rawreact.models.gbnf import check_grammar
from rawreact.models.llama import LlamaModel

STEP, ACTION, TITLES = load_grammar("step"), load_grammar("action"), load_grammar("titles")
REAL = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize(
    "grammar, message",
    [
        ('root ::= my_rule\nmy_rule ::= "a"', "on line 1, at '_rule'; rule names allow letters, digits and '-' only"),
        ('root ::= "[" [^]]* "]"', "at ']* \"]\"'; write a ']' inside a character class as '\\]'"),
        ('start ::= "a"', "grammar does not contain a 'root' symbol; the grammar needs a rule named root"),
        ('root ::= ("a" | "b"', "expecting ')' at the end of the grammar"),
        ("root ::= undefined", "Undefined rule identifier 'undefined'; define that rule or correct its name"),
        ('root ::= root "a" | "b"', "left recursion detected"),
        ("# only a comment\n", "has no rules; a grammar needs at least a rule named root"),
        ('root ::= "a"{3,1}', "line 1: the repetition {3,1} needs min <= max <= 10000"),
        ('root ::= "a"{0,99999}', "needs min <= max <= 10000"),  # llama.cpp would exhaust memory expanding it
    ],
)
def test_invalid_grammars_are_errors_that_name_the_problem_not_crashes(grammar, message):
    with pytest.raises(GrammarError) as error:
        check_grammar(grammar, source="my.gbnf")
    assert str(error.value).startswith("my.gbnf") and message in str(error.value)


def test_the_shipped_grammars_name_each_step_and_every_verb():
    step = STEP.for_step(3)
    assert 'root ::= " " thought "\\nAction 3: " action' in step
    assert 'action ::= "Search[" arg "]" | "Lookup[" arg "]" | "Think[" arg "]" | "Finish[" arg "]"' in step
    assert ACTION.for_action(2).count("root ::=") == 1 and 'root ::= " " action' in ACTION.for_action(2)
    assert [f'"{verb}["' in step for verb in VERBS.values()] == [True] * len(VERBS)
    titled = TITLES.for_step(1, ["Ed Wood", 'The "Iron" Duke', "Ed Wood", "  "])
    assert '"Search[" title "]"' in titled and 'title ::= "Ed Wood" | "The \\"Iron\\" Duke"\n' in titled
    assert '"Search[" arg "]"' in TITLES.for_step(1, [])  # no titles: searches stay free


def test_a_user_template_is_checked_and_its_errors_name_the_file(tmp_path):
    mine = tmp_path / "mine.gbnf"
    mine.write_text('root ::= " " thought "\\nAction $i: " action\nthought ::= [a-z ]{1,40}\n$rules')
    grammar = load_grammar("step", mine)
    assert grammar.name == f"step ({mine})" and "thought ::= [a-z ]{1,40}" in grammar.for_step(1)
    mine.write_text("root ::= $action")
    with pytest.raises(GrammarError, match=r"mine.gbnf line 1: unknown template variable \$action; the variables"):
        load_grammar("step", mine)
    mine.write_text('root ::= "costs $ 5"')
    with pytest.raises(GrammarError, match=r"mine.gbnf line 1: a lone \$; write \$\$ for a literal \$"):
        load_grammar("action", mine)
    mine.write_text("root ::= bad_name\n$rules")
    with pytest.raises(GrammarError, match=r"mine.gbnf: llama.cpp cannot parse the grammar: .*never '_'"):
        load_grammar("action", mine)
    with pytest.raises(GrammarError, match="unknown grammar mode 'all'; the modes are step, action, titles"):
        load_grammar("all")


# What the parser accepts in canonical form, the grammar admits; and the other way round.

printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=40)


def _round_trips(action: Action) -> bool:
    return parse_action(format_action(action)) == action


@REAL
@given(st.sampled_from(list(VERBS)), printable)
def test_every_canonical_action_the_parser_reads_back_is_admitted(gemma, verb, arg):
    action = Action(verb, arg)
    assume(_round_trips(action) and "[" not in arg and "]" not in arg)
    assert gemma.admits(ACTION.for_action(1), " " + format_action(action))
    assert gemma.admits(STEP.for_step(4), f" I think so.\nAction 4: {format_action(action)}")


@REAL
@given(st.sampled_from(list(VERBS)), printable, printable, st.integers(1, 9))
def test_every_step_the_grammar_admits_parses_to_its_action(gemma, verb, arg, thought, i):
    text = f" {thought}\nAction {i}: {VERBS[verb]}[{arg}]"
    admitted = gemma.admits(STEP.for_step(i), text)
    parsed = parse_step(text, i)
    if admitted:
        assert parsed == (" ".join(thought.split()), Action(verb, arg))
    elif thought.strip() and not set(thought) & set("[]:") and not thought[0].isspace():
        # the thought was fine, so the grammar refused the argument: the parser would change it
        assert not (_round_trips(Action(verb, arg)) and not set(arg) & set("[]"))


def test_the_grammar_bounds_refuses_the_usual_slips_and_keeps_titles(gemma):
    action = ACTION.for_action(1)
    assert gemma.admits(action, " Finish[]") and gemma.admits(action, " Search[" + "x" * 100 + "]")
    for slip in (
        " Search[" + "x" * 101 + "]",
        " search[Milan]",
        " Search [Milan]",
        " Search[Milan] now",
        " Search[ Milan]",
        ' Search["Milan"]',
        " Search[a [b] c]",
        " Answer[Milan]",
        " Search[Mil\nan]",
    ):
        assert not gemma.admits(action, slip), slip
    step = STEP.for_step(2)
    assert gemma.admits(step, " " + "t" * 200 + "\nAction 2: Finish[x]")
    assert not gemma.admits(step, " " + "t" * 201 + "\nAction 2: Finish[x]")
    assert not gemma.admits(step, " ok\nAction 3: Finish[x]")  # the step number is baked in
    titles = TITLES.for_action(1, ["Ed Wood", "Scott Derrickson"])
    assert gemma.admits(titles, " Search[Ed Wood]") and not gemma.admits(titles, " Search[Ed]")
    assert gemma.admits(titles, " Lookup[Ed]")  # lookups stay free


def test_fast_greedy_decoding_writes_what_the_grammar_over_the_whole_vocabulary_writes(gemma, demo):
    """The decoder that asks the grammar only about the best tokens equals masking the whole vocabulary first."""
    # Both reuse their caches the same way (the first two cases share the prompt), so only decoding differs.
    slow = LlamaModel(gemma.path, grammar_first=True)
    fast = LlamaModel(gemma.path)
    from rawreact import load_prompt

    question = demo.questions[1].question
    cases = [
        (f"{load_prompt(k=1).text}Question: {question}\nThought 1:", STEP.for_step(1), "\nObservation 1:"),
        (f"{load_prompt(k=1).text}Question: {question}\nThought 1:", TITLES.for_step(1, demo.passages), "\n"),
        ("Write a poem about the sea.\n", STEP.for_step(2), "\nObservation 2:"),  # far from the format
    ]
    for prompt, grammar, stop in cases:
        a = fast.complete(prompt, stop=[stop], max_tokens=36, grammar=grammar)
        b = slow.complete(prompt, stop=[stop], max_tokens=36, grammar=grammar)
        assert (a.text, a.finish_reason, a.completion_tokens) == (b.text, b.finish_reason, b.completion_tokens)
        assert a.text.strip() and (stop == "\n" or "\nAction " in a.text or a.finish_reason == "length")


@pytest.mark.parametrize("mode", ["step", "action", "titles"])
def test_a_real_episode_under_a_grammar_has_a_valid_action_at_every_step(gemma, demo, mode):
    question = demo.questions[2]
    traj = react(question.question, demo.env(), gemma, grammar=mode, max_steps=2)
    assert traj.steps and all(step.action is not None and step.error is None for step in traj.steps)
    assert not any(step.observation.startswith("Invalid action") for step in traj.steps)
    assert all(len(step.calls) == (2 if mode == "action" else 1) for step in traj.steps)
    if mode == "titles":
        assert all(s.action.arg in demo.passages for s in traj.steps if s.action.name == "search")
    later = [call for step in traj.steps[1:] for call in step.calls]
    assert later and all(call.evaluated_tokens < call.prompt_tokens / 4 for call in later)  # the cache is reused


def test_the_loop_asks_for_the_right_grammar_at_each_call():
    model = ScriptedModel([" a\nAction 1: Search[Dallow]", " b", " Finish[x]"])
    react("q?", _env(), model, grammar="step", max_steps=2)
    step, fallback = model.history[1]["grammar"], model.history[2]["grammar"]
    assert model.history[0]["grammar"] == STEP.for_step(1) and step == STEP.for_step(2)
    assert fallback == ACTION.for_action(2) and model.history[2]["stop"] == ["\n"]
    model = ScriptedModel([" a", " Search[Dallow]"])
    react("q?", _env(), model, grammar="action", max_steps=1)
    free, action = model.history
    assert free["grammar"] is None and free["stop"] == ["\nAction 1:", "\nObservation 1:"]
    assert action["grammar"] == ACTION.for_action(1) and action["prompt"].endswith("Thought 1: a\nAction 1:")


def _env():
    from rawreact import load_collection

    return load_collection().env()


def test_cli_runs_with_a_grammar_and_refuses_a_bad_grammar_file(tmp_path):
    out = tmp_path / "run.jsonl"
    args = [sys.executable, "-m", "rawreact", "run", "--limit", "1", "--max-steps", "2", "-q", "--out", str(out)]
    done = subprocess.run([*args, "--grammar", "titles"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "grammar titles" in done.stdout and json.loads(out.read_text())["invalid_actions"] == 0
    bad = tmp_path / "bad.gbnf"
    bad.write_text("root ::= ( $rules")
    failed = subprocess.run(
        [*args[:-1], str(tmp_path / "other.jsonl"), "--grammar-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert failed.returncode == 2 and failed.stdout == ""
    assert failed.stderr.startswith(f"rawreact: error: {bad}: llama.cpp cannot parse the grammar: expecting")


def test_a_model_that_cannot_apply_a_grammar_is_refused_before_it_is_called():
    class NoGrammar(ScriptedModel):
        supports_grammar = False

    model = NoGrammar([" t\nAction 1: Finish[x]"], name="plain")
    with pytest.raises(GrammarError, match="model plain cannot apply a grammar; run it without one"):
        react("q?", _env(), model, grammar="step")
    assert model.history == [] and react("q?", _env(), model).answer == "x"


def test_the_second_embedded_model_runs_under_a_grammar_too(demo):
    """SmolLM2 has another tokenizer (49,152 tokens): same valid actions, same text as full sampling."""
    from rawreact import load_model, load_prompt

    smol = load_model("smollm2-135m")  # one exemplar: the grammar, not the prompt's length, is under test
    traj = react(demo.questions[0].question, demo.env(), smol, load_prompt(k=1), grammar="step", max_steps=2)
    assert traj.steps and all(step.error is None and len(step.calls) == 1 for step in traj.steps)
    fast, slow = load_model("smollm2-135m", reuse_cache=False), load_model("smollm2-135m", grammar_first=True)
    prompt = traj.transcript(1) + "Thought 2:"
    a = fast.complete(prompt, stop=["\nObservation 2:"], max_tokens=60, grammar=STEP.for_step(2))
    b = slow.complete(prompt, stop=["\nObservation 2:"], max_tokens=60, grammar=STEP.for_step(2))
    assert (a.text, a.finish_reason) == (b.text, b.finish_reason) and "\nAction 2: " in a.text
