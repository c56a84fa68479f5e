"""Reference mode: the reference notebook's `webthink` loop and its Wikipedia environment, byte for byte.

Given the same completions, every model call's prompt and stop sequences are the notebook's, every
observation is what its `WikiEnv` (inside `HotPotQAWrapper`) shows for the same page text, and the
answer is the text inside `finish[...]` exactly as written, scored by the same normalised EM and F1.
It keeps the tolerant loop's record (`Trajectory`, `Step`), so runs of both loops read, report and
compare alike. docs/reference.md lists every behaviour in which the two loops differ; each row is
replayed in both by tests/test_reference.py.
"""

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rawreact.agents.guardrails import Guard
from rawreact.agents.loop import run_steps
from rawreact.agents.prompts import Prompt, load_prompt
from rawreact.agents.record import Step, Trajectory
from rawreact.config.choices import MAX_TOKENS
from rawreact.core.actions import Action
from rawreact.environments.reference import ReferenceEnv
from rawreact.models.base import Model, keep_prefix

if TYPE_CHECKING:
    pass


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
