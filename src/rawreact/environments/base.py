"""The one environment interface: what every environment a loop drives answers.

`PassageEnv` (a passage collection), `ReferenceEnv` (the reference notebook's) and `GameEnv` (a
TextWorld game) are environments by shape; nothing inherits from `Environment`.
"""

from typing import Protocol, runtime_checkable

from rawreact.core.actions import Action, Verbs


@runtime_checkable
class Environment(Protocol):
    """An episode's world.

    `verbs` declares its actions (the parser, grammar, tools schemas and prompt read it); `style` is the
    transcript a loop writes for it: "react" (`Thought i:`, `Action i:`, `Observation i:` lines) or
    "commands" (ALFWorld's `> command` lines, each followed by what the game said). `reset()` starts the
    episode afresh; `step(action)` answers one action with (observation, done), and never raises on the
    model's input. `answer` is what a `finish` gave (None before), and `reward` the episode's reward where
    the environment knows one (a game's score; None for a question, scored against its gold answer).
    `fresh()` is a new environment on the same task, sharing what is read only.
    """

    verbs: Verbs
    style: str
    answer: str | None

    def reset(self) -> None: ...

    def step(self, action: Action) -> tuple[str, bool]: ...

    def fresh(self) -> "Environment": ...
