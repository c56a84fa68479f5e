"""EM and F1 as the official HotpotQA evaluation computes them."""

import pytest

from rawreact.core.metrics import exact_match, f1_score, normalize_answer


@pytest.mark.parametrize(
    "text, normal",
    [
        ("The Halvard Prize!", "halvard prize"),
        ("  an   apple, a pear ", "apple pear"),
        ("Theory of the Anvil", "theory of anvil"),
        ("1,450", "1450"),
        ("U.S.", "us"),
    ],
)
def test_normalize_answer(text, normal):
    assert normalize_answer(text) == normal


@pytest.mark.parametrize(
    "prediction, gold, em, f1",
    [
        ("Halvard Prize", "the Halvard prize.", 1.0, 1.0),
        ("the prize", "Halvard Prize", 0.0, 2 * 0.5 * 1.0 / 1.5),  # precision 1/1, recall 1/2
        ("yes", "no", 0.0, 0.0),
        ("yes it is", "yes", 0.0, 0.0),  # yes/no answers must match exactly
        ("no", "no", 1.0, 1.0),
        ("", "Tam", 0.0, 0.0),
        ("river Tam river", "Tam river", 0.0, 0.8),  # precision 2/3, recall 2/2
        ("The Theatre", "theatre", 1.0, 1.0),  # articles are whole words only
        ("noanswer", "no answer", 0.0, 0.0),  # noanswer, like yes and no, must match exactly
        ("Ed Wood \u2013 film", "Ed Wood film", 0.0, 2 * 0.75 / 1.75),  # the en dash is no ASCII punctuation
        ("Yes.", "yes", 1.0, 1.0),
    ],
)
def test_em_and_f1(prediction, gold, em, f1):
    assert exact_match(prediction, gold) == em
    assert f1_score(prediction, gold) == pytest.approx(f1)
