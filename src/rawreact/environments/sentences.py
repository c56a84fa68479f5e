"""Sentence splitting for plain passages, kinder than the reference's `split(". ")`.

A boundary is `.`, `!` or `?` (with any closing quotes or brackets) followed by white space and a
capital letter, digit or opening quote. A period does not end a sentence after a known
abbreviation (Dr., St., Jan.), a single initial (J. R. R.), or a dotted acronym (U.S., e.g.);
decimals such as 4.5 never have the white space a boundary needs.
"""

import re
from collections.abc import Sequence

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt cmdr adm gov sen rep rev hon pres
    no nos vol vols fig figs op ch pp jan feb mar apr jun jul aug sep sept oct nov dec
    vs approx ca est inc ltd co corp bros dept univ ave rd blvd""".split()
)
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(\s+)(?=[\"'\u201c\u2018(\[]?\w)")
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")


_WORD = 40  # how far back a word that could be an abbreviation, initial or acronym is looked for


def _ends_sentence(text: str, boundary: re.Match) -> bool:
    """Whether the punctuation at `boundary` really ends a sentence.

    Only a few characters on either side are read, so splitting stays linear in the text's length.
    """
    following = text[boundary.end() : boundary.end() + 3].lstrip("\"'\u201c\u2018([")
    if not following or not (following[0].isupper() or following[0].isdigit()):
        return False
    if text[boundary.start()] != ".":
        return True
    words = text[max(0, boundary.start() - _WORD) : boundary.start()].rsplit(None, 1)
    word = words[-1].lstrip("\"'(\u201c\u2018[") if words else ""
    if len(word) == 1 and word.isalpha():
        return False  # an initial
    return word.lower() not in _ABBREVIATIONS and not _ACRONYM.fullmatch(word)


def split_sentences(text: str) -> list[str]:
    """Split plain text into sentences; paragraphs (lines) never share a sentence."""
    sentences = []
    for paragraph in text.splitlines():
        start = 0
        for boundary in _BOUNDARY.finditer(paragraph):
            if _ends_sentence(paragraph, boundary):
                sentences.append(paragraph[start : boundary.start(1)].strip())
                start = boundary.end()
        sentences.append(paragraph[start:].strip())
    return [s for s in sentences if s]


def sentences_of(passage: str | Sequence[str]) -> list[str]:
    """A passage's sentences, each on one line, empty ones dropped: a text is split, a list taken as it is.
    Memory (`env.Pages`) and a store read a page through this one rule."""
    sentences = split_sentences(passage) if isinstance(passage, str) else passage
    return [" ".join(s.split()) for s in sentences if s.strip()]
