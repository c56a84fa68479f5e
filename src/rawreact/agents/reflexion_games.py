"""Reflexion over games as the Reflexion code's `alfworld_runs` plays them: `--method react-reflexion --loop
reference` on games, with its prompts from the user's checkout of that code (docs/reflexion.md).

Its rules, restated. A trial's prompt is the base prompt (its words before two exemplars, then the
exemplars); then, when reflections were written, a blank line, the memory's heading and the last three
of them, each as `Trial i:` (numbered from 0) and its text stripped, on lines of their own; then the task's
heading and the game's opening; then a line break, the history (`> action`, then what the game said) on
lines joined by line breaks, and `>`. Each call stops at a line break and writes up to 256 tokens, and is
made again at temperature 0.2, 0.4, ... (six tries in all) while its text stripped holds fewer than five
characters, giving "" after six. The action, stripped, is sent as written; an observation loses a
leading `You arrive at loc N. `; an action that starts `think:` is answered `OK.`. A trial ends when the
game says it is done (a success, as the code counts it), when an action is the one before it again (a
failure), or after 49 steps. A reflection on a failed trial is one call with no stop sequence and up to
256 tokens on: the instruction, the examples file whole, a blank line, and the trial's scenario (its log
after its last task heading, stripped: the opening, the history, its status and the trial's totals, as
the code's one environment), then, when earlier reflections were written, the heading of past plans and
the last three of them as `Trial #i: ...`, and `New plan:`. Its text is kept as written.
"""

from collections.abc import Callable
from functools import partial

from rawreact.agents.alfworld import as_alfworld, play_lines
from rawreact.agents.game import GAME_STEPS
from rawreact.agents.prompts import Prompt
from rawreact.agents.record import Trajectory
from rawreact.agents.reflexion import Reflection, ReflectPrompt, Trial
from rawreact.core.errors import ContextLengthExceeded, PromptError
from rawreact.environments.game import drop_banner
from rawreact.models.base import Completion, Model, keep_prefix

TOKENS = 256  # its completions' max_tokens, for the trial's calls and the reflection's
TRIES = 6  # a call made again, hotter, while its text holds fewer than SHORT characters
SHORT = 5
SHOWN = 3  # the reflections a trial is shown, and a reflection is shown of the earlier plans
LOOP = "alfworld_runs"  # a trajectory made by its loop: its transcript is laid out as its EnvironmentHistory
TASK = "\nHere is the task:\n"  # where the task's opening goes, after the memory
MEMORY = "\n\nYour memory for the task below:"
PLANS, NEW_PLAN = "\n\nPlans from past attempts:\n", "\n\nNew plan:"
PLACES = ("{FEW_SHOT_EXAMPLES}", "{scenario}")  # where its reflection query puts the examples and the trial


def check(prompt: ReflectPrompt) -> None:
    """Refuse a reflection prompt that is not the code's query (`generate_reflections.py#query`)."""
    missing = [place for place in PLACES if place not in prompt.instruction]
    if missing:
        raise PromptError(
            f"the reference loop reflects as the Reflexion code's alfworld_runs does, with its query: give "
            f"--reflect-instruction REFLEXION/alfworld_runs/generate_reflections.py#query and --reflect-prompt "
            f"REFLEXION/alfworld_runs/reflexion_few_shot_examples.txt ({prompt.source} has no {', '.join(missing)})"
        )


def memory_text(memory: list[str]) -> str:
    """The memory a trial is shown: the last SHOWN reflections, numbered from 0, each stripped."""
    shown = memory[-SHOWN:]
    return "" if not shown else MEMORY + "".join(f"\nTrial {i}:\n{text.strip()}" for i, text in enumerate(shown))


def play_trial(
    env,
    model: Model,
    prompt: Prompt | str,
    memory: list[str],
    *,
    seed: int = 0,
    on_step=None,
    max_steps: int = GAME_STEPS,
) -> Trajectory:
    """One trial as its `alfworld_run` plays it; `ended` is "won" or "lost" (done), "repeat" (the action written
    twice in a row: the code's trial gives up) or "max_steps"."""
    env.reset()
    text = prompt if isinstance(prompt, str) else prompt.text
    opening = drop_banner(env.opening)  # as its run_trial drops ALFWorld's banner
    traj = Trajectory(opening, text, header=TASK, preamble=memory_text(memory), loop=LOOP, verbs=env.verbs)
    take = partial(_tries, model, seed=seed)
    return play_lines(env, model, traj, take, max_steps=max_steps, on_step=on_step, errors=False, gives_up=True)


def _tries(model: Model, text: str, seed: int) -> tuple[list[Completion], str]:
    """Its `llm`: a greedy call, then calls at 0.2, 0.4, ... while the text stripped is shorter than SHORT; the
    calls, and the line (the last text stripped, or "" when every try was short)."""
    calls = [model.complete(text, stop=["\n"], max_tokens=TOKENS)]
    for k in range(1, TRIES):
        if len(calls[-1].text.strip()) >= SHORT:
            break
        # its `cur_try * 0.2`, as the float it is: the 4th try sends 0.6000000000000001
        calls += model.sample(text, n=1, temperature=k * 0.2, seed=seed, stop=["\n"], max_tokens=TOKENS)
    line = calls[-1].text.strip()
    return calls, line if len(line) >= SHORT else ""


def scenario(traj: Trajectory) -> str:
    """The trial as its reflection is shown it: the log it writes of the trial, as the only environment of its
    run, after the last task heading, stripped."""
    status = "OK" if traj.ended in ("won", "lost") else "FAIL"
    won = int(status == "OK")
    totals = (
        f"\n-----\nSUCCESS: {won}\nADDITIONAL SUCCESS: {won}\nFAIL: {1 - won}\nTOTAL: 1\n"
        f"ACCURACY: {round(won / 1, 2)}\n-----"
    )
    log = f"\n#####\n\nEnvironment #0:\n{traj.transcript()[:-1]}\n\nSTATUS: {status}\n\n#####\n{totals}"
    return log.split(TASK.strip("\n"))[-1].strip()


def reflect(model: Model, prompt: ReflectPrompt, trial: Trial, earlier: list[str]) -> Reflection:
    """A reflection on a failed trial as its `update_memory` writes one; its text as the model wrote it."""
    check(prompt)
    query = prompt.instruction.replace(PLACES[0], prompt.examples).replace(PLACES[1], scenario(trial.part))
    shown = earlier[-SHOWN:]
    if shown:
        query += PLANS + "".join(f"Trial #{i}: {text}\n" for i, text in enumerate(shown))
    query += NEW_PLAN
    keep_prefix(model, prompt.instruction[: prompt.instruction.index(PLACES[0])])
    try:
        call = model.complete(query, stop=[], max_tokens=TOKENS)
    except ContextLengthExceeded:
        return Reflection("", None, [], "context")
    return Reflection(call.text, call, [], call.finish_reason)


def code_trials(
    env,
    model: Model,
    prompt: Prompt | str,
    *,
    trials: int,
    reflect_prompt: ReflectPrompt,
    done: list[Trial] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    on_step=None,
    seed: int = 0,
    max_steps: int = GAME_STEPS,
) -> list[Trial]:
    """Up to `trials` trials of one game, as its `main.py` runs them with memory: each failed one reflected on
    (the last one too, as its `update_memory` does after every trial), until one succeeds (the game said it
    was done). `done` and `on_trial` as `reflexion.trials` takes them."""
    check(reflect_prompt)
    env = as_alfworld(env)
    history = list(done or [])
    while True:
        written = [t.reflection.text for t in history if t.reflection is not None]
        if history:
            last = history[-1]
            if not last.passed and last.reflection is None:
                last.reflection = reflect(model, reflect_prompt, last, written)
                written.append(last.reflection.text)
                if on_trial is not None:
                    on_trial(last)
            if last.passed or len(history) >= trials:
                return history
        part = play_trial(env, model, prompt, written, seed=seed, on_step=on_step, max_steps=max_steps)
        trial = Trial(len(history) + 1, part, part.ended in ("won", "lost"))
        history.append(trial)
        if on_trial is not None:
            on_trial(trial)
