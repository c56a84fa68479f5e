"""A passage store: millions of pages in one SQLite file, searched in milliseconds, with no server.

A page is a title and its sentences. Opening a page by title is an index lookup on the title's
key (`env.title_key`: case and white space do not count; among pages with the same key the first
built wins, as in a collection). A search that opens no page lists similar titles: FTS5's BM25
ranking over the titles picks candidates, and the collection's title similarity (`env.similarity`)
orders them, BM25 breaking ties, so the list is a search engine's suggestions, not a scan.

`build_store` (the `rawreact index` command, through `corpus.py`'s readers) writes the file under
a temporary name and renames it only when it is complete, so a killed build never looks finished.
The store records its sources (path, format, size, SHA-256, counts) and a digest of its content,
which run manifests record as the store's identity.
"""

import hashlib
import json
import os
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path

from rawreact.env import one_line, similarity, title_key
from rawreact.errors import DataError

FORMAT = "rawreact-passages"
VERSION = 2  # 2: sentences kept as the source gives them (HotpotQA's leading spaces included)
CANDIDATES = 50  # titles the full-text index hands to the similarity ranking
RANKED = 2_000  # BM25 ranks at most this many matching titles (about 5 microseconds each)
COMMON = 20_000  # a word in more titles than this is too costly to intersect while a rarer word narrows the search
_BATCH = 5_000
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
        if info.get("version") != VERSION:
            raise DataError(
                f"{self.path}: store version {info.get('version')}, this rawreact reads {VERSION}; rebuild it"
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
        return None if found is None else [one_line(s) for s in found if s.strip()]

    def passage(self, title: str) -> list[str] | None:
        """The page's sentences as the source gave them (what `ReferenceEnv` joins), or None."""
        rows = self._query("SELECT sentences FROM pages WHERE key = ? ORDER BY id LIMIT 1", (title_key(title),))
        if not rows:
            return None
        try:
            sentences = json.loads(rows[0][0])
        except (TypeError, ValueError):
            sentences = None
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise DataError(
                f"{self.path}: page {title!r} holds no list of sentences; the store is damaged: build it again "
                "with `rawreact index`"
            )
        return sentences

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


Page = tuple[str, list[str]]


def build_store(
    sources: Iterable[tuple[dict, Iterable[Page]]],
    out: str | Path,
    *,
    on_pages: Callable[[int], None] | None = None,
    replace: bool = False,
) -> dict:
    """Write a store of every source's pages to `out`; returns its info (what `PassageStore.info` reads).

    `sources` are (description, pages) pairs; each description (path, format, size, ...) is kept in
    the store, with the counts of pages read, kept and skipped (no title or no sentences) added once
    its pages are read. Pages whose title repeats exactly are kept once (the first); titles that
    differ only in case are all kept and listed, and a search opens the first. The file appears at
    `out` only when complete, and replaces a file already there only with `replace`; an error or
    interruption removes the partial file, and a build starts by removing those of killed builds.
    A page with text no UTF-8 can hold (a lone surrogate escape in a JSON corpus) is skipped and
    counted (`unreadable`).
    """
    out = Path(out)
    remove_stale_builds(out)
    temp = out.with_name(f"{_BUILDING.format(name=out.name)}{os.getpid()}")
    temp.unlink(missing_ok=True)
    try:
        db = sqlite3.connect(temp)
    except sqlite3.Error as error:
        raise DataError(f"{out}: cannot write the store there ({error})") from None
    try:
        info = _fill(db, sources, on_pages)
        db.close()
        _place(temp, out, replace)
        return info
    except BaseException:
        db.close()
        temp.unlink(missing_ok=True)
        raise


_BUILDING = ".{name}.building-"  # the temporary file of a build, followed by the builder's process id


def remove_stale_builds(out: str | Path) -> list[Path]:
    """Remove the temporary files that killed builds of `out` left (their process is gone); return them.

    A build that a live process is still writing is left alone.
    """
    out = Path(out)
    prefix, removed = _BUILDING.format(name=out.name), []
    for path in out.parent.glob(f"{prefix}*"):
        pid = path.name.removeprefix(prefix)
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _place(temp: Path, out: Path, replace: bool) -> None:
    """Move the finished store into place: over an existing `out` only when `replace`.

    Without it the move is a hard link, which the file system refuses if `out` exists by then, so
    of two builds of the same `out` started together the second to finish fails instead of silently
    replacing the first's store.
    """
    if replace:
        os.replace(temp, out)
        return
    try:
        os.link(temp, out)
    except FileExistsError:
        raise DataError(
            f"{out} was written by another build while this one ran; give another --out, or add --force to replace it"
        ) from None
    except OSError:  # a file system without hard links: check, then rename
        if out.exists():
            raise DataError(f"{out} exists; give another --out, or add --force to replace it") from None
        os.replace(temp, out)
        return
    temp.unlink()


def _fill(db: sqlite3.Connection, sources, on_pages) -> dict:
    db.executescript(
        """
        PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536;
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE pages (id INTEGER PRIMARY KEY, title TEXT NOT NULL, key TEXT NOT NULL, sentences TEXT NOT NULL);
        """
    )
    digest, described, total, start = hashlib.sha256(), [], 0, time.perf_counter()
    for description, pages in sources:
        read = skipped = unreadable = 0
        batch = []
        for title, sentences in pages:
            read += 1
            title = one_line(title)
            sentences = list(sentences)  # as given: HotpotQA's carry the spaces between them (`reference.page_text`)
            if not title or not any(s.strip() for s in sentences):
                skipped += 1
                continue
            text = json.dumps(sentences, ensure_ascii=False)
            try:
                line = json.dumps(title, ensure_ascii=False).encode() + b"\t" + text.encode() + b"\n"
            except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text, SQLite's included, can hold it
                unreadable += 1
                continue
            digest.update(line)
            batch.append((title, title_key(title), text))
            if len(batch) == _BATCH:
                total += _insert(db, batch, on_pages)
        total += _insert(db, batch, on_pages)
        described.append(description | {"read": read, "skipped": skipped, "unreadable": unreadable})
    if total == 0:
        raise DataError("the sources hold no pages with a title and text; nothing to store")
    duplicates = db.execute("DELETE FROM pages WHERE id NOT IN (SELECT MIN(id) FROM pages GROUP BY title)").rowcount
    db.executescript(
        """
        CREATE INDEX pages_key ON pages (key);
        CREATE VIRTUAL TABLE titles USING fts5 (title, content = 'pages', content_rowid = 'id',
            tokenize = 'unicode61 remove_diacritics 2');
        INSERT INTO titles (titles) VALUES ('rebuild');
        CREATE VIRTUAL TABLE temp.vocabulary USING fts5vocab (main, titles, 'row');
        CREATE TABLE terms (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO terms SELECT term, doc FROM temp.vocabulary;
        """
    )
    from rawreact import __version__

    info = {
        "format": FORMAT,
        "version": VERSION,
        "rawreact": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pages": total - duplicates,
        "duplicates": duplicates,
        "sources": described,
        "content_sha256": digest.hexdigest(),
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    rows = [(name, json.dumps(value, ensure_ascii=False)) for name, value in info.items()]
    db.executemany("INSERT INTO meta VALUES (?, ?)", rows + [("complete", "1")])
    db.commit()
    return info


def _insert(db: sqlite3.Connection, batch: list, on_pages) -> int:
    db.executemany("INSERT INTO pages (title, key, sentences) VALUES (?, ?, ?)", batch)
    count = len(batch)
    batch.clear()
    if on_pages is not None and count:
        on_pages(count)
    return count
