"""What a newcomer's first afternoon met (issue 43, items 5 to 11): each item's test is here."""

import json

import pytest

from rawreact.cli.app import main
from rawreact.core.stats import interval, wilson


def test_a_share_on_a_few_questions_gets_an_honest_interval():
    """Item 6: 0 of 3 right is [0.000, 0.561] (Wilson's), not the bootstrap's [0.000, 0.000]."""
    assert str(wilson(0, 3)) == "0.000 [0.000, 0.561]"
    assert str(wilson(3, 3)) == "1.000 [0.439, 1.000]"
    assert str(interval([0, 0, 0], share=True)) == "0.000 [0.000, 0.561]"
    assert str(interval([0.0, 0.0, 0.0])) == "0.000 [0.000, 0.000]"  # not a share (F1): the bootstrap, as before
    with pytest.raises(ValueError, match="each 0 or 1"):
        interval([0.5, 1.0], share=True)
    half = wilson(5, 10)  # symmetric about one half: [0.2366, 0.7634]
    assert (round(half.low, 4), round(half.high, 4)) == (0.2366, 0.7634)
    z2 = 1.959963984540054**2  # with no success the upper bound is z^2 / (n + z^2), in closed form
    assert wilson(0, 12).high == pytest.approx(z2 / (12 + z2))


def test_a_small_comparison_says_its_intervals_are_wide(tmp_path, capsys):
    """Item 6: compare-runs on 3 questions shows Wilson's EM interval and says 3 questions mean little."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" I know.\nAction 1: Finish[nobody]\n"] * 6))
    for name in ("a", "b"):
        args = ["run", "--model", f"scripted:{script}", "--limit", "3", "--out", str(tmp_path / f"{name}.jsonl"), "-q"]
        assert main(args) == 0
    capsys.readouterr()
    assert main(["compare-runs", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--format", "markdown"]) == 0
    printed = capsys.readouterr()
    assert "| a | react | tolerant | 3 | 0.000 [0.000, 0.561] | base |" in printed.out or (
        "| a | react | 3 | 0.000 [0.000, 0.561] | base |" in printed.out
    )
    assert "only 3 questions: the intervals are wide" in printed.err
