"""The embedded backend: a GGUF model run in process by llama-cpp-python."""

import ctypes
import os
import time
from functools import cached_property
from pathlib import Path

import numpy as np

from rawreact.errors import ContextLengthExceeded, ModelError
from rawreact.models.base import ChatReply, Completion
from rawreact.models.chatml import ChatML
from rawreact.models.gbnf import GrammarSampler, check_grammar, quiet_log
from rawreact.models.gbnf import llama_cpp_module as _llama_cpp

_COMPILED = 64  # grammars kept compiled for llama-cpp-python's own sampler


class LlamaModel:
    """A llama-cpp-python model, greedy by default, reusing the KV cache of the growing prompt.

    Within an episode each call reuses the cached tokens it shares with the previous prompt, so a
    step only evaluates what the transcript added; a new episode reuses only what a cold start
    would compute identically (see `_reuse`). `reuse_cache=False` re-evaluates the whole prompt
    on every call instead, as a stateless API would.

    Greedy decoding under a grammar runs its own loop, which asks the grammar only about the
    tokens it is about to choose (see `GrammarSampler.best`): the same text as llama-cpp-python's
    grammar sampling, several times faster. `grammar_first=True`, or a temperature above 0, uses
    llama-cpp-python's sampler instead, which applies the grammar to the whole vocabulary.
    """

    supports_grammar = True
    concurrent = False  # one model, one KV cache: questions run one at a time (and use every core)

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
        grammar_first: bool = False,
    ) -> None:
        llama_cpp = _llama_cpp()
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist; give the path of a .gguf file")
        if n_threads is None:  # llama-cpp-python's default, half the cores, leaves a small machine idle
            n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        llama_cpp.llama_log_set(quiet_log, ctypes.c_void_p())
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
        self.grammar_first = grammar_first
        self._grammars: dict[str, object] = {}
        self._last_prompt: str | None = None
        self._aligned = 0  # cached tokens computed in whole batches from position 0, as a cold start would

    @property
    def chat_problem(self) -> str | None:
        """Why this model cannot take tool calls (no chat template, or not ChatML), or None when it can."""
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            return f"{self.name} has no chat template (a base model)"
        if "<|im_start|>" not in template:
            return f"{self.name}'s chat template is not ChatML, the only layout rawreact writes tool calls in"
        return None

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """The next assistant turn, in the ChatML function-calling layout under the tools grammar."""
        if self.chat_problem:
            raise ModelError(f"the tools method needs a chat model, and {self.chat_problem}")
        return self._tools_chat.chat(messages, tools, max_tokens=max_tokens)

    @cached_property
    def _tools_chat(self) -> ChatML:
        """The ChatML adapter of `chat`, kept so that it builds its tools grammar once."""
        return ChatML(self, constrain=True)

    @property
    def n_ctx(self) -> int:
        """The context window, in tokens."""
        return self.llm.n_ctx()

    def _grammar(self, text: str):
        """llama-cpp-python's grammar object for `text`, checked first (an invalid one would crash)."""
        if text not in self._grammars:
            check_grammar(text)
            if len(self._grammars) >= _COMPILED:  # titles grammars differ per question: keep the newest
                self._grammars.pop(next(iter(self._grammars)))
            self._grammars[text] = _llama_cpp().LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

    def sampler(self, grammar: str) -> GrammarSampler:
        """llama.cpp's grammar engine for `grammar` over this model's vocabulary."""
        return GrammarSampler(self.llm._model.vocab, self.llm.n_vocab(), grammar)

    def tokenize(self, text: str, bos: bool = True) -> list[int]:
        """The model's tokens for `text` (special tokens are parsed, as in prompts)."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=True)

    def admits(self, grammar: str, text: str) -> bool:
        """Whether `grammar` lets this model write `text` (as tokenized here) and then stop."""
        with self.sampler(grammar) as sampler:
            return sampler.admits(self.tokenize(text, bos=False), self.llm.token_eos())

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
        tokens = self.tokenize(prompt)
        if len(tokens) + max_tokens > self.n_ctx:
            raise ContextLengthExceeded(
                f"{self.name}: the prompt has {len(tokens)} tokens and {max_tokens} more were asked for, "
                f"but the context window is {self.n_ctx}; load the model with a larger n_ctx"
            )
        own_loop = grammar is not None and self.temperature == 0 and not self.grammar_first
        compiled = self._grammar(grammar) if grammar and not own_loop else None
        sampler = self.sampler(grammar) if own_loop else None
        reused = self._reuse(prompt, tokens)
        try:
            if sampler is not None:
                text, finish, generated = self._greedy(tokens, reused, sampler, stop, max_tokens)
            else:
                out = self.llm.create_completion(
                    tokens,  # already tokenized, with the BOS token, exactly as llama-cpp-python would
                    max_tokens=max_tokens,
                    stop=stop,
                    temperature=self.temperature,
                    seed=self.seed,
                    grammar=compiled,
                )
                choice = out["choices"][0]
                text, finish, generated = choice["text"], choice["finish_reason"], out["usage"]["completion_tokens"]
        except BaseException:
            self._last_prompt, self._aligned = None, 0  # the cache is in an unknown state: start cold
            raise
        finally:
            if sampler is not None:
                sampler.close()
        return Completion(
            text=text,
            finish_reason="length" if finish == "length" else "stop",
            prompt_tokens=len(tokens),
            completion_tokens=generated,
            evaluated_tokens=len(tokens) - reused,
            seconds=time.perf_counter() - start,
        )

    def sample(
        self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """`n` samples of `prompt`, which is evaluated once: each sample only generates.

        The prompt is evaluated as `complete` would evaluate it (so a later greedy call on another
        prompt is unaffected), the logits of its last token are kept, and each sample starts from
        them with the cache cut back to the prompt. Sample k draws with numpy's generator seeded
        `[seed, k]` (see `pick`), so the same seed gives the same samples.
        """
        start, llm = time.perf_counter(), self.llm
        tokens = self.tokenize(prompt)
        if len(tokens) + max_tokens > self.n_ctx:
            raise ContextLengthExceeded(
                f"{self.name}: the prompt has {len(tokens)} tokens and {max_tokens} more were asked for, "
                f"but the context window is {self.n_ctx}; load the model with a larger n_ctx"
            )
        reused = self._reuse(prompt, tokens)
        samples = []
        try:
            llm.n_tokens = reused
            llm.eval(tokens[reused:])
            first = self._logits().copy()
            for k in range(n):
                rng = np.random.default_rng([seed, k])
                text, finish, generated = self._decode(
                    len(tokens), first, lambda logits, rng=rng: pick(logits, temperature, rng), stop, max_tokens
                )
                samples.append(
                    Completion(
                        text=text,
                        finish_reason=finish,
                        prompt_tokens=len(tokens),
                        completion_tokens=generated,
                        evaluated_tokens=len(tokens) - reused if k == 0 else 0,
                        seconds=time.perf_counter() - start,
                    )
                )
                start = time.perf_counter()
        except BaseException:
            self._last_prompt, self._aligned = None, 0  # the cache is in an unknown state: start cold
            raise
        return samples

    def _logits(self) -> np.ndarray:
        """The logits of the last evaluated token (a view into llama.cpp's buffer)."""
        pointer = _llama_cpp().llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),))

    def _decode(self, at: int, logits: np.ndarray, choose, stop: list[str], max_tokens: int) -> tuple[str, str, int]:
        """Generate from position `at`, given the logits there: (text, finish reason, tokens generated).

        `choose` picks each token from the logits (a negative token ends the text). It ends as
        `create_completion` does: at an end-of-text token, at a stop sequence outside an unfinished
        UTF-8 character, or at `max_tokens`.
        """
        llm, llama_cpp = self.llm, _llama_cpp()
        vocab, stops = llm._model.vocab, [s.encode("utf-8") for s in stop if s]
        llm.n_tokens = at
        completion: list[int] = []
        unfinished = 0  # tokens still to pass before a stop check, as create_completion counts them
        while True:
            token = choose(logits)
            if token < 0 or llama_cpp.llama_vocab_is_eog(vocab, token):
                return llm.detokenize(completion).decode("utf-8", "ignore"), "stop", len(completion)
            completion.append(token)
            text = llm.detokenize(completion)
            unfinished = _multibyte_wait(text, unfinished)
            if unfinished > 0:
                unfinished -= 1
            else:
                found = next((s for s in stops if s in text), None)
                if found is not None:
                    return text[: text.index(found)].decode("utf-8", "ignore"), "stop", len(completion)
                if len(completion) >= max_tokens:
                    return text.decode("utf-8", "ignore"), "length", len(completion)
            llm.eval([token])
            logits = self._logits()

    def _greedy(
        self, tokens: list[int], reused: int, sampler: GrammarSampler, stop: list[str], max_tokens: int
    ) -> tuple[str, str, int]:
        """Greedy decoding under a grammar: (text, finish reason, tokens generated).

        It evaluates exactly what llama-cpp-python's `create_completion` evaluates (the prompt
        after the reused prefix, then one token at a time) and ends as it does (see `_decode`).
        """
        vocab, is_eog = self.llm._model.vocab, _llama_cpp().llama_vocab_is_eog

        def choose(logits: np.ndarray) -> int:
            token = sampler.best(logits)  # -1 when the grammar allows nothing more: the end
            if token >= 0 and not is_eog(vocab, token):
                sampler.accept(token)
            return token

        self.llm.n_tokens = reused
        self.llm.eval(tokens[reused:])
        return self._decode(len(tokens), self._logits(), choose, stop, max_tokens)


def _multibyte_wait(text: bytes, wait: int) -> int:
    """How many tokens to wait before checking stops, when `text` may end inside a UTF-8 character.

    This is llama-cpp-python's own rule in `create_completion`, kept as it is, quirks included, so
    that both decoding paths end a completion at the same token.
    """
    for k, char in enumerate(text[-3:]):
        k = 3 - k
        for num, pattern in ((2, 192), (3, 224), (4, 240)):
            if num > k and pattern & char == pattern:
                wait = num - k
    return wait


# llama-cpp-python's default sampling chain for `create_completion`, in its order.
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05


def pick(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """One token drawn as llama-cpp-python's default chain draws it: top-k 40, top-p 0.95, min-p 0.05,
    then temperature, then a draw from `rng` (greedy at temperature 0).
    """
    top = np.argpartition(logits, -TOP_K)[-TOP_K:]
    top = top[np.argsort(-logits[top], kind="stable")]
    if temperature <= 0:
        return int(top[0])
    values = logits[top].astype(np.float64)
    probs = np.exp(values - values[0])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), TOP_P)) + 1  # the fewest tokens holding TOP_P of the mass
    keep = min(keep, int((probs >= MIN_P * probs[0]).sum()))
    scaled = np.exp((values[:keep] - values[0]) / temperature)
    return int(top[rng.choice(keep, p=scaled / scaled.sum())])
