"""The methods that answer from the prompt alone: Standard, CoT and CoT-SC (`reason`), and what they return."""

import time
from dataclasses import dataclass, field

from rawreact.agents import answers
from rawreact.agents.prompts import Prompt
from rawreact.agents.record import header_entry
from rawreact.config.choices import REASONING
from rawreact.core.errors import ContextLengthExceeded, ModelError
from rawreact.core.metrics import is_answer, normalize_answer
from rawreact.models.base import Completion, Model, keep_prefix
from rawreact.tasks.fever import read_label

# What the prompt ends with before the model writes, and where its writing stops.
CUES = {"react": "Thought 1:", "act": "Action 1:", "standard": "Answer:", "cot": "Thought:", "cot-sc": "Thought:"}


STOPS = {"standard": ["\n"], "cot": ["\nQuestion:", "\n\n"]}


@dataclass
class Sample:
    """One answer: the completion and the answer read from it (None when there is none). An answer made in
    more than one call (the Reflexion code's CoT: a thought, then the action) keeps them in `calls`, and
    `call` is their text as the transcript shows it, with their costs added."""

    answer: str | None
    call: Completion
    calls: list[Completion] = field(default_factory=list)

    @property
    def made_by(self) -> list[Completion]:
        """The calls this answer took."""
        return self.calls or [self.call]

    def to_dict(self) -> dict:
        return {"answer": self.answer, "call": self.call.to_dict()} | (
            {"calls": [c.to_dict() for c in self.calls]} if self.calls else {}
        )

    @classmethod
    def from_dict(cls, data: dict) -> "Sample":
        return cls(data["answer"], Completion(**data["call"]), [Completion(**c) for c in data.get("calls", [])])


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
    preamble: str = ""  # a Reflexion trial's memory and CoT's context, between the prompt and the question

    @property
    def vote(self) -> answers.Vote:
        """The majority vote over the samples' answers (one sample: that sample's answer), each read as the
        score reads it: normalised as HotpotQA's EM normalises, a FEVER claim's label too (`SUPPORTS` and
        `supports` are one vote, `Supported.` another), so the winner is what scores, and its share is what
        CoT-SC -> ReAct compares with n/2."""
        return answers.vote([s.answer for s in self.samples], key=normalize_answer)

    @property
    def lenient_vote(self) -> answers.Vote:
        """A FEVER claim's vote on the label each answer gives (`SUPPORTS`, `Supported.` and `True` are one
        vote each for SUPPORTS): rawreact's lenient reading, reported beside the score, never in its place."""
        return answers.vote([s.answer for s in self.samples], key=read_label)

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
        return f"{self.prompt}{self.preamble}{self.header}: {self.question}\n{self.cue}{text}"

    def to_dict(self) -> dict:
        """A JSON-ready dict; `from_dict` reads it back."""
        tally = self.vote
        return (
            {
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
                "samples": [sample.to_dict() for sample in self.samples],
            }
            | header_entry(self.header)
            | ({"preamble": self.preamble} if self.preamble else {})
        )

    @classmethod
    def from_dict(cls, data: dict) -> "Reasoning":
        """The inverse of `to_dict` (the vote is recomputed from the samples)."""
        samples = [Sample.from_dict(s) for s in data["samples"]]
        fields = ("method", "question", "prompt", "temperature", "seed", "ended")
        extra = {"seconds": data.get("seconds", 0.0), "header": data.get("header", "Question")}
        extra["preamble"] = data.get("preamble", "")
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
    preamble: str = "",
) -> Reasoning:
    """Answer from the prompt alone: Standard and CoT in one greedy call, CoT-SC by `samples` samples.

    A Standard completion follows `Answer:` and ends at the line break; a CoT completion follows
    `Thought:` and ends before the next `Question:` (the next `header` line) or a blank line.
    `parse_answer` reads each. `preamble` goes between the prompt and the question line (a Reflexion
    trial's memory, CoT's context); the prompt alone is the prefix the model keeps.
    """
    if method not in REASONING:
        raise ValueError(f"reason() answers standard, cot and cot-sc, not {method!r}")
    sampled = method == "cot-sc"
    text = prompt if isinstance(prompt, str) else prompt.text
    keep_prefix(model, text)
    result = Reasoning(
        method,
        question,  # as given, as the notebooks send it: white space and all
        text,
        temperature=temperature if sampled else None,
        seed=seed if sampled else None,
        header=header,
        preamble=preamble,
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
