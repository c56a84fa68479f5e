"""The embedded backend: a GGUF model run in process by llama-cpp-python."""

import ctypes
import threading
import time
from functools import cached_property
from pathlib import Path

import numpy as np

from rawreact.core.errors import ContextLengthExceeded, ModelError
from rawreact.models import states
from rawreact.models.base import ChatReply, Completion
from rawreact.models.batch import PREFIXES, Engine, Request
from rawreact.models.build import loading, loads
from rawreact.models.chatml import END, ChatML
from rawreact.models.cores import Cores, allowed_cores
from rawreact.models.gbnf import GrammarSampler, quiet_log
from rawreact.models.gbnf import llama_cpp_module as _llama_cpp
from rawreact.models.specs import DRAFTS_MAX, sequences_problem
from rawreact.models.tagged import Tagged, speaks_tagged


class LlamaModel:
    """A GGUF model in process, greedy by default, reusing the KV cache of the growing prompt.

    llama-cpp-python loads the model and its tokenizer; the decoding is `batch.Engine`'s, in a
    context with one stream per worker (`workers`), so that `workers` questions decode together.
    Within an episode each call reuses the cached tokens it shares with the previous prompt, so a
    step only evaluates what the transcript added. A new episode starts from the saved state of
    the run's few-shot prompt (`keep_prefix`; kept on disk for later processes, `states`), never from what an
    earlier episode left.
    `reuse_cache=False` re-evaluates the whole prompt on every call instead, as a stateless API would.

    Greedy decoding under a grammar asks the grammar only about the tokens it is about to choose
    (see `GrammarSampler.best`); `grammar_first=True`, or a temperature above 0, applies the
    grammar to the whole vocabulary first, as llama-cpp-python's sampler does: the same text, slower.

    `drafts=K` lets each greedy call guess up to K tokens a pass by prompt lookup and keep those
    the model agrees with (see `batch`); sampled calls and CoT-SC's samples draft nothing. Drafting
    turns flash attention off unless `flash_attention` says otherwise, since with it on a token's
    logits change with the number of tokens in its pass. On llama.cpp's CPU kernels the text can
    still differ in the last bits from decoding without drafts (docs/servers.md, Drafting).

    `n_threads` fixes llama.cpp's threads (None: every core this process may use). "auto" follows the
    load instead: the cores less those other processes keep busy, re-measured every second
    (`cores.Cores`), so a busy machine slows a run down instead of stalling it; llama.cpp's arithmetic
    here depends on the thread count, so the text can then differ from a fixed count's.

    `repack` says whether llama.cpp copies the weights into the layout of this CPU's kernels at load (None:
    yes, unless the build has Intel AMX, whose kernels crash: see `build`); `build` lists the features the
    installed llama.cpp reports (AVX2, AVX512, AMX_INT8, REPACK, ...). Both decide the arithmetic.
    """

    supports_grammar = True

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
        workers: int = 1,
        drafts: int = 0,
        flash_attention: bool | None = None,
        repack: bool | None = None,
    ) -> None:
        llama_cpp = _llama_cpp()
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist; give the path of a .gguf file")
        if workers < 1:
            raise ModelError(f"workers must be 1 or more, not {workers}")
        problem = sequences_problem(str(path), workers, "workers")
        if problem:
            raise ModelError(problem)
        if isinstance(drafts, bool) or not isinstance(drafts, int) or not 0 <= drafts <= DRAFTS_MAX:
            raise ModelError(f"drafts must be a whole number from 0 (no drafting) to {DRAFTS_MAX}, not {drafts!r}")
        if not 0 <= seed < 2**32:  # llama.cpp's seeds are unsigned 32-bit numbers, as numpy's generator needs
            raise ModelError(f"seed={seed} must be a whole number from 0 to {2**32 - 1}")
        fixed = isinstance(n_threads, int) and not isinstance(n_threads, bool) and n_threads >= 1
        if not (n_threads is None or n_threads == "auto" or fixed):
            raise ModelError(f"n_threads must be a whole number of 1 or more, None or 'auto', not {n_threads!r}")
        if repack is not None and not isinstance(repack, bool):
            raise ModelError(f"repack must be True, False or None (llama.cpp's choice for this build), not {repack!r}")
        default = loads()
        self.build, self.repack = default["features"], default["repack"] if repack is None else repack
        self.shared_cache = False  # one llama.cpp cache for all of the engine's streams, instead of one each
        self.cores = Cores() if n_threads == "auto" else None  # the cores, less what other processes use
        n_threads = n_threads if fixed else allowed_cores()
        llama_cpp.llama_log_set(quiet_log, ctypes.c_void_p())
        try:
            # Its own context only tokenizes: the engine's contexts decode.
            with loading(llama_cpp, repack=self.repack):
                self.llm = llama_cpp.Llama(str(path), n_ctx=256, n_batch=256, n_threads=n_threads, verbose=False)
        except ValueError as error:
            raise ModelError(f"llama.cpp could not load {path}: {error}; is it a valid GGUF file?") from None
        self.name = name or path.name
        self.path = path
        trained = llama_cpp.llama_model_n_ctx_train(self.llm._model.model)
        if n_ctx > trained:  # checked before any context is made: a huge window would take the memory first
            raise ModelError(
                f"n_ctx={n_ctx} (--n-ctx): {self.name} was trained with a context window of {trained:,} tokens; "
                f"give --n-ctx {trained} or less"
            )
        self.n_ctx = n_ctx  # of each stream: the context window of one question
        self.n_threads = n_threads
        self.temperature = temperature
        self.seed = seed
        self.reuse_cache = reuse_cache
        # where prefix states are kept (models.states): at one fixed llama.cpp thread only, where a state read gives
        # the records a computed one gives (at two, measured, it did not)
        kept = reuse_cache and self.cores is None and n_threads == 1
        self.states_folder = states.folder() if kept else None
        self.grammar_first = grammar_first
        self.workers = workers
        self.drafts = drafts
        self.flash_attention = drafts == 0 if flash_attention is None else flash_attention
        self._sample_flash = True if flash_attention is None else flash_attention  # samples draft nothing
        self.concurrent = workers > 1  # several threads may call complete: their calls decode together
        self._lock, self._sampling = threading.Lock(), threading.Lock()
        self._engine: Engine | None = None
        self._samplers: dict[tuple[int, int], Engine] = {}
        # False (benchmarks/lats.py's baseline): samples share the prompt's cells but decode one after another
        self.samples_together = True
        self._prefixes: dict[str, list[int]] = {}

    @property
    def chat_problem(self) -> str | None:
        """Why this model cannot take tool calls (no chat template, or not ChatML), or None when it can."""
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            return f"{self.name} has no chat template (a base model)"
        if "<|im_start|>" not in template:
            return f"{self.name}'s chat template is not ChatML, the only turns rawreact writes tool calls in"
        return None

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """The next assistant turn, in the model's tool-call layout (`_tools_chat`) under its tools grammar."""
        if self.chat_problem:
            raise ModelError(f"the tools method needs a chat model, and {self.chat_problem}")
        return self._tools_chat.chat(messages, tools, max_tokens=max_tokens)

    @cached_property
    def _tools_chat(self) -> ChatML | Tagged:
        """The adapter of `chat`, kept so that it builds its tools grammar once: the model's own template where it
        calls tools in `<tool_call>` tags (Qwen2.5), else llama-cpp-python's ChatML function-calling layout."""
        template = self.llm.metadata.get("tokenizer.chat_template")
        if speaks_tagged(template):
            return Tagged(self, template, END, constrain=True)
        return ChatML(self, constrain=True)

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

    def keep_prefix(self, text: str) -> None:
        """Compute the state of `text` once and start every new episode that begins with it from that state.

        A run calls this with its few-shot prompt: each question then evaluates only what follows
        the prompt, and its greedy trajectory is the same whatever question came before it.
        """
        if not self.reuse_cache:
            return
        # Last used last: an engine made later (the samples' context, on the first sample) keeps the last PREFIXES.
        # A few are remembered, not all: LATS keeps a new one each time its reflections change.
        self._prefixes[text] = self._prefixes.pop(text, None) or self.tokenize(text)
        for old in list(self._prefixes)[:-REMEMBERED]:
            del self._prefixes[old]
        # Every time, not only the first: an engine keeps the prefixes used last (batch.PREFIXES of them), so
        # a prompt used again after others (a Reflexion run's, between its reflections) is kept again.
        for engine in (self._engine, *self._samplers.values()):
            if engine is not None:
                engine.keep_prefix(self._prefixes[text])

    def _check_length(self, tokens: list[int], max_tokens: int) -> None:
        if len(tokens) + max_tokens > self.n_ctx:
            raise ContextLengthExceeded(
                f"{self.name}: the prompt has {len(tokens)} tokens and {max_tokens} more were asked for, "
                f"but the context window is {self.n_ctx}; load the model with a larger n_ctx"
            )

    def _make_engine(
        self, streams: int, *, unified: bool = False, cells: int | None = None, sampling: bool = False
    ) -> Engine:
        engine = Engine(
            self.llm,
            streams=streams,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            threads=None if self.cores is None else self.cores.threads,
            unified=unified,
            cells=cells,
            drafts=0 if sampling else self.drafts,
            flash=self._sample_flash if sampling else self.flash_attention,
            # Samples of one prompt share its cells and decode side by side (benchmarks/lats.py: 1.12x fewer CPU-s
            # than one by one on Gemma); the workers' streams batch where the engine measured that it pays.
            rows=streams if sampling else None,
            states=lambda layout: states.kept(self.states_folder, self.path, self.build, self.repack, layout),
        )
        for tokens in self._prefixes.values():
            engine.keep_prefix(tokens)
        return engine

    @property
    def batching(self) -> dict | None:
        """What the engine of several workers measured of its passes and chose (`Engine.calibrate`): how many
        generating tokens a pass holds; None for one worker, whose passes hold one."""
        return self.engine.batching if self.workers > 1 else None

    @property
    def engine(self) -> Engine:
        """The context that `complete` decodes in, made on first use: one stream per worker."""
        with self._lock:
            if self._engine is None:  # each stream keeps its cells apart: see docs/servers.md on the cache
                self._engine = self._make_engine(self.workers, unified=self.shared_cache)
            return self._engine

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str],
        max_tokens: int,
        grammar: str | None = None,
    ) -> Completion:
        """Greedy (at temperature 0) completion of `prompt`, cut before the first stop sequence.

        Calls from several threads (the workers of a run) are decoded together, each worker's
        in its own stream of the context.
        """
        tokens = self.tokenize(prompt)
        self._check_length(tokens, max_tokens)
        sampler = self.sampler(grammar) if grammar is not None else None
        try:
            choose = self._chooser(sampler, self.temperature, np.random.default_rng([self.seed]))
            request = Request(prompt, tokens, choose, _stops(stop), max_tokens, reuse=self.reuse_cache)
            request.draft = self.drafts if self.temperature <= 0 else 0  # a sampled token is no model's own pick
            self.engine.run(request)
        finally:
            if sampler is not None:
                sampler.close()
        return _completion(request, time.perf_counter() - request.start)

    def _chooser(self, sampler: GrammarSampler | None, temperature: float, rng: np.random.Generator):
        """How each token is picked from the logits: greedy or drawn, under the grammar if any."""
        vocab, is_eog = self.llm._model.vocab, _llama_cpp().llama_vocab_is_eog
        whole = sampler is not None and (self.grammar_first or temperature > 0)

        def choose(logits: np.ndarray) -> int:
            if sampler is None and temperature <= 0:  # greedy: the first of the highest, as llama.cpp's sampler
                return int(np.argmax(logits))
            if whole:  # the grammar applied to the whole vocabulary, as llama-cpp-python's sampler applies it
                allowed = sampler.allowed_all()
                if not allowed.any():
                    return -1
                logits = np.where(allowed, logits, -np.inf)
            # best() is -1 when the grammar allows nothing more: the end
            token = sampler.best(logits) if sampler is not None and not whole else pick(logits, temperature, rng)
            if sampler is not None and token >= 0 and not is_eog(vocab, token):
                sampler.accept(token)
            return token

        return choose

    def _sampler(self, n: int, max_tokens: int) -> Engine:
        """The samples' context, for `n` streams of `max_tokens` each (the caller holds `_sampling`).

        A context of more streams and cells serves fewer samples too: LATS asks for 5 samples, then values a
        few at a time, and a new context each time would compute its kept prefixes again.
        """
        size = (max(n, SAMPLE_STREAMS), self.n_ctx * (1 + PREFIXES) + max(n, SAMPLE_STREAMS) * max_tokens)
        fits = [key for key in self._samplers if key[0] >= size[0] and key[1] >= size[1]]
        if fits:
            return self._samplers[fits[0]]
        for old in self._samplers.values():
            size = (max(size[0], old.streams), max(size[1], old.cells))
            old.close()
        self._samplers = {size: self._make_engine(size[0], unified=True, cells=size[1], sampling=True)}
        return self._samplers[size]

    def sample(
        self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """`n` samples of `prompt`, evaluated once and decoded together as `n` sequences sharing its cells.

        Sample k draws with numpy's generator seeded `[seed, k]` (see `pick`), so the same seed
        gives the same samples. The samples have a context of their own, where one question samples
        at a time; its cells hold the prompt (and the kept prefixes) once, and each sample's text.
        """
        tokens = self.tokenize(prompt)
        self._check_length(tokens, max_tokens)
        stops = _stops(stop)
        choosers = [self._chooser(None, temperature, np.random.default_rng([seed, k])) for k in range(n)]
        requests = [Request(prompt, tokens, choose, stops, max_tokens) for choose in choosers]
        with self._sampling:
            self._sampler(n, max_tokens).fork(requests, together=self.samples_together)
        first = requests[0]
        return [
            _completion(r, time.perf_counter() - first.start if k == 0 else 0.0, evaluated=k == 0)
            for k, r in enumerate(requests)
        ]

    def sample_each(
        self, prompts: list[str], *, temperature: float, seeds: list[int], stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """One sample of each prompt, decoded side by side (LATS's values of sibling nodes), sample k drawing with
        numpy's generator seeded `[seeds[k], 0]`, as `sample(prompt, n=1, seed=seeds[k])` draws (from logits
        computed in passes shared with the other prompts, which may round otherwise). Each prompt past a kept
        prefix is evaluated in a stream of its own."""
        stops = _stops(stop)
        requests = []
        for prompt, seed in zip(prompts, seeds, strict=True):
            tokens = self.tokenize(prompt)
            self._check_length(tokens, max_tokens)
            choose = self._chooser(None, temperature, np.random.default_rng([seed, 0]))
            requests.append(Request(prompt, tokens, choose, stops, max_tokens))
        # The prompts' own cells must fit the context beside the kept prefixes: they go in groups of at most two
        # windows' worth (a kept head counted in each prompt, though its cells are shared).
        groups, size = [[]], 0
        for request in requests:
            need = len(request.tokens) + max_tokens
            if groups[-1] and size + need > 2 * self.n_ctx:
                groups, size = [*groups, []], 0
            groups[-1].append(request)
            size += need
        with self._sampling:
            engine = self._sampler(len(prompts), max_tokens)
            for group in groups:
                engine.side_by_side(group, together=self.samples_together)
        seconds = time.perf_counter() - requests[0].start  # the call's, counted once (as `sample` counts it)
        return [_completion(r, seconds if k == 0 else 0.0) for k, r in enumerate(requests)]


REMEMBERED = 8  # kept prefixes remembered for engines made later, the last used
SAMPLE_STREAMS = 8  # the samples' context has room for this many at least, so that LATS's 5 and 1 share one


def _stops(stop: list[str]) -> list[bytes]:
    return [s.encode("utf-8") for s in stop if s]


def _completion(request: Request, seconds: float, evaluated: bool = True) -> Completion:
    return Completion(
        text=request.text,
        finish_reason=request.finish,
        prompt_tokens=len(request.tokens),
        completion_tokens=len(request.completion),
        evaluated_tokens=len(request.tokens) - request.reused if evaluated else 0,
        seconds=seconds,
    )


# llama-cpp-python's default sampling chain for `create_completion`, in its order.
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05


def pick(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """One token drawn as llama-cpp-python's default chain draws it: top-k 40, top-p 0.95, min-p 0.05,
    then temperature, then a draw from `rng` (greedy at temperature 0).
    """
    top = _top(logits)
    if temperature <= 0:
        return int(top[0])
    kept, values = chain(logits, top)
    scaled = np.exp((values - values[0]) / temperature)
    return int(kept[rng.choice(len(kept), p=scaled / scaled.sum())])


def chain(logits: np.ndarray, top: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The tokens llama-cpp-python's default chain keeps before the temperature (top-k 40, then top-p 0.95 and min-p
    0.05 of their untempered distribution), most likely first, with their logits; `top`: `_top(logits)`, where made."""
    top = _top(logits) if top is None else top
    values = logits[top].astype(np.float64)
    probs = np.exp(values - values[0])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), TOP_P)) + 1  # the fewest tokens holding TOP_P of the mass
    keep = min(keep, int((probs >= MIN_P * probs[0]).sum()))
    return top[:keep], values[:keep]


def _top(logits: np.ndarray) -> np.ndarray:
    """The TOP_K most likely tokens, most likely first (ties in the order argpartition gives)."""
    top = np.argpartition(logits, -TOP_K)[-TOP_K:]
    return top[np.argsort(-logits[top], kind="stable")]
