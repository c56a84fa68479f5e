"""A passage store: millions of pages in one SQLite file, searched in milliseconds, with no server.

A page is a title and its text or its sentences, as the source gave them. Opening a page by title is
an index lookup on the title's key (`titles.title_key`: case and white space do not count; among pages
with the same key the first built wins, as in a collection). A search that opens no page lists similar
titles: FTS5's BM25 ranking over the titles picks candidates, and the collection's title similarity
(`titles.similarity`) orders them, BM25 breaking ties, so the list is a search engine's suggestions.

`build.build_store` (the `rawreact index` command, through `tasks/corpus.py`'s readers) writes the file
under a temporary name and renames it only when it is complete, so a killed build never looks finished.
The store records its sources (path, format, size, SHA-256, counts) and a digest of its content,
which run manifests record as the store's identity.
"""

import json
import sqlite3
import threading
import unicodedata
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.environments.sentences import sentences_of
from rawreact.environments.titles import similarity, title_key

FORMAT = "rawreact-passages"
# 2: sentences kept as the source gives them (HotpotQA's leading spaces included); 3: a text kept as given,
# line breaks and all, and a page of white space kept, as memory keeps them. A version-2 store reads as it is.
VERSION = 3
READS = (2, 3)
CANDIDATES = 50  # titles the full-text index hands to the similarity ranking
RANKED = 2_000  # BM25 ranks at most this many matching titles (about 5 microseconds each)
COMMON = 20_000  # a word in more titles than this is too costly to intersect while a rarer word narrows the search
WORDS = 64  # distinct words of a search the index looks up: no title needs more, and SQL takes only so many
TABLES = {"meta", "pages", "titles", "terms"}


class PassageStore:
    """A built store, open read-only: `sentences(title)`, `similar(entity)` and the store's `info`.

    Safe to share between threads (one connection, one lock; each query takes well under a millisecond
    to tens of milliseconds).
    """

    titles = None  # too many to list: a grammar cannot enumerate them (see grammar.py's titles mode)

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(
                f"{self.path}: no such passage store; build one with `rawreact index SOURCE... --out {path}`"
            )
        try:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            info = {name: json.loads(value) for name, value in self._db.execute("SELECT name, value FROM meta")}
        except (sqlite3.DatabaseError, json.JSONDecodeError) as error:
            raise DataError(
                f"{self.path}: not a rawreact passage store ({error}); build one with `rawreact index`"
            ) from None
        if info.get("format") != FORMAT or info.get("complete") != 1:
            raise DataError(f"{self.path}: not a complete rawreact passage store; build it again with `rawreact index`")
        if info.get("version") not in READS:
            raise DataError(
                f"{self.path}: store version {info.get('version')}, this rawreact reads "
                f"{' and '.join(map(str, READS))}; rebuild it"
            )
        self.info = info
        self._lock = threading.Lock()
        self._check()

    def _check(self) -> None:
        """Refuse a damaged store when it is opened, not at the first search after the model has loaded.

        What is checked takes the same few milliseconds for any size: the tables, the recorded identity
        and counts, and a sample of pages spread over the whole file (read through the title index and
        the full-text index as a search reads them). Damage the sample misses is caught where a later
        search meets it, and named the same way (`_query`).
        """
        problem = None
        if not isinstance(self.info.get("content_sha256"), str) or not isinstance(self.info.get("pages"), int):
            problem = "its meta table lacks the content digest or the page count"
        else:
            tables = {row[0] for row in self._query("SELECT name FROM sqlite_master WHERE type = 'table'")}
            missing = sorted(TABLES - tables)
            problem = f"it has no table {', '.join(missing)}" if missing else None
        if problem is None:
            last = self._query("SELECT max(id) FROM pages")[0][0] or 0
            for page in sorted({1 + (last - 1) * k // 16 for k in range(17)}):  # 17 pages, from the first to the last
                for (title,) in self._query("SELECT title FROM pages WHERE id >= ? ORDER BY id LIMIT 1", (page,)):
                    if self.passage(title) is None:
                        problem = f"page {title!r} is not found by its title"
            self._query("SELECT title FROM titles WHERE titles MATCH ? LIMIT 1", ('"a"',))
        if problem is not None:
            raise DataError(f"{self.path}: a damaged passage store ({problem}); build it again with `rawreact index`")

    def _query(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        """The rows of one query; any SQLite error is one line naming the store (a damaged or changed file)."""
        try:
            with self._lock:
                return self._db.execute(sql, parameters).fetchall()
        except sqlite3.Error as error:
            raise DataError(
                f"{self.path}: the passage store cannot be read ({error}); it is damaged or was changed while in use: "
                "build it again with `rawreact index`"
            ) from None

    @property
    def sha256(self) -> str:
        """The digest of the store's pages (titles and sentences, in build order): its identity."""
        return self.info["content_sha256"]

    def __len__(self) -> int:
        return self.info["pages"]

    def sentences(self, title: str) -> list[str] | None:
        """The sentences of the page whose key is `title`'s, each on one line, or None (as `env.Pages`)."""
        found = self.passage(title)
        return None if found is None else sentences_of(found)

    def passage(self, title: str) -> str | list[str] | None:
        """The page as the source gave it (what `ReferenceEnv` reads): its text, line breaks and all, or its
        sentences; or None."""
        rows = self._query("SELECT sentences FROM pages WHERE key = ? ORDER BY id LIMIT 1", (title_key(title),))
        if not rows:
            return None
        try:
            passage = json.loads(rows[0][0])
        except (TypeError, ValueError):
            passage = None
        sentences = isinstance(passage, list) and all(isinstance(s, str) for s in passage)
        if not isinstance(passage, str) and not sentences:
            raise DataError(
                f"{self.path}: page {title!r} holds neither a text nor a list of sentences; the store is damaged: "
                "build it again with `rawreact index`"
            )
        return passage

    def similar(self, entity: str, n: int = 5) -> list[str]:
        """At most `n` titles like `entity`, best first, or fewer when fewer share a word with it.

        Candidates come from the full-text index, cheapest first: titles with every word of the
        search, then titles with any of its rarer words (BM25-ranked while the words' pages are
        few enough to rank in a few milliseconds; a word in more titles than that, such as "the",
        only joins the every-word query), then, if none, titles with the commonest words that
        begin as its words do (their first two thirds). `env.similarity` orders them, the full-text
        order breaking ties. A misspelling early in a one-word search finds nothing, where the
        in-memory scan (`env.Titles`) would still list the nearest titles.
        """
        words = list(dict.fromkeys(_words(title_key(entity))))[:WORDS]
        docs = self._docs(words)
        present = sorted((w for w in words if docs.get(w)), key=docs.__getitem__)
        # Titles with every word: a word in very many titles ("the") is left to the ranking when
        # rarer words narrow the search, as reading its long list would take most of the time.
        narrow = [w for w in present if docs[w] <= COMMON] or present
        candidates: list[str] = []
        if len(narrow) > 1:
            candidates = self._match(" AND ".join(map(_quote, narrow)), ranked=docs[narrow[0]] <= RANKED)
        rare, total = [], 0  # the rarest words, together in at most RANKED titles (or the rarest alone)
        for word in present:
            if rare and total + docs[word] > RANKED:
                break
            rare.append(word)
            total += docs[word]
        if rare and len(candidates) < CANDIDATES:
            found = self._match(" OR ".join(map(_quote, rare)), ranked=total <= RANKED)
            candidates += [t for t in found if t not in candidates]
        if not candidates:  # no word in common: a misspelt or longer word may still begin like one
            stems = dict.fromkeys(w[: max(3, 2 * len(w) // 3)] for w in words if len(w) >= 3)
            completions = [t for stem in stems for t in self._completions(stem)]
            if completions:
                candidates = self._match(" OR ".join(map(_quote, completions)), ranked=False)
        query = title_key(entity)
        order = {title: rank for rank, title in enumerate(candidates)}
        return sorted(order, key=lambda t: (-similarity(query, t), order[t]))[:n]

    def _docs(self, words: list[str]) -> dict[str, int]:
        """How many titles hold each word (words in none are left out)."""
        if not words:
            return {}
        marks = ",".join("?" * len(words))
        return dict(self._query(f"SELECT term, docs FROM terms WHERE term IN ({marks})", tuple(words)))

    def _completions(self, stem: str, n: int = 10) -> list[str]:
        """The `n` words in most titles that begin with `stem` (a range of the word table, not FTS5's
        prefix query, which would gather every such word's titles in memory)."""
        end = stem[:-1] + chr(ord(stem[-1]) + 1)
        sql = "SELECT term FROM terms WHERE term >= ? AND term < ? ORDER BY docs DESC LIMIT ?"
        return [row[0] for row in self._query(sql, (stem, end, n))]

    def _match(self, expression: str, ranked: bool) -> list[str]:
        order = "ORDER BY rank " if ranked else ""
        sql = f"SELECT title FROM titles WHERE titles MATCH ? {order}LIMIT ?"
        return [row[0] for row in self._query(sql, (expression, CANDIDATES))]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def is_store(path: str | Path) -> bool:
    """Whether `path` is an SQLite file (a store, or something `PassageStore` will refuse clearly)."""
    try:
        with open(path, "rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _quote(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _words(text: str) -> list[str]:
    """The words as FTS5's unicode61 tokenizer indexes them (`remove_diacritics 2`): runs of letters
    and digits, lower case, without diacritics, so "Zürich" is looked up as the index's "zurich"."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    word, words = [], []
    for char in bare + " ":
        if char.isalnum():
            word.append(char)
        elif word:
            words.append("".join(word))
            word = []
    return words
