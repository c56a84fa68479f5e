"""The reference notebook's Wikipedia environment (`WikiEnv` inside `HotPotQAWrapper`), over rawreact's passages.

Every observation is what the reference shows for the same page text; docs/reference.md lists
where it and `PassageEnv` differ. The loop that drives it is agents/reference.py.
"""

import warnings
from collections.abc import Mapping, Sequence

from rawreact.config.choices import LOOPS
from rawreact.core.actions import PASSAGE_VERBS, Action
from rawreact.core.metrics import normalize_answer
from rawreact.environments.env import NOT_FOUND, Pages
from rawreact.environments.store import PassageStore

N_FIRST = LOOPS["reference"]  # sentences a search shows: the reference environment's first five


# The reference's verbs, in the order its environment tries them; each is exactly `verb[...]`.
READ_ORDER = ("search", "lookup", "finish", "think")


def page_text(passage: str | Sequence[str]) -> str:
    """The page text of a passage, the one rule every path to `ReferenceEnv` takes: its text as given,
    or its sentences put back together.

    Sentences that carry their own separating white space (HotpotQA's: every sentence after the
    first starts with the space that followed the one before, where the text had one) are
    concatenated as given, which is the paragraph as HotpotQA took it from Wikipedia; sentences
    that carry none (a collection's, a FEVER page's) are joined by one space. A list is read the
    first way when any sentence after its first starts with white space.
    """
    if isinstance(passage, str):
        return passage
    carried = any(sentence[:1].isspace() for sentence in passage[1:])
    return ("" if carried else " ").join(passage)


def clean_str(text: str) -> str:
    """The reference environment's unescaping of page text: escapes such as `\\n` and `\\t` become the
    characters they name (so a literal `\\n` breaks the paragraph there), as UTF-8 bytes read back.

    Where the reference raises (`\\u00e9` in UTF-8 text, `C:\\Users`, a lone backslash at the end),
    the text stays as written: the notebook stops there, and no other reading is more faithful.
    """
    try:
        with warnings.catch_warnings():  # an unknown escape (`\\q`) stays as written, with a warning
            warnings.simplefilter("ignore", DeprecationWarning)
            return text.encode().decode("unicode-escape").encode("latin1").decode("utf-8")
    except UnicodeError:
        return text


def page_sentences(page: str) -> list[str]:
    """The reference environment's sentences of a page: each line split on ". ", and a period put back.

    So `No. 2` splits in two, and a piece that already ended with a period gets a second one.
    """
    pieces = []
    for paragraph in page.split("\n"):
        if paragraph.strip():
            pieces += paragraph.strip().split(". ")
    return [piece.strip() + "." for piece in pieces if piece.strip()]


def reference_page(text: str) -> str:
    """A passage's text as the reference environment keeps a page: each line a paragraph, stripped,
    dropped when it has two words or fewer (counted by single spaces), unescaped (`clean_str`), and
    ended by a line break of its own."""
    page = ""
    for line in text.split("\n"):
        paragraph = line.strip()
        if len(paragraph.split(" ")) > 2:
            page += clean_str(paragraph) + "\n"
    return page


class ReferenceEnv:
    """The reference's Wikipedia environment over `pages` (title -> page text or sentences, their
    `Pages`, or a passage store), with its HotpotQA wrapper. Every passage becomes page text by
    `page_text`, and a page as the reference keeps one by `reference_page`.

    Which page a search opens is decided as in `PassageEnv` (the title, ignoring case and white
    space; the reference asked Wikipedia's search); what it shows, and every other observation,
    is the reference's string. With a `gold` answer, the finishing observation carries the
    wrapper's reward (exact match, 0 or 1); without one it is the bare environment's, 0.
    It answers the notebook's four verbs and no others: a verb of the user's needs the tolerant loop.
    """

    verbs = PASSAGE_VERBS
    style = "react"
    # Whether a step after a finish is carried out, as WikiEnv's own `step` does (its check for a finished episode
    # is commented out): LATS's repository steps one environment for a whole search, so a branch after another's
    # finish searches on, and the finish's answer stays. The notebooks' loops stop at a finish, and see neither.
    goes_on = False

    def __init__(
        self, pages: "Mapping[str, str] | Pages | PassageStore", n_first: int = N_FIRST, gold: str | None = None
    ) -> None:
        if n_first < 1:
            raise ValueError(f"n_first must be at least 1, not {n_first}")
        self.n_first, self.gold = n_first, gold
        self.pages = Pages(pages) if isinstance(pages, Mapping) else pages
        self.reset()

    @property
    def titles(self) -> list[str] | None:
        """Every page title, in the collection's order (None for a store)."""
        return self.pages.titles

    def fresh(self, gold: str | None = None) -> "ReferenceEnv":
        """A new environment over the same pages, sharing their index, for a question with `gold`."""
        return ReferenceEnv(self.pages, self.n_first, gold)

    def reset(self) -> None:
        """Close the page and forget the answer, ready for a new episode."""
        self.page: str | None = None
        self.answer: str | None = None
        self.obs = ""
        self.steps = 0
        self._keyword: str | None = None
        self._found: list[str] = []
        self._count = 0

    @staticmethod
    def read(action: str) -> Action | None:
        """The action as the reference reads it: `verb[...]` exactly, after stripping, or None."""
        text = action.strip()
        for verb in READ_ORDER:
            if text.startswith(f"{verb}[") and text.endswith("]"):
                return Action(verb, text[len(verb) + 1 : -1])
        return None

    def step(self, action: str) -> tuple[str, bool]:
        """Carry out one action text, as the model's first letter lower-cased; (observation, done)."""
        if self.answer is not None and not self.goes_on:  # finished: nothing changes, and the step is not counted
            return self.obs, True
        parsed = self.read(action)
        done = False
        if parsed is None:
            self.obs = f"Invalid action: {action.strip()}"
        elif parsed.name == "search":
            self._search(parsed.arg)
        elif parsed.name == "lookup":
            self._lookup(parsed.arg)
        elif parsed.name == "finish":
            self.answer, done = parsed.arg, True
            self.obs = f"Episode finished, reward = {self.reward}\n"
        else:
            self.obs = "Nice thought."
        self.steps += 1
        return self.obs, done

    @property
    def reward(self) -> int:
        """The wrapper's reward: 1 when the answer matches the gold answer after normalisation, else 0."""
        if self.answer is None or self.gold is None:
            return 0
        return int(normalize_answer(self.gold) == normalize_answer(self.answer))

    def _search(self, entity: str) -> None:
        passage = self.pages.passage(entity)
        if passage is None:  # the open page and the lookup stay as they were
            similar = [clean_str(title) for title in self.pages.similar(entity)]  # as it cleans Wikipedia's titles
            self.obs = f"{NOT_FOUND}{entity}. Similar: {similar}."
            return
        self.page = page = reference_page(page_text(passage))
        self.obs = " ".join(page_sentences(page)[: self.n_first])
        self._keyword, self._found, self._count = None, [], 0

    def _lookup(self, keyword: str) -> None:
        if self._keyword != keyword:  # a new keyword starts over
            self._keyword, self._count = keyword, 0
            sentences = [] if self.page is None else page_sentences(self.page)
            self._found = [s for s in sentences if keyword.lower() in s.lower()]
        if self._count >= len(self._found):
            self.obs = "No more results.\n"
            return
        self.obs = f"(Result {self._count + 1} / {len(self._found)}) {self._found[self._count]}"
        self._count += 1
