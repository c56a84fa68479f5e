"""llama.cpp's grammar engine: checking a GBNF text, and greedy decoding under a grammar.

llama-cpp-python applies a grammar to every token of the vocabulary at every step, which costs
more than the model itself on a 262k-token vocabulary. `GrammarSampler.best` gives the same token
(the highest-scoring one the grammar allows) by asking the grammar about the best candidates
first, and about the whole vocabulary only when none of them is allowed.
"""

import contextlib
import ctypes
import functools
import os
import re
import sys
import tempfile

import numpy as np

from rawreact.core.errors import GrammarError, ModelError
from rawreact.models.cores import bound_spinning


def llama_cpp_module():
    """llama_cpp, imported on first use, or a clear error when it is not installed."""
    try:
        bound_spinning()  # before libgomp loads with llama.cpp
        import llama_cpp
    except ImportError:
        raise ModelError("the embedded backend needs llama-cpp-python: pip install llama-cpp-python") from None
    return llama_cpp


_captured_log: list[str] | None = None  # llama.cpp's log lines while check_grammar listens


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def quiet_log(level, text, user_data):
    """llama.cpp's own logging, dropped (it writes to stderr even with verbose=False) unless captured."""
    if _captured_log is not None:
        _captured_log.append(text.decode("utf-8", "replace"))


@contextlib.contextmanager
def _captured_output():
    """Collect what llama.cpp writes to its log and to file descriptor 2 inside the block."""
    global _captured_log
    llama_cpp = llama_cpp_module()
    llama_cpp.llama_log_set(quiet_log, ctypes.c_void_p())
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        _captured_log = lines
        try:
            yield lines
        finally:
            _captured_log = None
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.append(sink.read().decode("utf-8", "replace"))


def _explain(output: str, grammar: str) -> str:
    """llama.cpp's parse error, with the line it points at and a hint for the usual mistakes."""
    found = re.search(r"error parsing grammar: (.*)", output, re.DOTALL)
    if found is None:
        reason = next((line.strip() for line in output.splitlines() if line.strip()), "no reason given")
        return f"{reason}; the grammar needs a rule named root" if "'root'" in reason else reason
    # llama.cpp prints "<reason> at <the unparsed rest>", a blank line, then the whole grammar.
    message = found.group(1)
    if message.rstrip("\n").endswith(grammar.rstrip("\n")):
        message = message.rstrip("\n")[: -len(grammar.rstrip("\n"))].rstrip("\n")
    reason, _, rest = message.partition(" at ")
    text = reason
    if rest.strip() and grammar.rstrip("\n").endswith(rest):
        text += f" on line {grammar[: len(grammar) - len(rest)].count(chr(10)) + 1}, at {rest.splitlines()[0][:40]!r}"
    elif " at " in message and not rest.strip():
        text += " at the end of the grammar"
    hints = []
    code = _LITERALS.sub(" ", grammar)  # rule names and operators only
    if rest.startswith("_") or re.search(r"[\w-]_[\w-]*\s*::=", code):
        hints.append("rule names allow letters, digits and '-' only, never '_'")
    if re.search(r"(?<!\\)\[\^?\]", _COMMENTS.sub(" ", grammar)):
        hints.append("write a ']' inside a character class as '\\]', as in [^\\]\\n]")
    if reason.startswith("Undefined rule"):
        hints.append("define that rule or correct its name")
    return text + "".join(f"; {hint}" for hint in hints)


_COMMENTS = re.compile(r"#[^\n]*")
_LITERALS = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|#[^\n]*')
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
MAX_REPEAT = 10_000
# llama.cpp parses nested groups recursively, and a deep enough nesting overflows the stack (a
# crash, not an error); real grammars nest a few levels. Its size is bounded for the same reason.
MAX_DEPTH = 64
MAX_SIZE = 4_000_000


def _precheck(grammar: str, source: str) -> None:
    """What llama.cpp would not survive: no rules, groups nested too deep, too much text, or a
    repetition it cannot expand."""
    if len(grammar) > MAX_SIZE:
        raise GrammarError(f"{source} has {len(grammar):,} characters; a grammar may have at most {MAX_SIZE:,}")
    code = _LITERALS.sub(" ", grammar)
    if "::=" not in code:
        raise GrammarError(f"{source} has no rules; a grammar needs at least a rule named root")
    depth = 0
    for position, char in enumerate(code):
        depth += (char == "(") - (char == ")")
        if depth > MAX_DEPTH:
            line = code[:position].count("\n") + 1  # literals were replaced on their own lines
            raise GrammarError(
                f"{source} line {line}: groups nested more than {MAX_DEPTH} deep; flatten them into rules"
            )
    for repeat in _REPEAT.finditer(code):
        low, high = int(repeat.group(1)), repeat.group(2)
        if high and (int(high) < low or int(high) > MAX_REPEAT) or low > MAX_REPEAT:
            line = grammar[: grammar.find(repeat.group(0))].count("\n") + 1
            raise GrammarError(
                f"{source} line {line}: the repetition {repeat.group(0)} needs min <= max <= {MAX_REPEAT}"
            )


def check_grammar(grammar: str, source: str = "the grammar") -> None:
    """Raise GrammarError, naming the problem, when llama.cpp cannot parse `grammar`.

    llama-cpp-python 0.3.x dereferences a failed grammar parse and segfaults, so the text is
    first handed to the sampler constructor, which returns NULL on a parse error; what llama.cpp
    says about the error is captured for the message.
    """
    _precheck(grammar, source)
    problem = _parse_problem(grammar)
    if problem is not None:
        raise GrammarError(f"{source}: llama.cpp cannot parse the grammar: {problem}")


@functools.lru_cache(maxsize=256)  # a run asks about the same few grammars at every step
def _parse_problem(grammar: str) -> str | None:
    llama_cpp = llama_cpp_module()
    with _captured_output() as output:
        sampler = llama_cpp.llama_sampler_init_grammar(None, grammar.encode(), b"root")
    if not sampler:
        return _explain("".join(output), grammar)
    llama_cpp.llama_sampler_free(sampler)
    return None


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
_FIRST = 64  # candidates asked about before the whole vocabulary


class GrammarSampler:
    """One completion's grammar state over a model's vocabulary (use it as a context manager)."""

    def __init__(self, vocab, n_vocab: int, grammar: str, source: str = "the grammar") -> None:
        check_grammar(grammar, source)
        self._llama_cpp = llama_cpp_module()
        self._sampler = self._llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not self._sampler:
            raise GrammarError(f"{source}: llama.cpp rejected the grammar for this model's vocabulary")
        self._data = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.int32)

    def __enter__(self) -> "GrammarSampler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Free llama.cpp's sampler."""
        if self._sampler:
            self._llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None

    def allowed(self, tokens: np.ndarray) -> np.ndarray:
        """Which of `tokens` the grammar allows next (a boolean array)."""
        data = self._data[: len(tokens)]
        data["id"], data["logit"] = tokens, 0.0
        llama_cpp = self._llama_cpp
        array = llama_cpp.llama_token_data_array(
            data=data.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            size=len(tokens),
            selected=-1,
            sorted=False,
        )
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return np.isfinite(data["logit"])

    def allowed_all(self) -> np.ndarray:
        """Which tokens of the whole vocabulary the grammar allows next (a boolean array)."""
        return self.allowed(self._ids)

    def best(self, logits: np.ndarray) -> int:
        """The allowed token with the highest logit (the lowest id among equals), as greedy decoding picks.

        Candidates are asked about in order of logit: the top one, then the top 64, then all.
        Returns -1 when the grammar allows no token at all.
        """
        top = int(np.argmax(logits))
        if self.allowed(np.array([top], dtype=np.int32))[0]:
            return top
        first = np.argpartition(-logits, _FIRST)[:_FIRST]
        first = first[np.lexsort((first, -logits[first]))].astype(np.int32)
        ok = self.allowed(first)
        # The 64th best may tie with tokens left out of `first`, and a tie goes to the lowest id.
        if ok.any() and logits[first[ok.argmax()]] > logits[first[-1]]:
            return int(first[ok.argmax()])
        ok = self.allowed_all()
        if not ok.any():
            return -1
        return int(np.argmax(np.where(ok, logits, -np.inf)))

    def accept(self, token: int) -> None:
        """Advance the grammar over `token`, which must be allowed (llama.cpp aborts otherwise)."""
        self._llama_cpp.llama_sampler_accept(self._sampler, token)

    def admits(self, tokens: list[int], end: int) -> bool:
        """Whether the grammar allows `tokens` in turn and then the end-of-text token `end`."""
        for token in tokens:
            if not self.allowed(np.array([token], dtype=np.int32))[0]:
                return False
            self.accept(token)
        return bool(self.allowed(np.array([end], dtype=np.int32))[0])
