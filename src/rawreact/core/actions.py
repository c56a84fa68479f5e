"""Action sets and the tolerant parser that reads actions out of model text.

An environment declares its actions as a `Verbs` set (core/verbs.py); the parser reads only the
verbs of the set it is given. `PASSAGE_VERBS` is the passage environment's set, the default.
Every accepted form is listed, with an example, in docs/parser.md; tests/test_actions.py checks
each row of that table.
"""

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from rawreact.core.errors import EnvironmentSetupError
from rawreact.core.verbs import NOT_FOUND, Verb, verb_of  # noqa: F401 (NOT_FOUND: the search verb's miss)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MARKUP = re.compile(r"[*_`]")
_ACTION_PREFIX = re.compile(r"^\s*(?:action\s*\d*\s*:\s*)+", re.IGNORECASE)
_ACTION_LINE = re.compile(r"^[\s*_`>]*action\s*\d*[\s*_`]*:", re.IGNORECASE)
_THOUGHT_PREFIX = re.compile(r"^(?:\s*thought\s*\d*\s*:)+\s*", re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}


@dataclass(frozen=True)
class Action:
    """One parsed action: `name` is a verb's name, `arg` its argument (the text between the brackets)."""

    name: str
    arg: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"an action's name is a verb's name, not {self.name!r}")


class Verbs:
    """An environment's actions, in the order its prompt and grammar list them; read-only.

    `plus(...)` is this set with more verbs (Verb declarations, or functions: `verbs.verb_of`); a
    declaration that cannot work (two verbs of one name, a verb shadowing finish) is an
    EnvironmentSetupError before any model loads.
    """

    def __init__(self, verbs: Iterable[Verb]) -> None:
        self.all: tuple[Verb, ...] = tuple(verbs)
        self._by: dict[str, Verb] = {}
        for verb in self.all:
            if verb.name in self._by:
                raise EnvironmentSetupError(f"two verbs named {verb.shown or verb.name!r}; give each verb its own name")
            self._by[verb.name] = verb
        lines = [v for v in self.all if v.arg in ("prefix", "command")]
        bracketed = [v for v in self.all if v.arg in ("bracket", "none")]
        if lines and bracketed:  # a command verb reads any line, `Finish[...]` included: no episode could end
            raise EnvironmentSetupError(
                f"verbs {lines[0].shown or lines[0].name!r} and {bracketed[0].shown!r}: one set writes its actions "
                "either as `Name[...]` or as command lines (with `name: ...` for a thought), not both"
            )

    def __iter__(self) -> Iterator[Verb]:
        return iter(self.all)

    def __len__(self) -> int:
        return len(self.all)

    def __contains__(self, name: object) -> bool:
        return name in self._by

    def __getitem__(self, name: str) -> Verb:
        return self._by[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Verbs) and self.all == other.all

    def __hash__(self) -> int:
        return hash(self.all)

    def __repr__(self) -> str:
        return f"Verbs({', '.join(v.shown or v.name for v in self.all)})"

    def get(self, name: str) -> Verb | None:
        """The verb of that name, or None."""
        return self._by.get(name)

    @property
    def names(self) -> list[str]:
        """The verbs' names, in order."""
        return list(self._by)

    def plus(self, *extra: "Verb | Callable[..., object]") -> "Verbs":
        """This set with `extra` verbs after its own: declarations, or functions made verbs by `verb_of`."""
        added = [verb_of(v) for v in extra]
        for verb in added:
            if verb.name == "finish" and "finish" in self:
                raise EnvironmentSetupError(
                    f"verb {verb.shown!r} shadows finish, which gives the answer and ends the episode; name yours "
                    "otherwise"
                )
            if verb.name in self:
                raise EnvironmentSetupError(
                    f"verb {verb.shown!r} is already an action of this environment "
                    f"({self[verb.name].shown or verb.name}); name yours otherwise"
                )
        return Verbs(self.all + tuple(added))

    @property
    def commands(self) -> bool:
        """Whether actions are command lines (a game's `open the chest`), rather than `Name[...]`."""
        return any(v.arg in ("prefix", "command") for v in self.all)

    def format(self, action: Action) -> str:
        """The canonical prompt form of an action, such as `Search[Milan]`."""
        verb = self.get(action.name)
        if verb is None:
            raise ValueError(f"unknown action {action.name!r}; the actions are {', '.join(self.names)}")
        return verb.form(action.arg)

    def verb(self, head: str) -> str | None:
        """The bracketed verb named by the text before `[`, once markup and `Action i:` prefixes are gone."""
        head = _ACTION_PREFIX.sub("", _MARKUP.sub("", head)).strip().lower()
        verb = self._by.get(head)
        return head if verb is not None and verb.arg in ("bracket", "none") else None

    def bare(self, line: str) -> str | None:
        """The verb without an argument that a line names alone (`Inventory`, `Action 2: Inventory.`), or None."""
        head = _ACTION_PREFIX.sub("", _MARKUP.sub("", line)).strip().rstrip(".").strip().lower()
        verb = self._by.get(head)
        return head if verb is not None and verb.arg == "none" else None


# The passage environment's actions: the reference's four, in the prompts' casing and order.
PASSAGE_VERBS = Verbs(
    [
        Verb(
            "search",
            "Search",
            description="opens the passage titled entity and shows its first sentences. If no passage has that "
            "title, it lists similar titles to search instead.",
            parameter="entity",
            evidence=True,
            opens=True,
        ),
        Verb(
            "lookup",
            "Lookup",
            description="shows the next sentence of the open passage that contains keyword.",
            parameter="keyword",
            evidence=True,
            moves_on=True,
        ),
        Verb("think", "Think", description="notes a thought; nothing else happens.", parameter="thought", tool=False),
        Verb("finish", "Finish", description="gives the answer and ends the task.", parameter="answer"),
    ]
)
# The passage set as names -> the casing the prompts use (rawreact's public name since its first release).
VERBS: dict[str, str] = {verb.name: verb.shown for verb in PASSAGE_VERBS}


def format_action(action: Action, verbs: Verbs = PASSAGE_VERBS) -> str:
    """The canonical prompt form of an action, such as `Search[Milan]`."""
    return verbs.format(action)


def _argument(rest: str, truncated: bool) -> str | None:
    """The argument after `[`: up to the matching `]`, or the rest of an unclosed line."""
    depth = 0
    for pos, char in enumerate(rest):
        if char == "[":
            depth += 1
        elif char == "]":
            if depth == 0:
                return _unquote(rest[:pos].strip())
            depth -= 1
    # Unclosed: the rest of the line is the argument, unless the token limit cut this very line,
    # in which case the argument may be half written and must not be executed. An argument that
    # leaves a bracket of its own open (`Search[[`) has no canonical form that reads back the
    # same, so it is no action.
    if truncated or depth:
        return None
    return _unquote(rest.strip())


def _unquote(arg: str) -> str:
    """Remove pairs of quotes around the argument, so that its canonical form reads back the same."""
    while len(arg) >= 2 and _QUOTES.get(arg[0]) == arg[-1]:
        arg = arg[1:-1].strip()
    return arg


def _bare_prefix(line: str) -> bool:
    """Whether the line is an `Action i:` prefix with nothing after it."""
    return _ACTION_LINE.match(line) is not None and not action_text(_MARKUP.sub("", line))


def parse_action(text: str, *, truncated: bool = False, verbs: Verbs = PASSAGE_VERBS) -> Action | None:
    """Read the action on the first non-blank line of `text`, or None when there is none.

    `truncated` says the text was cut by the token limit right after this line, so an unclosed
    bracket there is a half-written argument rather than a finished one. Only the verbs of
    `verbs` are read; a set of command lines (a game's) reads the line itself (`parse_command`).
    """
    if verbs.commands:
        return parse_command(text, verbs, truncated=truncated)
    lines = _LINE_BREAK.split(text.lstrip())
    if len(lines) > 1 and _bare_prefix(lines[0]):  # `Action 3:` alone, the action on a later line
        lines = _LINE_BREAK.split("\n".join(lines[1:]).lstrip())
    line = lines[0]
    bracket = line.find("[")
    if bracket < 0:
        bare = verbs.bare(line)
        return None if bare is None else Action(bare, "")
    verb = verbs.verb(line[:bracket])
    if verb is None:
        return None
    arg = _argument(line[bracket + 1 :], truncated and len(lines) == 1)
    return None if arg is None else Action(verb, arg)


_COMMAND_PROMPT = re.compile(r"^[\s>]*")


def parse_command(text: str, verbs: Verbs, *, truncated: bool = False) -> Action | None:
    """Read a command line (ALFWorld's `> go to cabinet 1`) from the first non-blank line of `text`.

    `name: text` is that prefix verb (`think: ...`); any other line is the `command` verb's argument,
    white space collapsed. A line the token limit cut is no command: it may be half written.
    """
    lines = _LINE_BREAK.split(text.strip())
    line = " ".join(_COMMAND_PROMPT.sub("", lines[0]).split())
    if not line or (truncated and len(lines) == 1):
        return None
    head, colon, rest = line.partition(":")
    verb = verbs.get(head.strip().lower())
    if colon and verb is not None and verb.arg == "prefix":
        return Action(verb.name, rest.strip())
    return Action("command", line) if "command" in verbs else None


def _is_action_line(line: str, verbs: Verbs) -> bool:
    if _ACTION_LINE.match(line):
        return True
    bracket = line.find("[")
    return (bracket >= 0 and verbs.verb(line[:bracket]) is not None) or verbs.bare(line) is not None


def _clean_thought(lines: list[str]) -> str:
    return _THOUGHT_PREFIX.sub("", " ".join(" ".join(lines).split()))


def split_step(completion: str, verbs: Verbs = PASSAGE_VERBS) -> tuple[str, str | None, bool]:
    """Split a completion that followed `Thought i:` into (thought, action line, is last line).

    The action line is the first line with an `Action i:` prefix or a bare `Verb[...]` (or, when
    that prefix stands alone, the next line with text); the thought is everything before it on one
    line. Without an action line, the thought is the first line, as in the reference
    implementation, and the action line is None.
    """
    lines = _LINE_BREAK.split(completion.strip())
    for index, line in enumerate(lines):
        if _is_action_line(line, verbs):
            thought = _clean_thought(lines[:index])
            if _bare_prefix(line):  # `Action 3:` alone: the action is on the next line that has text
                index = next((k for k in range(index + 1, len(lines)) if lines[k].strip()), index)
            return thought, lines[index], index == len(lines) - 1
    return _clean_thought(lines[:1]), None, False


def parse_step(
    completion: str, i: int | None = None, *, truncated: bool = False, verbs: Verbs = PASSAGE_VERBS
) -> tuple[str, Action | None]:
    """Read (thought, action) from a completion that followed `Thought i:`.

    Any step number is accepted on the action line, so `i` is informational; only the first
    action counts, and everything after it (invented observations, further steps) is ignored.
    """
    thought, line, last = split_step(completion, verbs)
    if line is None:
        return thought, None
    return thought, parse_action(line, truncated=truncated and last, verbs=verbs)


def action_text(line: str) -> str:
    """An action line without its `Action i:` prefix, for echoing an invalid action."""
    return _ACTION_PREFIX.sub("", line).strip()
