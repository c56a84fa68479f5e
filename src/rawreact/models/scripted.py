"""A model that replays written completions, for tests, examples and the CLI without weights."""

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rawreact.errors import DataError, ModelError
from rawreact.models.base import Completion, cut_at_stop

_TOKEN = re.compile(r"\s*\S+")


class ScriptedModel:
    """Answers each call with the next scripted completion, treated like real model output.

    `completions` is a list of texts, used in order, or a function from the prompt to a text.
    Stop sequences and the token limit apply as a real backend applies them (a token here is a
    word with the white space before it), and every call is kept in `history`. A grammar is
    recorded there but not enforced: the script is the model's output, whatever it says.
    """

    def __init__(self, completions: Sequence[str] | Callable[[str], str], name: str = "scripted") -> None:
        self.name = name
        self._script = completions if callable(completions) else list(completions)
        self.history: list[dict] = []
        self._counted = ("", 0)  # the last prompt and its word count, as prompts only grow

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedModel":
        """Load a JSON list of completion texts."""
        try:
            texts = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise DataError(f"{path}: cannot read the script: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise DataError(f"{path} line {error.lineno}: not valid JSON: {error.msg}") from None
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise DataError(f"{path}: a model script must be a JSON list of completion strings")
        return cls(texts, name=f"scripted:{path}")

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

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, grammar: str | None = None) -> Completion:
        """Return the next completion, cut at the first stop sequence or after `max_tokens` words."""
        start = time.perf_counter()
        text = self._next(prompt)
        self.history.append({"prompt": prompt, "stop": list(stop), "max_tokens": max_tokens, "grammar": grammar})
        text, _ = cut_at_stop(text, stop)
        tokens = _TOKEN.findall(text)
        finish = "stop"
        if len(tokens) > max_tokens:
            text, tokens, finish = "".join(tokens[:max_tokens]), tokens[:max_tokens], "length"
        prompt_tokens = self._words(prompt)
        return Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(tokens),
            evaluated_tokens=prompt_tokens,
            seconds=time.perf_counter() - start,
        )
