"""The record of an episode: its steps (thought, action, observation, the model calls behind
them) and the whole trajectory. Both loops, the tolerant one (`loop.react`) and the reference
notebook's (`reference.reference_react`), write it; run files store it as JSON.
"""

import json
from dataclasses import dataclass, field

from rawreact.core.actions import NOT_FOUND, PASSAGE_VERBS, Action, Verbs
from rawreact.models.base import Completion


def token_totals(calls: list[Completion]) -> dict[str, int | None]:
    """Prompt, evaluated-prompt and completion tokens summed over `calls`.

    "evaluated" is None (unknown) when any call's backend did not say how much of the prompt it
    computed: a sum over partly unknown counts would be a wrong number.
    """
    evaluated = [c.evaluated_tokens for c in calls]
    return {
        "prompt": sum(c.prompt_tokens for c in calls),
        "evaluated": None if None in evaluated else sum(evaluated),
        "completion": sum(c.completion_tokens for c in calls),
    }


# The loops whose steps are a game's command lines: rawreact's and the notebook's game loop, and the Reflexion
# code's (`reflexion_games`), whose transcript is laid out as its EnvironmentHistory.
COMMAND_LOOPS = ("game", "alfworld_runs")


@dataclass
class Step:
    """One Thought / Action / Observation step, with the model calls that produced it.

    `thought` is None in an Act episode, whose steps have no Thought line. `error` says why no
    action ran: "no action" (none could be read), "truncated" (the token limit cut the action),
    "invalid" (the reference loop's environment refused it), or None when the action was carried
    out. `fallback` says the step made the fallback call, a second call for the action alone
    because the first gave none the loop could use (the reference's `n_badcalls` counts these).
    A step with no calls is the reference loop's closing `finish[]`, logged but never shown to
    the model. `repeat_of` names the earlier step this one repeats (see `guardrails.Guard`), and
    `note` is what a guardrail added after the observation for the model to read.
    """

    i: int
    thought: str | None
    action: Action | None
    action_text: str
    observation: str
    calls: list[Completion]
    error: str | None = None
    seconds: float = 0.0
    fallback: bool = False
    repeat_of: int | None = None
    note: str = ""

    @property
    def finish_reason(self) -> str:
        """The finish reason of the call that produced the action line ("" for a step without calls)."""
        return self.calls[-1].finish_reason if self.calls else ""

    def render(self) -> str:
        """The step as transcript text, exactly as the model sees it in later prompts."""
        return (
            "" if self.thought is None else f"Thought {self.i}: {self.thought}\n"
        ) + f"Action {self.i}: {self.action_text}\nObservation {self.i}: {self.observation}{self.note}\n"

    def to_dict(self) -> dict:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "i": self.i,
            "thought": self.thought,
            "action": None if self.action is None else [self.action.name, self.action.arg],
            "action_text": self.action_text,
            "observation": self.observation,
            "error": self.error,
            "fallback": self.fallback,
            "repeat_of": self.repeat_of,
            "note": self.note,
            "finish_reason": self.finish_reason,
            "tokens": token_totals(self.calls),
            "seconds": self.seconds,
            "calls": [c.to_dict() for c in self.calls],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Step":
        """The inverse of `to_dict` (the derived `finish_reason` and `tokens` are recomputed).

        A step written before `fallback` was recorded made the fallback call if it made two calls
        (which over-counts the grammar's "action" mode, whose steps are always two calls).
        """
        action = None if data["action"] is None else Action(*data["action"])
        calls = [Completion(**c) for c in data["calls"]]
        fields = {k: data[k] for k in ("i", "thought", "action_text", "observation", "error", "seconds")}
        fields |= {"repeat_of": data.get("repeat_of"), "note": data.get("note", "")}
        return cls(action=action, calls=calls, fallback=data.get("fallback", len(calls) > 1), **fields)


@dataclass
class Trajectory:
    """A whole episode: the prompt, the question, every step, and how it ended.

    `ended` is "finish" (the model called Finish), "max_steps" (the step limit was reached; the
    answer is then empty, as the reference's closing `finish[]`), "context" (the prompt outgrew
    the model's context window), "repeat" or "budget" (a guardrail ended it), or "text" (the tools
    method's model answered in plain text). `loop` is the loop that ran: "tolerant" (`react`),
    "reference" (`reference.reference_react`) or "tools" (`tools.tool_react`, native tool calls,
    whose `prompt` is the system message and `messages` the whole chat history). `header` is the
    word the question line starts with: "Question", or "Claim" for a FEVER claim. `preamble` is what
    a Reflexion trial put between the few-shot prompt and the question line (its memory of the
    failed trials); the prompt itself stays the run's, stored once.
    """

    question: str
    prompt: str
    steps: list[Step] = field(default_factory=list)
    answer: str = ""
    ended: str = ""
    loop: str = "tolerant"
    messages: list[dict] | None = None
    header: str = "Question"  # the word before the question in the prompt: "Claim" for FEVER
    preamble: str = ""  # a Reflexion trial's memory, between the prompt and the question line
    # The environment's verbs, which say what counts as evidence and as a search; not stored: a record read
    # back counts what its run counted when it was written.
    verbs: Verbs = field(default=PASSAGE_VERBS, compare=False, repr=False)
    reward: float | None = None  # a game's reward at the end (the share of its points scored); None for a question

    @property
    def model_calls(self) -> int:
        """How many times the model was called."""
        return sum(len(step.calls) for step in self.steps)

    @property
    def invalid_actions(self) -> int:
        """Steps whose action could not be carried out."""
        return sum(step.error is not None for step in self.steps)

    @property
    def repeats(self) -> int:
        """Steps that repeated an earlier action and saw the same."""
        return sum(step.repeat_of is not None for step in self.steps)

    @property
    def evidence(self) -> list[str]:
        """What the episode's searches and lookups showed: the text an answer can be found in. A search that
        opened nothing shows only the model's own query back (`Could not find 2000.`), which is no evidence."""
        return [s.observation for s in self.steps if self._is(s, "evidence") and not self._missed(s)]

    def _missed(self, step: Step) -> bool:
        """Whether the step is a search that opened nothing."""
        return self._is(step, "opens") and step.observation.startswith(NOT_FOUND)

    def _is(self, step: Step, flag: str) -> bool:
        """Whether the step's action is of a verb with that flag (see `verbs.Verb`)."""
        verb = None if step.action is None else self.verbs.get(step.action.name)
        return verb is not None and getattr(verb, flag)

    @property
    def fallback_calls(self) -> int:
        """Steps that made the fallback call (the reference's `n_badcalls`)."""
        return sum(step.fallback for step in self.steps)

    @property
    def searches(self) -> int:
        """Search actions carried out."""
        return sum(self._is(step, "opens") for step in self.steps)

    @property
    def search_hits(self) -> int:
        """Search actions that opened a passage (rather than listing similar titles)."""
        return sum(self._is(step, "opens") and not step.observation.startswith(NOT_FOUND) for step in self.steps)

    def tokens(self) -> dict[str, int]:
        """Prompt, evaluated-prompt and completion tokens summed over every call."""
        return token_totals([c for step in self.steps for c in step.calls])

    @property
    def seconds(self) -> float:
        """Wall time of all steps."""
        return sum(step.seconds for step in self.steps)

    @property
    def commands(self) -> bool:
        """Whether its steps are a game's command lines (`> command`, then what the game said), not ReAct's."""
        return self.loop in COMMAND_LOOPS

    def transcript(self, steps: int | None = None) -> str:
        """The prompt text after the first `steps` steps (all by default), as the model saw it.

        A tools episode has no prompt text of its own: its whole message history is shown instead.
        """
        if self.messages is not None:
            return history_text(self.messages)
        if self.loop == "alfworld_runs":  # the Reflexion code's EnvironmentHistory: `> action` and what was said
            lines = [line for s in self.steps[:steps] for line in (f"> {s.action_text}", s.observation)]
            return self.prompt + self.preamble + self.header + self.question + "\n" + "\n".join(lines) + ">"
        if self.loop == "program":  # the exemplars and the problem, then each implementation and its tests' verdict
            return self.prompt + self.question + "".join(program_text(s) for s in self.steps[:steps])
        if self.loop == "game":  # alfworld.ipynb's: `> command` lines, each followed by what the game said
            lines = "".join(f" {s.action_text}\n{s.observation}{s.note}\n>" for s in self.steps[:steps])
            head = f"{self.header}: " if self.header else ""  # none in the notebook's own loop: its prompt ends in it
            return self.prompt + self.preamble + f"{head}{self.question}\n>" + lines
        shown = "".join(s.render() for s in self.steps[:steps] if s.calls)  # not the closing finish[]
        return self.prompt + self.preamble + f"{self.header}: {self.question}\n" + shown

    def to_dict(self) -> dict:
        """A JSON-ready dict; `from_dict` reads it back."""
        return (
            {
                "question": self.question,
                "prompt": self.prompt,
                "answer": self.answer,
                "ended": self.ended,
                "loop": self.loop,
                "model_calls": self.model_calls,
                "steps": [s.to_dict() for s in self.steps],
            }
            | ({} if self.messages is None else {"messages": self.messages})
            | header_entry(self.header)
            | ({"preamble": self.preamble} if self.preamble else {})
            | ({} if self.reward is None else {"reward": self.reward})
        )

    def to_json(self) -> str:
        """The trajectory as one line of JSON."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "Trajectory":
        """The inverse of `to_json`."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict) -> "Trajectory":
        """The inverse of `to_dict`."""
        steps = [Step.from_dict(s) for s in data["steps"]]
        loop, messages, header = data.get("loop", "tolerant"), data.get("messages"), data.get("header", "Question")
        fields = (data["question"], data["prompt"], steps, data["answer"], data["ended"], loop, messages, header)
        return cls(*fields, data.get("preamble", ""), reward=data.get("reward"))


def program_text(step: Step) -> str:
    """One implementation of a program, as `show` and the live output print it: the reflection before it, the
    program, and what its tests said."""
    reflection = f"Reflection: {step.thought}\n" if step.thought else ""
    return f"\n--- implementation {step.i}\n{reflection}{step.action_text.rstrip()}\n--- {step.observation}\n"


def header_entry(header: str) -> dict:
    """The header as a record keeps it: only when it is not "Question", so QA records stay as they were."""
    return {} if header == "Question" else {"header": header}


def history_text(messages: list[dict]) -> str:
    """The message history as text, one message a block: what `show` prints for a tools episode."""
    blocks = []
    for m in messages:
        role = m["role"] if m["role"] != "tool" else f"tool {m.get('name', '')} ({m.get('tool_call_id', '')})"
        text = m.get("content") or ""
        for c in m.get("tool_calls") or []:
            text += ("\n" if text else "") + f"call {c['id']}: {c['function']['name']}({c['function']['arguments']})"
        blocks.append(f"[{role}] {text}")
    return "\n".join(blocks) + "\n"
