"""Questions and their passages, from any of the layouts rawreact reads, detected automatically.

- the project's own `envs/` layout: one object with shared `passages` and `questions`
  (see envs/README.md);
- the official HotpotQA JSON: a list of rows with `context` as `[title, [sentences]]` pairs;
- Hugging Face `hotpot_qa` rows, as a JSON list or JSONL, with `context` as parallel lists.

A HotpotQA question is answered over its own paragraphs (the distractor setting).
"""

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rawreact.env import PassageEnv
from rawreact.errors import DataError
from rawreact.loop import LOOPS
from rawreact.prompts import TASKS
from rawreact.reference import ReferenceEnv
from rawreact.resources import resource

if TYPE_CHECKING:
    from rawreact.store import PassageStore

DEMO = "demo.json"


@dataclass(frozen=True)
class Question:
    """A question with its gold answer and the titles of the passages that support it.

    `passages` (title -> sentences) are the question's own paragraphs, when it has any; otherwise
    it is answered over the passages of its collection.
    """

    id: str
    question: str
    answer: str
    supporting: tuple[str, ...] = ()
    passages: Mapping[str, Sequence[str]] | None = None
    kind: str = ""  # HotpotQA's type and level, such as "bridge/hard", when known
    task: str = "qa"  # "qa", or "fever": a claim whose answer is a label (fever.py)

    @property
    def header(self) -> str:
        """The word the question line starts with: "Question", or "Claim" for a FEVER claim."""
        return TASKS[self.task][1]


@dataclass(frozen=True)
class Passages:
    """Passages to ask questions over, read from a store or a collection file, with their identity."""

    source: str
    pages: "Mapping | PassageStore"
    sha256: str
    kind: str  # "store" or "collection"

    @property
    def count(self) -> int:
        """How many pages."""
        return len(self.pages)


def open_passages(path: str | Path) -> Passages:
    """A passage store (`rawreact index`), or a collection or HotpotQA file's passages (pooled)."""
    from rawreact.store import PassageStore, is_store

    if not Path(path).is_file():
        raise DataError(
            f"{path}: no such file; --passages takes a store built by `rawreact index`, a collection (envs/ layout) "
            "or a HotpotQA file"
        )
    if is_store(path):
        store = PassageStore(path)
        return Passages(str(path), store, store.sha256, "store")
    if Path(path).suffix.lower() in (".sqlite", ".sqlite3", ".db"):
        raise DataError(
            f"{path}: not an SQLite file, so not a passage store; build one with "
            f"`rawreact index SOURCE... --out {path}`"
        )
    collection = load_collection(path).pooled()
    return Passages(str(path), collection.passages, collection.sha256, "collection")


@dataclass(frozen=True)
class Collection:
    """Questions, the passages they share (if any), and the file they came from."""

    name: str
    passages: Mapping
    questions: tuple[Question, ...]
    layout: str = "envs"
    source: str = ""
    sha256: str = ""
    own: bool = True  # whether a question with paragraphs of its own is answered over them (False: `over`)
    _shared: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def task(self) -> str:
        """The task of its questions: "fever" for FEVER claims, else "qa"."""
        return "fever" if self.layout == "fever" else "qa"

    def env(
        self, question: Question | None = None, *, n_first: int | None = None, loop: str = "tolerant"
    ) -> PassageEnv | ReferenceEnv:
        """A fresh environment over the question's own passages, or the shared ones.

        `loop` "reference" gives the reference's environment (`ReferenceEnv`, which knows the
        question's gold answer for its reward) over the same passages; `n_first` defaults to the
        loop's (`LOOPS`). The shared passages are indexed once per loop and `n_first`, and every
        question gets its own state over that index, so a large collection costs its indexing once.
        """
        if loop not in LOOPS:
            raise ValueError(f"unknown loop {loop!r}; the loops are {', '.join(LOOPS)}")
        n_first = LOOPS[loop] if n_first is None else n_first
        gold = None if question is None else question.answer
        if question is not None and question.passages is not None and self.own:
            return self._new_env(question.passages, n_first, loop, gold)
        shared = self._shared.get((loop, n_first))
        if shared is None:
            shared = self._shared[loop, n_first] = self._new_env(self.passages, n_first, loop, gold)
        return shared.fresh(gold) if loop == "reference" else shared.fresh()

    def _new_env(self, passages: Mapping, n_first: int, loop: str, gold: str | None) -> PassageEnv | ReferenceEnv:
        if loop == "tolerant":
            return PassageEnv(passages, n_first=n_first)
        return ReferenceEnv(passages, n_first=n_first, gold=gold)  # `reference.page_text` reads every passage

    def over(self, passages: "Passages") -> "Collection":
        """These questions asked over `passages` instead of their own paragraphs (the open setting).

        Every question is then answered over `passages`, its own paragraphs or not, including the
        questions of the original collection that a run holds on to.
        """
        questions = tuple(replace(q, passages=None) for q in self.questions)
        return replace(self, passages=passages.pages, questions=questions, own=False)

    def pooled(self) -> "Collection":
        """This collection with shared passages: its own, or else every question's paragraphs together.

        `--question` asks one question over a file's passages; a HotpotQA file keeps its paragraphs
        with each question, so they are pooled (the first paragraph of a title wins).
        """
        if self.passages:
            return self
        pool: dict[str, Sequence[str]] = {}
        for question in self.questions:
            for title, sentences in (question.passages or {}).items():
                pool.setdefault(title, sentences)
        if not pool:
            raise DataError(f"{self.source} has no passages to search; give a collection (envs/README.md)")
        return Collection(self.name, pool, (), self.layout, self.source, self.sha256)


def choose_questions(
    collection: Collection,
    *,
    limit: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    shuffle_range: int | None = None,
) -> list[Question]:
    """The questions a run asks: all of them, shuffled with `seed` if asked, then the first `limit`.

    The shuffle is the reference notebook's: `random.Random(233).shuffle` of the indices, of all of
    them or, with `shuffle_range` N, of the first N (FEVER.ipynb shuffles `range(7405)`, the size of
    HotpotQA's dev set, over the 9,999 claims of `paper_dev.jsonl`, so only those can be drawn).
    """
    questions = list(collection.questions)
    if not questions:
        raise DataError(f"{collection.source} has no questions; add some, or ask one with --question")
    if shuffle_range is not None and not 1 <= shuffle_range <= len(questions):
        raise DataError(
            f"--shuffle-range {shuffle_range}: {collection.source} has {len(questions)} questions; give 1 to "
            f"{len(questions)}"
        )
    if shuffle:
        order = list(range(len(questions) if shuffle_range is None else shuffle_range))
        random.Random(seed).shuffle(order)
        questions = [questions[i] for i in order]
    return questions[:limit]


def load_collection(path: str | Path | None = None) -> Collection:
    """Read a question file in any known layout; the demo collection shipped in `envs/` by default."""
    path = Path(path) if path else resource("envs", DEMO)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read the question file: {error.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark, as some editors write, is not part of the data
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    digest = hashlib.sha256(raw).hexdigest()
    collection = _parse(path, text, digest)
    if _SURROGATE_ESCAPE.search(text):
        _check_encodable(collection)
    return collection


# A JSON escape of a UTF-16 surrogate: the only way a lone surrogate gets into a decoded string.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_encodable(collection: Collection) -> None:
    """Refuse text that no UTF-8 file, terminal or model can take (a lone surrogate such as "\\ud83d")."""

    def bad(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    where = f"{collection.source}"
    for title, passage in collection.passages.items():
        if bad(title) or any(bad(s) for s in ([passage] if isinstance(passage, str) else passage)):
            raise DataError(f"{where}: passage {title!r} holds a lone surrogate escape (\\ud800-\\udfff); fix the text")
    for question in collection.questions:
        texts = [question.id, question.question, question.answer, *question.supporting]
        for title, sentences in (question.passages or {}).items():
            texts += [title, *sentences]
        if any(bad(t) for t in texts):
            raise DataError(
                f"{where}: question {question.id!r} holds a lone surrogate escape (\\ud800-\\udfff), which no "
                "UTF-8 text can carry; fix or remove that question"
            )


def _parse(path: Path, text: str, digest: str) -> Collection:
    from rawreact import fever, hotpotqa  # the HotpotQA and FEVER layouts build on the types above

    def rows_of(rows: list[tuple[int, object]], unit: str) -> Collection:
        if rows and fever.is_claim_row(rows[0][1]):
            return fever.from_rows(path, digest, rows, unit)
        return hotpotqa.from_rows(path, digest, rows, unit)

    start = text.lstrip()[:1]
    if not start:
        raise DataError(f"{path} is empty; give a HotpotQA file (JSON or JSONL) or a collection (envs/README.md)")
    if start == "{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            if error.msg != "Extra data":  # one object per line is JSONL; anything else is broken JSON
                raise _invalid(path, error) from None
            return rows_of(hotpotqa.jsonl_rows(path, text), "line")
        if isinstance(data, dict) and "passages" in data:
            return _envs_layout(path, digest, data)
        if isinstance(data, dict) and ("context" in data or "claim" in data):  # a JSONL file of one row
            return rows_of([(1, data)], "line")
        raise _unknown(path)
    if start == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise _invalid(path, error) from None
        return rows_of(list(enumerate(data, 1)), "row")
    raise _unknown(path)


def _invalid(path: Path, error: json.JSONDecodeError) -> DataError:
    return DataError(f"{path} line {error.lineno} column {error.colno}: not valid JSON: {error.msg}")


def _unknown(path: Path) -> DataError:
    return DataError(
        f"{path}: unknown layout; rawreact reads the official HotpotQA JSON (a list of rows with 'context' "
        "pairs), Hugging Face hotpot_qa rows (JSON list or JSONL), FEVER claims (JSONL) and collections as in "
        "envs/README.md"
    )


def _envs_layout(path: Path, digest: str, data: dict) -> Collection:
    passages = data["passages"]
    if not isinstance(passages, dict):
        raise DataError(f"{path}: 'passages' must be an object (title -> text); see envs/README.md")
    for title, passage in passages.items():
        sentences = passage if isinstance(passage, list) else [passage]
        if not all(isinstance(s, str) for s in sentences):
            raise DataError(f"{path}: passage {title!r} must be a string or a list of sentence strings")
    rows = data.get("questions", [])
    if not isinstance(rows, list):
        raise DataError(f"{path}: 'questions' must be a list")
    questions = tuple(_question(path, i, row, set(passages)) for i, row in enumerate(rows))
    check_unique_ids(path, questions)
    return Collection(str(data.get("name", path.stem)), passages, questions, "envs", str(path), digest)


def check_unique_ids(path: Path, questions: tuple[Question, ...] | list[Question]) -> None:
    """Raise DataError naming the repeated ids when two questions share one."""
    repeated = [id for id, n in Counter(q.id for q in questions).items() if n > 1]
    if repeated:
        raise DataError(f"{path}: question ids must be unique; repeated: {', '.join(map(repr, repeated[:5]))}")


def _question(path: Path, index: int, row: object, titles: set[str]) -> Question:
    where = f"{path}: questions[{index}]"
    if not isinstance(row, dict):
        raise DataError(f"{where} must be an object with 'question' and 'answer'")
    for name in ("question", "answer"):
        if not isinstance(row.get(name), str):
            raise DataError(f"{where} needs a string {name!r}")
    supporting = row.get("supporting", [])
    if not isinstance(supporting, list) or not all(isinstance(t, str) for t in supporting):
        raise DataError(f"{where}: 'supporting' must be a list of passage titles")
    unknown = [t for t in supporting if t not in titles]
    if unknown:
        raise DataError(f"{where}: supporting titles {unknown} are not among the passages")
    return Question(str(row.get("id", f"q{index + 1}")), row["question"], row["answer"], tuple(supporting))
