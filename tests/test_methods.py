"""Every method with the scripted model: what each sends, how it reads the answer, the vote and the back-offs."""

import json

import pytest

from rawreact import load_collection
from rawreact.agents.answers import parse_answer
from rawreact.agents.grammar import load_grammar
from rawreact.agents.methods import solve
from rawreact.agents.prompts import load_prompt, read_exemplars
from rawreact.agents.reasoning import Reasoning, reason
from rawreact.config.choices import METHODS, PAPER
from rawreact.core.actions import parse_action
from rawreact.core.resources import resource
from rawreact.experiments.variants import Variant, ablation
from rawreact.models.scripted import ScriptedModel
from rawreact.reports.show import show
from rawreact.reports.summary import summarize
from rawreact.runs.records import read_run
from rawreact.runs.run import Result, run_questions
from rawreact.tasks.collection import Question

Q = "Which river flows through the birthplace of the composer of the opera The Glass Orchard?"


@pytest.fixture
def env():
    return load_collection(resource("envs", "exemplars.json")).env()


def test_there_are_the_seven_rows_of_the_paper():
    assert PAPER == ("react", "act", "standard", "cot", "cot-sc", "react-cot-sc", "cot-sc-react")
    # and native tool calls, which the paper did not have, and Reflexion's trials of ReAct and CoT
    # and LATS's tree search, and the two methods that write programs (issue 69)
    assert list(METHODS) == [*PAPER, "tools", "react-reflexion", "cot-reflexion", "lats", "simple", "reflexion"]


def test_act_prompts_for_the_action_and_writes_no_thought(env):
    model = ScriptedModel([" Search[The Glass Orchard]\nObservation 1: made up", " Finish[Lee]"])
    prompt = load_prompt(method="act")
    out = solve(Q, env, model, prompt, method="act")
    first, second = model.history
    assert first["prompt"] == prompt.text + f"Question: {Q}\nAction 1:"
    assert first["stop"] == ["\nObservation 1:", "]\n"]
    assert second["prompt"].startswith(first["prompt"] + " Search[The Glass Orchard]\nObservation 1: The Glass Orchard")
    assert second["prompt"].endswith("\nAction 2:") and "Thought" not in second["prompt"][len(prompt.text) :]
    assert (out.answer, out.ended, out.branch, out.model_calls) == ("Lee", "finish", "act", 2)
    assert [s.thought for s in out.steps] == [None, None]


def test_act_reads_a_bare_prefix_and_reports_what_it_cannot_read(env):
    model = ScriptedModel(["\nAction 1:\nSearch[Ilse Varnholt]", " I think the answer is Lee", " Finish[Lee]"])
    out = solve(Q, env, model, load_prompt(method="act"), method="act")
    assert out.steps[0].action is not None and out.steps[0].action.arg == "Ilse Varnholt"
    assert out.steps[1].error == "no action" and out.invalid_actions == 1
    assert out.answer == "Lee"


def test_act_under_a_grammar_uses_the_action_grammar(env):
    grammar = load_grammar("step")
    model = ScriptedModel([" Finish[Lee]"])
    solve(Q, env, model, load_prompt(method="act"), method="act", grammar=grammar)
    assert model.history[0]["grammar"] == grammar.for_action(1, env.titles)


def test_standard_is_one_call_on_answer(env):
    model = ScriptedModel([" Lee\nQuestion: made up"])
    prompt = load_prompt(method="standard")
    out = solve(Q, env, model, prompt, method="standard")
    [call] = model.history
    assert call["prompt"] == prompt.text + f"Question: {Q}\nAnswer:" and call["stop"] == ["\n"]
    assert (out.answer, out.ended, out.model_calls, out.steps, out.trajectory) == ("Lee", "finish", 1, [], None)


def test_cot_reads_the_answer_after_the_thought(env):
    model = ScriptedModel([" It was composed by Ilse Varnholt, born on the Lee. So the answer is Lee.\nAnswer: Lee"])
    prompt = load_prompt(method="cot")
    out = solve(Q, env, model, prompt, method="cot")
    [call] = model.history
    assert call["prompt"] == prompt.text + f"Question: {Q}\nThought:"
    assert call["stop"] == ["\nQuestion:", "\n\n"] and "temperature" not in call  # greedy, the model's own
    assert (out.answer, out.ended) == ("Lee", "finish")


def test_a_cot_completion_without_an_answer_ends_as_no_answer(env):
    out = solve(Q, env, ScriptedModel([" I do not know this opera."]), load_prompt(method="cot"), method="cot")
    assert (out.answer, out.ended) == ("", "no_answer")


def test_cot_sc_draws_n_seeded_samples_of_one_prompt_and_votes():
    texts = [" a\nAnswer: Lee", " b\nAnswer: the Tam", " c\nAnswer: Tam.", " d", " e\nAnswer: lee"]
    model = ScriptedModel(texts)
    result = reason(Q, model, load_prompt(method="cot"), method="cot-sc", samples=5, temperature=0.7, seed=40)
    assert len({call["prompt"] for call in model.history}) == 1
    assert [(c["temperature"], c["seed"]) for c in model.history] == [(0.7, s) for s in range(40, 45)]
    assert [s.answer for s in result.samples] == ["Lee", "the Tam", "Tam", None, "lee"]
    tally = result.vote
    assert (tally.answer, tally.votes, tally.share) == ("Lee", 2, 0.4)  # a tie: Lee's first vote came first
    assert tally.counts == {"lee": 2, "tam": 2}
    back = Reasoning.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.answer == "Lee" and back.to_dict() == result.to_dict()


def test_react_cot_sc_keeps_a_finished_react_answer(env):
    model = ScriptedModel([" I know it.\nAction 1: Finish[Lee]"])
    out = solve(Q, env, model, load_prompt(), method="react-cot-sc", backoff_prompt=load_prompt(method="cot"))
    assert (out.answer, out.branch, out.reasoning, out.model_calls) == ("Lee", "react", None, 1)


@pytest.mark.parametrize(
    "react_steps",
    [
        [" Look.\nAction 1: Search[Ilse Varnholt]", " More.\nAction 2: Search[Dornach-on-Lee]"],  # step limit
        [" Done.\nAction 1: Finish[]"],  # finished without an answer
    ],
    ids=["step limit", "empty finish"],
)
def test_react_cot_sc_backs_off_to_cot_sc_without_a_react_answer(env, react_steps):
    samples = [" x\nAnswer: Tam", " y\nAnswer: Lee", " z\nAnswer: Lee"]
    model = ScriptedModel(react_steps + samples)
    cot = load_prompt(method="cot")
    out = solve(Q, env, model, load_prompt(), method="react-cot-sc", backoff_prompt=cot, samples=3, max_steps=2, seed=7)
    assert (out.answer, out.branch, out.ended) == ("Lee", "cot-sc", "finish")
    assert out.trajectory is not None and out.trajectory.answer == ""
    assert model.history[-1]["prompt"] == cot.text + f"Question: {Q}\nThought:"
    assert out.model_calls == len(react_steps) + 3


def test_cot_sc_react_keeps_a_majority_of_half_the_votes(env):
    model = ScriptedModel([" Answer: Lee", " Answer: Lee", " Answer: Tam", " Answer: Ouse"])
    out = solve(
        Q, env, model, load_prompt(method="cot"), method="cot-sc-react", backoff_prompt=load_prompt(), samples=4
    )
    assert (out.answer, out.branch, out.trajectory) == ("Lee", "cot-sc", None)  # 2 of 4 is not fewer than half


def test_cot_sc_react_asks_react_when_the_vote_is_split(env):
    samples = [" Answer: Lee", " Answer: Tam", " Answer: Lee", " Answer: Ouse", " no answer"]
    model = ScriptedModel(samples + [" I will check.\nAction 1: Finish[Tam]"])
    react_prompt = load_prompt()
    out = solve(Q, env, model, load_prompt(method="cot"), method="cot-sc-react", backoff_prompt=react_prompt, samples=5)
    assert (out.answer, out.branch) == ("Tam", "react")  # Lee had 2 of 5 votes, fewer than half
    assert out.reasoning.vote.answer == "Lee" and model.history[-1]["prompt"].startswith(react_prompt.text)
    assert [c.text for c in out.calls][:5] == samples  # the calls in the order they ran


def test_a_back_off_needs_its_second_prompt(env):
    with pytest.raises(ValueError, match="backoff_prompt"):
        solve(Q, env, ScriptedModel([]), load_prompt(), method="react-cot-sc")


def test_records_of_every_method_read_back_and_show(tmp_path, env):
    question = Question("q1", Q, "Lee")
    out = tmp_path / "run.jsonl"
    model = ScriptedModel([" Look.\nAction 1: Search[Ilse Varnholt]", " Answer: Lee", " Answer: Tam", " Answer: Lee"])
    [result] = run_questions(
        [question],
        lambda q: load_collection(resource("envs", "exemplars.json")).env(),
        model,
        load_prompt(),
        out=out,
        method="react-cot-sc",
        backoff_prompt=load_prompt(method="cot"),
        samples=3,
        max_steps=1,
    )
    assert isinstance(result, Result) and result.em == 1.0
    _, [record] = read_run(out)
    assert (record["method"], record["branch"], record["ended"]) == ("react-cot-sc", "cot-sc", "finish")
    assert record["vote_share"] == pytest.approx(2 / 3) and record["model_calls"] == 4
    assert record["reasoning"]["prompt"] == load_prompt(method="cot").text  # restored from the manifest
    assert "prompt" not in json.loads(out.read_text())["reasoning"]  # stored once, in the manifest
    text = show(record)
    assert "answered by cot-sc" in text and "--- react\n" in text and "--- cot-sc\n" in text
    assert text.index("--- react") < text.index("--- cot-sc") and "[sample 3] answer 'Lee'" in text
    summary = summarize([record])
    assert summary["vote_share"] == pytest.approx(2 / 3) and summary["branches"] == {"cot-sc": 1.0}


def test_the_shipped_prompts_answer_the_same_exemplar_questions():
    """Standard, CoT and Act exemplars ask the ReAct exemplars' questions and give their Finish answers."""
    react = read_exemplars()
    questions = [e.splitlines()[0] for e in react]
    answers = [e.rstrip("\n").rsplit("Finish[", 1)[1].rstrip("]") for e in react]
    for method in ("standard", "cot", "act"):
        exemplars = read_exemplars(method=method)
        assert [e.splitlines()[0] for e in exemplars] == questions, method
        for exemplar, answer in zip(exemplars, answers, strict=True):
            if method == "act":
                assert exemplar.rstrip("\n").endswith(f"Finish[{answer}]")
            else:
                body = exemplar.split("\n", 1)[1]
                cue = "Answer:" if method == "standard" else "Thought:"
                assert body.startswith(cue)
                assert parse_answer(body if method == "standard" else body.removeprefix(cue)) == answer


def test_the_act_exemplars_replay_on_their_passages():
    collection = load_collection(resource("envs", "exemplars.json"))
    for exemplar in read_exemplars(method="act"):
        env, lines = collection.env(), exemplar.splitlines()[1:]
        for n in range(1, len(lines) // 2 + 2):
            action_line = lines[2 * (n - 1)]
            assert action_line.startswith(f"Action {n}: ")
            observation, done = env.step(parse_action(action_line))
            if done:
                break
            assert lines[2 * n - 1] == f"Observation {n}: {observation}"
        assert env.answer


@pytest.mark.parametrize(
    "method, key, cue",
    [
        ("standard", "webqa_simple6", "Answer:"),
        ("cot", "cotqa_simple6", "Thought:"),
        ("act", "webact_simple6", "Action 1:"),
    ],
)
def test_a_reference_prompt_file_gives_the_bytes_its_format_implies(tmp_path, method, key, cue):
    texts = {  # in the reference's layouts, in our words
        "webqa_simple6": "Question: Is the sky blue?\nAnswer: yes\n",
        "cotqa_simple6": "Question: Is the sky blue?\nThought: Light scatters, so the answer is yes.\nAnswer: yes\n",
        "webact_simple6": "Question: Is the sky blue?\nAction 1: Search[Sky]\nObservation 1: It is blue.\n"
        "Action 2: Finish[yes]\n\n",
    }
    path = tmp_path / "prompts_naive.json"
    path.write_text(json.dumps(texts))
    variant = Variant("ref", method=method, prompt=str(path), key=key)
    model = ScriptedModel([" Answer: no", " Finish[no]"])
    env = load_collection(resource("envs", "exemplars.json")).env()
    solve("Is grass red?", env, model, variant.load_prompt(), **variant.solve_options(None, None) | {"max_steps": 1})
    assert model.history[0]["prompt"] == texts[key] + f"Question: Is grass red?\n{cue}"


def test_variants_take_the_method_and_refuse_what_does_not_apply():
    assert Variant("a", method="cot-sc").config(load_collection(), load_prompt(method="cot"), None)["samples"] == 21
    assert [v.method for v in ablation("methods", Variant("base", grammar="step"))] == list(PAPER)
    assert {v.name: v.grammar for v in ablation("methods", Variant("base", grammar="step"))}["cot"] is None
    with pytest.raises(Exception, match="method='tot'; the methods are react, act"):
        Variant("a", method="tot")
    with pytest.raises(Exception, match="method cot writes none; drop the grammar"):
        Variant("a", method="cot", grammar="step")
    with pytest.raises(Exception, match="samples=0 .--samples. must be at least 1"):
        Variant("a", method="cot-sc", samples=0)
    with pytest.raises(Exception, match="backoff prompt settings apply to react-cot-sc and cot-sc-react only"):
        Variant("a", method="cot", backoff_key="x").load_backoff_prompt()


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "rawreact", *map(str, args)], capture_output=True, text=True)


def test_the_command_line_runs_a_method_records_it_and_refuses_to_mix_methods(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" x\nAnswer: Halvard Prize", " y\nAnswer: Tam", " z\nAnswer: the Halvard Prize"]))
    out = tmp_path / "run.jsonl"
    done = _cli("run", "--model", f"scripted:{script}", "--method", "cot-sc", "--samples", "3", "--seed", "9",
                "--sample-temperature", "0.5", "--limit", "1", "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "method cot-sc (n 3, T 0.5, seed 9)" in done.stdout
    assert "votes (3 samples): {'halvard prize': 2, 'tam': 1}" in done.stdout
    manifest, [record] = read_run(out)
    config = manifest["config"]
    assert (config["method"], config["samples"], config["sample_temperature"], config["seed"]) == ("cot-sc", 3, 0.5, 9)
    assert config["prompt"] == "prompts/cot/exemplars.txt" and record["em"] == 1.0
    again = _cli("run", "--model", f"scripted:{script}", "--method", "cot", "--limit", "1", "--out", out, "--resume")
    assert again.returncode == 2 and "method" in again.stderr and "Traceback" not in again.stderr
    shown = _cli("show", out, "--id", record["id"])
    assert "[sample 2] answer 'Tam'" in shown.stdout and "method cot-sc" in shown.stdout
    report = _cli("report", out)
    assert report.stdout.splitlines()[0].split()[1] == "method" and "67%" in report.stdout  # the vote share


def test_the_command_line_refuses_a_grammar_where_nothing_acts(tmp_path):
    done = _cli("run", "--method", "standard", "--grammar", "step", "--limit", "1")
    assert done.returncode == 2 and "a grammar constrains action lines, and method standard writes none" in done.stderr


def test_the_docs_table_of_methods_is_the_code_s():
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "docs" / "paper.md").read_text(encoding="utf-8")
    section = readme.split("## Methods: the rows of the paper's table", 1)[1].split("\n\n- ", 1)[0]
    rows = [line.strip("| ").split(" | ") for line in section.splitlines() if line.startswith("| `")]
    assert [r[0].split()[0].strip("`") for r in rows] == list(PAPER)
    for row, method in zip(rows, (METHODS[m] for m in PAPER), strict=True):
        assert row[1] == method.paper
        assert row[2].replace("`", "") == method.reference_key.replace(" + ", ", then ")


def test_the_context_check_covers_a_back_off_s_second_prompt():
    from rawreact.agents.prompts import Prompt
    from rawreact.core.errors import ModelError
    from rawreact.runs.run import check_context

    class Counted:  # counts words as tokens, with a small window
        name, n_ctx = "counted", 60

        def tokenize(self, text):
            return text.split()

    short, long = Prompt("Answer briefly.\n", "short.txt", 0), Prompt("word " * 80, "long.txt", 0)
    questions = [Question("q1", "Is it?", "yes")]
    check_context(Counted(), short, questions, 10, "react-cot-sc", short)
    with pytest.raises(ModelError, match=r"the prompt \(long.txt\) with the longest question"):
        check_context(Counted(), short, questions, 10, "react-cot-sc", long)


def test_the_readme_s_command_for_each_method_is_one_rawreact_takes():
    """The README's table of methods: every method of the paper's table, and each command parses as written."""
    import shlex
    from pathlib import Path

    from rawreact.cli.parser import parser

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The paper's methods", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("| ").split(" | ") for line in section.splitlines() if line.startswith("| `")]
    assert set(PAPER) <= {row[0].strip("`") for row in rows} <= set(METHODS)
    for method, _, command in rows:
        for part in command.strip("`").split(" && "):
            args = parser().parse_args(shlex.split(part)[1:])
            if args.command == "run":
                assert (args.method or "react") == method.strip("`")
