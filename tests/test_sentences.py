"""Sentence splitting of plain passages."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact.environments.sentences import split_sentences

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


class _Counting(str):
    """A string that adds up how many characters its slices copy."""

    copied = 0

    def __getitem__(self, key):
        part = super().__getitem__(key)
        _Counting.copied += len(part)
        return part


def test_each_boundary_reads_only_a_few_characters_so_splitting_is_linear():
    from rawreact.environments import sentences

    text = "Dr. x. " * 2_000 + "A. " * 2_000  # thousands of candidate boundaries, each near a long text
    boundaries = list(sentences._BOUNDARY.finditer(text))
    _Counting.copied = 0
    counted = _Counting(text)
    for boundary in boundaries:
        sentences._ends_sentence(counted, boundary)
    assert len(boundaries) > 3_000 and _Counting.copied <= 50 * len(boundaries)
    assert len(split_sentences("Mr. A. " * 10_000)) == 1  # 20,000 periods, none of them a boundary
