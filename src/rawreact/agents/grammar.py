"""GBNF grammars that make an invalid action line impossible, built from data-file templates.

The templates live in `prompts/grammars/`: `step.gbnf` constrains the whole step that follows
`Thought i:` (one call), `action.gbnf` the action alone that follows `Action i:` (the second call
of a two-call step, and the fallback call). Both include `rules.gbnf`, whose action alternatives
come from the environment's declared verbs (`verbs.Verb`), which the parser reads too, so grammar and
parser cannot disagree.
"""

import hashlib
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rawreact.config.choices import MODES
from rawreact.core.actions import PASSAGE_VERBS, Action, Verbs, parse_action
from rawreact.core.errors import GrammarError
from rawreact.core.files import read_whole
from rawreact.core.resources import resource
from rawreact.core.text import one_line

_SHIPPED = "prompts/grammars"


@dataclass(frozen=True)
class Template:
    """The text of a grammar template file and where it came from."""

    text: str
    source: str

    def fill(self, **values: str) -> str:
        """Strict `$name` substitution: an unknown name or a stray `$` is an error naming the line."""
        try:
            return string.Template(self.text).substitute(values)
        except KeyError as error:
            name = error.args[0]
            raise GrammarError(
                f"{self.source} line {_line_of(self.text, '$' + name)}: unknown template variable ${name}; "
                f"the variables are {', '.join('$' + v for v in values)} (write $$ for a literal $)"
            ) from None
        except ValueError:
            bad = re.search(r"\$(?![$\w{])", self.text)
            line = _line_of(self.text, bad.group(0)) if bad else "?"
            raise GrammarError(f"{self.source} line {line}: a lone $; write $$ for a literal $") from None


@dataclass(frozen=True)
class Grammar:
    """How actions are constrained.

    `mode` is "step" (one call writes thought and action under `step`) or "action" (a free
    thought, then a call under `action`); `titles` restricts Search arguments to the titles of
    the environment's passages. Templates use `$i` (the step number) and `$rules` (the action
    rules, rules.gbnf filled in).
    """

    mode: str
    step: Template
    action: Template
    rules: Template
    titles: bool = False

    @property
    def name(self) -> str:
        """The mode as the CLI spells it, with the user's template file if there is one."""
        name = "titles" if self.titles else self.mode
        user = [t.source for t in (self.step, self.action) if not t.source.startswith(_SHIPPED)]
        return f"{name} ({user[0]})" if user else name

    @property
    def sha256(self) -> str:
        """A hash of the mode and the templates' text: what decides the grammars this run applies."""
        parts = [self.mode, str(self.titles), self.step.text, self.action.text, self.rules.text]
        return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()

    def for_step(self, i: int, titles: Iterable[str] = (), verbs: Verbs = PASSAGE_VERBS) -> str:
        """The GBNF for the completion after `Thought i:`, over the environment's `verbs`."""
        return self._render(self.step, i, titles, verbs)

    def for_action(self, i: int, titles: Iterable[str] = (), verbs: Verbs = PASSAGE_VERBS) -> str:
        """The GBNF for the completion after `Action i:`, over the environment's `verbs`."""
        return self._render(self.action, i, titles, verbs)

    def _render(self, template: Template, i: int, titles: Iterable[str], verbs: Verbs) -> str:
        searchable = _searchable(titles, verbs) if self.titles else []
        rules = self.rules.fill(actions=_actions(verbs, bool(searchable)))
        if searchable:
            rules += "\ntitle ::= " + " | ".join(_literal(t) for t in searchable) + "\n"
        return template.fill(i=str(i), rules=rules)


def _searchable(titles: Iterable[str], verbs: Verbs) -> list[str]:
    """The titles a search (the verb that opens a passage) can carry unchanged through the parser, in
    order, without repeats."""
    opens = [verb for verb in verbs if verb.opens][:1]
    seen: dict[str, None] = {}
    for verb in opens:
        for title in titles:
            title = one_line(title)
            action = Action(verb.name, title)
            if title and parse_action(verbs.format(action), verbs=verbs) == action:
                seen.setdefault(title)
    return list(seen)


def _actions(verbs: Verbs, titles: bool) -> str:
    """The alternatives of the `action` rule: every verb, in the prompts' casing, with its argument (a
    title for the verb that opens passages, under `titles`; none for a verb without one)."""
    alternatives = []
    for verb in verbs:
        if verb.arg == "none":
            alternatives.append(f'"{verb.shown}[]"')
        else:
            alternatives.append(f'"{verb.shown}[" {"title" if titles and verb.opens else "arg"} "]"')
    return " | ".join(alternatives)


def _literal(text: str) -> str:
    """A GBNF string literal for `text`."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else _escape(c) for c in escaped) + '"'


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _line_of(text: str, needle: str) -> int:
    return text[: max(text.find(needle), 0)].count("\n") + 1


def _read(path: Path, source: str) -> Template:
    try:
        return Template(read_whole(path).decode("utf-8-sig"), source)
    except OSError as error:
        raise GrammarError(f"{path}: cannot read the grammar file: {error.strerror}") from None
    except UnicodeDecodeError:
        raise GrammarError(f"{path}: not UTF-8 text; save the grammar file as UTF-8") from None


def load_grammar(mode: str = "step", path: str | Path | None = None) -> Grammar:
    """The grammar of a mode (see MODES), validated; `path` replaces the template of that mode.

    A user's template file may use `$i` and `$rules`, like the shipped ones; it replaces
    `step.gbnf` in the "step" and "titles" modes and `action.gbnf` in the "action" mode.
    """
    if mode not in MODES:
        raise GrammarError(f"unknown grammar mode {mode!r}; the modes are {', '.join(MODES)}")
    if mode == "commands":
        raise GrammarError("the commands grammar is a game's: load it with agents.commands.load_commands_grammar")
    which = "action" if mode == "action" else "step"
    templates = {
        name: _read(resource("prompts", f"grammars/{name}.gbnf"), f"{_SHIPPED}/{name}.gbnf")
        for name in ("step", "action", "rules")
    }
    if path is not None:
        templates[which] = _read(Path(path), str(path))
    grammar = Grammar(which, **templates, titles=mode == "titles")
    validate(grammar)
    return grammar


def validate(grammar: Grammar, verbs: Verbs = PASSAGE_VERBS) -> None:
    """Render both templates over `verbs` and have llama.cpp parse them; a problem is a GrammarError."""
    from rawreact.models.gbnf import check_grammar

    if verbs.commands:
        raise GrammarError(
            "the step and action grammars write `Name[...]` actions, and this environment's actions are command "
            "lines; a game's grammar is its admissible commands (--grammar commands)"
        )
    for template, render in ((grammar.step, grammar.for_step), (grammar.action, grammar.for_action)):
        check_grammar(render(1, ["A title"], verbs), source=template.source)
