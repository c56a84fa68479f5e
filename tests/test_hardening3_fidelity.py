"""Hardening, third round (issue 44): fidelity to the reference notebooks. Every method sends the question
as given, and FEVER's CoT-SC votes on what its score reads. Each test fails on the main before the round."""

import pytest

from rawreact import ScriptedModel
from rawreact.agents.methods import Outcome, solve
from rawreact.agents.prompts import load_prompt
from rawreact.agents.reasoning import reason
from rawreact.environments.env import PassageEnv
from rawreact.runs.run import Result
from rawreact.tasks.collection import Question

QUESTION = "Where is  the  Orlo   festival held? "  # the white space of the question as a data file gives it
PAGES = {"Orlo": "Orlo is a fishing village. It holds a lantern festival every October."}


def _script(prompt: str) -> str:
    if prompt.endswith("Reflection:"):
        return " Search first."
    if prompt.endswith("Answer:"):
        return " Orlo"
    if prompt.endswith("Thought:"):
        return " It is held in Orlo. So the answer is Orlo."
    return " I know it.\nAction 1: Finish[Orlo]" if prompt.endswith("Thought 1:") else " Finish[Orlo]"


@pytest.mark.parametrize(
    "method, options",
    [
        ("standard", {}),
        ("cot", {}),
        ("cot-sc", {"samples": 3}),
        ("react", {}),
        ("act", {}),
        ("react-reflexion", {"reflexion": {"trials": 2, "gold": "Tessin"}}),
        ("cot-reflexion", {"reflexion": {"trials": 2, "gold": "Tessin"}}),
    ],
)
def test_every_method_sends_the_question_as_given(method, options):
    """Before: Standard, CoT, CoT-SC (and the tolerant loop) collapsed it; the notebooks send it as given."""
    model = ScriptedModel(_script)
    prompt = load_prompt(method={"react-reflexion": "react", "cot-reflexion": "cot"}.get(method, method))
    solve(QUESTION, PassageEnv(PAGES), model, prompt, method=method, **options)
    asked = [call["prompt"] for call in model.history if not call["prompt"].endswith("Reflection:")]
    assert asked and all(f"Question: {QUESTION}\n" in text for text in asked)


CLAIM = "Orlo holds a lantern festival."
SAMPLES = (
    [" The page says so. So the answer is Supported."] * 7
    + [" It is true. So the answer is SUPPORTS."] * 6
    + [" It is false. So the answer is REFUTES."] * 8
)


def test_fever_cot_sc_votes_on_what_its_score_reads_and_keeps_the_lenient_vote_beside_it():
    """Before: 7 `Supported` and 6 `SUPPORTS` pooled as 13 votes for SUPPORTS, which then scored 0."""
    model = ScriptedModel(list(SAMPLES))
    reasoning = reason(CLAIM, model, "Check claims.\n", method="cot-sc", samples=21, header="Claim")
    assert reasoning.answer == "REFUTES" and reasoning.vote.votes == 8  # the strict reading: three spellings
    assert 2 * reasoning.vote.votes < 21  # so CoT-SC -> ReAct backs off to ReAct here
    assert reasoning.lenient_vote.votes == 13 and reasoning.lenient_vote.answer == "Supported"
    record = Result(Question("c1", CLAIM, "SUPPORTS", task="fever"), Outcome("cot-sc", "cot-sc", reasoning=reasoning))
    record = record.to_dict()
    assert record["prediction"] == "REFUTES" and record["em"] == 0.0 and record["vote_share"] == pytest.approx(8 / 21)
    assert record["label"] == "SUPPORTS" and record["lenient_em"] == 1.0  # the lenient figure, its own vote


def test_a_claim_answered_once_is_read_leniently_from_that_answer():
    model = ScriptedModel([" It holds one. So the answer is Supported."])
    reasoning = reason(CLAIM, model, "Check claims.\n", method="cot", header="Claim")
    record = Result(Question("c1", CLAIM, "SUPPORTS", task="fever"), Outcome("cot", "cot", reasoning=reasoning))
    record = record.to_dict()
    assert record["em"] == 0.0 and record["label"] == "SUPPORTS" and record["lenient_em"] == 1.0
