"""Reference mode: the reference notebook's `webthink` loop and its Wikipedia environment, byte for byte.

Given the same completions, every model call's prompt and stop sequences are the notebook's, every
observation is what its `WikiEnv` (inside `HotPotQAWrapper`) shows for the same page text, and the
answer is the text inside `finish[...]` exactly as written, scored by the same normalised EM and F1.
It keeps the tolerant loop's record (`Trajectory`, `Step`), so runs of both loops read, report and
compare alike. docs/reference.md lists every behaviour in which the two loops differ; each row is
replayed in both by tests/test_reference.py.
"""

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rawreact.actions import Action
from rawreact.env import NOT_FOUND, Pages
from rawreact.guardrails import Guard
from rawreact.loop import LOOPS, MAX_TOKENS, run_steps
from rawreact.metrics import normalize_answer
from rawreact.models.base import Model, keep_prefix
from rawreact.prompts import Prompt, load_prompt
from rawreact.record import Step, Trajectory

if TYPE_CHECKING:
    from rawreact.store import PassageStore

N_FIRST = LOOPS["reference"]  # sentences a search shows: the reference environment's first five
# The reference's verbs, in the order its environment tries them; each is exactly `verb[...]`.
VERBS = ("search", "lookup", "finish", "think")


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
    """

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
        for verb in VERBS:
            if text.startswith(f"{verb}[") and text.endswith("]"):
                return Action(verb, text[len(verb) + 1 : -1])
        return None

    def step(self, action: str) -> tuple[str, bool]:
        """Carry out one action text, as the model's first letter lower-cased; (observation, done)."""
        if self.answer is not None:  # finished: nothing changes, and the step is not counted
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


def reference_react(
    question: str,
    env: ReferenceEnv,
    model: Model,
    prompt: Prompt | str | None = None,
    *,
    max_steps: int = 7,
    max_tokens: int = MAX_TOKENS,
    on_step: Callable[[Step], None] | None = None,
    repeats: str = "off",
    budget: int | None = None,
    header: str = "Question",
    thoughts: bool = True,
) -> Trajectory:
    """Run one episode as the reference notebook's `webthink` does, and return its trajectory.

    The question is sent as given. Each step is one call on `transcript + "Thought i:"`, stopped
    at `\\nObservation i:`; its stripped text must split into exactly two parts on
    `\\nAction i: `, or the fallback call asks for the action alone after the first line. The
    action goes to the environment with its first letter lower-cased, and thought, action and
    observation go back into the transcript as written. An episode that does not finish is closed
    by `finish[]`, a step with no call that the record keeps and the model never sees.

    With `thoughts=False` it runs Act, which the notebook has no code for (the paper's Act prompt,
    `webact_simple6`, is `Action i: ...` and `Observation i: ...` steps): each step is one call on
    `transcript + "Action i:"`, stopped at `\\nObservation i:`; its stripped text is the action, sent
    and written back as `webthink` sends and writes an action, with no fallback call (there is no
    thought to fall back on), over the same environment.

    The guardrails `repeats` ("off" or "stop"; a note would change the notebook's observations)
    and `budget` end an episode early, and change no call before that.
    """
    if repeats == "note":
        raise ValueError("the reference loop shows the notebook's observations, so repeats=note cannot add to them")
    prompt = load_prompt() if prompt is None else prompt
    # The notebook's question line is its environment's first observation: "Question: ..." or, for FEVER, "Claim: ...".
    traj = Trajectory(question, prompt if isinstance(prompt, str) else prompt.text, loop="reference", header=header)
    keep_prefix(model, traj.prompt)

    def take(i: int, text: str) -> Step:
        return (_step if thoughts else _act_step)(i, text, env, model, max_tokens)

    run_steps(
        traj, env, take, max_steps=max_steps, max_tokens=max_tokens, guard=Guard(repeats, budget), on_step=on_step
    )
    if traj.ended == "finish":
        return traj
    observation, _ = env.step("finish[]")
    closing = Step(len(traj.steps) + 1, None, Action("finish", ""), "finish[]", observation, [])
    traj.steps.append(closing)
    traj.answer = env.answer or ""
    if on_step is not None:
        on_step(closing)
    return traj


def _step(i: int, text: str, env: ReferenceEnv, model: Model, max_tokens: int) -> Step:
    """One step of `webthink`: the call after `Thought i:`, and the fallback call when it does not split."""
    start = time.perf_counter()
    first = model.complete(text + f"Thought {i}:", stop=[f"\nObservation {i}:"], max_tokens=max_tokens)
    calls = [first]
    parts = first.text.strip().split(f"\nAction {i}: ")
    fallback = len(parts) != 2
    if fallback:
        thought = first.text.strip().split("\n")[0]
        retry = model.complete(text + f"Thought {i}: {thought}\nAction {i}:", stop=["\n"], max_tokens=max_tokens)
        calls.append(retry)
        action = retry.text.strip()
    else:
        thought, action = parts
    return _acted(i, thought, action, env, calls, start, fallback)


def _act_step(i: int, text: str, env: ReferenceEnv, model: Model, max_tokens: int) -> Step:
    """One Act step: the call after `Action i:`; its stripped text is the action, as webthink takes one."""
    start = time.perf_counter()
    call = model.complete(text + f"Action {i}:", stop=[f"\nObservation {i}:"], max_tokens=max_tokens)
    return _acted(i, None, call.text.strip(), env, [call], start, False)


def _acted(
    i: int, thought: str | None, action: str, env: ReferenceEnv, calls: list, start: float, fallback: bool
) -> Step:
    """The step of an action as webthink carries it out and writes it back."""
    # The notebook lower-cases the first letter (and stops with an IndexError on an empty action,
    # which here goes on as an invalid action).
    sent = action[:1].lower() + action[1:]
    observation = env.step(sent)[0].replace("\\n", "")  # the notebook drops escaped line breaks
    parsed = env.read(sent)
    error = None if parsed is not None else "invalid"
    return Step(i, thought, parsed, action, observation, calls, error, time.perf_counter() - start, fallback)
