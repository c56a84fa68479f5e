"""Fine-tuning examples from run files: the steps of the episodes that went well, one example a line,
in the layouts trainers take as they are (as FireAct fine-tuned small models on ReAct trajectories).

- "completion": one example per step, `{"prompt": ..., "completion": ...}`. The prompt is the question
  and the steps before this one, as the model saw them, up to `Thought i:` (`Action i:` in an Act
  episode); the completion is the thought and the action, as the loop renders them. Steps whose action
  could not be carried out, or that repeated an earlier one, are not made targets (they stay in
  later prompts, since the model saw them).
- "chat": one example per episode, `{"messages": [...]}`: the question as the user's first message,
  each step's thought and action as an assistant message, each observation as a user message. The
  assistant messages of invalid and repeated steps carry `"weight": 0`, which trainers that read
  OpenAI's chat layout take as "do not learn from this message".

- "trl": Hugging Face TRL's conversational prompt-completion layout, one example per step the chat
  layout trains on: `{"prompt": [messages before it], "completion": [its assistant message]}`. TRL
  reads no `weight`, so the invalid and repeated steps are never a completion here (they stay in
  later prompts, as the model saw them): the same meaning as the chat layout's weight 0.
- "fireact": FireAct's Alpaca layout, which its Llama scripts read: one JSON array (not lines) of
  `{"instruction": ..., "input": "", "output": ...}`, the completion layout's prompt and completion.

A tools episode (native tool calls) is exported in the chat and trl layouts only: its own message
history, with the functions it was offered, as OpenAI's fine-tuning takes function calling.

Without `with_prompt` the few-shot prompt is left out (a fine-tuned model needs no exemplars); with
it, it comes before the question (completion) or as the system message (chat).

A problem of a program is exported when its program passed the hidden tests: the problem (its prompt, after
the exemplars with `with_prompt`) and the program, its body alone where it continues the problem's prompt
(completion, fireact), or the user's and the assistant's messages (chat, trl).

A Reflexion question is exported as its final trial (the record's trajectory, selected by its
score like any other). Its memory of the failed trials is left out unless `with_memory`: the model
trained on it then answers without reflections; with it, the memory comes before the question.
"""

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from rawreact import __version__
from rawreact.agents.record import Step, Trajectory
from rawreact.agents.tools import shipped_tools
from rawreact.core.errors import DataError
from rawreact.core.tasks import task_type
from rawreact.models.base import openai_message
from rawreact.runs.records import manifest_path, read_run
from rawreact.runs.runfile import refuse_existing, write_whole

LAYOUTS = ("completion", "chat", "trl", "fireact")
_CHATS = ("chat", "trl")  # the layouts of messages, which a tools episode has
_ACTING = ("react", "act", "tools")  # the parts that answer through a trajectory


@dataclass(frozen=True)
class Export:
    """What an export wrote: examples, from how many questions, and why the others were left out."""

    examples: int
    questions: int
    records: int
    not_selected: int
    no_trajectory: int
    no_target: int = 0  # selected, but no step of theirs is a target (every action invalid or repeated)
    games: int = 0  # how many of the records are games, selected when won


def selected(record: dict, min_f1: float | None = None) -> bool:
    """Whether a record's episode is exported: EM 1 by default, F1 at least `min_f1` when it is given.

    A question without a gold answer has no score (null), so it is never selected. A game is selected when
    it was won (`min_f1` then asks its reward to be at least that).
    """
    if task_type(record.get("task")).scoring == "outcome":  # judged by the environment: exported when won
        return bool(record.get("success")) and (min_f1 is None or (record.get("reward") or 0.0) >= min_f1)
    if min_f1 is None:
        return record["em"] == 1
    return record["f1"] is not None and record["f1"] >= min_f1


def _target(step: Step) -> bool:
    return bool(step.calls) and step.error is None and step.repeat_of is None


def _cue(step: Step) -> str:
    return f"Thought {step.i}:" if step.thought is not None else f"Action {step.i}:"


def _answer(step: Step) -> str:
    """What the model wrote after the cue, as the loop renders it."""
    if step.thought is None:
        return f" {step.action_text}"
    return f" {step.thought}\nAction {step.i}: {step.action_text}"


def completion_examples(traj: Trajectory, with_prompt: bool = False) -> list[dict]:
    """One prompt/completion pair per step that ran a valid, new action."""
    skip = 0 if with_prompt else len(traj.prompt)
    if traj.loop == "program":  # a passed program (`_program_trajectory`): the problem, then what passed
        return [
            {"prompt": (traj.prompt if with_prompt else "") + traj.question, "completion": traj.steps[0].action_text}
        ]
    if traj.commands:  # the transcript ends with `>`, and the model wrote the line after it
        return [
            {"prompt": traj.transcript(k)[skip:], "completion": f" {step.action_text}"}
            for k, step in enumerate(traj.steps)
            if _target(step)
        ]
    return [
        {"prompt": traj.transcript(k)[skip:] + _cue(step), "completion": _answer(step)}
        for k, step in enumerate(traj.steps)
        if _target(step)
    ]


def chat_example(traj: Trajectory, with_prompt: bool = False) -> dict:
    """The episode as one conversation; invalid and repeated steps are there with weight 0.

    A tools episode is its own message history, with the functions it was offered (`tools`), in the
    layout OpenAI's fine-tuning takes for function calling.
    """
    if traj.messages is not None:
        messages = [openai_message(m) for m in _weighed(traj)]
        return {"messages": messages if with_prompt else messages[1:], "tools": list(shipped_tools())}
    messages = [{"role": "system", "content": traj.prompt.rstrip("\n")}] if with_prompt else []
    if traj.loop == "program":  # a passed program: the problem, and the program that passed as the answer
        program = traj.answer
        return {
            "messages": [
                *messages,
                {"role": "user", "content": traj.question},
                {"role": "assistant", "content": program},
            ]
        }
    messages.append({"role": "user", "content": f"{traj.preamble}{traj.header}: {traj.question}"})
    shown = [s for s in traj.steps if s.calls]  # not the reference loop's closing finish[]
    for n, step in enumerate(shown):
        game = traj.commands  # a game's lines: the command or thought, then what the game said
        message = {"role": "assistant", "content": step.action_text if game else (_cue(step) + _answer(step))}
        if not _target(step):
            message["weight"] = 0
        messages.append(message)
        if n + 1 < len(shown):  # the last observation ("Episode finished.") is nobody's cue
            seen = f"{step.observation}{step.note}" if game else f"Observation {step.i}: {step.observation}{step.note}"
            messages.append({"role": "user", "content": seen})
    return {"messages": messages}


def trl_examples(traj: Trajectory, with_prompt: bool = False) -> list[dict]:
    """TRL's conversational prompt-completion examples: one per assistant message the chat layout trains on
    (weight 0 is never a completion), the messages before it as the prompt."""
    chat = chat_example(traj, with_prompt)
    plain = [{k: v for k, v in m.items() if k != "weight"} for m in chat["messages"]]
    tools = {"tools": chat["tools"]} if "tools" in chat else {}
    return [
        {"prompt": plain[:k], "completion": [plain[k]]} | tools
        for k, message in enumerate(chat["messages"])
        if message["role"] == "assistant" and message.get("weight", 1) != 0
    ]


def fireact_examples(traj: Trajectory, with_prompt: bool = False) -> list[dict]:
    """FireAct's Alpaca examples: the completion layout's prompt as `instruction`, its completion as `output`."""
    return [
        {"instruction": e["prompt"], "input": "", "output": e["completion"]}
        for e in completion_examples(traj, with_prompt)
    ]


_MAKERS = {
    "completion": completion_examples,
    "chat": lambda traj, with_prompt: [chat_example(traj, with_prompt)],
    "trl": trl_examples,
    "fireact": fireact_examples,
}


def _program_trajectory(record: dict) -> Trajectory:
    """A passed program as a one-step episode the layouts take: the problem, then the program that passed (its
    body alone where it continues the problem's prompt) as what the model wrote, with no cue before it."""
    traj = Trajectory.from_dict(record["trajectory"])
    program, problem = traj.answer, traj.question
    written = program[len(problem) :] if program.startswith(problem) else program
    step = Step(1, None, None, written, "", traj.steps[-1].calls)
    return replace(traj, steps=[step])


def _weighed(traj: Trajectory) -> list[dict]:
    """A tools episode's messages, each assistant turn with `"weight": 0` when one of its calls is not a
    target (an unknown function, arguments that are not a valid object, a repeat), as in the text layout.

    Steps follow the turns' calls in order: a turn with n calls made the next n steps (fewer when the
    episode ended inside the turn), a turn without calls (a plain-text answer) one step.
    """
    steps, out = iter(traj.steps), []
    for message in traj.messages:
        message = dict(message)
        if message["role"] == "assistant":
            made = [step for _, step in zip(range(len(message.get("tool_calls") or [None])), steps, strict=False)]
            if any(step.error is not None or step.repeat_of is not None for step in made):
                message["weight"] = 0
        out.append(message)
    return out


def export(
    runs: list[str | Path],
    out: str | Path,
    *,
    layout: str = "completion",
    min_f1: float | None = None,
    with_prompt: bool = False,
    with_memory: bool = False,
    force: bool = True,
) -> Export:
    """Write the examples of `runs`' selected episodes to `out` (whole or not at all), and a manifest beside it.

    Without `force`, an existing `out` or manifest is refused once the runs are read, before anything is written.
    With no example to write, nothing is written (`examples` is 0, and the counts say why).
    """
    if layout not in LAYOUTS:
        raise DataError(f"unknown layout {layout!r}; the layouts are {', '.join(LAYOUTS)}")
    if min_f1 is not None and not 0 <= min_f1 <= 1:
        raise DataError(f"--min-f1 {min_f1} is not between 0 and 1")
    examples, questions, records, not_selected, no_trajectory, no_target, games = [], 0, 0, 0, 0, 0, 0
    sources = []
    for path in runs:
        _, found = read_run(path)
        sources.append({"run_file": str(path), "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()})
        for record in found:
            records += 1
            games += task_type(record.get("task")).scoring == "outcome"
            if task_type(record.get("task")).writes_programs and record.get("trajectory") is not None:
                if not selected(record, min_f1):
                    not_selected += 1
                    continue
                made = _MAKERS[layout](_program_trajectory(record), with_prompt)
                questions, examples = questions + 1, examples + made
                continue
            acting = record.get("trajectory") is not None and record.get("branch", "react") in _ACTING
            # A tools episode is a chat history: it has no prompt/completion steps.
            if not acting or (record.get("branch") == "tools" and layout not in _CHATS):
                no_trajectory += 1
                continue
            if not selected(record, min_f1):
                not_selected += 1
                continue
            traj = Trajectory.from_dict(record["trajectory"])
            if not with_memory:  # a Reflexion trial's memory of the failed ones
                traj = replace(traj, preamble="")
            made = _MAKERS[layout](traj, with_prompt)
            questions += bool(made)
            no_target += not made
            examples += made
    result = Export(len(examples), questions, records, not_selected, no_trajectory, no_target, games)
    manifest = {
        "rawreact": __version__,
        "layout": layout,
        "selection": "em == 1" if min_f1 is None else f"f1 >= {min_f1}",
        "with_prompt": with_prompt,
        "with_memory": with_memory,
        "sources": sources,
        "examples": result.examples,
        "questions": result.questions,
    }
    out = Path(out)
    if not examples:  # an empty file would look like a finished export: write nothing (the caller says why)
        return result
    for path in (out, manifest_path(out)):
        refuse_existing(path, force, "--out")
    if layout == "fireact":  # one JSON array, as FireAct's scripts read it
        text = json.dumps(examples, ensure_ascii=False, indent=1) + "\n"
    else:
        text = "".join(json.dumps(example, ensure_ascii=False) + "\n" for example in examples)
    write_whole(out, text, "choose another --out")
    write_whole(manifest_path(out), json.dumps(manifest, indent=2) + "\n", "choose another --out")
    return result
