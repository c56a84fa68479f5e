"""`PassageEnv`: the reference's Wikipedia environment, over a collection of passages."""

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rawreact.core.actions import Action, parse_action
from rawreact.core.text import one_line
from rawreact.environments.sentences import sentences_of
from rawreact.environments.titles import Titles, title_key

if TYPE_CHECKING:
    from rawreact.environments.store import PassageStore

NOT_FOUND = "Could not find "  # how a search that opened no passage begins its observation


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
    sentences), its `Pages`, or a `store.PassageStore`.

    Observations are the reference's strings, each on one line. `step` never raises on the
    model's input: misuse comes back as an observation.
    """

    def __init__(self, pages: "Mapping[str, str | Sequence[str]] | Pages | PassageStore", n_first: int = 2) -> None:
        if n_first < 1:
            raise ValueError(f"n_first must be at least 1, not {n_first}")
        self.n_first = n_first
        self.pages = Pages(pages) if isinstance(pages, Mapping) else pages
        self.reset()

    @property
    def titles(self) -> list[str] | None:
        """Every passage title, in the collection's order (None for a store: too many to list)."""
        return self.pages.titles

    def fresh(self) -> "PassageEnv":
        """A new environment over the same passages, sharing their index (built once, read only)."""
        return PassageEnv(self.pages, self.n_first)

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
        parsed = parse_action(action) if isinstance(action, str) else action
        if parsed is None:
            self.obs = one_line(f"Invalid action: {action}")
            return self.obs, False
        if parsed.name == "finish":
            self.answer = parsed.arg
            self.obs = "Episode finished."
            return self.obs, True
        if parsed.name == "search":
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
