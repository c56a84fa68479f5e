"""A cache of model calls: a rerun, or a variant that shares calls with another, does not pay for them again.

`CachedModel(model, path)` answers each call from an SQLite file when the same call was made before, and makes
it (and stores its reply) when not. A call's key is the SHA-256 of everything that decides its reply:

- the call: its kind (complete, sample, chat), the prompt or messages, the stop sequences, the token limit, the
  grammar, and any other option (a sample's seed and temperature);
- the model (`identity`): its backend, its name, the SHA-256 of its file (or what a server says of the model it
  serves), and every setting of it that can change a token: temperature, seed, context window, threads (llama.cpp's
  arithmetic depends on the count), workers (streams decode together), drafts, flash attention, whether llama.cpp
  repacked the weights and the CPU features its build uses (`models.build`), the grammar's scope;
- the code: Python's version, rawreact's and llama-cpp-python's.

A call that samples (at a temperature above 0, and every `sample`) is never answered from the cache unless
`sampled=True` asks for it: a sampled reply is one draw, and a rerun should draw again. A reply from the cache
says so (`Completion.cached`), with 0 seconds and 0 evaluated tokens, since this run computed nothing for it.

What a cache does to reproducibility: a cached reply was made by the same model file and settings, and the same
code, so a run that reads it gets the text it would have computed, except where the text depends on something
the key cannot see (a server's batching, llama.cpp's `--threads auto` following the load): such a run repeats the
first draw instead of making its own. The manifest records the cache's file and how many calls came from it.
"""

import hashlib
import json
import sqlite3
import threading
from dataclasses import asdict, replace
from pathlib import Path

from rawreact.core.errors import ModelError
from rawreact.core.resources import installed_versions
from rawreact.models.base import ChatReply, Completion, ToolCall
from rawreact.models.specs import model_sha256

# The attributes of a backend that can decide its replies; a backend keeps those it has.
DECIDING = (
    "name",
    "model",
    "served_model",
    "family",
    "n_ctx",
    "temperature",
    "seed",
    "reuse_cache",
    "n_threads",
    "grammar_first",
    "workers",
    "drafts",
    "flash_attention",
    "repack",
    "build",
)
SCHEMA = "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, reply TEXT NOT NULL)"


def identity(model) -> dict:
    """What of `model` decides its replies (see the module's docstring), as JSON-ready values."""
    found = getattr(model, "cache_identity", None)
    if callable(found):
        return found()
    said = {"backend": type(model).__name__}
    for name in DECIDING:
        value = getattr(model, name, None)
        if value is not None and isinstance(value, str | int | float | bool | dict | list):
            said[name] = value
    if getattr(model, "cores", None) is not None:
        said["n_threads"] = "auto"
    path = getattr(model, "path", None)
    if path is not None:
        said["file_sha256"] = model_sha256(str(path))
    return said | {"versions": installed_versions("rawreact", "llama-cpp-python")}


class CallCache:
    """The SQLite file of a cache: one row a call, its key and its reply as JSON. Threads share one connection
    under a lock; processes (shards on one machine) share the file through SQLite's own locking."""

    def __init__(self, path: str | Path) -> None:
        if not str(path).strip():
            raise ModelError("--cache '' names no file; give one, such as --cache calls.sqlite, or leave --cache out")
        self.path = Path(path)
        if self.path.is_dir():
            raise ModelError(f"cache {self.path} is a folder; give a file, such as calls.sqlite")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ModelError(
                f"cache {self.path}: cannot make its folder {self.path.parent} ({error.strerror}); give a file in a "
                "folder, such as calls.sqlite"
            ) from None
        self._db = None
        try:
            self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
            self._check()
        except sqlite3.DatabaseError as error:
            if self._db is not None:
                self._db.close()
            said = str(error)
            if "readonly" in said or "read-only" in said:
                hint = "this user cannot write it: give a file of your own, or make this one writable"
            else:  # damaged, or not SQLite
                hint = "give another file, or remove this one"
            raise ModelError(f"cache {self.path} cannot be used: {said}; {hint}") from None
        except ModelError:
            self._db.close()
            raise
        self._lock = threading.Lock()

    def _check(self) -> None:
        """Refuse, before any model loads, an SQLite file that is not a cache (another program's file, a passage
        store), one of another layout, a damaged one, and one that cannot be written."""
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables - {"calls"}:
            raise ModelError(
                f"cache {self.path} is an SQLite file with other tables ({', '.join(sorted(tables - {'calls'}))}): "
                "another program's file, or one of the run's inputs; a cache holds only its calls, so give a file "
                "of its own, such as calls.sqlite"
            )
        if "calls" in tables:
            columns = [row[1] for row in self._db.execute("PRAGMA table_info(calls)")]
            if columns != ["key", "reply"]:
                raise ModelError(
                    f"cache {self.path} has a table calls of another layout ({', '.join(columns)}); it is not "
                    "rawreact's cache: give another file"
                )
        found = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]  # the first fault found, or "ok"
        if found != "ok":
            raise ModelError(
                f"cache {self.path} is damaged ({' '.join(found.split())}); remove it, or give another file"
            )
        self._db.execute("BEGIN IMMEDIATE")  # a write, rolled back: a cache that cannot be written fails now
        try:
            self._db.execute(SCHEMA)
            self._db.execute("INSERT OR REPLACE INTO calls VALUES ('', '')")
        finally:
            self._db.execute("ROLLBACK")
        self._db.execute(SCHEMA)

    def get(self, key: str) -> dict | None:
        """The reply stored for `key`, or None: never stored, or a row that cannot be read (a miss, made again)."""
        try:
            with self._lock:
                row = self._db.execute("SELECT reply FROM calls WHERE key = ?", (key,)).fetchone()
            found = None if row is None else json.loads(row[0])
        except (sqlite3.DatabaseError, ValueError, TypeError):
            return None
        return found if isinstance(found, dict | list) else None

    def put(self, key: str, reply: dict) -> None:
        """Store a call's reply under `key` (over one that could not be read)."""
        text = json.dumps(reply, ensure_ascii=False)
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?)", (key, text))
        except sqlite3.DatabaseError as error:
            raise ModelError(
                f"cache {self.path} cannot store a call ({error}); the run file keeps every finished question: "
                "give another --cache (or none) and --resume"
            ) from None

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedModel:
    """`model` with its calls answered from `cache` (a `CallCache` or its path) when made before.

    Every other attribute is the model's own, so a run, a fleet's episodes and the tools method see the model.
    `hits` and `made` count the calls answered from the cache and the calls made.
    """

    def __init__(self, model, cache: CallCache | str | Path, *, sampled: bool = False) -> None:
        refused = getattr(model, "cache_problem", None)
        if refused:
            raise ModelError(f"a cache cannot answer for {model.name}: {refused}")
        self.model, self.sampled = model, sampled
        self.cache = cache if isinstance(cache, CallCache) else CallCache(cache)
        self._identity: str | None = None
        self._count = threading.Lock()
        self.hits = self.made = 0

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def key(self, kind: str, **call) -> str:
        """The SHA-256 of a call and of what of the model decides its reply."""
        if self._identity is None:  # on the first call: a fleet knows what it serves once a server answered
            self._identity = json.dumps(identity(self.model), sort_keys=True, ensure_ascii=False)
        text = json.dumps({"kind": kind, "call": call}, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(f"{self._identity}\n{text}".encode()).hexdigest()

    def _samples(self, temperature: float | None) -> bool:
        return (getattr(self.model, "temperature", 0.0) if temperature is None else temperature) > 0

    def _through(self, kind: str, sampled: bool, make, read, write, **call):
        if sampled and not self.sampled:
            with self._count:
                self.made += 1
            return make()
        key = self.key(kind, **call)
        found = self.cache.get(key)
        try:
            answer = None if found is None else read(found)
        except (KeyError, TypeError, ValueError, AttributeError):  # a row of another shape: a miss, made again
            answer = None
        if answer is not None:
            with self._count:
                self.hits += 1
            return answer
        reply = make()
        self.cache.put(key, write(reply))
        with self._count:
            self.made += 1
        return reply

    def complete(self, prompt: str, **options) -> Completion:
        return self._through(
            "complete",
            self._samples(options.get("temperature")),
            lambda: self.model.complete(prompt, **options),
            _cached,
            Completion.to_dict,
            prompt=prompt,
            **options,
        )

    def sample(self, prompt: str, **options) -> list[Completion]:
        return self._through(
            "sample",
            True,
            lambda: self.model.sample(prompt, **options),
            lambda found: [_cached(c) for c in found],
            lambda replies: [c.to_dict() for c in replies],
            prompt=prompt,
            **options,
        )

    def chat(self, messages: list[dict], tools: list[dict], **options) -> ChatReply:
        return self._through(
            "chat",
            self._samples(None),
            lambda: self.model.chat(messages, tools, **options),
            _chat,
            asdict,
            messages=messages,
            tools=tools,
            **options,
        )

    def said(self) -> dict:
        """What the manifest records of the cache: its file and whether sampled calls may come from it (the run
        adds the calls answered from it and made, counted from its records: `runs.results.cached_counts`)."""
        return {"file": str(self.cache.path.resolve()), "sampled": self.sampled}


def _chat(found: dict) -> ChatReply:
    return ChatReply(found["content"], [ToolCall(**call) for call in found["tool_calls"]], _cached(found["call"]))


def _cached(found: dict) -> Completion:
    """A stored reply as a Completion that says it came from the cache: nothing was computed for it here."""
    return replace(Completion(**{k: v for k, v in found.items() if k != "cached"}), evaluated_tokens=0, seconds=0.0,
                   cached=True)  # fmt: skip
