"""HotpotQA rows, in the official JSON layout or as Hugging Face `hotpot_qa` rows.

Official: `{"_id", "question", "answer", "type", "level", "supporting_facts": [[title, i], ...],
"context": [[title, [sentence, ...]], ...]}`. Hugging Face: `{"id", ..., "supporting_facts":
{"title": [...], "sent_id": [...]}, "context": {"title": [...], "sentences": [[...], ...]}}`.
A row without an id gets one derived from its content, so it is the same in every run.
"""

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.tasks.collection import Collection, Question, check_unique_ids


def jsonl_rows(path: Path, text: str) -> list[tuple[int, object]]:
    """(line number, parsed row) for every non-blank line of a JSONL file."""
    rows = []
    # Lines end at "\n" (or "\r\n") only: str.splitlines() would also break inside a row at U+2028 and the like.
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            try:
                rows.append((number, json.loads(line)))
            except json.JSONDecodeError as error:
                raise DataError(f"{path} line {number}: not valid JSON: {error.msg}") from None
    return rows


def from_rows(
    path: Path, digest: str, rows: list[tuple[int, object]], unit: str = "row", questions_only: bool = False
) -> Collection:
    """A collection of HotpotQA questions, each with its own paragraphs.

    `rows` are (number, row) pairs, numbered as `unit` says ("row" of a JSON list, "line" of JSONL). Where
    the run brings the environment (`questions_only`: `--env`, or `--passages`), a row needs its question
    alone: its paragraphs, if it has any, are read as HotpotQA's, and its answer is "" when it has none (no
    score); each question keeps its row, which an `--env` factory is given. The ReAct paper's own data files
    (`hotpot_*_v1_simplified.json`) are such rows: questions only, since the paper searched live Wikipedia.
    """
    if not rows:
        raise DataError(f"{path} has no rows; a HotpotQA file is a list of question rows")
    counted: dict[str, int] = {}
    questions = []
    for number, row in rows:
        where = f"{path} {unit} {number}"
        question = _row(where, row, questions_only)
        if not question.id:  # derived ids repeat only for repeated rows: number the repeats
            base = _derived_id(row)
            counted[base] = counted.get(base, 0) + 1
            question = replace(question, id=base if counted[base] == 1 else f"{base}-{counted[base]}")
        questions.append(question)
    check_unique_ids(path, questions)
    layout = "hotpotqa-hf" if isinstance(rows[0][1].get("context"), dict) else "hotpotqa"
    return Collection(path.stem, {}, tuple(questions), layout, str(path), digest)


def _derived_id(row: dict) -> str:
    """A short hash of the question, answer and paragraph titles."""
    key = json.dumps([row.get("question"), row.get("answer"), _titles(row)], ensure_ascii=False)
    return "h" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def _titles(row: dict) -> list:
    context = row.get("context")
    if isinstance(context, dict):
        return list(context.get("title", []))
    return [pair[0] if isinstance(pair, list) and pair else None for pair in context or []]


def _row(where: str, row: object, questions_only: bool = False) -> Question:
    if not isinstance(row, dict):
        needs = "'question'" if questions_only else "'question', 'answer' and 'context'"
        raise DataError(f"{where}: a row must be an object with {needs}")
    for name in ("question",) if questions_only else ("question", "answer"):
        if not isinstance(row.get(name), str):
            state = "has no" if name not in row else "has a non-string"
            if questions_only:  # --env or --passages: the row is the user's, not HotpotQA's
                raise DataError(
                    f"{where} {state} {name!r}; with --env or --passages each row needs its question as text (and "
                    "its gold answer, to be scored), or, for a game an --env environment plays, its 'id' and 'game'"
                )
            raise DataError(f"{where} {state} {name!r}; every HotpotQA row needs its question and gold answer")
    if not row["question"].strip():
        raise DataError(f"{where} has an empty 'question'; write the question, or remove the row")
    raw_id = row.get("_id", row.get("id"))
    if raw_id is not None and not isinstance(raw_id, str):
        raise DataError(
            f"{where} has the id {json.dumps(raw_id)[:40]}, which is not text; write it as a string, such as "
            f"{json.dumps(str(raw_id))[:40]}, or leave it out (rawreact then derives one)"
        )
    if questions_only and not isinstance(row.get("answer", ""), str):
        raise DataError(f"{where} has a non-string 'answer'; a gold answer is text (or leave it out: no score)")
    kind = "/".join(str(row[k]) for k in ("type", "level") if row.get(k))
    if questions_only and "context" not in row:  # the run's environment (--env, --passages) is not the row's
        raw_id = row.get("_id", row.get("id"))
        answer = row.get("answer", "")
        return Question("" if raw_id is None else str(raw_id), row["question"], answer, kind=kind, row=row)
    if "context" not in row:
        raise DataError(
            f"{where} has no 'context'; rawreact answers over each row's own paragraphs, and this row holds a "
            "question without them, as the ReAct paper's own data files do (hotpot_*_simplified.json: the paper "
            "searched live Wikipedia); give the passages to "
            "search with --passages (a store from `rawreact index` over a Wikipedia dump, or a HotpotQA file), "
            "or use HotpotQA's distractor file, whose rows carry their paragraphs"
        )
    context = row["context"]
    passages = _hf_context(where, context) if isinstance(context, dict) else _official_context(where, context)
    if not passages:
        raise DataError(f"{where}: 'context' has no paragraphs to search")
    supporting = _supporting(where, row.get("supporting_facts", []))
    raw_id = row.get("_id", row.get("id"))
    question = Question(
        "" if raw_id is None else str(raw_id), row["question"], row["answer"], supporting, passages, kind
    )
    return replace(question, row=row) if questions_only else question


def _official_context(where: str, context: object) -> dict[str, list[str]]:
    if not isinstance(context, list):
        raise DataError(f"{where}: 'context' must be a list of [title, [sentences]] pairs or a dict of lists")
    passages: dict[str, list[str]] = {}
    for index, pair in enumerate(context):
        ok = isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], list)
        if not ok or not all(isinstance(s, str) for s in pair[1]):
            raise DataError(f"{where}: context[{index}] must be [title, [sentence, ...]]")
        passages.setdefault(pair[0], pair[1])
    return passages


def _hf_context(where: str, context: dict) -> dict[str, list[str]]:
    titles, sentences = context.get("title"), context.get("sentences")
    if not isinstance(titles, list) or not isinstance(sentences, list) or len(titles) != len(sentences):
        raise DataError(f"{where}: 'context' must have lists 'title' and 'sentences' of the same length")
    passages: dict[str, list[str]] = {}
    for index, (title, paragraph) in enumerate(zip(titles, sentences, strict=True)):
        sentences_ok = isinstance(paragraph, list) and all(isinstance(s, str) for s in paragraph)
        if not isinstance(title, str) or not sentences_ok:
            raise DataError(f"{where}: context paragraph {index} must be a title and a list of sentences")
        passages.setdefault(title, paragraph)
    return passages


def _supporting(where: str, facts: object) -> tuple[str, ...]:
    """The supporting titles, in order, without repeats."""
    if isinstance(facts, dict):
        titles = facts.get("title", [])
    elif isinstance(facts, list):
        titles = [fact[0] if isinstance(fact, list) and fact else None for fact in facts]
    else:
        titles = None
    if not isinstance(titles, list) or not all(isinstance(t, str) for t in titles):
        raise DataError(f"{where}: 'supporting_facts' must be [title, sentence] pairs or a dict of lists")
    return tuple(dict.fromkeys(titles))
