"""FEVER: claims to check against Wikipedia, labelled SUPPORTS, REFUTES or NOT ENOUGH INFO.

A claim file is JSON lines (or a JSON list) of `{"id", "claim", "label", ...}` rows, as FEVER
distributes them (`verifiable` and `evidence` are read past). A claim is asked as `Claim: ...`
instead of `Question: ...`, over a passage store of FEVER's `wiki-pages` (`rawreact index`), and
scored as the reference scores it: the normalised answer against the normalised gold label
(`label_score`, the record's EM); the label `read_label` reads tolerantly (`Supported.`, `NEI`) is
kept beside it, with its own score (`lenient_em`).
"""

import re
from collections import Counter
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.core.metrics import exact_match
from rawreact.core.tasks import FEVER
from rawreact.tasks.collection import Collection, Question, check_unique_ids

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
_WORDS = re.compile(r"[a-z]+")
# How an answer may spell a label: the first words of the answer, lower-cased, decide.
_SPELLINGS = {
    "SUPPORTS": ("supports", "support", "supported", "supporting", "true"),
    "REFUTES": ("refutes", "refute", "refuted", "refuting", "false"),
    "NOT ENOUGH INFO": ("not enough", "nei", "not enough info", "not enough information", "insufficient"),
}


def read_label(answer: str) -> str | None:
    """The label an answer gives, or None: `SUPPORTS`, `Supported.`, `refutes`, `NEI`, `Not enough
    information` and the like are read; anything else is no label."""
    words = " ".join(_WORDS.findall(answer.lower()))
    for label, spellings in _SPELLINGS.items():
        for spelling in spellings:
            if words == spelling or words.startswith(spelling + " "):
                return label
    return None


def label_score(answer: str, gold: str) -> float:
    """The reference's score of a claim (its FEVER wrapper's reward): 1.0 when the answer, normalised as
    HotpotQA's EM normalises, is the gold label normalised, else 0.0. `Supported.` and `NEI` score 0."""
    return exact_match(answer, gold)


def lenient_score(answer: str, gold: str) -> float:
    """1.0 when the label `read_label` reads in the answer is the gold label: rawreact's lenient reading,
    reported beside the reference's score (`lenient_em`), never in its place."""
    return float(read_label(answer) == gold)


def label_table(runs: dict[str, list[dict]]) -> list[dict[str, str]]:
    """Per run and gold label: how many claims, the share right (the reference's score, and the lenient
    reading's), and what the run answered.

    Only the runs with FEVER records are counted; `predicted` counts the labels read from the answers
    (`none`: no label could be read).
    """
    rows = []
    for name, records in runs.items():
        claims = [r for r in records if r.get("task") == FEVER.name]
        for gold in LABELS:
            of_label = [r for r in claims if r["answer"] == gold]
            if not of_label:
                continue
            answered = Counter(r.get("label") or "none" for r in of_label)
            rows.append(
                {
                    "run": name,
                    "gold label": gold,
                    "n": str(len(of_label)),
                    "accuracy": f"{sum(r['em'] for r in of_label) / len(of_label):.3f}",
                    "lenient": _lenient(of_label),
                    "predicted": ", ".join(f"{label} {n}" for label, n in sorted(answered.items())),
                }
            )
    return rows


def _lenient(records: list[dict]) -> str:
    """The lenient accuracy of claim records ("-" where records written before it was kept lack it)."""
    if not all("lenient_em" in r for r in records):
        return "-"
    return f"{sum(r['lenient_em'] for r in records) / len(records):.3f}"


def is_claim_row(row: object) -> bool:
    """Whether a parsed row is a FEVER claim."""
    return isinstance(row, dict) and "claim" in row and "context" not in row


def from_rows(path: Path, digest: str, rows: list[tuple[int, object]], unit: str = "line") -> Collection:
    """A collection of FEVER claims; they have no passages of their own (give a store with --passages)."""
    questions = []
    for number, row in rows:
        where = f"{path} {unit} {number}"
        if not isinstance(row, dict) or not isinstance(row.get("claim"), str):
            raise DataError(f"{where}: a FEVER row needs a string 'claim'")
        label = row.get("label")
        if label not in LABELS:
            raise DataError(
                f"{where}: label {label!r} is not one of {', '.join(LABELS)}; rawreact scores labelled claims "
                "(FEVER's train and dev files, not its unlabelled test file)"
            )
        raw_id = row.get("id")
        questions.append(Question(str(number) if raw_id is None else str(raw_id), row["claim"], label, task=FEVER.name))
    check_unique_ids(path, questions)
    return Collection(path.stem, {}, tuple(questions), FEVER.layout, str(path), digest)
