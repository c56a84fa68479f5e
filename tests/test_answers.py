"""The answer parser (every row of docs/answers.md, and totality) and the self-consistency vote."""

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact.agents.answers import clean_answer, parse_answer, vote

DOC = (Path(__file__).parent.parent / "docs" / "answers.md").read_text(encoding="utf-8")


def _cell(text: str) -> str | None:
    text = text.strip()
    if text == "nothing":
        return None
    match = re.fullmatch(r"(`+)(.*?)\1", text)
    assert match, f"cell is not a code span: {text!r}"
    return match.group(2).replace("\\n", "\n")


ROWS = [
    re.split(r" \| ", line.strip("| "))
    for line in DOC.split("| Form |", 1)[1].splitlines()[2:]
    if line.startswith("| ")
]


def test_the_table_has_every_row():
    assert len(ROWS) == 31


@pytest.mark.parametrize("form, completion, answer", ROWS, ids=[row[0] for row in ROWS])
def test_parse_answer_table(form, completion, answer):
    assert parse_answer(_cell(completion)) == _cell(answer)


@given(st.text())
def test_parse_answer_is_total_and_its_answers_are_clean(text):
    answer = parse_answer(text)
    assert answer is None or (answer and answer == clean_answer(answer))


def test_a_standard_completion_is_read_after_its_cue():
    assert parse_answer("Answer:" + " Halvard Prize") == "Halvard Prize"
    assert parse_answer("Answer:" + "") is None


def test_the_majority_wins_under_the_official_normalisation():
    tally = vote(["the Tam", "Lee", "Tam.", None, "TAM"])
    assert (tally.answer, tally.votes, tally.samples) == ("the Tam", 3, 5)
    assert tally.share == pytest.approx(0.6)
    assert tally.counts == {"tam": 3, "lee": 1}


def test_a_tie_goes_to_the_answer_voted_first():
    assert vote(["Lee", "Tam", "Tam", "Lee"]).answer == "Lee"
    assert vote(["Tam", "Lee", "Lee", "Tam"]).answer == "Tam"
    assert vote([None, "Ouse", "Lee", "Lee", "Ouse"]).answer == "Ouse"


def test_samples_without_an_answer_vote_for_nothing():
    tally = vote([None, "", "the", None])  # "the" normalises to nothing
    assert (tally.answer, tally.votes, tally.share, tally.counts) == ("", 0, 0.0, {})
    assert vote([None, None, "Tam"]).share == pytest.approx(1 / 3)


@given(st.lists(st.one_of(st.none(), st.sampled_from(["Tam", "the Tam", "Lee", "lee.", "yes", ""]))))
def test_the_winner_has_the_most_votes(answers):
    tally = vote(answers)
    assert tally.votes == max(tally.counts.values(), default=0)
    assert sum(tally.counts.values()) <= len(answers) == tally.samples
