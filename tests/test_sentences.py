"""Sentence splitting of plain passages."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact.sentences import split_sentences

CASES = [
    ("One. Two.", ["One.", "Two."]),
    ("It weighs 4.5 kg. It is red.", ["It weighs 4.5 kg.", "It is red."]),
    ("She moved to the U.S. in 1990. She stayed.", ["She moved to the U.S. in 1990.", "She stayed."]),
    ("He met Dr. Lind in St. Albans. They talked.", ["He met Dr. Lind in St. Albans.", "They talked."]),
    ("J. R. R. Tolkien wrote it. It sold well.", ["J. R. R. Tolkien wrote it.", "It sold well."]),
    ('He said "Go home." Then he left.', ['He said "Go home."', "Then he left."]),
    ("Is it? Yes! It is.", ["Is it?", "Yes!", "It is."]),
    ("Born on Jan. 5 in Orlo. Died 1990.", ["Born on Jan. 5 in Orlo.", "Died 1990."]),
    ("Use e.g. Lind. Or not.", ["Use e.g. Lind.", "Or not."]),
    ("It ended in 1954. 3,000 lanterns flew.", ["It ended in 1954.", "3,000 lanterns flew."]),
    ("the tam. lower case next", ["the tam. lower case next"]),
    ("First line\nSecond line. Third.", ["First line", "Second line.", "Third."]),
    ("", []),
]


@pytest.mark.parametrize("text, sentences", CASES)
def test_split(text, sentences):
    assert split_sentences(text) == sentences


@given(st.text())
def test_splitting_loses_no_words(text):
    assert " ".join(split_sentences(text)).split() == text.split()
