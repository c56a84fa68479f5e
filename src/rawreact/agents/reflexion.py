"""Reflexion (Shinn et al., 2023): trials of ReAct or CoT on one question, each after a failed one
shown what went wrong, as the Reflexion code's HotpotQA agents do.

A trial is one ReAct episode (`loop.react`), one CoT answer (`reasoning.reason`, given the
question's gold paragraphs as context or nothing), or one game played (`game.play`, as the Reflexion
paper plays ALFWorld). An evaluator decides whether it passed: `em`, the gold answer's exact match
(the paper's oracle), `supported`, which needs no gold answer, or, for a game, `won`.
A failed trial is followed by the next, whose prompt holds, between the few-shot prompt and the
question line, what the strategy keeps (STRATEGIES): nothing (`base`), the last trial's transcript
(`last_trial`), every reflection written so far (`reflexion`), or the last trial and the reflection
written on it (`last_trial_and_reflexion`). A reflection is one more raw-completion call on its own
few-shot prompt (`ReflectPrompt`), shown the failed trial; a trial too long for it has its longest
observations cut first, as the reference does. The question ends at the first trial that passes,
or after `trials` trials.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rawreact.agents.game import play
from rawreact.agents.guardrails import supported
from rawreact.agents.loop import react
from rawreact.agents.prompts import Prompt, json_string, python_string, read_exemplars, read_instruction, read_text
from rawreact.agents.reasoning import Reasoning, reason
from rawreact.agents.record import Trajectory
from rawreact.agents.reflexion_code import format_step, reference_cot
from rawreact.config.choices import REFLECT_TOKENS, REFLECTING, STRATEGIES, TRIALS
from rawreact.core.errors import ContextLengthExceeded, PromptError
from rawreact.core.metrics import is_answer, normalize_answer
from rawreact.core.text import one_line, whole_number
from rawreact.models.base import Completion, Model, keep_prefix

# How long a failed trial may be, in tokens, where a reflection or the next trial is shown it: the
# reference cuts its scratchpad to 1,600 tokens by replacing its longest observations.
SCRATCHPAD_TOKENS = 1600
CUT = "[passage cut to fit]"

# What a trial's memory says before what it holds (rawreact's own words; the reference's differ).
LAST_TRIAL = "You have tried this question before and did not get it right. This was your last attempt:\n"
END_OF_LAST = "(end of the last attempt)\n"
REFLECTIONS = (
    "You have tried this question before and did not get it right. The reflections below say what went wrong "
    "and how to do better; use them to answer it this time.\nReflections:\n"
)
AFTER_LAST = "The reflection below says what went wrong in that attempt and how to do better.\nReflection:\n"
# A game's memory says the same of a game not won.
GAME_LAST_TRIAL = "You have played this game before and did not win. This was your last attempt:\n"
GAME_REFLECTIONS = (
    "You have played this game before and did not win. The reflections below say what went wrong and how to "
    "do better; use them to win it this time.\nReflections:\n"
)

SHIPPED = {"react": "reflexion/", "cot": "reflexion/cot/", "game": "games/reflexion/"}  # under prompts/


@dataclass(frozen=True)
class ReflectPrompt:
    """The few-shot prompt of a reflection: an instruction and solved examples, from files.

    rawreact's layout: the instruction, the examples, then `Question: ...`, the failed trial and
    `Reflection:`. An instruction holding `{examples}` is a template in the Reflexion code's layout
    (its `REFLECT_INSTRUCTION`), filled in as that code fills it: `{examples}`, `{question}`,
    `{scratchpad}` (the trial, each line after a line break) and, for CoT, `{context}`.
    """

    instruction: str
    examples: str
    source: str

    @property
    def template(self) -> bool:
        """Whether the instruction is the Reflexion code's template."""
        return "{examples}" in self.instruction

    @property
    def sha256(self) -> str:
        """A hash of the instruction and examples, so a run records exactly which it used."""
        return hashlib.sha256(f"{self.instruction}\0{self.examples}".encode()).hexdigest()

    @property
    def prefix(self) -> str:
        """What every reflection prompt starts with: the prefix the model keeps."""
        if self.template:
            return self.instruction[: self.instruction.index("{examples}")]
        return self.instruction + self.examples

    def text(self, question: str, scratchpad: str, context: str = "", header: str = "Question") -> str:
        """The reflection prompt for a failed trial (`scratchpad`: its lines after the question line)."""
        if self.template:
            values = {"examples": self.examples, "question": question, "context": context}
            values["scratchpad"] = "".join("\n" + line for line in scratchpad.rstrip("\n").split("\n"))
            return self.instruction.format_map(values)
        shown = f"Context: {context}\n" if context else ""
        return f"{self.prefix}{shown}{header}: {question}\n{scratchpad}Reflection:"


def load_reflect_prompt(
    exemplars: str | None = None, *, key: str | None = None, instruction: str | None = None, agent: str = "react"
) -> ReflectPrompt:
    """The reflection prompt of `agent` ("react" or "cot"): the shipped one (prompts/reflexion/), or files.

    `exemplars` is an exemplar file in rawreact's layout, or a Python file whose top-level string
    `key` holds the examples (the Reflexion code's `fewshots.py`, key `REFLECTIONS` or
    `COT_REFLECT`); `instruction` a text file or `FILE.py#NAME` (its `prompts.py#REFLECT_INSTRUCTION`).
    """
    method = f"reflect-{agent}"
    instruction_text = read_instruction(instruction, method)
    if exemplars is not None and str(exemplars).endswith(".py"):
        if key is None:
            raise PromptError(f"{exemplars}: name its string of examples with --reflect-key, such as REFLECTIONS")
        examples, source = python_string(Path(exemplars), key), f"{exemplars}#{key}"
    elif exemplars is not None and str(exemplars).endswith(".json"):
        examples, source = json_string(Path(exemplars), key, "--reflect-key"), f"{exemplars}#{key}"
    elif exemplars is not None and "{FEW_SHOT_EXAMPLES}" in instruction_text:  # the code's alfworld_runs: whole
        examples, source = read_text(Path(exemplars)), str(exemplars)
    else:
        if key is not None:
            raise PromptError(f"--reflect-key {key!r} names a string of a .py or .json file, not of {exemplars}")
        examples = "".join(block + "\n" for block in read_exemplars(exemplars, method))
        source = str(exemplars or f"prompts/{SHIPPED[agent]}exemplars.txt")
    if instruction is not None:
        source += f" + {instruction}"
    return ReflectPrompt(instruction_text, examples, source)


@dataclass
class Reflection:
    """What the model wrote on a failed trial, the call that wrote it, and the trial's steps whose
    observations were cut to fit the reflection prompt (`cut`, step numbers; CoT has none)."""

    text: str
    call: Completion | None  # None when the prompt did not fit the context window (`ended` "context")
    cut: list[int] = field(default_factory=list)
    ended: str = "stop"

    def to_dict(self) -> dict:
        """A JSON-ready dict; `from_dict` reads it back."""
        call = None if self.call is None else self.call.to_dict()
        return {"text": self.text, "cut": self.cut, "ended": self.ended, "call": call}

    @classmethod
    def from_dict(cls, data: dict) -> "Reflection":
        """The inverse of `to_dict`."""
        call = None if data.get("call") is None else Completion(**data["call"])
        return cls(data["text"], call, list(data.get("cut", [])), data.get("ended", "stop"))


@dataclass
class Trial:
    """One attempt at the question: its ReAct trajectory or CoT reasoning, whether the evaluator
    passed it, and the reflection written after it failed (None: it passed, or none was asked for)."""

    n: int
    part: Trajectory | Reasoning
    passed: bool
    reflection: Reflection | None = None

    @property
    def answer(self) -> str:
        return self.part.answer

    @property
    def ended(self) -> str:
        return self.part.ended

    @property
    def calls(self) -> list[Completion]:
        """The trial's calls, then its reflection's."""
        if isinstance(self.part, Trajectory):
            calls = [c for step in self.part.steps for c in step.calls]
        else:
            calls = [c for s in self.part.samples for c in s.made_by]
        reflection = self.reflection
        return calls + ([reflection.call] if reflection is not None and reflection.call is not None else [])

    def to_dict(self) -> dict:
        """A JSON-ready dict without the few-shot prompt (a run file stores it once); `from_dict` reads it
        back given the prompt."""
        kind = "trajectory" if isinstance(self.part, Trajectory) else "reasoning"
        part = {k: v for k, v in self.part.to_dict().items() if k != "prompt"}
        reflection = None if self.reflection is None else self.reflection.to_dict()
        return {"trial": self.n, "passed": self.passed, kind: part, "reflection": reflection}

    @classmethod
    def from_dict(cls, data: dict, prompt: str) -> "Trial":
        """The inverse of `to_dict`, with the few-shot prompt put back."""
        if "trajectory" in data:
            part = Trajectory.from_dict(data["trajectory"] | {"prompt": prompt})
        else:
            part = Reasoning.from_dict(data["reasoning"] | {"prompt": prompt})
        reflection = None if data.get("reflection") is None else Reflection.from_dict(data["reflection"])
        return cls(data["trial"], part, bool(data["passed"]), reflection)


def scratchpad(part: Trajectory | Reasoning) -> str:
    """A trial as the model wrote it after the question line: its steps (a game's `> line` and what the game
    said), or CoT's thought and answer."""
    if isinstance(part, Trajectory) and part.commands:
        return "".join(f"> {step.action_text}\n{step.observation}\n" for step in part.steps)
    if isinstance(part, Trajectory):
        return "".join(step.render() for step in part.steps if step.calls)
    if not part.samples:
        return ""
    return f"{part.cue}{part.samples[0].call.text.rstrip()}\n"


def cut_to_fit(text: str, limit: int, count: Callable[[str], int]) -> tuple[str, list[int]]:
    """`text` with its longest observations replaced by a mark until it counts `limit` or less, as the
    reference's `truncate_scratchpad`; and the step numbers of the observations replaced."""
    lines = text.split("\n")
    game = bool(lines) and lines[0].startswith("> ")  # a game's scratchpad: `> line`, then what the game said
    said = (lambda line: line and not line.startswith("> ")) if game else (lambda line: line.startswith("Observation"))
    observations = sorted((k for k, line in enumerate(lines) if said(line)), key=lambda k: count(lines[k]))
    cut = []
    while observations and count("\n".join(lines)) > limit:
        k = observations.pop()
        if game:  # its step is the count of `>` lines up to it
            lines[k] = CUT
            cut.append(sum(line.startswith("> ") for line in lines[:k]))
            continue
        label = lines[k].split(":")[0]
        lines[k] = f"{label}: {CUT}"
        cut.append(whole_number(label.split()[-1]) or 0)
    return "\n".join(lines), sorted(cut)


def token_counter(model: Model) -> Callable[[str], int]:
    """How a scratchpad's length is counted: the model's tokens, or, for a model that cannot count them
    (a server), a word and a third per token's worth (English runs about 0.75 words a token)."""
    tokenize = getattr(model, "tokenize", None)
    if tokenize is not None:
        return lambda text: len(tokenize(text, bos=False))
    return lambda text: round(len(text.split()) * 4 / 3)


def memory(
    strategy: str,
    history: list[Trial],
    question: str,
    *,
    header: str = "Question",
    count: Callable[[str], int] = lambda text: 0,
    limit: int = SCRATCHPAD_TOKENS,
) -> str:
    """What the next trial is shown of the failed ones (`history`) under `strategy`, ending in a blank line."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; the strategies are {', '.join(STRATEGIES)}")
    if not history or strategy == "base":
        return ""
    last = history[-1]
    game = isinstance(last.part, Trajectory) and last.part.commands
    shown = cut_to_fit(scratchpad(last.part), limit, count)[0].strip("\n")
    opening = GAME_LAST_TRIAL if game else LAST_TRIAL
    last_trial = f"{opening}{header}: {question}\n{shown}\n{END_OF_LAST}"  # without CoT's context, as the reference
    if strategy == "last_trial":
        return last_trial + "\n"
    written = [t.reflection.text for t in history if t.reflection is not None and t.reflection.text]
    if strategy == "reflexion":
        head = GAME_REFLECTIONS if game else REFLECTIONS
        return "" if not written else head + "".join(f"- {text}\n" for text in written) + "\n"
    latest = last.reflection.text if last.reflection is not None else ""
    return last_trial + (f"{AFTER_LAST}- {latest}\n" if latest else "") + "\n"


def passes(evaluator: str, part: Trajectory | Reasoning, gold: str, context: str = "") -> bool:
    """Whether a trial passed: `em` its answer is the gold one (normalised exact match, the paper's
    oracle); `supported` it answered, and the answer occurs in what it read (its searches and lookups,
    or the context it was given; a yes or no needs a passage opened)."""
    if evaluator == "won":  # a game: the game says
        return part.ended == "won"
    answer = part.answer
    if not is_answer(answer):
        return False
    if evaluator == "em":
        return normalize_answer(answer) == normalize_answer(gold)
    if evaluator == "supported":
        if isinstance(part, Trajectory):
            return bool(supported(answer, part.evidence, part.search_hits > 0))
        return bool(context) and bool(supported(answer, [context], True))
    raise ValueError(f"unknown evaluator {evaluator!r}")


def reflect(
    model: Model,
    prompt: ReflectPrompt,
    trial: Trial,
    question: str,
    *,
    context: str = "",
    max_tokens: int = REFLECT_TOKENS,
    header: str = "Question",
    count: Callable[[str], int] = lambda text: 0,
    limit: int = SCRATCHPAD_TOKENS,
) -> Reflection:
    """One reflection on a failed trial: a call on the reflection prompt (which shows CoT's `context`, its
    text without the `Context:` label), stopped at a blank line or the next question, its lines joined into one.

    On the Reflexion code's own prompt (a template: its checkout was given), the call is the reference's:
    CoT's stops at the first line break, ReAct's has no stop, and the text's line breaks are deleted, as its
    `format_step` deletes them (`I guessed.Next`)."""
    shown, cut = cut_to_fit(scratchpad(trial.part), limit, count)
    keep_prefix(model, prompt.prefix)
    stop = ["\n\n", f"\n{header}:"]
    if prompt.template:  # the reference's: CoT's reflection stops at the line break, ReAct's nowhere
        stop = ["\n"] if isinstance(trial.part, Reasoning) else []
    try:
        call = model.complete(prompt.text(question, shown, context, header), stop=stop, max_tokens=max_tokens)
    except ContextLengthExceeded:
        return Reflection("", None, cut, "context")
    text = format_step(call.text) if prompt.template else one_line(" ".join(call.text.split("\n"))).strip()
    return Reflection(text, call, cut, call.finish_reason)


def gold_context(paragraphs: list[str]) -> str:
    """The context CoT (GT) is given: the gold supporting paragraphs, one a line, as the `Context:` line."""
    return "Context: " + "\n".join(" ".join(p.split()) for p in paragraphs) + "\n"


def trials(
    question: str,
    env,
    model: Model,
    prompt: Prompt | str,
    *,
    agent: str = "react",
    strategy: str = "reflexion",
    trials: int = TRIALS,
    evaluator: str = "em",
    gold: str = "",
    context: str = "",
    reflect_prompt: ReflectPrompt | None = None,
    reflect_max_tokens: int = REFLECT_TOKENS,
    header: str = "Question",
    done: list[Trial] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    scratchpad_tokens: int = SCRATCHPAD_TOKENS,
    max_tokens: int = 100,
    as_reflexion_code: bool = False,
    **loop_options,
) -> list[Trial]:
    """Up to `trials` trials of `agent` ("react" or "cot") on `question`, until one passes the evaluator.

    `context` (CoT's, from `gold_context`) goes before the question line. `done` are trials already
    made (a resumed run's): the next one follows them, and a missing reflection on the last is
    written first. `on_trial(trial)` is called when a trial ends and again when its reflection is
    written, so that a run can keep both. `loop_options` go to the ReAct loop. `as_reflexion_code` (the
    agent's prompt comes from the Reflexion code's files) makes each CoT trial as its `CoTAgent` does
    (`reference_cot`); its reflections follow that code whenever their prompt is its template.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; the strategies are {', '.join(STRATEGIES)}")
    if strategy in REFLECTING and reflect_prompt is None:
        reflect_prompt = load_reflect_prompt(agent=agent)
    count = token_counter(model)
    history = list(done or [])
    paragraphs = context.removeprefix("Context: ").rstrip("\n")  # what the context line shows, without its label
    while True:
        if history:
            last = history[-1]
            if last.passed or len(history) >= trials:
                return history
            if agent == "game":  # what a game's reflection is shown as its question: the game's opening
                question = last.part.question
            if strategy in REFLECTING and last.reflection is None:
                last.reflection = reflect(
                    model,
                    reflect_prompt,
                    last,
                    question,
                    context=paragraphs,
                    max_tokens=reflect_max_tokens,
                    header=header,
                    count=count,
                    limit=scratchpad_tokens,
                )
                if on_trial is not None:
                    on_trial(last)
        before = memory(strategy, history, question, header=header, count=count, limit=scratchpad_tokens)
        if agent == "game":  # the game's opening is its question
            part = play(env, model, prompt, max_tokens=max_tokens, header=header, preamble=before, **loop_options)
            question = part.question
        elif agent == "react":
            part = react(
                question, env, model, prompt, max_tokens=max_tokens, header=header, preamble=before, **loop_options
            )
        elif as_reflexion_code:
            part = reference_cot(question, model, prompt, header=header, preamble=before + context)
        else:
            part = reason(
                question, model, prompt, method="cot", max_tokens=max_tokens, header=header, preamble=before + context
            )
        trial = Trial(len(history) + 1, part, passes(evaluator, part, gold, paragraphs))
        history.append(trial)
        if on_trial is not None:
            on_trial(trial)
