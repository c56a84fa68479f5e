"""A model that replays written completions, for tests, examples and the CLI without weights."""

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rawreact.core.errors import DataError, ModelError
from rawreact.core.tasks import TASK_TYPES
from rawreact.core.text import commented, one_line
from rawreact.models.base import ChatReply, Completion, cut_at_stop
from rawreact.models.chatml import END, START, ChatML

_TOKEN = re.compile(r"\s*\S+")
_STEP = re.compile(r"(?:Thought|Action) (\d+):$|(?:Thought|Answer):$")  # Standard and CoT prompts: step 1
_OPENS = re.compile(r"\n(?:Thought|Action) (\d+):")


def _under_way(text: str) -> tuple[int, str] | None:
    """The step a prompt continues (it ends inside a step's text, which the token limit cut) and what that step
    wrote so far: (i, the text after `Thought i:` or `Action i:`), or None."""
    start = text.rfind("\nObservation ")
    opened = _OPENS.search(text, max(start, 0))
    return None if opened is None else (int(opened.group(1)), text[opened.end() :])


def _texts(data: object) -> bool:
    return isinstance(data, list) and all(isinstance(t, str) for t in data)


class _ByQuestion:
    """A script by question: the completion for step i of the question the prompt ends with, and
    `reflection`, what every Reflexion reflection call (a prompt ending in `Reflection:`) gets."""

    def __init__(self, scripts: dict[str, list[str]], name: str, reflection: str | None = None) -> None:
        self.scripts, self.name, self.reflection = scripts, name, reflection
        self.problems = [key for key in scripts if "\n" in key]  # problems of programs: their prompts

    def program(self, prompt: str) -> str | None:
        """A program method's call, where the prompt holds a scripted problem (the one it holds last): its tests
        call gets no tests; an implementation gets the first text, or the one after the earlier implementation
        the prompt shows (programs' reflexion); None for a prompt of no scripted problem."""
        held = [(prompt.rfind(key), key) for key in self.problems if key in prompt]
        if not held:
            return None
        texts = self.scripts[max(held)[1]]
        if re.search(r"# Tests of \w+:\n$", prompt):
            return ""
        shown = [k for k, text in enumerate(texts) if text.strip() and commented(text) in prompt]
        return texts[min(shown[-1] + 1, len(texts) - 1)] if shown else texts[0]

    def __call__(self, prompt: str) -> str:
        if prompt.endswith("Reflection:"):
            if self.reflection is None:
                raise ModelError(f"{self.name} has no 'reflection' for a Reflexion reflection call; add one")
            return self.reflection
        program = self.program(prompt)
        if program is not None:
            return program
        # The start of the last Question (or FEVER's Claim) line of the prompt.
        line, header = max((("\n" + prompt).rfind(f"\n{h}: "), h) for h in {t.header for t in TASK_TYPES.values()})
        question = prompt[line + len(header) + 2 :].split("\n", 1)[0] if line >= 0 else ""
        question = one_line(question.removesuffix(END))  # a ChatML user turn ends with <|im_end|>
        step = _STEP.search(prompt)
        turns = prompt.count(f"{START}assistant\n")  # the tools method: the assistant turn to write
        cut = _under_way(prompt[line:]) if step is None and not turns and line >= 0 else None
        if question in self.scripts and cut is not None:  # the loop continues a line the token limit cut
            texts, (i, written) = self.scripts[question], cut
            if i <= len(texts) and texts[i - 1].startswith(written):
                return texts[i - 1][len(written) :]  # the rest of that step's text, as a model would go on
        if question not in self.scripts or (step is None and not turns):
            raise ModelError(f"{self.name} has no script for the question {question!r}; add it to the script")
        texts, i = self.scripts[question], int(step.group(1) or 1) if step is not None else turns
        if i > len(texts):
            raise ModelError(f"{self.name} has {len(texts)} steps for {question!r} and was asked for step {i}")
        return texts[i - 1]


class ScriptedModel:
    """Answers each call with the next scripted completion, treated like real model output.

    `completions` is a list of texts, used in order, or a function from the prompt to a text.
    Stop sequences and the token limit apply as a real backend applies them (a token here is a
    word with the white space before it), and every call is kept in `history`. A grammar is
    recorded there but not enforced: the script is the model's output, whatever it says.
    `seconds_per_call` makes each call take that long, like a real model.
    """

    supports_grammar = True  # recorded in `history`, not enforced
    concurrent = True  # scripts by question answer the same in any order; see `from_file`

    def __init__(
        self,
        completions: Sequence[str] | Callable[[str], str],
        name: str = "scripted",
        seconds_per_call: float = 0.0,
    ) -> None:
        self.name = name
        self._script = completions if callable(completions) else list(completions)
        self.seconds_per_call = seconds_per_call
        self.history: list[dict] = []
        self._counted = ("", 0)  # the last prompt and its word count, as prompts only grow
        self._lock = threading.Lock()  # several questions may share the model (run_questions workers)
        self.script_sha256: str | None = None  # the script file's, for one read from a file

    @property
    def cache_problem(self) -> str | None:
        """Why a call cache cannot answer for this model (`models.cache`), or None: a list script answers in the
        order of the calls, not by the prompt."""
        if callable(self._script):
            return None
        return (
            'its script is a list, answered in call order rather than by prompt; script it by question ({"questions": '
            "...})"
        )

    def cache_identity(self) -> dict:
        """What decides this model's replies, for a call cache: its name and its script file's content."""
        return {"backend": "ScriptedModel", "name": self.name, "script_sha256": self.script_sha256}

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedModel":
        """Load a script: a JSON list of completions, used in order (or `{"completions": [...]}`, with
        `"seconds_per_call"`), or an object with the
        completions of each question by step, `{"questions": {QUESTION: [step 1, ...]}}`, and
        optionally `"seconds_per_call"` and `"reflection"` (the text of every Reflexion reflection).
        Scripts by question give the same answers in any order, so a shuffled or resumed run can use them.
        """
        try:
            raw = Path(path).read_bytes()
            data = json.loads(raw.decode("utf-8-sig"))
        except OSError as error:
            raise DataError(f"{path}: cannot read the script: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise DataError(f"{path} line {error.lineno}: not valid JSON: {error.msg}") from None
        name = f"scripted:{path}"
        if _texts(data):
            return cls(data, name=name)
        if isinstance(data, dict) and "completions" in data:  # a list in call order, with a pace of its own
            delay = data.get("seconds_per_call", 0.0)
            if not _texts(data["completions"]) or not isinstance(delay, (int, float)) or isinstance(delay, bool):
                raise DataError(f"{path}: 'completions' is a list of completion strings, 'seconds_per_call' a number")
            return cls(data["completions"], name=name, seconds_per_call=float(delay))
        if isinstance(data, dict) and isinstance(data.get("questions"), dict):
            scripts = data["questions"]
            delay, reflection = data.get("seconds_per_call", 0.0), data.get("reflection")
            if not all(_texts(texts) for texts in scripts.values()) or not isinstance(delay, (int, float)):
                raise DataError(f"{path}: 'questions' maps each question to a list of completion strings")
            if reflection is not None and not isinstance(reflection, str):
                raise DataError(f"{path}: 'reflection' must be the text of a reflection")
            # A problem of a program is keyed by its whole prompt, line breaks and all (`_ByQuestion.program`).
            by_question = {(q if "\n" in q else one_line(q)): texts for q, texts in scripts.items()}
            model = cls(_ByQuestion(by_question, name, reflection), name=name, seconds_per_call=float(delay))
            model.script_sha256 = hashlib.sha256(raw).hexdigest()
            return model
        raise DataError(
            f"{path}: a model script is a JSON list of completion strings, or an object "
            '{"questions": {"question": ["step 1 completion", ...]}}'
        )

    def _next(self, prompt: str) -> str:
        if callable(self._script):
            return self._script(prompt)
        call = len(self.history)
        if call >= len(self._script):
            raise ModelError(
                f"{self.name} has {len(self._script)} completions and was asked for call {call + 1}; "
                "add completions to the script"
            )
        return self._script[call]

    def _words(self, prompt: str) -> int:
        """Whitespace-separated words in `prompt`, counting only what was added to the last one."""
        last, count = self._counted
        if last and prompt.startswith(last):
            rest = prompt[len(last) :]
            joined = bool(rest) and not rest[0].isspace() and not last[-1].isspace()  # a word spans the seam
            count += len(rest.split()) - joined
        else:
            count = len(prompt.split())
        self._counted = (prompt, count)
        return count

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str],
        max_tokens: int,
        grammar: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        """Return the next completion, cut at the first stop sequence or after `max_tokens` words.

        `temperature` and `seed` (set by `sample`) are recorded in `history`, as a grammar is.
        """
        start = time.perf_counter()
        if self.seconds_per_call:
            time.sleep(self.seconds_per_call)
        with self._lock:
            text = self._next(prompt)
            self.history.append(
                {"prompt": prompt, "stop": list(stop), "max_tokens": max_tokens, "grammar": grammar}
                | ({} if temperature is None else {"temperature": temperature, "seed": seed})
            )
            prompt_tokens = self._words(prompt)
        text, _ = cut_at_stop(text, stop)
        tokens = _TOKEN.findall(text)
        finish = "stop"
        if len(tokens) > max_tokens:
            text, tokens, finish = "".join(tokens[:max_tokens]), tokens[:max_tokens], "length"
        return Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(tokens),
            evaluated_tokens=prompt_tokens,
            seconds=time.perf_counter() - start,
        )

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """The next assistant turn: a scripted completion in the ChatML function-calling layout, read as a reply.

        Scripts write the layout's raw text (`functions.search:` and the arguments, or `message:`), so
        every reply goes through the reader the embedded model's does; no grammar is applied.
        """
        return ChatML(self, constrain=False).chat(messages, tools, max_tokens=max_tokens)

    def sample(
        self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """The next `n` completions, one call each, sample k recorded with seed `seed + k`."""
        return [
            self.complete(prompt, stop=stop, max_tokens=max_tokens, temperature=temperature, seed=seed + k)
            for k in range(n)
        ]
