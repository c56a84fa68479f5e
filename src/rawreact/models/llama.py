"""The embedded backend: a GGUF model run in process by llama-cpp-python."""

import ctypes
import os
import time
from pathlib import Path

from rawreact.errors import ContextLengthExceeded, ModelError
from rawreact.models.base import Completion


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError:
        raise ModelError("the embedded backend needs llama-cpp-python: pip install llama-cpp-python") from None
    return llama_cpp


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def _quiet_log(level, text, user_data):
    """llama.cpp's own logging, dropped: it writes to stderr even with verbose=False."""


def check_grammar(grammar: str) -> None:
    """Raise ModelError when llama.cpp cannot parse `grammar`, instead of letting it crash.

    llama-cpp-python 0.3.x dereferences a failed grammar parse and segfaults, so the text is
    first handed to the sampler constructor, which returns NULL on a parse error.
    """
    llama_cpp = _llama_cpp()
    sampler = llama_cpp.llama_sampler_init_grammar(None, grammar.encode(), b"root")
    if not sampler:
        raise ModelError("the GBNF grammar does not parse (check rule names, brackets and that `root` exists)")
    llama_cpp.llama_sampler_free(sampler)


class LlamaModel:
    """A llama-cpp-python model, greedy by default, reusing the KV cache of the growing prompt.

    Within an episode each call reuses the cached tokens it shares with the previous prompt, so a
    step only evaluates what the transcript added; a new episode reuses only what a cold start
    would compute identically (see `_reuse`). `reuse_cache=False` re-evaluates the whole prompt
    on every call instead, as a stateless API would.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        n_ctx: int = 8192,
        temperature: float = 0.0,
        seed: int = 0,
        reuse_cache: bool = True,
        n_threads: int | None = None,
    ) -> None:
        llama_cpp = _llama_cpp()
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist; give the path of a .gguf file")
        if n_threads is None:  # llama-cpp-python's default, half the cores, leaves a small machine idle
            n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p())
        try:
            # swa_full keeps the whole sliding-window cache, without which Gemma 3 cannot reuse a prefix.
            self.llm = llama_cpp.Llama(
                str(path), n_ctx=n_ctx, seed=seed, swa_full=True, n_threads=n_threads, verbose=False
            )
        except ValueError as error:
            raise ModelError(f"llama.cpp could not load {path}: {error}; is it a valid GGUF file?") from None
        self.name = name or path.name
        self.path = path
        self.temperature = temperature
        self.seed = seed
        self.reuse_cache = reuse_cache
        self._grammars: dict[str, object] = {}
        self._last_prompt: str | None = None
        self._aligned = 0  # cached tokens computed in whole batches from position 0, as a cold start would

    @property
    def n_ctx(self) -> int:
        """The context window, in tokens."""
        return self.llm.n_ctx()

    def _grammar(self, text: str):
        if text not in self._grammars:
            check_grammar(text)
            self._grammars[text] = _llama_cpp().LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

    def _reuse(self, prompt: str, tokens: list[int]) -> int:
        """Choose how many cached tokens the next call reuses, and set the cache up for it.

        Within an episode every prompt extends the previous one, and the cache is reused up to the
        longest shared token prefix. A prompt that does not extend the previous one starts a new
        episode: then only whole batches that a cold start would have computed identically are
        kept, because floating point results depend on how tokens were batched, and a greedy
        episode must not change with whichever episode happened to run before it.
        """
        llm, batch = self.llm, self.llm.n_batch
        shared = llm.longest_token_prefix(llm._input_ids, tokens) if self.reuse_cache else 0
        if self.reuse_cache and self._last_prompt is not None and prompt.startswith(self._last_prompt):
            reused = shared - (shared == len(tokens))  # llama-cpp-python recomputes one token for logits
            self._aligned = min(self._aligned, reused)
        else:
            reused = max(0, min(shared, self._aligned, len(tokens) - 1) // batch * batch)
            llm.n_tokens = reused  # llama-cpp-python reuses exactly the first n_tokens cached tokens
            self._aligned = reused + (len(tokens) - reused) // batch * batch
        self._last_prompt = prompt
        return reused

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, grammar: str | None = None) -> Completion:
        """Greedy (at temperature 0) completion of `prompt`, cut before the first stop sequence."""
        start = time.perf_counter()
        tokens = self.llm.tokenize(prompt.encode("utf-8"), special=True)
        if len(tokens) + max_tokens > self.n_ctx:
            raise ContextLengthExceeded(
                f"{self.name}: the prompt has {len(tokens)} tokens and {max_tokens} more were asked for, "
                f"but the context window is {self.n_ctx}; load the model with a larger n_ctx"
            )
        compiled = self._grammar(grammar) if grammar else None
        reused = self._reuse(prompt, tokens)
        try:
            out = self.llm.create_completion(
                tokens,  # already tokenized, with the BOS token, exactly as llama-cpp-python would
                max_tokens=max_tokens,
                stop=stop,
                temperature=self.temperature,
                seed=self.seed,
                grammar=compiled,
            )
        except BaseException:
            self._last_prompt, self._aligned = None, 0  # the cache is in an unknown state: start cold
            raise
        choice, usage = out["choices"][0], out["usage"]
        return Completion(
            text=choice["text"],
            finish_reason="length" if choice["finish_reason"] == "length" else "stop",
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            evaluated_tokens=len(tokens) - reused,
            seconds=time.perf_counter() - start,
        )
