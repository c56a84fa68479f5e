"""Prefix states kept on disk: the cells of a few-shot prompt, computed once on this machine, for later processes.

Every process that runs a prompt computes its few-shot prefix before its first question (1,277 tokens for the demo's
prompt: 4.0 CPU-seconds on Gemma 3 270M at one thread, about 30 on Qwen2.5-Coder-1.5B). The engine computes a
prefix into a sequence of its own, in chunks from position 0 (`batch.Engine`), so its cells are the same numbers
in every process with the same model file, llama.cpp build and context layout. This keeps them: the first process
writes the sequence's state (`llama_state_seq_get_data`) under a key of everything that decides those numbers, and
a later one reads it into its prefix's sequence instead of computing it.

What a run writes does not depend on it: the state read is the bytes the computation would give (the prefix of
a pass that held nothing else; one that shared its pass with other streams' tokens is not kept), and the call
that starts from it counts the prefix as evaluated, as the call that computes it does, so a record is the same
either way (`tests/test_states.py` runs a question both ways). That holds at one llama.cpp thread, and only there
are states kept: at two threads the state's bytes are the same, but the demo's 7 questions on Gemma 3 270M
wrote other text from step 2 of some questions when it was read than when it was computed (EM 0.000 against
0.143), so a model at more threads, or at `--threads auto`, keeps none. The run's manifest names the folder, or
none.

The folder is `$XDG_CACHE_HOME/rawreact/states`; `RAWREACT_STATES` names another, or `off` keeps none. A state
is about 9 KB a token on Gemma 3 270M (11.8 MB for the demo's prompt); the folder keeps the states read or
written last, at most `MOST_BYTES` in all.
"""

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from rawreact.core.folders import cache_home
from rawreact.models.gbnf import llama_cpp_module
from rawreact.models.specs import model_sha256

MOST_BYTES = 2 << 30  # the folder's states together, the oldest removed first
SUFFIX = ".state"


def folder() -> Path | None:
    """Where prefix states are kept (`RAWREACT_STATES`, by default rawreact's cache), or None when kept nowhere."""
    given = os.environ.get("RAWREACT_STATES")
    if given is None:
        return cache_home() / "states"
    return None if given.strip().lower() in ("", "off", "0", "no") else Path(given).expanduser()


def kept(where: Path | None, model: Path, build: list[str], repack: bool, layout: dict) -> "States | None":
    """The kept states of an engine's prefixes, or None where none are kept: the model file (by content), llama.cpp's
    version and build, and the engine's `layout` decide them. The file is hashed when a prefix is first kept or
    looked for, not when the engine is made (an engine that keeps no prefix never hashes it)."""
    if where is None:
        return None
    basis = {"llama_cpp": llama_cpp_module().__version__, "features": build, "repack": repack} | layout
    return States(where, lambda: basis | {"model_sha256": model_sha256(str(model))})


class States:
    """The kept states of one engine's prefixes: `basis()` makes what, besides the tokens, decides them (made once,
    when first needed)."""

    def __init__(self, where: Path, basis: Callable[[], dict]) -> None:
        self.where, self._basis = where, basis
        self.read_count = self.written = 0

    @cached_property
    def basis(self) -> str:
        return json.dumps(self._basis(), sort_keys=True)

    def path(self, tokens: tuple[int, ...]) -> Path:
        digest = hashlib.sha256(self.basis.encode())
        digest.update(b"\0" + b",".join(str(t).encode() for t in tokens))
        return self.where / (digest.hexdigest() + SUFFIX)

    def read(self, tokens: tuple[int, ...]) -> bytes | None:
        """The state kept for `tokens`, or None: none kept, or one whose bytes do not match their digest."""
        path = self.path(tokens)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) < 32 or hashlib.sha256(data[32:]).digest() != data[:32]:
            with contextlib.suppress(OSError):
                path.unlink()  # cut short or altered: computed again, and kept again
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # read last: removed last
        self.read_count += 1
        return data[32:]

    def write(self, tokens: tuple[int, ...], state: bytes) -> None:
        """Keep `state` for `tokens` (whole or not at all: written aside, then renamed), then trim the folder.
        A folder that cannot be written to keeps nothing, and the run goes on."""
        path = self.path(tokens)
        try:
            self.where.mkdir(parents=True, exist_ok=True)
            handle, aside = tempfile.mkstemp(dir=self.where, prefix=".writing-")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(hashlib.sha256(state).digest() + state)
                os.replace(aside, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(aside)
        except OSError:
            return
        self.written += 1
        trim(self.where, MOST_BYTES)


def trim(where: Path, most: int) -> None:
    """Remove the states used longest ago until those left hold at most `most` bytes."""
    kept = []
    for path in where.glob("*" + SUFFIX):
        with contextlib.suppress(OSError):
            stat = path.stat()
            kept.append((stat.st_mtime_ns, stat.st_size, path))
    total = sum(size for _, size, _ in kept)
    for _, size, path in sorted(kept):
        if total <= most:
            return
        with contextlib.suppress(OSError):
            path.unlink()
        total -= size
