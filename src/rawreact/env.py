"""`PassageEnv`: the reference's Wikipedia environment, over a collection of passages."""

from collections.abc import Mapping, Sequence

from rawreact.actions import Action, parse_action
from rawreact.sentences import split_sentences

NOT_FOUND = "Could not find "  # how a search that opened no passage begins its observation


def one_line(text: str) -> str:
    """Collapse all white space, line breaks included, so text cannot start a transcript line."""
    return " ".join(text.split())


def _key(title: str) -> str:
    return one_line(title).lower()


def _trigrams(text: str) -> frozenset[str]:
    padded = f"  {text} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


class PassageEnv:
    """Answers `search`, `lookup`, `think` and `finish` over `pages` (title -> text or sentences).

    Observations are the reference's strings, each on one line. `step` never raises on the
    model's input: misuse comes back as an observation.
    """

    def __init__(self, pages: Mapping[str, str | Sequence[str]], n_first: int = 2) -> None:
        if n_first < 1:
            raise ValueError(f"n_first must be at least 1, not {n_first}")
        self.n_first = n_first
        self.titles = list(pages)
        self._grams = [(title, _trigrams(_key(title)), frozenset(_key(title).split())) for title in self.titles]
        self._sentences: dict[str, list[str]] = {}
        for title, passage in pages.items():
            sentences = split_sentences(passage) if isinstance(passage, str) else passage
            self._sentences.setdefault(_key(title), [one_line(s) for s in sentences if s.strip()])
        self.reset()

    def fresh(self) -> "PassageEnv":
        """A new environment over the same passages, sharing their index (built once, read only)."""
        env = object.__new__(PassageEnv)
        env.n_first, env.titles, env._grams, env._sentences = self.n_first, self.titles, self._grams, self._sentences
        env.reset()
        return env

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
        sentences = self._sentences.get(_key(entity))
        if sentences is None:
            return one_line(f"{NOT_FOUND}{entity}. Similar: {self.similar(entity)}.")
        self.page = sentences
        self._lookup = None
        return " ".join(sentences[: self.n_first])

    def similar(self, entity: str, n: int = 5) -> list[str]:
        """At most `n` titles ranked by similarity to `entity`, best first (ties keep page order).

        Similarity is the share of the entity's words found in the title plus the Dice overlap of
        their character trigrams: cheap, and robust to misspellings and partial names.
        """
        query = _key(entity)
        grams, words = _trigrams(query), frozenset(query.split())

        def score(item: tuple[str, frozenset[str], frozenset[str]]) -> float:
            _, title_grams, title_words = item
            dice = 2 * len(grams & title_grams) / (len(grams) + len(title_grams))
            return len(words & title_words) / max(len(words), 1) + dice

        return [title for title, _, _ in sorted(self._grams, key=score, reverse=True)[:n]]

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
