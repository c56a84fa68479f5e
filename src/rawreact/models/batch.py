"""Several sequences in one llama.cpp context: each decode step batched across the calls in flight.

llama-cpp-python's high-level `Llama` drives one sequence; this drives a context of `streams`
sequences through its low-level API. Each thread's call is a `Request` on the stream of its
worker (`base.WORKER`), handed to the engine's one decoder thread, which takes every step for
all the requests in flight. One thread calls llama.cpp: with OpenMP, each calling thread gets a
team of CPU threads of its own, and idle teams spin, which on two cores halves the speed.

A call evaluates its prompt in whole chunks of `N_BATCH` tokens and then generates one token per
step; the chunks of one prompt always start at the same places, so that one stream alone always
computes the same numbers. Prefixes given to `keep_prefix` (the few-shot prompt of a run) are
computed once, in chunks from position 0, into a sequence of their own, whose cells are copied
into a stream whenever a new episode begins with them: a new episode costs only what follows
its prefix, and its greedy trajectory cannot depend on the episodes before it.

Each stream has a cache of its own (llama.cpp's `kv_unified` off), so a token's attention reads
its own stream's cells only; in one cache shared by all streams, cells are laid out by history, and
flash attention computes a prompt chunk over whole tiles of cells that hold other streams' tokens
too. llama.cpp computes a pass over separate caches in one piece only where its sequences ascend by
one, and splits it elsewhere (each piece reads all the weights again), so the engine writes a pass
in the order of its sequences. Samples of one prompt (`fork`) share one cache: they share its cells.

Whether decoding streams together saves anything depends on the machine: a pass reads every weight once, so a
pass of k tokens shares that read, but on a CPU whose passes are bound by arithmetic a pass of 2 to 4 logit
rows can cost more than the same rows one a pass (Gemma 3 270M on a 2-core AMD EPYC, issue 68). An engine of
several streams therefore times, once when it is made, passes of 1 to 8 generating tokens in scratch sequences
(`calibrate`), and a pass takes, of the tokens waiting, the count whose CPU time a token is least (the others
wait for the next pass, the streams taking turns); `batching` says what it measured and chose, and a run's
manifest records it.

One room: the engine's decoder thread, its streams' caches, the prefixes it keeps and the passes it times all
hold one llama.cpp context, which one thread may call; split, each part would reach into the same context's state.

A greedy request may also draft (`Request.draft`, prompt lookup, see `lookup.Lookup`): its next
token goes into the pass with up to that many tokens guessed from its own prompt and text, all
with logits, and the model's pick after each is compared with the next guess. The agreed guesses
are kept, as if decoded one by one; the cells of the others are removed. This gives the same
tokens as decoding one at a time only where the logits of a token do not depend on how many
tokens share its pass: not on the AVX2 build of llama.cpp, measured (llamafile's
kernels and weight repacking round otherwise), but on a build without them, with flash attention
off, in passes of up to 7 tokens (`benchmarks/pass_cost.py` measures it).
"""

import contextlib
import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rawreact.core.errors import ModelError
from rawreact.models.base import WORKER
from rawreact.models.gbnf import llama_cpp_module
from rawreact.models.lookup import Lookup
from rawreact.models.states import States

N_BATCH = 512  # prompt tokens per chunk, llama-cpp-python's default
IDLE = 1.0  # seconds the decoder thread waits for work before it ends
PREFIXES = 2  # prefixes kept, each in a sequence of its own (a back-off run has two prompts)
_MEASURED: dict[tuple, dict] = {}  # what `Engine.calibrate` found, by model file, threads, attention and cache layout


@dataclass
class Prefix:
    """A registered prefix: the sequence that holds its cells, and whether they are computed."""

    seq: int
    tokens: tuple[int, ...]
    ready: bool = False
    building: bool = False
    alone: bool = True  # every pass that computed it held nothing else: its cells are what any process computes

    @property
    def length(self) -> int:
        return len(self.tokens)


@dataclass(eq=False)
class Request:
    """One completion under way: its prompt, how it picks and stops, and what it wrote so far."""

    prompt: str
    tokens: list[int]
    choose: Callable[[np.ndarray], int]  # picks a token from logits; a negative one ends the text
    stop: list[bytes]
    max_tokens: int
    stream: int = 0
    reuse: bool = True
    start: float = field(default_factory=time.perf_counter)
    cuts: list[int] = field(default_factory=list)  # where the prompt's chunks start, then its end
    position: int = 0  # of the next token to evaluate
    feed: int | None = None  # the generated token to evaluate next
    reused: int = 0
    completion: list[int] = field(default_factory=list)
    unfinished: int = 0
    text: str = ""
    finish: str = ""
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False  # its caller stopped waiting (Ctrl-C): it is dropped at the next step
    build: "Prefix | None" = None  # the prefix this request computes, in the prefix's own sequence
    forks: list["Request"] = field(default_factory=list)  # requests that start from this one's prompt
    then: "Request | None" = None  # a fork decoded one by one: the next, which starts when this one ends
    draft: int = 0  # tokens guessed by prompt lookup per pass, up to the engine's `drafts` (0: none; greedy only)
    lookup: Lookup | None = None


@dataclass
class Stats:
    """What an engine has decoded: its passes, the tokens and logit rows in them, and the drafts."""

    passes: int = 0
    tokens: int = 0  # evaluated in the passes: prompt chunks, generated tokens and drafts
    rows: int = 0  # tokens whose logits were computed (the output layer's work)
    seconds: float = 0.0  # in llama_decode
    generated: int = 0  # tokens picked
    drafted: int = 0
    accepted: int = 0
    threads: dict[int, int] = field(default_factory=dict)  # passes by the thread count they ran with


class Engine:
    """A llama.cpp context with `streams` sequences, each holding up to `n_ctx` tokens."""

    def __init__(
        self,
        llm,
        *,
        streams: int,
        n_ctx: int,
        n_threads: int,
        threads: Callable[[], int] | None = None,
        unified: bool = False,
        cells: int | None = None,
        drafts: int = 0,
        flash: bool = True,
        rows: int | None = None,
        states: Callable[[dict], States | None] | None = None,
    ) -> None:
        llama_cpp = self._llama_cpp = llama_cpp_module()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = cells or n_ctx * (streams + PREFIXES)  # a unified cache may hold fewer
        params.n_seq_max = streams + PREFIXES  # the prefixes' sequences come after the streams
        # a prompt chunk, and a token of each other stream with its drafts
        self.room = params.n_batch = params.n_ubatch = N_BATCH + streams * (1 + drafts)
        params.n_threads = params.n_threads_batch = n_threads
        params.swa_full = True  # without it Gemma 3 cannot reuse a prefix
        params.kv_unified = unified
        # Flash attention is faster here, but a token's logits then depend on how many tokens share its pass.
        flash_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.flash_attn_type = flash_type
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise ModelError(f"llama.cpp could not make a context of {streams} x {n_ctx} tokens; lower --n-ctx")
        self.llm, self.streams, self.drafts, self.unified, self.cells = llm, streams, drafts, unified, params.n_ctx
        self.flash = flash
        # where the prefixes' states are kept (models.states), given what decides their cells besides the model's
        self.states = None if states is None else states({"flash": flash, "unified": unified, "sequences":
                                                          params.n_seq_max, "chunk": N_BATCH})  # fmt: skip
        self.n_threads, self.threads = n_threads, threads  # `threads()`: the count of the next pass (models.cores)
        self.stats = Stats()
        self.trace: list[tuple[bytes, int, int]] | None = None  # when a list: each draft's text before it, size, kept
        self.passes: list[tuple[int, int, float]] | None = None  # when a list: each pass's tokens, logit rows, CPU s
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
        self.n_vocab = llm.n_vocab()
        self.vocab = llm._model.vocab
        self.cached: list[list[int]] = [[] for _ in range(streams)]  # the tokens each stream's cells hold
        self.holds: list[Prefix | None] = [None] * streams  # the prefix whose copy each stream's first cells are
        self.last: list[str | None] = [None] * streams  # the prompt of each stream's last call
        self.prefixes: OrderedDict[tuple[int, ...], Prefix] = OrderedDict()
        self._cond = threading.Condition()
        self._waiting: list[Request] = []
        self._active: list[Request] = []
        self._decoder: threading.Thread | None = None
        self._turn = 0  # where the next pass starts among the generating requests, when not all fit (`rows`)
        # How many of n generating tokens a pass takes: at most `rows` if given, else as measured (`calibrate`).
        self.batching: dict | None = None
        if rows is None and streams > 1:
            self.take = self.calibrate()
        else:
            self.take = {n: min(n, rows or streams) for n in range(1, streams + 1)}

    def calibrate(self, repeats: int = 3, context: int = 16) -> dict[int, int]:
        """Time passes of 1, 2, 3, 4, 6, 8, 12 and 16 generating tokens (as many as there are streams) in scratch
        sequences that hold `context` tokens each, `repeats` times in turn, and choose for each count n of tokens
        waiting how many of them a pass takes: the measured count up to n whose CPU time a token is least (a
        larger one within 5% of it wins: fewer passes, less wall time). Sets `batching`; the choice by n.

        A process measures a model once for each thread count, flash attention and cache layout (`_MEASURED`):
        passes of up to 16 tokens cost what they cost whatever the streams."""
        key = (self.llm.model_path, self.n_threads, self.flash, self.unified, min(self.streams, 16))
        if key in _MEASURED:
            self.batching = _MEASURED[key]
            return {n: _MEASURED[key]["tokens_a_pass"][str(min(n, 16))] for n in range(1, self.streams + 1)}
        llama_cpp, batch = self._llama_cpp, self.batch
        sizes = [k for k in (1, 2, 3, 4, 6, 8, 12, 16) if k <= self.streams]
        most = sizes[-1]
        scratch = (self.llm.tokenize(b" the river, the lake and the town of Orlo" * 8, add_bos=False) * 2)[:context]
        positions = [0] * most

        def decode(seqs: range, tokens: list[int]) -> float:
            size = 0
            for seq in seqs:
                for k, token in enumerate(tokens):
                    batch.token[size], batch.pos[size], batch.n_seq_id[size] = token, positions[seq] + k, 1
                    batch.seq_id[size][0], batch.logits[size] = seq, k == len(tokens) - 1
                    size += 1
                positions[seq] += len(tokens)
            batch.n_tokens = size
            cpu = time.process_time()  # llama.cpp's threads included
            if llama_cpp.llama_decode(self.ctx, batch) != 0:
                raise ModelError(f"llama.cpp could not decode {size} tokens while timing its passes; lower --workers")
            return time.process_time() - cpu

        costs: dict[int, list[float]] = {k: [] for k in sizes}
        try:
            for seq in range(most):  # each scratch sequence's context, then one warm-up token
                decode(range(seq, seq + 1), scratch)
            decode(range(most), scratch[:1])
            for _ in range(repeats):
                for k in sizes:
                    costs[k].append(decode(range(k), scratch[:1]) / k)
        finally:
            for seq in range(most):
                llama_cpp.llama_memory_seq_rm(self.memory, seq, -1, -1)
        per_token = {k: float(np.median(found)) for k, found in costs.items()}
        chosen = {}
        for n in range(1, min(self.streams, 16) + 1):
            fits = {k: cost for k, cost in per_token.items() if k <= n}
            least = min(fits.values())
            chosen[n] = max(k for k, cost in fits.items() if cost <= least * 1.05)
        self.batching = {
            "tokens_a_pass": {str(n): k for n, k in chosen.items()},  # by the tokens waiting
            "cpu_ms_a_token": {str(k): round(1000 * cost, 3) for k, cost in per_token.items()},
            "measured": f"passes of {sizes[0]} to {most} generating tokens, {repeats} times in turn, median CPU time",
        }
        _MEASURED[key] = self.batching
        return {n: chosen[min(n, 16)] for n in range(1, self.streams + 1)}

    def close(self) -> None:
        """Free the context (the model stays loaded)."""
        if self.ctx:
            self._llama_cpp.llama_batch_free(self.batch)
            self._llama_cpp.llama_free(self.ctx)
            self.ctx = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit llama_cpp may already be gone
            self.close()

    def keep_prefix(self, tokens: list[int]) -> None:
        """Remember `tokens` as a prefix whose state is computed once and copied into new episodes."""
        key = tuple(tokens)
        with self._cond:
            if key in self.prefixes:
                self.prefixes.move_to_end(key)
                return
            free = set(range(self.streams, self.streams + PREFIXES)) - {p.seq for p in self.prefixes.values()}
            if not free:  # the oldest prefix not being computed gives up its sequence
                old = next((k for k, p in self.prefixes.items() if not p.building), None)
                if old is None:
                    return  # every sequence is being filled: episodes with this prefix evaluate it whole
                free = {self.prefixes.pop(old).seq}
            self.prefixes[key] = Prefix(min(free), key)

    def run(self, request: Request) -> Request:
        """Decode `request` to its end, sharing each step with the other requests in flight."""
        request.stream = WORKER.get() % self.streams
        return self._until_done(request, [request])

    def fork(self, requests: list[Request], *, together: bool = True) -> None:
        """Decode requests that share one prompt: it is evaluated once, in stream 0, and every other
        stream starts from its cells (in a unified context they share them). Each starts cold, so
        the same requests always give the same texts.

        With `together` False (a baseline for benchmarks) the requests still share the prompt's cells
        and first logits, but decode one after another, a token a pass, as separate calls would.
        """
        for stream, request in enumerate(requests):
            request.stream = stream
            self._llama_cpp.llama_memory_seq_rm(self.memory, stream, -1, -1)
            self.last[stream], self.holds[stream] = None, None
        requests[0].forks = requests[1:]
        if not together:
            for before, after in zip(requests, requests[1:], strict=False):
                before.then = after
        self._until_done(requests[0], requests)

    def side_by_side(self, requests: list[Request], *, together: bool = True) -> None:
        """Decode requests of different prompts side by side, one stream each, every one a new episode (from a
        kept prefix, if its prompt begins with one). With `together` False (a benchmark's baseline) they decode
        one after another instead, as separate calls would."""
        for stream, request in enumerate(requests):
            request.stream = stream
            self.last[stream] = None
        if not together:
            for request in requests:
                self._until_done(request, [request])
            return
        with self._cond:
            self._waiting.extend(requests[1:])
        self._until_done(requests[0], requests)

    def _until_done(self, request: Request, ends: list[Request]) -> Request:
        """Hand `request` to the decoder thread and wait until every request of `ends` is done."""
        with self._cond:
            self._waiting.append(request)
            if self._decoder is None:
                self._decoder = threading.Thread(target=self._decode_forever, daemon=True, name="rawreact-decoder")
                self._decoder.start()
            self._cond.notify_all()
        try:
            for r in ends:
                while not r.done.wait(0.2):  # a timeout keeps the wait interruptible by signals
                    pass
        except BaseException:
            with self._cond:
                for r in ends:
                    r.cancelled = True
            raise
        for r in ends:
            if r.error is not None:
                raise r.error
        return request

    def _decode_forever(self) -> None:
        """The decoder thread: one thread calls llama.cpp, so its CPU threads stay one team.

        It ends after a second without work, so that it does not keep an unused engine alive.
        """
        while True:
            with self._cond:
                if not self._waiting and not self._active:
                    self._cond.wait(IDLE)
                    if not self._waiting and not self._active:
                        self._decoder = None
                        return
            with contextlib.suppress(BaseException):  # _step hands an error to every request it concerns
                self._step()

    def _admit(self) -> None:
        """Move waiting requests whose stream is free into the batch, their caches set up.

        A new episode whose prefix another request is computing waits for it, rather than compute it too.
        """
        with self._cond:
            busy = {r.stream for r in self._active}
            admitted = []
            self._waiting = [r for r in self._waiting if not r.cancelled]
            for request in self._waiting:
                entry = self.prefixes.get(self._prefix(request.tokens)) if self._new(request) else None
                if request.stream not in busy and not (entry is not None and entry.building):
                    busy.add(request.stream)
                    admitted.append(request)
                    self._begin(request)  # now, so that the next request sees a prefix this one builds
                    self._active.append(request)
            self._waiting = [r for r in self._waiting if r not in admitted]

    def _new(self, request: Request) -> bool:
        """Whether `request` starts a new episode in its stream: its prompt does not extend the last one.

        The same prompt again is a new episode too (a question asked again), so that it evaluates as the first time.
        """
        last = self.last[request.stream]
        return not (request.reuse and last is not None and request.prompt.startswith(last) and request.prompt != last)

    def _begin(self, request: Request) -> None:
        """Keep what the stream's cache shares with the prompt, and plan the prompt's chunks.

        Within an episode (a prompt that extends the stream's last one) the longest shared token
        prefix is kept. A new episode keeps nothing but a registered prefix: a copy of the cells of
        the prefix's own sequence, or, the first time, the prefix computed into that sequence (in
        chunks from position 0, as every later episode will find it) and then copied. A stream whose
        first cells are a copy of that prefix already keeps them instead of copying again.
        """
        s, tokens, llama_cpp = request.stream, request.tokens, self._llama_cpp
        cached = self.cached[s]
        keep, prefix, restored = 0, None, False
        if not self._new(request):
            keep = min(
                self.llm.longest_token_prefix(cached, tokens), len(tokens) - 1
            )  # the last prompt token must give logits
            if self.holds[s] is not None and keep < self.holds[s].length:
                self.holds[s] = None  # part of the prefix's copy goes
        else:
            prefix = self._prefix(tokens) if request.reuse else None
            entry = self.prefixes.get(prefix) if prefix is not None else None
            if entry is not None and entry.ready and self.holds[s] is entry:
                keep, prefix = len(prefix), None  # the stream's first cells are this prefix's copy already
            else:
                llama_cpp.llama_memory_seq_rm(self.memory, s, -1, -1)
                cached.clear()
                self.holds[s] = None
            restored = entry is not None and not entry.ready and self._restore(entry)
            if entry is not None and entry.ready and prefix is not None:
                # between separate caches llama.cpp copies a whole stream's cache, n_ctx cells, whatever they hold
                llama_cpp.llama_memory_seq_cp(self.memory, entry.seq, s, -1, -1)
                keep, prefix, self.holds[s] = len(prefix), None, entry
                cached.extend(tokens[:keep])
            elif entry is not None and not entry.ready:  # no other request is computing it (see _admit)
                entry.building, request.build = True, entry
                llama_cpp.llama_memory_seq_rm(self.memory, entry.seq, -1, -1)
        llama_cpp.llama_memory_seq_rm(self.memory, s, keep, -1)
        del cached[keep:]
        self.last[s] = request.prompt
        request.reused = request.position = keep
        if restored:  # read, not computed: counted as the call that computes it counts it (models.states)
            request.reused = 0
        ends = [len(prefix), len(tokens)] if prefix is not None else [len(tokens)]
        request.cuts, at = [], keep
        for end in ends:
            request.cuts.extend(range(at, end, N_BATCH))
            at = end
        request.cuts.append(len(tokens))

    def _prefix(self, tokens: list[int]) -> tuple[int, ...] | None:
        """The longest registered prefix that `tokens` begin with and go beyond."""
        fits = [p for p in self.prefixes if len(p) < len(tokens) and tuple(tokens[: len(p)]) == p]
        return max(fits, key=len, default=None)

    def _set_threads(self) -> None:
        """Run the next pass with the thread count `threads()` says (the load may have changed), and count it."""
        if self.threads is not None:
            wanted = self.threads()
            if wanted != self.n_threads:
                self._llama_cpp.llama_set_n_threads(self.ctx, wanted, wanted)
                self.n_threads = wanted
        self.stats.threads[self.n_threads] = self.stats.threads.get(self.n_threads, 0) + 1

    def _step(self) -> None:
        """One decode: a token of every generating request and the next prompt chunk of the others."""
        self._admit()
        for request in self._active:
            if request.cancelled:  # its cells stay as they are; the stream's next call starts a new episode
                self.last[request.stream] = None
                request.done.set()
        self._active = [r for r in self._active if not r.cancelled]
        if not self._active:
            return
        batch, rows, size = self.batch, [], 0
        try:
            chosen, used = [], 0
            generating = [r for r in self._active if r.feed is not None]
            taken = self.take.get(len(generating), len(generating))
            if taken < len(generating):  # the streams take turns (see `calibrate`)
                start = self._turn % len(generating)
                generating = (generating[start:] + generating[:start])[:taken]
                self._turn += taken
            prompts = [r for r in self._active if r.feed is None]
            for request in generating + prompts:  # prompt chunks take the room left
                if request.feed is not None:
                    pieces = [request.feed, *self._drafts(request)]
                else:
                    end = next(c for c in request.cuts if c > request.position)
                    if used + end - request.position > self.room:
                        continue  # the whole chunk waits for the next step: chunks never move
                    pieces = request.tokens[request.position : end]
                used += len(pieces)
                chosen.append((request, pieces, request.build.seq if request.build is not None else request.stream))
            if len(chosen) > 1:
                for request, _, _ in chosen:
                    if request.build is not None:
                        request.build.alone = False
            if not self.unified:  # llama.cpp splits a pass of separate caches wherever the sequences do not ascend by 1
                chosen.sort(key=lambda c: c[2])
            for request, pieces, seq in chosen:
                drafting = len(pieces) > 1 and request.feed is not None
                for k, token in enumerate(pieces):
                    batch.token[size] = token
                    batch.pos[size] = request.position + k
                    batch.n_seq_id[size] = 1
                    batch.seq_id[size][0] = seq
                    batch.logits[size] = drafting or k == len(pieces) - 1
                    size += 1
                rows.append((request, size - 1, pieces))
            batch.n_tokens = size
            self._set_threads()
            start, cpu = time.perf_counter(), time.thread_time() if self.passes is not None else 0.0
            code = self._llama_cpp.llama_decode(self.ctx, batch)
            if code != 0:
                raise ModelError(f"llama.cpp could not decode a batch of {size} tokens (code {code})")
            stats = self.stats
            stats.seconds += time.perf_counter() - start
            if self.passes is not None:  # llama.cpp's other threads, if any, are not in this thread's CPU time
                self.passes.append((size, sum(bool(batch.logits[k]) for k in range(size)), time.thread_time() - cpu))
            stats.passes, stats.tokens = stats.passes + 1, stats.tokens + size
            for request, row, pieces in rows:
                if request.feed is not None and len(pieces) > 1:
                    stats.rows += len(pieces)
                    self._verify(request, row, pieces)
                    continue
                request.position += len(pieces)
                self.cached[request.stream].extend(pieces)
                request.feed = None
                if request.position < len(request.tokens):
                    if request.build is not None and request.position == request.build.length:
                        self._built(request)
                    continue
                stats.rows += 1
                logits = self._logits(row)
                for other in request.forks:
                    self._share(request, other)
                    self._advance(other, logits)
                if request.then is None:
                    self._active.extend(request.forks)
                request.forks = []
                self._advance(request, logits)
        except BaseException as error:  # the cache is in an unknown state: every request in it fails
            self.holds = [None] * self.streams
            for request in self._active + [f for r in self._active for f in (*r.forks, *_chain(r))]:
                request.error = error
                request.done.set()
                self.last[request.stream] = None
                if request.build is not None:
                    request.build.building = request.build.ready = False
            self._active = []
            raise
        self._active = [r for r in self._active if not r.done.is_set()]

    def _logits(self, row: int) -> np.ndarray:
        pointer = self._llama_cpp.llama_get_logits_ith(self.ctx, row)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))

    def _drafts(self, request: Request) -> list[int]:
        """The tokens prompt lookup guesses after `request`'s next one (none when it does not draft).

        It guesses no further than `max_tokens` allows: the last token a request may pick is never evaluated.
        """
        room = min(request.draft, self.drafts, request.max_tokens - len(request.completion) - 1)
        if room <= 0:
            return []
        if request.lookup is None:
            request.lookup = Lookup(request.tokens)
        request.lookup.extend(request.completion)
        return request.lookup.propose(room)

    def _verify(self, request: Request, row: int, pieces: list[int]) -> None:
        """Keep the drafts the model agrees with, picking after each piece as one token a pass would.

        `pieces` is the request's next token and its drafts, evaluated in the rows that end at
        `row`. The pick after a piece is made, and kept, only when every piece before it was the
        model's own pick; it stops at the first pick that differs from the next draft, or at the
        end of the text. The cells of the drafts after that are removed.
        """
        first, stream = row - len(pieces) + 1, request.stream
        before = self.llm.detokenize(request.completion) if self.trace is not None else b""
        kept = 0
        while kept < len(pieces):
            self._advance(request, self._logits(first + kept))
            kept += 1
            if request.done.is_set() or kept == len(pieces) or request.feed != pieces[kept]:
                break
        self.stats.drafted += len(pieces) - 1
        self.stats.accepted += kept - 1
        if self.trace is not None:
            self.trace.append((before, len(pieces) - 1, kept - 1))
        request.position += kept
        self.cached[stream].extend(pieces[:kept])
        if not self._llama_cpp.llama_memory_seq_rm(self.memory, stream, request.position, -1):
            raise ModelError("llama.cpp could not remove the cells of rejected drafts")

    def _share(self, request: Request, other: Request) -> None:
        """Give `other`'s stream the cells of `request`'s, which has just evaluated their shared prompt."""
        llama_cpp = self._llama_cpp
        llama_cpp.llama_memory_seq_rm(self.memory, other.stream, -1, -1)
        llama_cpp.llama_memory_seq_cp(self.memory, request.stream, other.stream, -1, -1)
        self.cached[other.stream] = list(self.cached[request.stream])
        self.holds[other.stream] = None
        other.position, other.reused = request.position, request.reused
        self.last[other.stream] = None  # samples share no episode

    def _built(self, request: Request) -> None:
        """The prefix that `request` computed is complete: its stream starts from a copy of it, and its state is
        kept for later processes if it was computed alone."""
        entry, request.build = request.build, None
        self._llama_cpp.llama_memory_seq_cp(self.memory, entry.seq, request.stream, -1, -1)
        entry.ready, entry.building, self.holds[request.stream] = True, False, entry
        if self.states is not None and entry.alone:
            llama_cpp = self._llama_cpp
            size = llama_cpp.llama_state_seq_get_size(self.ctx, entry.seq)
            state = (ctypes.c_uint8 * size)()
            if llama_cpp.llama_state_seq_get_data(self.ctx, state, size, entry.seq) == size:
                self.states.write(entry.tokens, bytes(state))

    def _restore(self, entry: Prefix) -> bool:
        """Read `entry`'s kept state into its sequence, if one is kept and llama.cpp takes it."""
        state = self.states.read(entry.tokens) if self.states is not None else None
        if state is None:
            return False
        llama_cpp = self._llama_cpp
        llama_cpp.llama_memory_seq_rm(self.memory, entry.seq, -1, -1)
        taken = llama_cpp.llama_state_seq_set_data(self.ctx, (ctypes.c_uint8 * len(state)).from_buffer_copy(state),
                                                   len(state), entry.seq)  # fmt: skip
        if not taken or llama_cpp.llama_memory_seq_pos_max(self.memory, entry.seq) != entry.length - 1:
            llama_cpp.llama_memory_seq_rm(self.memory, entry.seq, -1, -1)
            return False
        entry.ready = True
        return True

    def _advance(self, request: Request, logits: np.ndarray) -> None:
        """Pick the next token and end the text as `create_completion` does, or feed the token on.

        It ends at an end-of-text token, at a stop sequence outside an unfinished UTF-8
        character, or at `max_tokens`; the final token is not evaluated.
        """
        token = request.choose(logits)
        self.stats.generated += 1
        if token < 0 or self._llama_cpp.llama_vocab_is_eog(self.vocab, token):
            self._end(request, self.llm.detokenize(request.completion), "stop")
            return
        request.completion.append(token)
        text = self.llm.detokenize(request.completion)
        request.unfinished = _multibyte_wait(text, request.unfinished)
        if request.unfinished > 0:
            request.unfinished -= 1
        else:
            found = next((s for s in request.stop if s in text), None)
            if found is not None:
                self._end(request, text[: text.index(found)], "stop")
                return
            if len(request.completion) >= request.max_tokens:
                self._end(request, text, "length")
                return
        request.feed = token

    def _end(self, request: Request, text: bytes, finish: str) -> None:
        request.text, request.finish = text.decode("utf-8", "ignore"), finish
        request.done.set()
        # The next fork decoded one by one starts, once it holds the prompt's cells (`_share` moved its position).
        after = next((r for r in _chain(request) if not r.done.is_set()), None)
        if after is not None and after.position and after not in self._active:
            self._active.append(after)


def _chain(request: Request) -> list[Request]:
    """The forks that decode one by one after `request`, in order."""
    found, after = [], request.then
    while after is not None:
        found.append(after)
        after = after.then
    return found


def _multibyte_wait(text: bytes, wait: int) -> int:
    """How many tokens to wait before checking stops, when `text` may end inside a UTF-8 character.

    This is llama-cpp-python's own rule in `create_completion`, kept as it is, quirks included, so
    that a completion ends at the same token as it would there.
    """
    for k, char in enumerate(text[-3:]):
        k = 3 - k
        for num, pattern in ((2, 192), (3, 224), (4, 240)):
            if num > k and pattern & char == pattern:
                wait = num - k
    return wait
