"""Text helpers every layer shares: one-line text, text safe for a terminal, counted words, question headers."""

import re
import sys
import threading


def one_line(text: str) -> str:
    """Collapse all white space, line breaks included, so text cannot start a transcript line."""
    return " ".join(text.split())


# Control characters (an escape sequence could move the cursor or retitle the terminal), and the
# bidirectional overrides that can make text read differently from what it is.
# Lone surrogates too: no terminal (no UTF-8) can show them.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` safe for a terminal: line breaks and tabs kept, other control characters (and lone
    surrogates) shown as escapes."""
    return _UNSAFE.sub(lambda match: match.group(0).encode("unicode_escape").decode("ascii"), text)


def inline(text: str) -> str:
    """`text` on one line for a terminal (an id in a printed line): as `printable`, with line breaks shown as
    `\\n`, so that a question's id cannot start a line of its own, such as a forged `result` line."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


_WHOLE = re.compile(r"[0-9]+")


def whole_number(text: str) -> int | None:
    """`text` as a whole number written in ASCII digits (white space around it allowed), or None.

    `str.isdigit` says yes to `²` and `٣`, which `int` then refuses or reads as another script's digit."""
    text = text.strip()
    return int(text) if _WHOLE.fullmatch(text) else None


# What `ast.parse` raises on text that is no Python: a syntax error, a null byte (ValueError), or code nested deeper
# than the parser goes (thousands of unary minus signs: RecursionError, or MemoryError in Python 3.11).
UNPARSEABLE = (SyntaxError, ValueError, RecursionError, MemoryError)

_SAYING = threading.Lock()


def say(text: str) -> None:
    """Write `text` to stderr as one whole line, safe for a terminal, `rawreact: ` before it.

    Worker threads say things at once (a thousand episodes on one failed server): `print` writes the
    text and its line break separately, so their lines glued together; one write under one lock cannot."""
    line = printable(f"rawreact: {text}") + "\n"
    with _SAYING:
        sys.stderr.write(line)
        sys.stderr.flush()


def commented(text: str) -> str:
    """Text as Python comments, each line after `# ` (programs' reflexion shows an earlier implementation so)."""
    return "\n".join(f"# {line}".rstrip() for line in text.rstrip("\n").split("\n"))


def plural(n: int, word: str) -> str:
    """`n word`, with an s unless n is 1, and n's thousands separated (`5,233,329 pages`)."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"
