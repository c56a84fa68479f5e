"""What a decode pass of the embedded model costs, and whether its logits depend on its size.

Drafting (prompt lookup) pays for itself only if a pass of n tokens costs little more than a pass
of one, and is exact only if a token's logits are the same whichever tokens share its pass. This
measures both on an embedded model (Gemma 270M unless `--model` says), in rawreact's engine, after
the first 800 tokens of the shipped prompt:

- cost: the median CPU milliseconds (this process's, llama.cpp's threads included; wall time on a
  shared machine measures the load) of a pass of n tokens of one sequence, with logits for every
  token (as verifying n - 1 drafts needs) and for the last only (as a prompt chunk), and the
  ratio to a pass of one token; the median wall milliseconds beside them;
- invariance: the same n tokens decoded one a pass and then in one pass, both with logits; the
  largest difference of any logit, row by row (0 means bit-identical).

Each with flash attention on and off. `--no-repack` loads the weights without llama.cpp's
runtime repacking (`use_extra_bufts`, whose 4-row kernels round otherwise); which matrix kernels
a build has (llamafile's or ggml's own) is fixed when llama-cpp-python is compiled.

    python benchmarks/pass_cost.py [--sizes 2 3 4 6 8] [--repeat 15] [--threads 1] [--model gemma3-270m]
        [--no-repack]

`--threads` is llama.cpp's (default 1: on a shared machine more threads spin while they wait, and their CPU
time then measures the waiting).
"""

import argparse
import os
import time

import numpy as np

from rawreact import load_model, load_prompt
from rawreact.models.batch import Engine
from rawreact.models.cores import cpu_name
from rawreact.models.gbnf import llama_cpp_module

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

llama_cpp = llama_cpp_module()  # loaded as rawreact loads it, with its bounded OpenMP spin (models/cores.py)

START = 800  # tokens of context before the measured passes


def decode(engine: Engine, tokens: list[int], start: int, all_logits: bool) -> None:
    batch = engine.batch
    for k, token in enumerate(tokens):
        batch.token[k], batch.pos[k], batch.n_seq_id[k] = token, start + k, 1
        batch.seq_id[k][0] = 0
        batch.logits[k] = all_logits or k == len(tokens) - 1
    batch.n_tokens = len(tokens)
    if llama_cpp.llama_decode(engine.ctx, batch) != 0:
        raise SystemExit(f"llama.cpp could not decode a pass of {len(tokens)} tokens")


def rewind(engine: Engine, position: int) -> None:
    llama_cpp.llama_memory_seq_rm(engine.memory, 0, position, -1)


def logits(engine: Engine, row: int) -> np.ndarray:
    return np.array(engine._logits(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 3, 4, 6, 8], help="besides 1, the base")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-repack", action="store_true", help="load the weights without runtime repacking")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--model", default="gemma3-270m", help="an embedded model's name or a .gguf file")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    if args.no_repack:  # llama-cpp-python's Llama has no argument for it: change the defaults it starts from
        defaults = llama_cpp.llama_cpp.llama_model_default_params

        def without_repack():
            params = defaults()
            params.use_extra_bufts = False
            return params

        llama_cpp.llama_cpp.llama_model_default_params = without_repack
    model = load_model(args.model, n_ctx=4096, n_threads=args.threads)
    tokens = model.tokenize(load_prompt().text)
    sizes = sorted({1, *args.sizes})  # the ratios are against a pass of one token
    largest = sizes[-1]
    repacking = "off" if args.no_repack else "on"
    print(f"{args.model}, {model.n_threads} threads, repacking {repacking}, {START} tokens before; CPU ms (wall ms)")
    print(f"{'flash':>5s} {'n':>2s} {'CPU ms all':>16s} {'x 1':>5s} {'CPU ms last':>16s} {'x 1':>5s}  "
          "largest change by row")  # fmt: skip
    for flash in (True, False):
        engine = Engine(model.llm, streams=1, n_ctx=4096, n_threads=args.threads, flash=flash)
        for at in range(0, START, 400):
            decode(engine, tokens[at : min(at + 400, START)], at, False)
        alone = []  # the measured tokens one a pass, as decoding without drafts computes them
        for k in range(largest):
            decode(engine, [tokens[START + k]], START + k, True)
            alone.append(logits(engine, 0))
        one = None  # a pass of one token, which comes first
        for n in sizes:
            medians, walls = [], []
            for all_logits in (True, False):
                times, wall = [], []
                for _ in range(args.repeat):
                    rewind(engine, START)
                    start, cpu = time.perf_counter(), time.process_time()
                    decode(engine, tokens[START : START + n], START, all_logits)
                    times.append(time.process_time() - cpu)
                    wall.append(time.perf_counter() - start)
                medians.append(1000 * float(np.median(times)))
                walls.append(1000 * float(np.median(wall)))
            rewind(engine, START)
            decode(engine, tokens[START : START + n], START, True)
            diffs = [float(np.abs(logits(engine, k) - alone[k]).max()) for k in range(n)]
            one = one or medians[0]
            print(
                f"{'on' if flash else 'off':>5s} {n:2d} {medians[0]:7.1f} ({walls[0]:6.1f}) {medians[0] / one:5.2f} "
                f"{medians[1]:7.1f} ({walls[1]:6.1f}) {medians[1] / one:5.2f}  " + " ".join(f"{d:.2g}" for d in diffs),
                flush=True,
            )
        engine.close()


if __name__ == "__main__":
    main()
