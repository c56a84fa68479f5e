"""The tolerant ReAct loop, in the shape of the reference notebook's `webthink`; its record is `record.py`'s."""

import time
from collections.abc import Callable

from rawreact.agents.grammar import Grammar, load_grammar
from rawreact.agents.guardrails import Guard
from rawreact.agents.prompts import Prompt, load_prompt, with_actions
from rawreact.agents.record import Step, Trajectory
from rawreact.config.choices import MAX_TOKENS
from rawreact.core.actions import Action, action_text, format_action, parse_action, split_step
from rawreact.core.errors import ContextLengthExceeded, GrammarError
from rawreact.core.metrics import is_answer
from rawreact.core.text import one_line
from rawreact.environments.env import PassageEnv
from rawreact.models.base import Completion, Model, keep_prefix

# A call also stops once its action line is complete: `]` and the line break after it. The parser needs
# nothing after that line and ignores what follows (invented observations, further steps), which was 43% of
# the tokens a small model generated. A stop sequence, so every backend stops there the same way; the text
# ends without that `]`, which the tolerant parser does not need (`Search[x` searches x).
ACTION_END = "]\n"


def step_stops(i: int) -> list[str]:
    """Where the tolerant loop's call of step `i` stops: the next observation, or a complete action line."""
    return [f"\nObservation {i}:", ACTION_END]


def _titles(env) -> list[str]:
    """The titles a titles grammar may search: the environment's, where it lists any (a store, or an
    environment that is no passage collection, lists none)."""
    return getattr(env, "titles", None) or []


def _act(env: PassageEnv, line: str, action: Action | None, truncated: bool) -> tuple[str, str, str | None]:
    """Run a parsed action, or turn its absence into an observation: (text, observation, error)."""
    if action is not None:
        return format_action(action, env.verbs), env.step(action)[0], None
    shown = one_line(action_text(line))
    if truncated:
        return shown, f"Invalid action: {shown} (cut off at the token limit)", "truncated"
    return shown, one_line(f"Invalid action: {shown}"), "no action"


def react(
    question: str,
    env: PassageEnv,
    model: Model,
    prompt: Prompt | str | None = None,
    *,
    max_steps: int = 7,
    grammar: Grammar | str | None = None,
    max_tokens: int = MAX_TOKENS,
    on_step: Callable[[Step], None] | None = None,
    thoughts: bool = True,
    repeats: str = "off",
    budget: int | None = None,
    header: str = "Question",
    preamble: str = "",
) -> Trajectory:
    """Run one ReAct episode on `question` and return its trajectory.

    Each step is one call on `transcript + "Thought i:"`, stopped at `\\nObservation i:` or once its
    action line is complete (`step_stops`); when no action line comes back, one more call asks for the
    action alone, as the reference does.
    `grammar` (a Grammar, or a mode of `load_grammar`: "step", "action" or "titles") constrains
    what the model may write; in the "action" mode every step is two calls, a free thought and a
    constrained action. `on_step` is called with each step as soon as it is done.

    `thoughts=False` runs Act, the paper's baseline without thoughts: each step is one call on
    `transcript + "Action i:"`, stopped as a ReAct step is, under the action grammar if any.
    `repeats` and `budget` are the guardrails (see `guardrails.Guard`). `header` is the word the
    question line starts with ("Claim" for FEVER). `preamble` goes between the prompt and the question
    line (a Reflexion trial's memory); the prompt alone is the prefix the model keeps across episodes.
    """
    prompt = load_prompt() if prompt is None else prompt
    grammar = load_grammar(grammar) if isinstance(grammar, str) else grammar
    if grammar is not None and not getattr(model, "supports_grammar", True):
        raise GrammarError(f"model {model.name} cannot apply a grammar; run it without one")
    text = with_actions(prompt if isinstance(prompt, str) else prompt.text, env.verbs)
    keep_prefix(model, text)
    traj = Trajectory(question=question, prompt=text, header=header, preamble=preamble, verbs=env.verbs)
    take = _react_step if thoughts else _act_step
    run_steps(
        traj,
        env,
        lambda i, text: take(i, text, env, model, grammar, max_tokens),
        max_steps=max_steps,
        max_tokens=max_tokens,
        guard=Guard(repeats, budget, env.verbs),
        on_step=on_step,
    )
    if traj.ended != "finish":
        env.step(Action("finish", ""))  # the reference closes an unfinished episode with finish[]
    return traj


def run_steps(
    traj: Trajectory,
    env,
    take: Callable[[int, str], Step],
    *,
    max_steps: int,
    max_tokens: int,
    guard: Guard,
    on_step: Callable[[Step], None] | None = None,
    render: Callable[[Step], str] = Step.render,
    over: Callable[[Trajectory], bool] | None = None,
) -> None:
    """Take steps (`take(i, transcript)`) into `traj` until Finish, the step limit or a guardrail.

    Every loop runs its steps here; it sets `traj.ended` (and `traj.answer` on Finish). `render` is how a
    step joins the transcript, and `over(traj)` says whether the episode ended after a step, setting
    `traj.ended` (by default: the environment has an answer, given by Finish). The environment is reset
    first unless `over` is given: an environment that says its own end (a game) was started by its loop.
    """
    if over is None:
        env.reset()
    over = over or (lambda traj: _finished(traj, env))
    text = traj.transcript()
    try:
        for i in range(1, max_steps + 1):
            if not guard.allows([c for s in traj.steps for c in s.calls], max_tokens):
                traj.ended = "budget"
                return
            step = take(i, text)
            stop = guard.check(step)
            traj.steps.append(step)
            text += render(step)
            if on_step is not None:
                on_step(step)
            if over(traj):
                return
            if stop:
                traj.ended = "repeat"
                return
        traj.ended = "max_steps"
    except ContextLengthExceeded:
        traj.ended = "context"


def _finished(traj: Trajectory, env) -> bool:
    """Whether a Finish ended the episode, setting its answer and ending (a Finish that says nothing,
    `Finish[]` or `Finish[。]`, gave no answer)."""
    if env.answer is None:
        return False
    traj.answer, traj.ended = env.answer, "finish" if is_answer(env.answer) else "no_answer"
    return True


def _react_step(i: int, text: str, env: PassageEnv, model: Model, grammar: Grammar | None, max_tokens: int) -> Step:
    """One ReAct step: a call after `Thought i:`, and the reference's fallback call when it wrote no action.

    In the grammar's "action" mode every step is two calls, a free thought and a constrained action.
    """
    start = time.perf_counter()
    two_calls = grammar is not None and grammar.mode == "action"
    stop = [f"\nAction {i}:", f"\nObservation {i}:"] if two_calls else step_stops(i)
    step_grammar = grammar.for_step(i, _titles(env), env.verbs) if grammar is not None and not two_calls else None
    first = model.complete(text + f"Thought {i}:", stop=stop, max_tokens=max_tokens, grammar=step_grammar)
    calls = [first]
    thought, line, last = split_step(first.text, env.verbs)
    truncated = first.finish_reason == "length" and last
    fallback = line is None and not two_calls
    if line is not None and truncated and step_grammar is None:
        line, truncated = _continued(model, text + f"Thought {i}:", first, line, max_tokens, calls)
    if line is None or two_calls:
        # The reference's fallback: keep the first line as the thought, ask for the action.
        retry = model.complete(
            text + f"Thought {i}: {thought}\nAction {i}:",
            stop=["\n"],
            max_tokens=max_tokens,
            grammar=None if grammar is None else grammar.for_action(i, _titles(env), env.verbs),
        )
        calls.append(retry)
        line, truncated = retry.text, retry.finish_reason == "length"
    action = parse_action(line, truncated=truncated, verbs=env.verbs)
    shown, observation, error = _act(env, line, action, truncated)
    return Step(i, thought, action, shown, observation, calls, error, time.perf_counter() - start, fallback)


def _act_step(i: int, text: str, env: PassageEnv, model: Model, grammar: Grammar | None, max_tokens: int) -> Step:
    """One Act step: a call after `Action i:` whose first line with text is the action line."""
    start = time.perf_counter()
    call = model.complete(
        text + f"Action {i}:",
        stop=step_stops(i),
        max_tokens=max_tokens,
        grammar=None if grammar is None else grammar.for_action(i, _titles(env), env.verbs),
    )
    lines = [line for line in call.text.strip().splitlines() if line.strip()] or [""]
    truncated = call.finish_reason == "length" and len(lines) == 1
    calls = [call]
    if truncated and grammar is None and lines[0].strip():
        lines[0], truncated = _continued(model, text + f"Action {i}:", call, lines[0], max_tokens, calls)
    action = parse_action(lines[0] if len(calls) > 1 else call.text, truncated=truncated, verbs=env.verbs)
    shown, observation, error = _act(env, lines[0], action, truncated)
    return Step(i, None, action, shown, observation, calls, error, time.perf_counter() - start)


def _continued(model: Model, asked: str, cut: Completion, line: str, max_tokens: int, calls: list) -> tuple[str, bool]:
    """An action line the token limit cut (a long thought came first), continued by one more call from where the
    text stopped to the line's end: (the whole line, whether it was cut again). The call joins `calls`."""
    rest = model.complete(asked + cut.text, stop=["\n"], max_tokens=max_tokens)
    calls.append(rest)
    return line + rest.text, rest.finish_reason == "length"
