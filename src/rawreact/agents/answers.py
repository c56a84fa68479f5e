"""Reading an answer from a Standard or CoT completion, and the self-consistency vote.

The accepted forms are listed in `docs/answers.md`; the tests check that table row by row.
"""

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from rawreact.core.actions import parse_action
from rawreact.core.metrics import is_answer, normalize_answer

_ANSWER_LINE = re.compile(r"^\W{0,3}(?:final\s+)?answer\s*[:=]\s*(.*)$", re.IGNORECASE)
_ANSWER_IS = re.compile(r"\bthe\s+(?:final\s+)?answer\s+is\s*:?\s*(.+?)\s*(?:\.\s|\.?$)", re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "*": "*"}


def clean_answer(text: str) -> str:
    """An answer without surrounding white space, pairs of quotes (or `**`), or one final period."""
    text = " ".join(text.split())
    while True:
        before = text
        if text.endswith(".") and not text.endswith(".."):
            text = text[:-1].rstrip()
        while len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
            text = text[1:-1].strip()
        if text == before:
            return text


def parse_answer(completion: str) -> str | None:
    """The answer a Standard or CoT completion gives, or None when it gives none.

    In order: the first `Answer:` line with text (or the next line with text, when `Answer:`
    stands alone); else a `Finish[...]` action line; else the last "the answer is X" in the text.
    The completion of a Standard prompt follows `Answer:`, so call this on `"Answer:" + text`.
    """
    lines = [line.strip() for line in completion.splitlines()]
    for index, line in enumerate(lines):
        found = _ANSWER_LINE.match(line)
        if found is None:
            continue
        rest = found.group(1).strip()
        if line.startswith("**") and rest.startswith("**") and rest.count("**") % 2:  # `**Answer:** X`
            rest = rest[2:].strip()
        rest = rest or next((later for later in lines[index + 1 :] if later), "")
        answer = clean_answer(rest)
        if answer:
            return answer
    for line in lines:
        action = parse_action(line)
        if action is not None and action.name == "finish" and clean_answer(action.arg):
            return clean_answer(action.arg)
    said = _ANSWER_IS.findall(" ".join(lines))
    if said and clean_answer(said[-1]):
        return clean_answer(said[-1])
    return None


@dataclass(frozen=True)
class Vote:
    """The outcome of a majority vote: the answer, its votes, and the votes of every answer."""

    answer: str
    votes: int
    samples: int
    counts: dict[str, int]

    @property
    def share(self) -> float:
        """The winner's votes over all samples (those with no answer included)."""
        return self.votes / self.samples if self.samples else 0.0


def vote(answers: list[str | None], key: Callable[[str], str | None] = normalize_answer) -> Vote:
    """Majority vote over answers, read by `key`: the official normalisation (HotpotQA's EM) by
    default, the label an answer gives for a FEVER claim (`fever.read_label`).

    Samples without an answer (None, no answer by `metrics.is_answer`, or nothing by `key`) vote
    for nothing. Ties go to the answer whose first vote came earliest in sample order; the answer
    returned is the text of that first vote. With no answer at all the winner is "" with 0 votes.
    """
    normal = [key(a) or None if is_answer(a) else None for a in answers]
    counts = Counter(n for n in normal if n is not None)
    if not counts:
        return Vote("", 0, len(answers), {})
    first = {n: i for i, n in reversed(list(enumerate(normal))) if n is not None}
    winner = min(counts, key=lambda n: (-counts[n], first[n]))
    return Vote(answers[first[winner]], counts[winner], len(answers), dict(counts.most_common()))
