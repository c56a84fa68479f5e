"""Questions and the collections that hold them: `Question`, `Collection` (with each question's
environment), `Passages` (a store or a pooled file, for the open setting), and `choose_questions`
(limit and shuffle, as the notebooks sample). `loading.py` reads them from files.

A HotpotQA question is answered over its own paragraphs (the distractor setting), unless a
collection is put `over` other passages.
"""

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rawreact.config.choices import LOOPS
from rawreact.core.errors import DataError
from rawreact.core.tasks import QA, of_layout, task_type
from rawreact.environments.env import PassageEnv
from rawreact.environments.game import GameEnv
from rawreact.environments.programs import ProgramEnv
from rawreact.environments.reference import ReferenceEnv
from rawreact.environments.scienceworld import ScienceWorldEnv, is_episode

if TYPE_CHECKING:
    from rawreact.environments.store import PassageStore


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
    kind: str = ""  # HotpotQA's type and level, such as "bridge/hard", when known (a game's recipe)
    task: str = QA.name  # its task type's name (core.tasks): a question, a FEVER claim (fever.py), a game (games.py)
    game: str = ""  # a game's file, for a game
    row: Mapping | None = field(default=None, compare=False, hash=False)  # its file's row, for an --env of one's own

    def row_fields(self) -> dict:
        """What an `--env` factory is given of the question: its row's fields, then its id, question and answer."""
        return dict(self.row or {}) | {"id": self.id, "question": self.question, "answer": self.answer}

    @property
    def header(self) -> str:
        """The word the question line starts with: its task type's ("Question", "Claim", "Task")."""
        return task_type(self.task).header


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
    def game_rows(self) -> bool:
        """Whether its questions are games listed by row, which an --env environment plays (`games.from_rows`)."""
        return bool(self.questions) and bool(self.questions[0].game) and self.questions[0].row is not None

    @property
    def task(self) -> str:
        """The task type of its questions (its name), from its layout: a question unless a type declares it."""
        return of_layout(self.layout).name

    def env(
        self,
        question: Question | None = None,
        *,
        n_first: int | None = None,
        loop: str = "tolerant",
        unboxed: bool = False,
    ) -> PassageEnv | ReferenceEnv | GameEnv | ScienceWorldEnv | ProgramEnv:
        """A fresh environment over the question's own passages, or the shared ones; a game's own.

        `loop` "reference" gives the reference's environment (`ReferenceEnv`, which knows the
        question's gold answer for its reward) over the same passages; `n_first` defaults to the
        loop's (`LOOPS`). The shared passages are indexed once per loop and `n_first`, and every
        question gets its own state over that index, so a large collection costs its indexing once.
        `unboxed`: a program's environment runs programs without a box where this machine has none.
        """
        if loop not in LOOPS:
            raise ValueError(f"unknown loop {loop!r}; the loops are {', '.join(LOOPS)}")
        if question is not None and is_episode(question.game):  # a ScienceWorld episode, in the simulator
            return ScienceWorldEnv(question.game)
        if question is not None and task_type(question.task).writes_programs:  # its hidden tests, in a sandbox
            return ProgramEnv(question.row or {}, unboxed=unboxed)
        if question is not None and question.game and question.row is not None:
            return None  # a game of a games file (tasks.games.from_rows): the --env factory makes it from its row
        if question is not None and question.game:  # a text game is its own environment, laid out for the loop
            return GameEnv(question.game, opening="alfworld" if loop == "reference" else "textworld")
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


def check_unique_ids(path: Path, questions: tuple[Question, ...] | list[Question]) -> None:
    """Raise DataError naming the repeated ids when two questions share one."""
    repeated = [id for id, n in Counter(q.id for q in questions).items() if n > 1]
    if repeated:
        raise DataError(f"{path}: question ids must be unique; repeated: {', '.join(map(repr, repeated[:5]))}")
