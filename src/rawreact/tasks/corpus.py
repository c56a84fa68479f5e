"""Readers of the corpora a passage store is built from, streaming, one page at a time.

- HotpotQA's fullwiki corpus as distributed: `enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2`,
  a tar of folders of bz2-compressed JSON-lines files (`AA/wiki_00.bz2`), one intro paragraph per
  line as `{"id", "url", "title", "text": [sentence, ...], "text_with_links", ...}`; its sentences
  carry their own leading spaces. Read as the tar, its unpacked folder, or single files.
- FEVER's `wiki-pages/wiki-NNN.jsonl`: `{"id", "text", "lines"}`, where `id` is the title with `_`
  for spaces and PTB escapes (`-LRB-` for `(`), and `lines` is `"0\\tsentence\\tlink...\\n1\\t..."`.
- Any JSON-lines file of `{"title", "text"}` (text split into sentences) or `{"title", "sentences"}`.
- A question file rawreact reads (a HotpotQA file or an envs/ collection): its passages, pooled.

Files may be plain, `.bz2` or `.gz`; a folder is read file by file in name order. Each source
is hashed as it is read (the SHA-256 of the file as it is on disk), so the store records what it
was built from without a second pass over gigabytes.
"""

import bz2
import gzip
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.tasks.loading import load_collection

Page = tuple[str, str | list[str]]
# FEVER's titles and sentences keep the Penn Treebank escapes of its tokenizer.
_BEFORE_CLOSE = re.compile(r" ([.,;:!?)\]}%]|'s\b|n't\b|'re\b|'ve\b|'ll\b|'d\b|'m\b)")
_AFTER_OPEN = re.compile(r"([(\[{$]) ")
_QUOTES = re.compile(r"``\s?|\s?''")
_PTB = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "-COLON-": ":"}


class _Hashing(io.RawIOBase):
    """A file that hashes every byte read through it, and counts them."""

    def __init__(self, file) -> None:
        self.file, self.sha256, self.size = file, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.file.read(len(buffer))
        buffer[: len(data)] = data
        self.sha256.update(data)
        self.size += len(data)
        return len(data)


def read_sources(paths: list[str | Path]) -> Iterator[tuple[dict, Iterator[Page]]]:
    """(description, pages) for each source file; a folder gives one per data file in it."""
    for path in map(Path, paths):
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not files:
                raise DataError(f"{path}: an empty folder; give the corpus's files or the folder that holds them")
            for file in files:
                yield from _source(file)
        elif path.exists():
            yield from _source(path)
        else:
            raise DataError(f"{path}: no such file or folder")


def _source(path: Path) -> Iterator[tuple[dict, Iterator[Page]]]:
    description: dict = {"path": str(path)}
    name = path.name.lower()
    if _is_question_file(path):
        collection = load_collection(path).pooled()
        description |= {"format": f"collection ({collection.layout})", "size": path.stat().st_size}
        description["sha256"] = collection.sha256
        pages = ((title, p if isinstance(p, str) else list(p)) for title, p in collection.passages.items())
        yield description, pages
        return
    file = open(path, "rb")  # noqa: SIM115 (closed when its pages are read)
    hashing = _Hashing(file)
    pages = _tar_pages(path, hashing) if ".tar" in name else _line_pages(path, _decompressed(name, hashing))
    yield description, _finish(description, pages, hashing, file)


def _is_question_file(path: Path) -> bool:
    """A file `load_collection` reads: a JSON list (HotpotQA), an envs/ collection, or JSONL question rows.

    JSON lines are told apart by their first line's keys: a question row has a `question` and its
    `context` (HotpotQA) or a `claim` (FEVER), a page has a `title`. The whole first line is read,
    however long: a page of a few megabytes is still one line of a corpus.
    """
    if path.name.lower().endswith((".bz2", ".gz", ".tar")):
        return False
    try:
        with open(path, "rb") as file:
            head = file.readline()
    except OSError as error:
        raise DataError(f"{path}: cannot read it: {error.strerror}") from None
    start = head.lstrip()[:1]
    if start == b"[":
        return True
    if start != b"{":
        return False
    try:
        row = json.loads(head)
    except ValueError:  # one JSON document over many lines: an envs/ collection
        return True
    if not isinstance(row, dict):
        return False
    return "passages" in row or ("question" in row and "context" in row) or ("claim" in row and "title" not in row)


def _finish(description: dict, pages: Iterator[Page], hashing: _Hashing, file) -> Iterator[Page]:
    formats: set[str] = set()
    try:
        for page, kind in pages:
            formats.add(kind)
            yield page
        while hashing.read(1 << 20):  # hash what a reader left unread (a tar's padding)
            pass
    finally:
        file.close()
    description |= {"format": " + ".join(sorted(formats)) or "empty", "size": hashing.size}
    description["sha256"] = hashing.sha256.hexdigest()


def _decompressed(name: str, raw) -> io.BufferedIOBase:
    buffered = io.BufferedReader(raw, 1 << 20)
    if name.endswith(".bz2"):
        return bz2.BZ2File(buffered)
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=buffered)
    return buffered


def _tar_pages(path: Path, raw) -> Iterator[tuple[Page, str]]:
    try:
        with tarfile.open(fileobj=io.BufferedReader(raw, 1 << 20), mode="r|*") as tar:
            for member in tar:
                if member.isfile() and not Path(member.name).name.startswith("."):
                    inner = tar.extractfile(member)
                    yield from _line_pages(Path(f"{path}:{member.name}"), _decompressed(member.name.lower(), inner))
    except (tarfile.TarError, EOFError, OSError) as error:
        raise DataError(f"{path}: not a readable tar archive ({error}); download it again") from None


def _line_pages(where: Path, file) -> Iterator[tuple[Page, str]]:
    """Each line's page and its format, from one JSON-lines file."""
    try:
        for number, raw in enumerate(file, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise DataError(
                    f"{where} line {number}: not a JSON object ({error}); a corpus has one page per line"
                ) from None
            yield _page(where, number, row)
    except (OSError, EOFError) as error:  # a truncated or corrupt compressed file
        raise DataError(f"{where}: cannot read it to the end ({error}); download it again") from None


def _page(where: Path, number: int, row: object) -> tuple[Page, str]:
    if not isinstance(row, dict):
        raise DataError(f"{where} line {number}: a page must be a JSON object, not {type(row).__name__}")
    if "lines" in row and "id" in row:
        if not row["id"]:  # FEVER's first page has an empty id and no text: counted as skipped
            return ("", []), "fever wiki-pages"
        sentences = [line.split("\t")[1] if "\t" in line else "" for line in str(row["lines"]).split("\n")]
        return (_unescape(str(row["id"]).replace("_", " ")), [_unescape(s) for s in sentences]), "fever wiki-pages"
    title = row.get("title")
    if not isinstance(title, str):
        raise DataError(
            f"{where} line {number}: no 'title'; a page is {{'title', 'text'}} or {{'title', 'sentences'}}, "
            "a HotpotQA fullwiki line, or a FEVER wiki-pages line ('id', 'lines')"
        )
    if isinstance(row.get("sentences"), list):
        return (title, _strings(where, number, row["sentences"])), "title + sentences"
    text = row.get("text")
    if isinstance(text, str):  # kept as given: the store splits it as memory does, and keeps its line breaks
        return (title, text), "title + text"
    if isinstance(text, list):  # HotpotQA: sentences, or paragraphs of sentences in its -processed dump
        flat = [s for item in text for s in (item if isinstance(item, list) else [item])]
        return (title, _strings(where, number, flat)), "hotpotqa fullwiki"
    raise DataError(f"{where} line {number}: page {title!r} has neither 'text' nor 'sentences'")


def _strings(where: Path, number: int, items: list) -> list[str]:
    if not all(isinstance(s, str) for s in items):
        raise DataError(f"{where} line {number}: sentences must be strings")
    return items


def _unescape(text: str) -> str:
    """FEVER's tokenized text as plain text: PTB escapes undone, and no space before `.`, `,` and the like."""
    for escape, char in _PTB.items():
        text = text.replace(escape, char)
    text = _QUOTES.sub('"', text)
    return _AFTER_OPEN.sub(r"\1", _BEFORE_CLOSE.sub(r"\1", text)).strip()
