"""How titles are matched: by key (case and white space do not count) and by trigram similarity."""

from collections.abc import Sequence

from rawreact.core.text import one_line


def title_key(title: str) -> str:
    """How titles are matched: case and white space do not count."""
    return one_line(title).lower()


def _trigrams(text: str) -> frozenset[str]:
    padded = f"  {text} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def _score(
    grams: frozenset[str], words: frozenset[str], title_grams: frozenset[str], title_words: frozenset[str]
) -> float:
    """The share of the query's words in the title plus the Dice overlap of their character trigrams."""
    dice = 2 * len(grams & title_grams) / (len(grams) + len(title_grams))
    return len(words & title_words) / max(len(words), 1) + dice


def similarity(query: str, title: str) -> float:
    """How like `title` a search for `query` (a `title_key`) is: the share of the query's words in
    the title plus the Dice overlap of their character trigrams (cheap, and robust to misspellings
    and partial names)."""
    key = title_key(title)
    return _score(_trigrams(query), frozenset(query.split()), _trigrams(key), frozenset(key.split()))


class Titles:
    """The titles of a collection, found ignoring case and white space, and ranked by similarity."""

    def __init__(self, titles: Sequence[str]) -> None:
        self.titles = list(titles)
        self._grams = [
            (title, _trigrams(title_key(title)), frozenset(title_key(title).split())) for title in self.titles
        ]

    def similar(self, entity: str, n: int = 5) -> list[str]:
        """At most `n` titles ranked by `similarity` to `entity`, best first (ties keep page order)."""
        query = title_key(entity)
        grams, words = _trigrams(query), frozenset(query.split())

        def score(item: tuple[str, frozenset[str], frozenset[str]]) -> float:  # `similarity`, trigrams kept
            return _score(grams, words, item[1], item[2])

        return [title for title, _, _ in sorted(self._grams, key=score, reverse=True)[:n]]
