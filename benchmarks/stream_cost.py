"""What one generated token costs when S streams decode together, against one stream alone (issue 42 item 4).

Each stream holds the same `--context` tokens (evaluated once, then copied), and a pass gives every stream one
token with logits, as the embedded engine's passes do while every question writes. CPU milliseconds a pass and a
token at one llama.cpp thread, wall time beside them and the load average at the start and end, for a shared cache
(`unified`) and a cache of its own per stream (the engine's); one stream alone is measured before the streams and
again after them. Then what a prompt token costs in a chunk of N tokens after the context (one stream, logits for
the last only): the observations a question appends are evaluated so.

    python benchmarks/stream_cost.py [--context 800 2400] [--streams 2 4 8] [--repeats 15] [--chunks 1 8 32 256]
"""

import argparse
import os
import time

import llama_cpp

from rawreact.core.resources import resource
from rawreact.models import build
from rawreact.models.cores import cpu_name
from rawreact.models.specs import model_path

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")


def context(llm, streams: int, unified: bool, size: int):
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_seq_max = (size + 64) * streams, streams
    params.n_batch = params.n_ubatch = 512 + streams
    params.n_threads = params.n_threads_batch = 1
    params.swa_full, params.kv_unified = True, unified
    params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED  # the engine's default
    return llama_cpp.llama_init_from_model(llm._model.model, params)


def decode(ctx, batch, items: list[tuple[int, int, int, bool]]) -> None:
    for k, (token, position, seq, logits) in enumerate(items):
        batch.token[k], batch.pos[k], batch.n_seq_id[k], batch.logits[k] = token, position, 1, logits
        batch.seq_id[k][0] = seq
    batch.n_tokens = len(items)
    if llama_cpp.llama_decode(ctx, batch) != 0:
        raise RuntimeError("llama_decode failed")


WALL: list[float] = []  # each measurement's wall seconds a pass, beside its CPU seconds


def _measured(llm, tokens: list[int], streams: int, unified: bool, extra: int, step, repeats: int) -> float:
    """CPU seconds of `step(ctx, batch, memory)`, a pass after `tokens` that removes what it added, in a context of
    `streams` streams that each hold `tokens` (evaluated once in stream 0, then copied) and `extra` more."""
    ctx = context(llm, streams, unified, len(tokens) + extra)
    memory, batch = llama_cpp.llama_get_memory(ctx), llama_cpp.llama_batch_init(512 + streams, 0, 1)
    for start in range(0, len(tokens), 512):
        decode(ctx, batch, [(t, start + k, 0, False) for k, t in enumerate(tokens[start : start + 512])])
    for seq in range(1, streams):
        llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
    start, wall = time.process_time(), time.perf_counter()
    for _ in range(repeats):
        step(ctx, batch, memory)
    seconds = (time.process_time() - start) / repeats
    WALL.append((time.perf_counter() - wall) / repeats)
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    return seconds


def pass_cost(llm, tokens: list[int], streams: int, unified: bool, repeats: int) -> float:
    """CPU seconds of one pass that gives each of `streams` streams one token after `tokens`."""

    def step(ctx, batch, memory) -> None:
        decode(ctx, batch, [(tokens[5], len(tokens), seq, True) for seq in range(streams)])
        for seq in range(streams):
            llama_cpp.llama_memory_seq_rm(memory, seq, len(tokens), -1)

    return _measured(llm, tokens, streams, unified, 0, step, repeats)


def chunk_cost(llm, tokens: list[int], size: int, repeats: int) -> float:
    """CPU seconds of one pass of `size` prompt tokens after `tokens` (at most 512), one stream, logits for the
    last."""

    def step(ctx, batch, memory) -> None:
        decode(ctx, batch, [(tokens[k % len(tokens)], len(tokens) + k, 0, k == size - 1) for k in range(size)])
        llama_cpp.llama_memory_seq_rm(memory, 0, len(tokens), -1)

    return _measured(llm, tokens, 1, False, size, step, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, nargs="+", default=[800, 2400], help="tokens each stream holds")
    parser.add_argument("--streams", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--chunks", type=int, nargs="+", default=[1, 8, 32, 256], help="prompt chunk sizes")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    with build.loading(llama_cpp):  # as rawreact loads this build
        llm = llama_cpp.Llama(str(model_path("gemma3-270m")), n_ctx=256, n_threads=1, verbose=False)
    text = resource("prompts", "exemplars.txt").read_text(encoding="utf-8")
    source = llm.tokenize(text.encode())
    print(f"load {os.getloadavg()[0]:.2f} at the start; CPU ms (wall ms) a pass, one llama.cpp thread")
    for size in args.context:
        tokens = (source * (size // len(source) + 1))[:size]
        one = pass_cost(llm, tokens, 1, False, args.repeats)
        print(f"context {size} tokens a stream: 1 stream {1000 * one:.1f} ({1000 * WALL[-1]:.1f}) ms a pass")
        for streams in args.streams:
            for unified in (True, False):
                cost = pass_cost(llm, tokens, streams, unified, args.repeats)
                cache = "shared cache" if unified else "cache per stream"
                print(f"  {streams} streams, {cache}: {1000 * cost:.1f} ({1000 * WALL[-1]:.1f}) ms a pass, "
                      f"{1000 * cost / streams:.1f} ms a token, {one * streams / cost:.2f}x fewer CPU-s a token "
                      "than one stream")  # fmt: skip
        again = pass_cost(llm, tokens, 1, False, args.repeats)  # the baseline again, after the streams
        print(f"  1 stream again: {1000 * again:.1f} ({1000 * WALL[-1]:.1f}) ms a pass")
        for size in args.chunks:
            cost = chunk_cost(llm, tokens, size, max(2, args.repeats // 3))
            print(f"  a prompt chunk of {size}: {1000 * cost:.1f} ({1000 * WALL[-1]:.1f}) ms, "
                  f"{1000 * cost / size:.2f} ms a token")  # fmt: skip
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
