"""`PassageEnv`: the reference's Wikipedia environment, over a collection of passages, and the verbs a
user adds to it."""

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rawreact.core.actions import PASSAGE_VERBS, Action, Verbs, parse_action
from rawreact.core.text import one_line
from rawreact.core.verbs import NOT_FOUND, Verb
from rawreact.environments.sentences import sentences_of
from rawreact.environments.titles import Titles, title_key

if TYPE_CHECKING:
    from rawreact.environments.store import PassageStore

__all__ = ["NOT_FOUND", "Pages", "PassageEnv", "run_verb"]


class Pages:
    """Passages held in memory (title -> text or sentences), as a store holds them on disk.

    Both answer `sentences(title)` (None when no page has that title, ignoring case and white
    space; the first of several wins) and `similar(entity, n)`; `titles` lists every title here,
    and is None for a store, which has too many.
    """

    def __init__(self, pages: Mapping[str, str | Sequence[str]]) -> None:
        self.index = Titles(pages)
        self._passages: dict[str, str | Sequence[str]] = {}
        for title, passage in pages.items():
            self._passages.setdefault(title_key(title), passage)

    @property
    def titles(self) -> list[str]:
        """Every passage title, in the collection's order."""
        return self.index.titles

    def passage(self, title: str) -> str | Sequence[str] | None:
        """The passage as given (its text or sentences), or None."""
        return self._passages.get(title_key(title))

    def sentences(self, title: str) -> list[str] | None:
        """The passage's sentences, each on one line, or None."""
        passage = self.passage(title)
        return None if passage is None else sentences_of(passage)

    def similar(self, entity: str, n: int = 5) -> list[str]:
        """At most `n` titles ranked by similarity to `entity` (see `Titles.similar`)."""
        return self.index.similar(entity, n)


class PassageEnv:
    """Answers `search`, `lookup`, `think` and `finish` over `pages`: a mapping (title -> text or
    sentences), its `Pages`, or a `store.PassageStore`; and the user's `verbs` (functions or `Verb`s,
    see `verbs.verb_of`), after those four.

    Observations are the reference's strings, each on one line. `step` never raises on the
    model's input: misuse comes back as an observation, and so does a user's verb that raises.
    """

    style = "react"  # the transcript: `Thought i:`, `Action i:` and `Observation i:` lines

    def __init__(
        self,
        pages: "Mapping[str, str | Sequence[str]] | Pages | PassageStore",
        n_first: int = 2,
        verbs: "Sequence[Verb | Callable[..., object]] | Verbs" = (),
    ) -> None:
        if n_first < 1:
            raise ValueError(f"n_first must be at least 1, not {n_first}")
        self.n_first = n_first
        self.pages = Pages(pages) if isinstance(pages, Mapping) else pages
        self.verbs = verbs if isinstance(verbs, Verbs) else PASSAGE_VERBS.plus(*verbs)
        self.reset()

    def with_verbs(self, *verbs: "Verb | Callable[..., object]") -> "PassageEnv":
        """A new environment over the same passages that also answers `verbs` (functions or `Verb`s)."""
        return PassageEnv(self.pages, self.n_first, self.verbs.plus(*verbs))

    @property
    def titles(self) -> list[str] | None:
        """Every passage title, in the collection's order (None for a store: too many to list)."""
        return self.pages.titles

    def fresh(self) -> "PassageEnv":
        """A new environment over the same passages, sharing their index (built once, read only)."""
        return PassageEnv(self.pages, self.n_first, self.verbs)

    @property
    def reward(self) -> None:
        """None: a question is scored against its gold answer, which this environment does not know."""
        return None

    def reset(self) -> None:
        """Close the open passage and forget the answer, ready for a new episode."""
        self.page: list[str] | None = None
        self.answer: str | None = None
        self._lookup: tuple[str, list[str]] | None = None
        self._lookup_count = 0
        self.obs = ""

    def step(self, action: str | Action) -> tuple[str, bool]:
        """Carry out one action (text such as `search[Milan]`, or an Action); (observation, done)."""
        if self.answer is not None:  # finish is terminal: nothing changes any more
            return self.obs, True
        parsed = parse_action(action, verbs=self.verbs) if isinstance(action, str) else action
        verb = None if parsed is None else self.verbs.get(parsed.name)
        if parsed is None:
            self.obs = one_line(f"Invalid action: {action}")
            return self.obs, False
        if verb is None:  # an Action of a verb this environment does not have
            self.obs = one_line(f"Invalid action: {parsed.name}[{parsed.arg}]")
            return self.obs, False
        if parsed.name == "finish":
            self.answer = parsed.arg
            self.obs = "Episode finished."
            return self.obs, True
        if verb.run is not None:
            self.obs = run_verb(verb, parsed.arg)
        elif parsed.name == "search":
            self.obs = self._search(parsed.arg)
        elif parsed.name == "lookup":
            self.obs = self._lookup_next(parsed.arg)
        else:
            self.obs = "Nice thought."
        return self.obs, False

    def _search(self, entity: str) -> str:
        sentences = self.pages.sentences(entity)
        if sentences is None:
            return one_line(f"{NOT_FOUND}{entity}. Similar: {self.similar(entity)}.")
        self.page = sentences
        self._lookup = None
        return " ".join(sentences[: self.n_first])

    def similar(self, entity: str, n: int = 5) -> list[str]:
        """At most `n` titles like `entity`, best first (see `Titles.similar` and `PassageStore.similar`)."""
        return self.pages.similar(entity, n)

    def _lookup_next(self, keyword: str) -> str:
        if self.page is None:
            return "No more results."
        if self._lookup is None or self._lookup[0] != keyword:
            needle = keyword.lower()
            self._lookup = (keyword, [s for s in self.page if needle in s.lower()])
            self._lookup_count = 0
        results = self._lookup[1]
        if self._lookup_count >= len(results):
            return "No more results."
        self._lookup_count += 1
        return one_line(f"(Result {self._lookup_count} / {len(results)}) {results[self._lookup_count - 1]}")


def run_verb(verb: Verb, arg: str) -> str:
    """A user's verb run on `arg`: what it returns, as one line of text; what it raises, or a return value
    whose text cannot be made, as the observation `Name[arg] failed: ...` (the model's misuse, or the verb's
    fault, is something the model reads and the episode goes on). A verb that has not returned within the
    bound `bound_verbs` set is answered so too; its thread is left to finish on its own."""
    done: list = []

    def call() -> None:
        try:
            result = verb.run(arg) if verb.arg == "bracket" else verb.run()
            done.append(("ok", one_line("" if result is None else str(result))))
        except Exception as error:  # noqa: BLE001 - any failure of the user's code is an observation
            done.append(("failed", f"{type(error).__name__}: {error}"))

    seconds = _BOUND[0]
    if seconds is None:
        call()
    else:
        worker = threading.Thread(target=call, name=f"verb {verb.shown}", daemon=True)
        _WAITING[worker] = (verb.form(arg), time.monotonic())
        worker.start()
        try:
            worker.join(seconds)
        finally:
            _WAITING.pop(worker, None)
        if not done:
            return (
                one_line(f"{verb.form(arg)} failed: no answer within {seconds:g} seconds (--verb-timeout)")
                or f"{verb.shown} failed."
            )
    kind, text = done[0]
    if kind == "failed":
        return one_line(f"{verb.form(arg)} failed: {text}") or f"{verb.shown} failed."
    return text or f"{verb.form(arg)} gave nothing."


# How long a user's verb may take (None: as long as it takes), and the verbs under way: what a run waits on.
_BOUND: list[float | None] = [None]
_WAITING: dict[threading.Thread, tuple[str, float]] = {}


def bound_verbs(seconds: float | None) -> None:
    """Answer a user's verb that has not returned within `seconds` (None: wait as long as it takes) with
    `Name[arg] failed: no answer within N seconds`, so that a verb that hangs cannot hang the run."""
    _BOUND[0] = seconds


def waiting_on() -> list[str]:
    """The users' verbs under way now, each as `Name[arg] (N s so far)`: what a stopping run waits for."""
    now = time.monotonic()
    return [f"{form} ({now - since:.0f} s so far)" for form, since in list(_WAITING.values())]
