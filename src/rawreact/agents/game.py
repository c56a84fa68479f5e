"""The game loop: ALFWorld's, as the reference repository's `alfworld.ipynb` drives it, over any
environment of command lines (`GameEnv`, a TextWorld game).

The prompt is the few-shot text, then `Task: ` and the game's opening, then `>`; each call continues
it with one line and stops at its line break; the line is read as a command or `think: ...`, and
` {action}\\n{observation}\\n>` is appended. ReAct and Act differ by their prompts: ReAct's exemplars
think, Act's do not (with the commands grammar, Act's lines can only be commands). The episode ends
when the game is won or lost, at the step limit (49 commands: the notebook's `range(1, 50)`), or by a
guardrail. A command the game did not admit at that step is still sent, as the notebook sends it, and
counted: its step's error is "inadmissible".
"""

import time
from collections.abc import Callable

from rawreact.agents.commands import CommandGrammar
from rawreact.agents.guardrails import Guard
from rawreact.agents.loop import run_steps
from rawreact.agents.prompts import Prompt
from rawreact.agents.record import Step, Trajectory
from rawreact.config.choices import MAX_TOKENS
from rawreact.core.actions import parse_command
from rawreact.core.errors import GrammarError
from rawreact.core.text import one_line
from rawreact.environments.game import commands_unknown
from rawreact.models.base import Model, keep_prefix

GAME_STEPS = 49  # alfworld.ipynb: `for i in range(1, 50)`
NOTHING = "Nothing happens."  # what a line with no command is answered, as ALFWorld answers one


def play(
    env,
    model: Model,
    prompt: Prompt | str,
    *,
    max_steps: int = GAME_STEPS,
    max_tokens: int = MAX_TOKENS,
    grammar: CommandGrammar | None = None,
    thoughts: bool = True,
    on_step: Callable[[Step], None] | None = None,
    repeats: str = "off",
    budget: int | None = None,
    header: str = "Task",
    preamble: str = "",
) -> Trajectory:
    """Play one game to its end or the step limit; the trajectory records every line, and the game's reward.

    `grammar` (a `CommandGrammar`) limits each line to the commands the game admits at that step, and to
    thoughts unless `thoughts` is False (Act).
    """
    if grammar is not None and not getattr(model, "supports_grammar", True):
        raise GrammarError(f"model {model.name} cannot apply a grammar; run it without one")
    text = prompt if isinstance(prompt, str) else prompt.text
    keep_prefix(model, text)
    env.reset()
    traj = Trajectory(env.opening, text, header=header, preamble=preamble, loop="game", verbs=env.verbs)

    def over(traj: Trajectory) -> bool:
        if env.done:
            traj.ended = "won" if env.won else "lost"
        return env.done

    run_steps(
        traj,
        env,
        lambda i, transcript: _step(i, transcript, env, model, grammar, thoughts, max_tokens),
        max_steps=max_steps,
        max_tokens=max_tokens,
        guard=Guard(repeats, budget, env.verbs),
        on_step=on_step,
        render=lambda step: f" {step.action_text}\n{step.observation}{step.note}\n>",
        over=over,
    )
    traj.reward = env.reward
    return traj


def admitted(commands) -> set[str]:
    """The commands a game admits, as a line is compared with them: lower case, white space collapsed."""
    return {" ".join(c.lower().split()) for c in commands}


def _step(i: int, transcript: str, env, model: Model, grammar, thoughts: bool, max_tokens: int) -> Step:
    """One line of the game: a call, the command or thought it wrote, and what the game said."""
    start = time.perf_counter()
    known = getattr(env, "admissible", None)  # None: a game that does not say what it admits
    if grammar is not None and known is None:
        raise GrammarError(commands_unknown(getattr(env, "path", "this game")))
    admissible = admitted(known or ())
    line_grammar = None if grammar is None else grammar.for_commands(known, thoughts, env.verbs)
    call = model.complete(transcript, stop=["\n"], max_tokens=max_tokens, grammar=line_grammar)
    truncated = call.finish_reason == "length"
    action = parse_command(call.text, env.verbs, truncated=truncated)
    if action is None:
        shown = one_line(call.text.lstrip(" >"))
        error = "truncated" if truncated and shown else "no action"
        return Step(i, None, None, shown, NOTHING, [call], error, time.perf_counter() - start)
    observation, _ = env.step(action)
    inadmissible = known is not None and env.verbs[action.name].whole_line and action.arg.lower() not in admissible
    error = "inadmissible" if inadmissible else None
    return Step(i, None, action, env.verbs.format(action), observation, [call], error, time.perf_counter() - start)
