"""LATS's prompts (`agents.lats`): what a search sends to expand a node, value a child and reflect on a failed
trajectory, under the repository's rules (its templates, read from a clone's `hotpot/hotpot.py`) or rawreact's
own (its ReAct prompt, its value prompt in prompts/lats/, its Reflexion reflection prompt)."""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rawreact.core.errors import PromptError
from rawreact.core.files import read_whole
from rawreact.models.base import Model


@dataclass
class LatsPrompts:
    """What a search sends. `expand(question_and_steps, reflections)` is a step's prompt, ending where the next
    thought begins; `value(child_text, failed)` a child's value prompt; `reflect(trajectory)` a reflection's."""

    expand: Callable[[str, list[dict]], str]
    value: Callable[[str, list[str], list[dict]], str]
    reflect: Callable[[str], str]
    source: str = ""


@dataclass(frozen=True)
class LatsPromptFiles:
    """What a run's LATS prompts are made of: the repository's `hotpot/hotpot.py` (`lats_prompts`, its rules), or
    rawreact's value prompt text and reflection prompt (a ReflectPrompt); `made(steps, model)` puts them together
    around the run's ReAct prompt `steps`."""

    lats_prompts: str | None = None
    value: str = ""
    reflect: object = None
    value_source: str = "prompts/lats/value.txt"
    # the repository's templates and the SHA-256 of the file's bytes they were read from (`read_reference`)
    strings: dict | None = field(default=None, repr=False, compare=False)
    file_sha256: str = ""

    @classmethod
    def read_reference(cls, path: str) -> "LatsPromptFiles":
        """The repository's prompts, read once: a run sends the templates whose file's hash its manifest holds."""
        from rawreact.agents.prompts import read_bytes_and_text

        data, text = read_bytes_and_text(Path(path))
        return cls(
            lats_prompts=path, strings=reference_strings(path, text), file_sha256=hashlib.sha256(data).hexdigest()
        )

    @property
    def source(self) -> str:
        """Where the prompts come from: the repository's file, or rawreact's value and reflection prompts."""
        return self.lats_prompts or f"{self.value_source} + {self.reflect.source}"

    @property
    def sha256(self) -> str:
        """A hash of what the prompts are made of: the repository's file, or the value and reflection prompts."""
        if self.lats_prompts is not None:
            return self.file_sha256 or hashlib.sha256(read_whole(self.lats_prompts)).hexdigest()
        return hashlib.sha256(f"{self.value}\0{self.reflect.sha256}".encode()).hexdigest()

    def made(self, steps: str, model: Model) -> LatsPrompts:
        """The prompts of a search, counting tokens (for the repository's 4,000-token limit) as `model` does."""
        if self.lats_prompts is None:
            return own_prompts(steps, self.value, self.reflect, source=self.source)
        tokenize = getattr(model, "tokenize", None)
        count = (lambda t: len(tokenize(t))) if tokenize else words
        return reference_prompts(self.lats_prompts, count, self.strings)


def words(text: str) -> int:
    """A token count for a model that cannot count its own: a word and the space before it, as the scripted model
    counts."""
    return len(text.split())


REFERENCE_STRINGS = ("cot_prompt", "cot_prompt_short", "cot_prompt_feedback", "cot_prompt_feedback_short",
                     "value_prompt_reasoning", "reflection_prompt")  # fmt: skip


# The fields each template may name: what `HotPotQATask` fills them with (`.format(input=..., ...)`).
REFERENCE_FIELDS = {
    "cot_prompt": {"input"},
    "cot_prompt_short": {"input"},
    "cot_prompt_feedback": {"trajectories", "input"},
    "cot_prompt_feedback_short": {"trajectories", "input"},
    "value_prompt_reasoning": {"s", "input"},
    "reflection_prompt": {"trajectory"},
}


def reference_strings(path: str, text: str | None = None) -> dict[str, str]:
    """The repository's templates, read from its `hotpot/hotpot.py`, each checked to name only the fields its
    task fills: a PromptError naming the template and the field, when the file is read (before any model)."""
    import string

    from rawreact.agents.prompts import python_strings

    found = python_strings(Path(path), REFERENCE_STRINGS, text)
    for name, template in found.items():
        allowed = REFERENCE_FIELDS[name]
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
        except ValueError as error:
            raise PromptError(
                f"{path}: {name} is not a format template: {error}; restore it from the repository"
            ) from None
        for named in fields:
            if named not in allowed:
                filled = ", ".join("{" + f + "}" for f in sorted(allowed))
                raise PromptError(
                    f"{path}: {name} names the field {{{named}}}, and LATS fills only {filled} in it; restore the "
                    "template from the repository"
                )
    return found


LONGEST = 4000  # hotpotqa.py's max_token_length: past it, the short prompts


def reference_prompts(path: str, count: Callable[[str], int], found: dict | None = None) -> LatsPrompts:
    """The repository's prompts, read from its `hotpot/hotpot.py` (`path`), put together as its `HotPotQATask`
    does: the CoT prompt (with the failed trajectories and reflections, where there are any) around the
    question and steps, its short forms past 4,000 tokens (`count` counts them: the model's tokenizer here,
    GPT-2's there); the value prompt `value_prompt_reasoning` alone (its branch with the failed trajectories
    is never taken: `if len(z) != 0 and False`); the reflection prompt around a failed trajectory. `found`: the
    templates, read already."""
    found = reference_strings(path) if found is None else found

    def expand(text: str, reflections: list[dict]) -> str:
        if not reflections:
            prompt = found["cot_prompt"].format(input=text)
            return found["cot_prompt_short"].format(input=text) if count(prompt) > LONGEST else prompt
        said = "".join(f"{r['trajectory']}FAILED TRAJECTORY\nReflection: {r['reflection']}\n\n" for r in reflections)
        prompt = found["cot_prompt_feedback"].format(trajectories=said, input=text)
        if count(prompt) > LONGEST:
            said = "".join(f"{r['trajectory']}FAILED TRAJECTORY\nReflection: {r['reflection']}\n\n"
                           for r in reflections[:3])  # fmt: skip
            prompt = found["cot_prompt_feedback_short"].format(trajectories=said, input=text)
        return prompt

    def value(text: str, failed: list[str], reflections: list[dict]) -> str:
        return found["value_prompt_reasoning"].format(s="", input=text + "\nThis trajectory is ")

    return LatsPrompts(expand, value, lambda trajectory: found["reflection_prompt"].format(trajectory=trajectory),
                       source=f"{path}#{','.join(REFERENCE_STRINGS)}")  # fmt: skip


WRONG = "This trajectory is wrong.\nThus the correctness score is 1"  # how own value prompts show a failed one


def own_prompts(steps: str, value_text: str, reflect, source: str = "") -> LatsPrompts:
    """rawreact's prompts: its ReAct prompt (`steps`, instruction and exemplars) before the question and steps,
    with the reflections on failed attempts between them; its value prompt (`value_text`, prompts/lats/) before
    the trajectory, the failed ones shown first; its Reflexion reflection prompt (`reflect`, a ReflectPrompt)."""

    def expand(text: str, reflections: list[dict]) -> str:
        if not reflections:
            return steps + text
        lessons = "".join(f"- {' '.join(r['reflection'].split())}\n" for r in reflections)
        return f"{steps}Earlier attempts at this question failed. What was learned from them:\n{lessons}\n{text}"

    def value(text: str, failed: list[str], reflections: list[dict]) -> str:
        question = text.split("\n", 1)[0]
        wrong = "".join(f"{question}\n{f}\n{WRONG}\n\n" for f in failed[:2])
        return f"{value_text}{wrong}{text}\nThis trajectory is"

    def reflection(trajectory: str) -> str:
        question, _, rest = trajectory.partition("\n")
        return reflect.text(question.removeprefix("Question: "), rest.strip("\n"))

    return LatsPrompts(expand, value, reflection, source=source)


SCORES = [("10", 1.0), ("9", 0.9), ("8", 0.8), ("7", 0.7), ("6", 0.6), ("5", 0.5), ("4", 0.4), ("3", 0.3),
          ("2", 0.2), ("1", 0.1)]  # fmt: skip


def value_of(text: str) -> float:
    """A value reply read as `value_outputs_unwrap` reads it: the first of 10, 9, ..., 1 found anywhere in the
    text, as a tenth (`10` gives 1.0, a text with a `3` and no higher number 0.3), and -1 with no digit."""
    return next((value for digits, value in SCORES if digits in text), -1.0)
