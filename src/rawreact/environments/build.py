"""`build_store` (the `rawreact index` command): a passage store written from corpus readers, safely.

The file is written under a temporary name and put in place only when it is complete, so a killed
build never looks finished; a build that finishes second never replaces the first one's store.
"""

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rawreact import __version__
from rawreact.core.errors import DataError
from rawreact.core.folders import make_parents, remove_made
from rawreact.core.text import one_line, whole_number
from rawreact.environments.store import FORMAT, VERSION
from rawreact.environments.titles import title_key

Page = tuple[str, "str | list[str]"]  # a title and its text or sentences


def build_store(
    sources: Iterable[tuple[dict, Iterable[Page]]],
    out: str | Path,
    *,
    on_pages: Callable[[int], None] | None = None,
    replace: bool = False,
) -> dict:
    """Write a store of every source's pages to `out`; returns its info (what `PassageStore.info` reads).

    `sources` are (description, pages) pairs; each description (path, format, size, ...) is kept in
    the store, with the counts of pages read, kept and skipped (no title) added once
    its pages are read. Pages whose title repeats exactly are kept once (the first); titles that
    differ only in case are all kept and listed, and a search opens the first. The file appears at
    `out` only when complete, and replaces a file already there only with `replace`; an error or
    interruption removes the partial file, and a build starts by removing those of killed builds.
    A page with text no UTF-8 can hold (a lone surrogate escape in a JSON corpus) is skipped and
    counted (`unreadable`).
    """
    out = Path(out)
    made = make_parents(out)
    remove_stale_builds(out)
    temp = out.with_name(f"{_BUILDING.format(name=out.name)}{os.getpid()}")
    temp.unlink(missing_ok=True)
    db = None
    try:  # from the moment the file may exist: a SIGTERM right after `connect` made it removed it too (CI, 2026-12-02)
        try:
            db = sqlite3.connect(temp)
        except sqlite3.Error as error:
            raise DataError(f"{out}: cannot write the store there ({error})") from None
        info = _fill(db, sources, on_pages)
        db.close()
        _place(temp, out, replace)
        return info
    except BaseException:
        if db is not None:
            db.close()
        temp.unlink(missing_ok=True)
        remove_made(made)
        raise


_BUILDING = ".{name}.building-"  # the temporary file of a build, followed by the builder's process id


def remove_stale_builds(out: str | Path) -> list[Path]:
    """Remove the temporary files that killed builds of `out` left (their process is gone); return them.

    A build that a live process is still writing is left alone.
    """
    out = Path(out)
    prefix, removed = _BUILDING.format(name=out.name), []
    for path in out.parent.glob(f"{prefix}*"):
        pid = whole_number(path.name.removeprefix(prefix))
        if pid is not None and pid != os.getpid() and not _alive(pid):
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
            # As given, as memory keeps it: a text with its line breaks (each a paragraph to the reference's
            # page), or sentences (HotpotQA's carry the spaces between them: `reference.page_text`).
            sentences = sentences if isinstance(sentences, str) else list(sentences)
            if not title:
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


_BATCH = 5_000
