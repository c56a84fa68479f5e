"""LATS on the embedded model (issue 58): what decoding a search's samples side by side saves.

A LATS search's calls are samples: n of one prompt at each expansion (5 in the repository's settings), and
the values of a node's children, one sample each of prompts that differ only in their last step. The
embedded model evaluates an expansion's prompt once and decodes its samples together, a token of each in
one pass (`LlamaModel.sample`), and the children's values side by side (`LlamaModel.sample_each`); every
prompt starts from the kept state of the prompt's fixed head (the exemplars, the value prompt).

To compare like with like, the benchmark runs each LATS search once (decoding side by side) and records
every call of the sampling context: its requests' prompt tokens and the tokens each wrote. Then it replays
those calls twice, in turns whose order rotates question by question: side by side, as the search made
them, and one by one (each expansion's prompt still evaluated once and its samples started from its
cells, as n separate calls to llama-cpp-python, which keeps the prompt's cells between calls, would at
best; then each sample decoded alone, a token a pass). A replay picks each token as the search did
(drawing it as the search drew it, then keeping the recorded one), so both replays compute exactly the
same tokens; only the passes that hold them differ. It prints CPU seconds a question (this process, every
thread, llama.cpp's included) of the search and of each replay, wall seconds, and the calls, passes and
tokens by kind.

    RAWREACT_HOTPOTQA=FILE python benchmarks/lats.py [--limit 5] [--iterations 30] [--samples 5] [--threads 2]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

from rawreact import load_collection, load_model, load_prompt, solve
from rawreact.config.settings import Settings
from rawreact.models.batch import Engine, Request
from rawreact.models.cores import cpu_name
from rawreact.models.llama import pick
from rawreact.runs.setup import lats_options

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SHARED = os.environ.get("RAWREACT_HOTPOTQA")


class Recorder:
    """Records each call of the sampling context (`fork`: samples of one prompt; `side_by_side`: one sample of
    each of several prompts): the kind, each request's prompt and tokens, and the tokens it wrote."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, list[int], list[bytes], int, list[int]]]]] = []
        fork, side = Engine.fork, Engine.side_by_side

        def recording(method, kind):
            def call(engine, requests, *, together=True):
                method(engine, requests, together=together)
                if self.on:
                    made = [
                        (r.prompt, list(r.tokens), list(r.stop), r.max_tokens, list(r.completion)) for r in requests
                    ]
                    self.calls.append((kind, made))

            return call

        self.on = False
        Engine.fork, Engine.side_by_side = recording(fork, "fork"), recording(side, "side")


def forced(tokens: list[int], temperature: float, seed: int):
    """A chooser that draws as the search drew (the same work), then picks the recorded token; -1 at the end."""
    rng, at = np.random.default_rng([seed, 0]), iter(tokens)

    def choose(logits: np.ndarray) -> int:
        pick(logits, temperature, rng)
        return next(at, -1)

    return choose


def replay(model, calls, together: bool, temperature: float) -> tuple[float, float, int, int]:
    """(CPU s, wall s, passes, prompt tokens evaluated) of the recorded calls made again, side by side or one by
    one."""
    engine = next(iter(model._samplers.values()))
    passes, cpu, wall, evaluated = engine.stats.passes, time.process_time(), time.perf_counter(), 0
    for kind, made in calls:
        requests = [Request(prompt, tokens, forced(written, temperature, k), stop, max_tokens)
                    for k, (prompt, tokens, stop, max_tokens, written) in enumerate(made)]  # fmt: skip
        if kind == "fork":
            engine.fork(requests, together=together)
        else:
            engine.side_by_side(requests, together=together)
        for request, (*_, written) in zip(requests, made, strict=True):
            assert request.completion == written, "a replay wrote other tokens than the search"
        evaluated += sum(len(r.tokens) - r.reused for r in (requests[:1] if kind == "fork" else requests))
    return time.process_time() - cpu, time.perf_counter() - wall, engine.stats.passes - passes, evaluated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SHARED, help="HotpotQA questions (default: RAWREACT_HOTPOTQA)")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-flash", action="store_true", help="the samples' context without flash attention")
    args = parser.parse_args()
    if not args.data or not os.path.isfile(args.data):
        print(f"no question file at {args.data}; give one with --data or RAWREACT_HOTPOTQA", file=sys.stderr)
        return 2
    data = load_collection(args.data)
    questions = data.questions[: args.limit]
    model = load_model("gemma3-270m", n_threads=args.threads)
    model._sample_flash = not args.no_flash
    prompt = load_prompt(method="react")
    settings = Settings(method="lats", iterations=args.iterations, lats_samples=args.samples)
    options = lats_options(settings)["lats"]
    recorder = Recorder()
    print(f"{cpu_name()}, {args.threads} llama.cpp threads; Gemma 3 270M; {len(questions)} "
          f"questions, LATS {args.iterations} iterations, {args.samples} samples an expansion, em evaluator; load "
          f"{os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    rows = []
    for k, question in enumerate(questions):
        recorder.calls, recorder.on = [], True
        cpu, wall = time.process_time(), time.perf_counter()
        outcome = solve(question.question, data.env(question), model, prompt, method="lats",
                        lats=options | {"gold": question.answer})  # fmt: skip
        cpu, wall, recorder.on = time.process_time() - cpu, time.perf_counter() - wall, False
        calls = recorder.calls
        row = {"search": (cpu, wall), "ended": outcome.search.ended}
        for together in [True, False] if k % 2 == 0 else [False, True]:
            row[together] = replay(model, calls, together, settings.lats_temperature)
        row["requests"] = {kind: sum(len(made) for kd, made in calls if kd == kind) for kind in ("fork", "side")}
        row["generated"] = sum(len(r[4]) for _, made in calls for r in made)
        row["prompt"] = sum(len(made[0][1]) if kd == "fork" else sum(len(r[1]) for r in made) for kd, made in calls)
        rows.append(row)
        print(f"  {question.id}: search {cpu:6.1f} CPU s ({wall:5.1f} s), ended {row['ended']}; "
              f"{row['requests']['fork']} samples in {sum(kd == 'fork' for kd, _ in calls)} calls, "
              f"{row['requests']['side']} side by side in {sum(kd == 'side' for kd, _ in calls)}; "
              f"{row['generated']} tokens written, {row[True][3]} evaluated of {row['prompt']}; "
              f"replayed side by side {row[True][0]:6.1f} CPU s "
              f"({row[True][2]} passes), one by one {row[False][0]:6.1f} CPU s ({row[False][2]} passes): "
              f"{row[False][0] / row[True][0]:.2f}x", flush=True)  # fmt: skip
    print(f"\nload at the end {os.getloadavg()[0]:.2f}")
    n = len(rows)
    mean = {key: statistics.fmean(r[key][0] for r in rows) for key in ("search", True, False)}
    ratio = sum(r[False][0] for r in rows) / sum(r[True][0] for r in rows)
    each = [r[False][0] / r[True][0] for r in rows]
    print(f"{n} questions: a search {mean['search']:.1f} CPU s a question; its calls replayed side by side "
          f"{mean[True]:.1f}, one by one {mean[False]:.1f}: one by one costs {ratio:.2f}x the CPU seconds "
          f"(a question {min(each):.2f}x to {max(each):.2f}x); "
          f"{statistics.fmean(r['generated'] for r in rows):.0f} tokens written a question")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
