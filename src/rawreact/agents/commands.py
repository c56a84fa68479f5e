"""The commands grammar: at each step of a game, the action line may only be a command the game admits
now, or a thought. This is where a grammar helps a small model most: it can never write a command the
game would reject. The template is prompts/grammars/commands.gbnf.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rawreact.agents.grammar import Template, _literal, _read
from rawreact.core.actions import Verbs
from rawreact.core.errors import GrammarError
from rawreact.core.resources import resource
from rawreact.core.text import one_line
from rawreact.environments.game import GAME_VERBS

_SHIPPED = "prompts/grammars/commands.gbnf"


@dataclass(frozen=True)
class CommandGrammar:
    """The admissible commands of each step as a grammar; `thoughts` lets a line be `think: ...` too."""

    template: Template
    mode: str = "commands"
    titles: bool = False

    @property
    def name(self) -> str:
        """The mode as the CLI spells it, with the user's template file if there is one."""
        return self.mode if self.template.source == _SHIPPED else f"{self.mode} ({self.template.source})"

    @property
    def sha256(self) -> str:
        """A hash of the mode and the template's text."""
        return hashlib.sha256(f"{self.mode}\0{self.template.text}".encode("utf-8", "surrogatepass")).hexdigest()

    def for_commands(self, commands: Iterable[str], thoughts: bool = True, verbs: Verbs = GAME_VERBS) -> str:
        """The GBNF of one step's action line: one of `commands`, or (with `thoughts`) a line of each of the
        environment's prefix verbs (`think: ...`)."""
        alternatives = sorted({one_line(c) for c in commands if one_line(c)})
        if not alternatives and not thoughts:  # a game with nothing to do still lets the model write a line
            alternatives = ["look"]
        literals = [_literal(c) for c in alternatives]
        prefixes = [f"{_literal(verb.shown + ': ')} thought" for verb in verbs if verb.arg == "prefix"]
        thought = "".join(f" | {p}" if literals or k else p for k, p in enumerate(prefixes)) if thoughts else ""
        return self.template.fill(commands=" | ".join(literals), thought=thought)


def load_commands_grammar(path: str | None = None) -> CommandGrammar:
    """The commands grammar (a user's template file in its layout instead, with `path`), validated."""
    from rawreact.models.gbnf import check_grammar

    template = _read(Path(path) if path else resource("prompts", "grammars/commands.gbnf"), str(path or _SHIPPED))
    grammar = CommandGrammar(template)
    for thoughts in (True, False):
        check_grammar(grammar.for_commands(["go east", 'say "hi"'], thoughts), source=template.source)
    if "$" in grammar.for_commands(["x"]):
        raise GrammarError(f"{template.source}: a $ is left after filling in $commands and $thought; write $$")
    return grammar
