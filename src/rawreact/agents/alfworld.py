"""The reference game loop, byte for byte: `alfworld.ipynb`'s `alfworld_run`, over any environment of command
lines (`--loop reference` on games, which `--reference DIR` chooses).

Its rules, restated: the first prompt is the prompt (the notebook's frame around two exemplars) and the
environment's opening, then `\\n>`. Each of up to 49 calls continues the whole text, stops at a line
break and may write 100 tokens; its text, stripped of white space at both ends, is the action, whatever
it holds (empty, cut at the token limit, `> go north`, two spaces inside): it is sent to the environment
as it is, and echoed as it is. The observation loses a leading `You arrive at loc N. ` (the notebook's
`process_ob`); an action that starts with `think:` (in that case) is answered `OK.`, although the
environment was sent it too. ` {action}\\n{observation}\\n>` is appended. The episode ends when the
environment says it is done, and succeeds when it was won. No grammar, no guardrail, no rewriting: where
rawreact's own game loop (`game.play`) differs, docs/reference.md lists it.
"""

import time
from collections.abc import Callable

from rawreact.agents.game import GAME_STEPS, admitted
from rawreact.agents.prompts import Prompt
from rawreact.agents.record import Step, Trajectory
from rawreact.config.choices import MAX_TOKENS
from rawreact.core.actions import Action
from rawreact.core.errors import ContextLengthExceeded
from rawreact.environments.game import drop_banner
from rawreact.models.base import Completion, Model, keep_prefix

SEEN = "OK."
ARRIVED = "You arrive at loc "


def process_ob(observation: str) -> str:
    """The notebook's `process_ob`: an observation that starts `You arrive at loc N. ` loses that sentence."""
    if observation.startswith(ARRIVED):
        observation = observation[observation.find(". ") + 2 :]
    return observation


def line_verbs(verbs) -> tuple[object, str | None]:
    """The environment's verb of whole command lines, and what a thought line starts with (its verb of
    `name: ...` lines, as `think:`), or None: the notebook's loop sends lines, and answers thoughts itself."""
    command = next((v for v in verbs if v.whole_line), None)
    if command is None:
        raise ValueError("the reference game loop sends whole lines, and the environment declares no command verb")
    thought = next((v for v in verbs if v.arg == "prefix"), None)
    return command, None if thought is None else f"{thought.shown}:"


def send(env, line: str, command, thought: str | None) -> tuple[Action, bool, str, bool]:
    """One line sent as the notebook sends it (whole, as written) and what the loop makes of the reply: the
    action the line is recorded as, whether it is a thought, the observation (`process_ob`'s, or `OK.` after
    a thought) and whether the environment is done. The Reflexion code's loop, adapted from it, does the same."""
    observation, done = env.step(Action(command.name, line))
    if thought is not None and line.startswith(thought):
        return Action(env.verbs[thought[:-1].lower()].name, line[len(thought) :].strip()), True, SEEN, done
    return Action(command.name, line), False, process_ob(observation), done


def play_lines(
    env,
    model: Model,
    traj: Trajectory,
    take: Callable[[str], tuple[list[Completion], str]],
    *,
    max_steps: int,
    on_step: Callable[[Step], None] | None = None,
    errors: bool = True,
    gives_up: bool = False,
) -> Trajectory:
    """The loop of both reference game loops (the Reflexion code's is adapted from the notebook's), over a started
    environment and its trajectory: `take(transcript)` gives a step's calls and its line, which is sent whole
    (`send`) and recorded (with what went wrong, where `errors`). The episode ends when the environment is done
    ("won" or "lost"), when the line is the one before it again where the loop `gives_up` ("repeat"), at the
    step limit ("max_steps") or at the context window ("context")."""
    keep_prefix(model, traj.prompt)
    command, thought_mark = line_verbs(env.verbs)
    last = ""
    try:
        for i in range(1, max_steps + 1):
            start = time.perf_counter()
            calls, line = take(traj.transcript())
            action, thought, observation, done = send(env, line, command, thought_mark)  # no command is rewritten
            error = _error(env, line, thought, calls[-1].finish_reason) if errors else None
            traj.steps.append(Step(i, None, action, line, observation, calls, error, time.perf_counter() - start))
            if on_step is not None:
                on_step(traj.steps[-1])
            if done:
                traj.ended = "won" if getattr(env, "won", False) else "lost"
                break
            if gives_up and line == last:
                traj.ended = "repeat"
                break
            last = line
        else:
            traj.ended = "max_steps"
    except ContextLengthExceeded:
        traj.ended = "context"
    traj.reward = getattr(env, "reward", None)
    return traj


def alfworld_run(
    env,
    model: Model,
    prompt: Prompt | str,
    *,
    max_steps: int = GAME_STEPS,
    max_tokens: int = MAX_TOKENS,
    on_step: Callable[[Step], None] | None = None,
) -> Trajectory:
    """Play one episode as `alfworld_run` does; the trajectory's transcript is the text of its last call plus
    the last step, and `ended` is "won", "lost" (done, not won) or "max_steps"."""
    env = as_alfworld(env)
    env.reset()
    text = prompt if isinstance(prompt, str) else prompt.text
    traj = Trajectory(
        drop_banner(env.opening), text, header="", loop="game", verbs=env.verbs
    )  # its prompt ends in its cue

    def take(transcript: str) -> tuple[list[Completion], str]:  # one call; its text, stripped, is the line
        call = model.complete(transcript, stop=["\n"], max_tokens=max_tokens)
        return [call], call.text.strip()

    return play_lines(env, model, traj, take, max_steps=max_steps, on_step=on_step)


def as_alfworld(env):
    """The environment a reference game loop plays: a TextWorld game laid out as ALFWorld opens (its room, then
    `Your task is to: `), whichever layout it was made with (`GameEnv(path)` opens with its objective)."""
    if getattr(env, "layout", None) == "textworld" and hasattr(env, "laid_out"):
        return env.laid_out("alfworld")
    return env


def _error(env, line: str, thought: bool, finish_reason: str) -> str | None:
    """What a step's record says went wrong (it changes nothing that is sent): a line cut at the token limit,
    an empty line, or a command the environment does not admit, where it says what it admits."""
    if finish_reason == "length":
        return "truncated"
    if not line:
        return "no action"
    admissible = getattr(env, "admissible", None)
    if thought or admissible is None:
        return None
    return None if " ".join(line.lower().split()) in admitted(admissible) else "inadmissible"
