"""The action set and the tolerant parser that reads actions out of model text.

Every accepted form is listed, with an example, in docs/parser.md; tests/test_actions.py checks
each row of that table.
"""

import re
from dataclasses import dataclass

# The one description of the action set: verb -> the casing the prompts use.
VERBS: dict[str, str] = {"search": "Search", "lookup": "Lookup", "think": "Think", "finish": "Finish"}

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MARKUP = re.compile(r"[*_`]")
_ACTION_PREFIX = re.compile(r"^\s*(?:action\s*\d*\s*:\s*)+", re.IGNORECASE)
_ACTION_LINE = re.compile(r"^[\s*_`>]*action\s*\d*[\s*_`]*:", re.IGNORECASE)
_THOUGHT_PREFIX = re.compile(r"^(?:\s*thought\s*\d*\s*:)+\s*", re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019"}


@dataclass(frozen=True)
class Action:
    """One parsed action: `name` is a key of VERBS, `arg` the text between the brackets."""

    name: str
    arg: str

    def __post_init__(self) -> None:
        if self.name not in VERBS:
            raise ValueError(f"unknown action {self.name!r}; the actions are {', '.join(VERBS)}")


def format_action(action: Action) -> str:
    """The canonical prompt form of an action, such as `Search[Milan]`."""
    return f"{VERBS[action.name]}[{action.arg}]"


def _verb(head: str) -> str | None:
    """The verb named by the text before `[`, once markup and `Action i:` prefixes are gone."""
    head = _ACTION_PREFIX.sub("", _MARKUP.sub("", head)).strip().lower()
    return head if head in VERBS else None


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


def parse_action(text: str, *, truncated: bool = False) -> Action | None:
    """Read the action on the first non-blank line of `text`, or None when there is none.

    `truncated` says the text was cut by the token limit right after this line, so an unclosed
    bracket there is a half-written argument rather than a finished one.
    """
    lines = _LINE_BREAK.split(text.lstrip())
    if len(lines) > 1 and _bare_prefix(lines[0]):  # `Action 3:` alone, the action on a later line
        lines = _LINE_BREAK.split("\n".join(lines[1:]).lstrip())
    line = lines[0]
    bracket = line.find("[")
    if bracket < 0:
        return None
    verb = _verb(line[:bracket])
    if verb is None:
        return None
    arg = _argument(line[bracket + 1 :], truncated and len(lines) == 1)
    return None if arg is None else Action(verb, arg)


def _is_action_line(line: str) -> bool:
    if _ACTION_LINE.match(line):
        return True
    bracket = line.find("[")
    return bracket >= 0 and _verb(line[:bracket]) is not None


def _clean_thought(lines: list[str]) -> str:
    return _THOUGHT_PREFIX.sub("", " ".join(" ".join(lines).split()))


def split_step(completion: str) -> tuple[str, str | None, bool]:
    """Split a completion that followed `Thought i:` into (thought, action line, is last line).

    The action line is the first line with an `Action i:` prefix or a bare `Verb[...]` (or, when
    that prefix stands alone, the next line with text); the thought is everything before it on one
    line. Without an action line, the thought is the first line, as in the reference
    implementation, and the action line is None.
    """
    lines = _LINE_BREAK.split(completion.strip())
    for index, line in enumerate(lines):
        if _is_action_line(line):
            thought = _clean_thought(lines[:index])
            if _bare_prefix(line):  # `Action 3:` alone: the action is on the next line that has text
                index = next((k for k in range(index + 1, len(lines)) if lines[k].strip()), index)
            return thought, lines[index], index == len(lines) - 1
    return _clean_thought(lines[:1]), None, False


def parse_step(completion: str, i: int | None = None, *, truncated: bool = False) -> tuple[str, Action | None]:
    """Read (thought, action) from a completion that followed `Thought i:`.

    Any step number is accepted on the action line, so `i` is informational; only the first
    action counts, and everything after it (invented observations, further steps) is ignored.
    """
    thought, line, last = split_step(completion)
    if line is None:
        return thought, None
    return thought, parse_action(line, truncated=truncated and last)


def action_text(line: str) -> str:
    """An action line without its `Action i:` prefix, for echoing an invalid action."""
    return _ACTION_PREFIX.sub("", line).strip()
