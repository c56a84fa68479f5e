"""Verbs as data: what an environment declares of each action it answers.

A `Verb` names an action (its lower-case `name`, and the casing the prompt writes, `shown`), the
shape of its argument, and one line the model reads of it. Everything that knows the actions (the
tolerant parser, the GBNF grammars, the tools schemas, the prompt's list of actions, the guardrails
and the records) reads these declarations, so a verb added here is a verb everywhere.

`verb_of(function)` makes a verb of a Python function: its name, its docstring's first line, and
its one `str` argument (or none) become the verb the model sees, as dspy's `ReAct(tools=[...])` does.
"""

import inspect
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from rawreact.core.errors import EnvironmentSetupError

# The shapes of an argument: `Search[Milan]` (bracketed text), `Inventory[]` (nothing), `think: ...` (text
# after the name and a colon, as ALFWorld's thoughts), and a whole command line (`open the chest`).
ARGS = ("bracket", "none", "prefix", "command")
NOT_FOUND = "Could not find "  # how a search that opened no passage begins its observation
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


@dataclass(frozen=True)
class Verb:
    """One action an environment answers.

    `evidence`: its observations are text an answer can be found in (the `supported` check reads them).
    `moves_on`: the same action shows the next result (a lookup), so it repeats only when it also sees the
    same observation. `opens`: it opens a passage by title (a search): counted in `searches`, a hit unless
    its observation starts with `NOT_FOUND`, and restricted to the titles by `--grammar titles`. `tool`: it
    is a function of the tools method (a thought is a chat message's content instead). `run`, for a verb of
    the user's, is the function that answers it: its argument in, the observation out.
    """

    name: str
    shown: str
    arg: str = "bracket"
    description: str = ""
    parameter: str = "arg"
    evidence: bool = False
    moves_on: bool = False
    opens: bool = False
    tool: bool = True
    run: Callable[..., object] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        problem = verb_problem(self)
        if problem:
            raise EnvironmentSetupError(problem)

    @property
    def whole_line(self) -> bool:
        """Whether its argument is the whole line: a game's command, which the game may or may not admit."""
        return self.arg == "command"

    def form(self, arg: str) -> str:
        """The canonical prompt form of this verb with `arg`, such as `Search[Milan]` or `think: x`."""
        if self.arg == "prefix":
            return f"{self.shown}: {arg}"
        if self.arg == "command":
            return arg
        return f"{self.shown}[{arg if self.arg == 'bracket' else ''}]"

    def listed(self) -> str:
        """The verb as the prompt's list of actions shows it: `Calculate[expression] evaluates ...`."""
        forms = {"bracket": f"{self.shown}[{self.parameter}]", "none": f"{self.shown}[]"}
        forms |= {"prefix": f"{self.shown}: {self.parameter}", "command": self.parameter}
        return f"{forms[self.arg]} {self.description}".strip()


def verb_problem(verb: Verb) -> str | None:
    """What makes a declaration unusable (a name the parser or the grammar cannot hold), or None."""
    if verb.arg not in ARGS:
        return f"verb {verb.name!r}: its argument shape is {verb.arg!r}; the shapes are {', '.join(ARGS)}"
    if verb.arg == "command":
        return None if verb.name == "command" else f"verb {verb.name!r}: a command verb is named 'command'"
    if not _NAME.fullmatch(verb.shown) or verb.shown.lower() != verb.name:
        return (
            f"verb {verb.shown or verb.name!r}: a verb's name is letters and digits starting with a letter, and its "
            f"lower case is its name (the parser reads `Name[...]` and drops `_`, `*` and spaces as markdown); "
            f"name it {suggest(verb.shown or verb.name)!r}"
        )
    if "\n" in verb.description:
        return f"verb {verb.shown!r}: its description is one line, the one the prompt lists"
    return None


def suggest(name: str) -> str:
    """A name the parser can hold for `name`: `word_count` -> `WordCount`."""
    parts = re.findall(r"[A-Za-z0-9]+", name)
    shown = "".join(part[:1].upper() + part[1:] for part in parts).lstrip("0123456789")
    return shown or "Verb"


def verb_of(function: Callable[..., object]) -> Verb:
    """A verb of a Python function: `def calculate(expression: str) -> str` with a docstring is
    `Calculate[expression]`, described by the docstring's first line; a function without arguments
    is `Name[]`. The function's return value, as text, is the observation."""
    if isinstance(function, Verb):
        return function
    name = getattr(function, "__name__", "")
    if not callable(function) or not name or name == "<lambda>":
        raise EnvironmentSetupError(
            f"{function!r} is not a named function; a verb is a `def` with a docstring and one str argument (or none)"
        )
    doc = (inspect.getdoc(function) or "").strip()
    if not doc:
        raise EnvironmentSetupError(
            f"function {name}: give it a docstring; its first line is what the model reads of the verb"
        )
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        raise EnvironmentSetupError(f"function {name}: its signature cannot be read; wrap it in a def") from None
    needed = [p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    keyword = [p for p in needed if p.kind is p.KEYWORD_ONLY]
    if keyword:  # the verb's text is passed by position: a keyword-only argument would fail every call
        raise EnvironmentSetupError(
            f"function {name}: its argument {keyword[0].name} is keyword-only (after * in the def); a verb is called "
            "with its text by position, so make it a plain argument"
        )
    if len(needed) > 1:
        raise EnvironmentSetupError(
            f"function {name} needs {len(needed)} arguments ({', '.join(p.name for p in needed)}); a verb takes "
            "one str argument, the text between its brackets, or none"
        )
    if needed and needed[0].annotation not in (needed[0].empty, str, "str"):
        raise EnvironmentSetupError(
            f"function {name}: its argument {needed[0].name} is annotated {needed[0].annotation!r}; the model "
            "writes text, so a verb's argument is a str"
        )
    if not name.isascii():  # suggest() would drop its letters without a word: `café` would become `Caf`
        plain = suggest(unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode())
        raise EnvironmentSetupError(
            f"function {name}: a verb's name is ASCII letters and digits (the parser and the grammar read those); "
            f"rename it, or declare it as Verb({plain.lower()!r}, {plain!r}, run={name}, ...)"
        )
    shown = suggest(name) if not _NAME.fullmatch(name) else name[:1].upper() + name[1:]
    first = " ".join(doc.splitlines()[0].split())
    arg, parameter = ("bracket", needed[0].name) if needed else ("none", "arg")
    return Verb(shown.lower(), shown, arg, first, parameter, run=function)
