"""The rows of the ReAct paper's HotpotQA table: ReAct, Act, Standard, CoT, CoT-SC and the two back-offs.

ReAct and Act are the loop (`loop.react`). Standard, CoT and CoT-SC answer from the prompt alone
(`reason`). The back-offs combine them: ReAct -> CoT-SC asks CoT-SC when ReAct gives no answer,
CoT-SC -> ReAct asks ReAct when the majority answer holds fewer than half of the votes. `solve`
runs any of them on one question and returns an `Outcome`, which a run file stores.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rawreact import answers
from rawreact.env import PassageEnv, one_line
from rawreact.errors import ContextLengthExceeded, ModelError
from rawreact.fever import read_label
from rawreact.guardrails import setting_problem, supported
from rawreact.loop import LOOPS, react
from rawreact.metrics import is_answer, normalize_answer
from rawreact.models.base import Completion, Model, keep_prefix
from rawreact.prompts import TASKS, Prompt
from rawreact.record import Step, Trajectory, header_entry, token_totals
from rawreact.reference import reference_react
from rawreact.tools import tool_react


@dataclass(frozen=True)
class Method:
    """One method: its spelling here, the paper's name, and the reference repository's prompt key."""

    name: str
    paper: str
    reference_key: str


METHODS = {
    m.name: m
    for m in (
        Method("react", "ReAct", "webthink_simple6"),
        Method("act", "Act", "webact_simple6"),
        Method("standard", "Standard", "webqa_simple6"),
        Method("cot", "CoT", "cotqa_simple6"),
        Method("cot-sc", "CoT-SC", "cotqa_simple6"),
        Method("react-cot-sc", "ReAct → CoT-SC", "webthink_simple6 + cotqa_simple6"),
        Method("cot-sc-react", "CoT-SC → ReAct", "cotqa_simple6 + webthink_simple6"),
        Method("tools", "native tool calls", "-"),
    )
}
PAPER = tuple(m for m in METHODS if m != "tools")  # the rows of the paper's table
# What the prompt ends with before the model writes, and where its writing stops.
CUES = {"react": "Thought 1:", "act": "Action 1:", "standard": "Answer:", "cot": "Thought:", "cot-sc": "Thought:"}
STOPS = {"standard": ["\n"], "cot": ["\nQuestion:", "\n\n"]}


# A back-off's two parts, in the order they run.
BACKOFFS = {"react-cot-sc": ("react", "cot-sc"), "cot-sc-react": ("cot-sc", "react")}
SAMPLING = ("cot-sc", *BACKOFFS)  # the methods that draw CoT-SC samples
REASONING = ("standard", "cot", "cot-sc")  # the methods that answer from the prompt alone, with no action


def first_method(method: str) -> str:
    """The method whose prompt the run's main prompt is: the first part of a back-off."""
    return BACKOFFS.get(method, (method,))[0]


@dataclass
class Sample:
    """One answer call: the completion and the answer read from it (None when there is none)."""

    answer: str | None
    call: Completion


@dataclass
class Reasoning:
    """Standard, CoT or CoT-SC on one question: the prompt, every sample, and the voted answer."""

    method: str
    question: str
    prompt: str
    samples: list[Sample] = field(default_factory=list)
    temperature: float | None = None  # of the CoT-SC samples; None when greedy
    seed: int | None = None
    ended: str = ""
    seconds: float = 0.0  # wall time of all samples (server samples run at once)
    header: str = "Question"  # the word before the question: "Claim" for FEVER

    @property
    def vote(self) -> answers.Vote:
        """The majority vote over the samples' answers (one sample: that sample's answer).

        A FEVER claim's samples vote on the label each answer gives (`SUPPORTS`, `Supported.` and
        `True` are one vote each for SUPPORTS), the way the claim is scored.
        """
        key = read_label if self.header == TASKS["fever"][1] else normalize_answer
        return answers.vote([s.answer for s in self.samples], key=key)

    @property
    def answer(self) -> str:
        """The answer the method gives: the majority answer, "" when no sample gave one."""
        return self.vote.answer

    @property
    def cue(self) -> str:
        """What the prompt ends with: `Answer:` (Standard) or `Thought:` (CoT)."""
        return CUES[self.method]

    def transcript(self, sample: int = 0) -> str:
        """The prompt text and one sample's completion, as the model saw and wrote it."""
        text = self.samples[sample].call.text if self.samples else ""
        return f"{self.prompt}{self.header}: {self.question}\n{self.cue}{text}"

    def to_dict(self) -> dict:
        """A JSON-ready dict; `from_dict` reads it back."""
        tally = self.vote
        return {
            "method": self.method,
            "question": self.question,
            "prompt": self.prompt,
            "answer": tally.answer,
            "ended": self.ended,
            "votes": tally.votes,
            "share": tally.share,
            "counts": tally.counts,
            "temperature": self.temperature,
            "seed": self.seed,
            "seconds": self.seconds,
            "samples": [{"answer": s.answer, "call": s.call.to_dict()} for s in self.samples],
        } | header_entry(self.header)

    @classmethod
    def from_dict(cls, data: dict) -> "Reasoning":
        """The inverse of `to_dict` (the vote is recomputed from the samples)."""
        samples = [Sample(s["answer"], Completion(**s["call"])) for s in data["samples"]]
        fields = ("method", "question", "prompt", "temperature", "seed", "ended")
        extra = {"seconds": data.get("seconds", 0.0), "header": data.get("header", "Question")}
        return cls(samples=samples, **extra, **{k: data[k] for k in fields})


def reason(
    question: str,
    model: Model,
    prompt: Prompt | str,
    *,
    method: str = "cot",
    samples: int = 21,
    temperature: float = 0.7,
    seed: int = 0,
    max_tokens: int = 100,
    header: str = "Question",
) -> Reasoning:
    """Answer from the prompt alone: Standard and CoT in one greedy call, CoT-SC by `samples` samples.

    A Standard completion follows `Answer:` and ends at the line break; a CoT completion follows
    `Thought:` and ends before the next `Question:` (the next `header` line) or a blank line.
    `parse_answer` reads each.
    """
    if method not in REASONING:
        raise ValueError(f"reason() answers standard, cot and cot-sc, not {method!r}")
    sampled = method == "cot-sc"
    text = prompt if isinstance(prompt, str) else prompt.text
    keep_prefix(model, text)
    result = Reasoning(
        method,
        one_line(question),
        text,
        temperature=temperature if sampled else None,
        seed=seed if sampled else None,
        header=header,
    )
    stop = STOPS["standard"] if method == "standard" else [f"\n{header}:", "\n\n"]
    start = time.perf_counter()
    try:
        if sampled:
            sample = getattr(model, "sample", None)
            if sample is None:
                raise ModelError(f"model {model.name} cannot draw samples, which CoT-SC needs")
            calls = sample(
                result.transcript(), n=samples, temperature=temperature, seed=seed, stop=stop, max_tokens=max_tokens
            )
        else:
            calls = [model.complete(result.transcript(), stop=stop, max_tokens=max_tokens)]
    except ContextLengthExceeded:
        result.ended, result.seconds = "context", time.perf_counter() - start
        return result
    result.seconds = time.perf_counter() - start
    prefix = "Answer:" if method == "standard" else ""
    result.samples = [Sample(answers.parse_answer(prefix + call.text), call) for call in calls]
    result.ended = "finish" if is_answer(result.answer) else "no_answer"
    return result


@dataclass
class Outcome:
    """One question under one method: the answer, how it ended, which part answered, and the parts."""

    method: str
    branch: str  # the part whose answer this is: react, act, tools, standard, cot or cot-sc
    trajectory: Trajectory | None = None
    reasoning: Reasoning | None = None

    @property
    def _answering(self) -> Trajectory | Reasoning:
        return self.reasoning if self.branch in REASONING else self.trajectory

    @property
    def answer(self) -> str:
        """The final answer."""
        return self._answering.answer

    @property
    def ended(self) -> str:
        """How the answering part ended (see the README's table of endings)."""
        return self._answering.ended

    @property
    def steps(self) -> list[Step]:
        """The steps of the loop's part (none for the methods that only reason)."""
        return [] if self.trajectory is None else self.trajectory.steps

    @property
    def calls(self) -> list[Completion]:
        """Every model call, in order."""
        calls = [c for step in self.steps for c in step.calls]
        samples = [] if self.reasoning is None else [s.call for s in self.reasoning.samples]
        return samples + calls if self.method == "cot-sc-react" else calls + samples

    @property
    def model_calls(self) -> int:
        """How many times the model was called."""
        return len(self.calls)

    def tokens(self) -> dict[str, int | None]:
        """Prompt, evaluated-prompt and completion tokens over every call."""
        return token_totals(self.calls)

    @property
    def seconds(self) -> float:
        """Wall time of the whole question."""
        reasoning = 0.0 if self.reasoning is None else self.reasoning.seconds
        return reasoning + (0.0 if self.trajectory is None else self.trajectory.seconds)

    @property
    def invalid_actions(self) -> int:
        """Steps whose action could not be carried out."""
        return 0 if self.trajectory is None else self.trajectory.invalid_actions

    @property
    def repeats(self) -> int:
        """Steps that repeated an earlier action and saw the same (see `guardrails.Guard`)."""
        return 0 if self.trajectory is None else self.trajectory.repeats

    @property
    def supported(self) -> bool | None:
        """Whether the answer occurs in what the episode's searches and lookups showed (`guardrails.supported`).

        None when the answer is empty, or came from a method that saw no passage (Standard, CoT, CoT-SC).
        """
        if self.branch in REASONING or self.trajectory is None:
            return None
        traj = self.trajectory
        return supported(traj.answer, traj.evidence, traj.search_hits > 0)

    @property
    def fallback_calls(self) -> int:
        """Steps that made the fallback call for the action alone (the reference's `n_badcalls`)."""
        return 0 if self.trajectory is None else self.trajectory.fallback_calls

    @property
    def loop(self) -> str | None:
        """The loop that ran the actions ("tolerant", "reference" or "tools"), or None for a method without one."""
        return None if self.trajectory is None else self.trajectory.loop

    @property
    def searches(self) -> int:
        """Search actions carried out."""
        return 0 if self.trajectory is None else self.trajectory.searches

    @property
    def search_hits(self) -> int:
        """Search actions that opened a passage."""
        return 0 if self.trajectory is None else self.trajectory.search_hits


def solve(
    question: str,
    env: PassageEnv,
    model: Model,
    prompt: Prompt | str,
    *,
    method: str = "react",
    backoff_prompt: Prompt | str | None = None,
    samples: int = 21,
    sample_temperature: float = 0.7,
    seed: int = 0,
    max_tokens: int = 100,
    on_step: Callable[[Step], None] | None = None,
    loop: str = "tolerant",
    header: str = "Question",
    **loop_options,
) -> Outcome:
    """Answer `question` by `method` (see METHODS) and return the outcome.

    `prompt` is the method's prompt (for a back-off, the prompt of its first part); a back-off's
    second part uses `backoff_prompt` (a CoT prompt after ReAct, a ReAct prompt after CoT-SC).
    `samples`, `sample_temperature` and `seed` are CoT-SC's; `loop_options` (max_steps, grammar)
    go to the loop. `loop` "reference" runs the ReAct or Act part in the reference notebook's loop
    (`reference.reference_react`, over a `ReferenceEnv`), which has no grammar.
    `header` is the word the question line starts with ("Claim" for FEVER).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(METHODS)}")
    if method in BACKOFFS and backoff_prompt is None:
        raise ValueError(f"method {method} needs the prompt of its second part: backoff_prompt")
    repeats = loop_options.get("repeats", "off")
    problem = loop_problem(loop, method, loop_options.get("grammar") is not None, repeats)
    problem = problem or guard_problem(method, repeats, loop_options.get("budget"))
    if problem:
        raise ValueError(problem)
    sampling = {"samples": samples, "temperature": sample_temperature, "seed": seed, "max_tokens": max_tokens}
    sampling["header"] = header
    options = {"max_tokens": max_tokens, "on_step": on_step, "header": header, **loop_options}
    if loop == "reference":
        options.pop("grammar", None)

    def act(part_prompt: Prompt | str) -> Trajectory:
        if loop == "reference":
            return reference_react(question, env, model, part_prompt, thoughts=method != "act", **options)
        return react(question, env, model, part_prompt, thoughts=method != "act", **options)

    if method in ("react", "act"):
        return Outcome(method, method, trajectory=act(prompt))
    if method == "tools":
        text = prompt if isinstance(prompt, str) else prompt.text
        options.pop("grammar", None)
        if header != "Question":
            raise ValueError("the tools method answers questions; run FEVER claims with the paper's methods")
        options.pop("header")
        return Outcome(method, method, trajectory=tool_react(question, env, model, text, **options))
    if method in REASONING:
        return Outcome(method, method, reasoning=reason(question, model, prompt, method=method, **sampling))
    if method == "react-cot-sc":
        trajectory = act(prompt)
        if trajectory.ended == "finish" and is_answer(trajectory.answer):
            return Outcome(method, "react", trajectory=trajectory)
        reasoning = reason(question, model, backoff_prompt, method="cot-sc", **sampling)
        return Outcome(method, "cot-sc", trajectory=trajectory, reasoning=reasoning)
    reasoning = reason(question, model, prompt, method="cot-sc", **sampling)
    if 2 * reasoning.vote.votes >= samples:
        return Outcome(method, "cot-sc", reasoning=reasoning)
    return Outcome(method, "react", trajectory=act(backoff_prompt), reasoning=reasoning)


def guard_problem(method: str, repeats: str, budget: int | None) -> str | None:
    """What is wrong with these guardrails for `method`, or None: they watch actions, which reasoning lacks."""
    problem = setting_problem(repeats, budget)
    if problem:
        return problem
    if method in REASONING and (repeats != "off" or budget is not None):
        return f"the guardrails repeats and budget watch actions, and method {method} takes none; drop them"
    return None


def loop_problem(loop: str, method: str, grammar: bool, repeats: str = "off") -> str | None:
    """What is wrong with running `method` in `loop` (with a grammar or not, and a repeat policy), or None."""
    if loop not in LOOPS:
        return f"loop={loop!r}; the loops are {', '.join(LOOPS)}"
    if method == "tools":
        if loop != "tolerant":
            return "the tools method calls functions, not text actions, so it has no reference loop; drop it"
        if grammar:
            return (
                "the tools method keeps its calls well-formed itself on llama.cpp models (prompts/grammars/"
                "tools.gbnf); drop the grammar"
            )
        return None
    if loop == "tolerant":
        return None
    if repeats == "note":
        return "the reference loop shows the notebook's observations, so repeats=note cannot add to them; use stop"
    if method in REASONING:
        return (
            f"the reference loop runs ReAct and Act (the notebook's webthink, and its Act steps), and method "
            f"{method} takes no action; drop the reference loop, or run react, act, react-cot-sc or cot-sc-react"
        )
    if grammar:
        return "the reference loop sends no grammar, as the notebook did; drop the grammar, or use the tolerant loop"
    return None
