"""CPU-seconds a question of the embedded model against a plain llama-cpp-python loop, measured so that load cannot
fool it.

Wall time on a shared machine says more about the other processes than about rawreact, so each run reports the
CPU time this process used (llama.cpp's threads included) beside its wall time, and the load average when it
starts and ends. The settings take turns (A B A B ...) and repeat, and every ratio is against the plain loop
measured in the same run, on the same questions:

- `plain`: rawreact's loop and prompt over llama-cpp-python's own `Llama` completion call (with its reuse of the
  prefix it shares with the last call), one question at a time, each call stopped at `\\nObservation i:` only, as
  a reference-style loop stops it: the baseline.
- `plain+stop`: the same, also stopped where the tolerant loop stops a call (a complete action line), so that
  its ratio to `engine` is the engine's alone.
- `engine W`: rawreact's embedded engine with W workers decoding together (greedy, the default settings: a cache of
  its own for each stream), and with `--shared`, `engine W shared`: the same with one cache shared by the streams.
- with `--server W ...`, `server W`: llama.cpp's own C++ `llama-server` (built from the same llama.cpp by
  `python -m rawreact.models.llama_server`) with `--parallel W` slots, driven by rawreact's `llamacpp:` backend
  with W workers (each on its own slot, `cache_prompt` on): the peer a user would run instead. Its CPU seconds
  count both processes (the server's from /proc); the server's start is not counted.
  `--server-flags` adds the server with other flags beside it: `server W unified` (one KV cache for all slots,
  `--kv-unified`, where rawreact's launcher gives each slot its own) and `server W no-cache-ram` (`--cache-ram 0`:
  no host-memory prompt cache, which copies idle slots' cache on every request), so that the peer runs at its best.
- with `--no-repack`, every setting again as `S no-repack`: the weights loaded without llama.cpp's runtime
  repacking (`models.build`), on both sides. Otherwise both sides load them as rawreact does on this build.

Both sides run greedy with the same context, flash attention and `--threads` llama.cpp threads (default 1: on a
shared machine more threads spin while they wait, and their CPU time then measures the waiting). The columns:
wall and CPU seconds a question, the load at the start and end of the run, decode passes a question, generated
tokens a pass and milliseconds a pass inside llama_decode (the engine's own counts), prompt tokens evaluated a
question (beyond the kept few-shot prompt, which is computed once a run), generated tokens a question, calls
cut at the token limit a question (a question whose calls run to the limit is costly, most of all alone in the
run's tail), and EM. Give three times as many questions as workers or more: in a run's tail fewer questions are
left than workers. The summary gives each setting's median CPU-seconds a question over the repeats, and how
many times fewer than `plain` that is. Last, for each engine setting, where its decode time goes (`costs`): the
CPU time of a pass fitted to what a pass, a logit row and a prompt token cost, and what a question would cost
with every pass full.

    RAWREACT_HOTPOTQA=FILE python benchmarks/throughput.py [--limit 24] [--workers 1 8] [--repeats 2]
        [--threads 1] [--grammar step] [--n-first 5] [--shared] [--no-repack] [--server 1 8] [--server-flags]
        [--model gemma3-270m] [--only SETTING ...] [--json FILE]

`--model` is an embedded model's name or a .gguf file (default: gemma3-270m; qwen2.5-coder-1.5b is six times
larger, and reads far more weight bytes a token, which a batch shares).
"""

import argparse
import functools
import json
import os
import shlex
import statistics
import sys
import time

import numpy as np

from rawreact import load_collection, load_model, load_prompt, run_questions
from rawreact.agents.loop import ACTION_END
from rawreact.models import build, llama_server
from rawreact.models.base import Completion
from rawreact.models.cores import cpu_name, process_seconds
from rawreact.models.gbnf import llama_cpp_module
from rawreact.models.specs import model_file

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

llama_cpp = llama_cpp_module()  # loaded as rawreact loads it, with its bounded OpenMP spin (models/cores.py)

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout


class PlainLlama:
    """llama-cpp-python's own completion call, as a simple reference-style loop would make it."""

    def __init__(self, spec: str, n_ctx: int, n_threads: int, early_stop: bool, repack: bool | None = None) -> None:
        with build.loading(llama_cpp, repack=repack):  # None: as rawreact loads this build
            self.llm = llama_cpp.Llama(
                str(model_file(spec)),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                flash_attn=True,
                swa_full=True,  # without it Gemma 3 keeps no prefix between calls
                seed=0,
                verbose=False,
            )
        self.name, self.early_stop = f"{spec} (plain llama-cpp-python)", early_stop

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, grammar: str | None = None) -> Completion:
        start = time.perf_counter()
        stop = stop if self.early_stop else [s for s in stop if s != ACTION_END]
        grammar = llama_cpp.LlamaGrammar.from_string(grammar, verbose=False) if grammar else None
        out = self.llm(prompt, stop=stop, max_tokens=max_tokens, temperature=0.0, grammar=grammar)
        usage, choice = out["usage"], out["choices"][0]
        return Completion(
            text=choice["text"],
            finish_reason=choice["finish_reason"],
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            evaluated_tokens=None,
            seconds=time.perf_counter() - start,
        )


def measure(
    data, questions, prompt, setting: str, workers: int, threads: int, grammar, n_first: int, spec: str
) -> dict:
    """One run of the questions in one setting: its wall and CPU time, the load around it, and what it did."""
    repack = False if setting.endswith(" no-repack") else None  # None: as rawreact loads this build
    server = None
    if setting.startswith("server"):
        flags = {"kv_unified": " unified" in setting, "cache_ram": 0 if " no-cache-ram" in setting else None}
        server, url = llama_server.start(model_file(spec), parallel=workers, threads=threads, n_ctx=8192,
                                         repack=repack, **flags)  # fmt: skip
        model = load_model(f"llamacpp:{url}", workers=workers)
    elif setting.startswith("plain"):
        model = PlainLlama(spec, 8192, threads, early_stop=setting.startswith("plain+stop"), repack=repack)
    else:
        model = load_model(spec, workers=workers, n_threads=threads, repack=repack)
        model.shared_cache = " shared" in setting
        model.engine.passes = []  # each pass's tokens, logit rows and CPU seconds, for `costs`
    env = functools.partial(data.env, n_first=n_first)
    server_cpu = process_seconds(server.pid) if server else 0.0
    load, wall, cpu = os.getloadavg()[0], time.perf_counter(), time.process_time()
    results = list(run_questions(questions, env, model, prompt, workers=workers, grammar=grammar))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if server:
        server_cpu = process_seconds(server.pid) - server_cpu
        cpu += server_cpu
    n = len(results)
    row = {
        "wall": wall / n,
        "cpu": cpu / n,
        "load": (load, os.getloadavg()[0]),
        "em": sum(r.em for r in results) / n,
        "generated": sum(r.outcome.tokens()["completion"] for r in results) / n,
        "cut": sum(c.finish_reason == "length" for r in results for c in r.outcome.calls) / n,
    }
    if server:
        row["server_cpu"] = server_cpu / n
        row["evaluated"] = sum(r.outcome.tokens()["evaluated"] or 0 for r in results) / n
        llama_server.stop(server)
    elif not setting.startswith("plain"):
        row["passes"] = model.engine.stats.passes / n
        row["per_pass"] = model.engine.stats.generated / model.engine.stats.passes
        row["ms_pass"] = 1000 * model.engine.stats.seconds / model.engine.stats.passes
        row["evaluated"] = sum(r.outcome.tokens()["evaluated"] for r in results) / n  # after the kept prefix
        row["pass_log"], row["questions"] = model.engine.passes, n
        row["batching"] = model.engine.batching  # what the engine measured of its passes and chose
        model.engine.close()
    else:
        model.llm.close()
    return row


def costs(rows: list[dict], workers: int) -> str:
    """Where an engine setting's decode time goes, over all its rounds: a least-squares fit of each pass's CPU
    time to a cost a pass, a cost a logit row (a generated token, or the last of a prompt) and a cost a prompt
    token without logits; what a question costs by that fit, and what it would cost if every pass held
    `workers` logit rows (no tail, no stream waiting on its observation), or if passes cost nothing beyond
    their tokens (the many-stream floor)."""
    log = np.array([p for row in rows for p in row["pass_log"]], dtype=float)
    questions = sum(row["questions"] for row in rows)
    tokens, logit_rows, cpu = log.T
    fit, *_ = np.linalg.lstsq(np.stack([np.ones_like(cpu), logit_rows, tokens - logit_rows], 1), cpu, rcond=None)
    per_pass, per_row, per_token = fit
    work = (per_row * logit_rows.sum() + per_token * (tokens - logit_rows).sum()) / questions
    packed = work + per_pass * logit_rows.sum() / workers / questions
    return (
        f"{1000 * per_pass:.1f} ms a pass + {1000 * per_row:.1f} a logit row + {1000 * per_token:.1f} a prompt token; "
        f"decode {cpu.sum() / questions:.2f} CPU s a question ({logit_rows.sum() / len(cpu):.2f} logit rows a pass), "
        f"{packed:.2f} with {workers} rows in every pass, {work:.2f} with passes free"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SAMPLE, required=SAMPLE is None, help="default: RAWREACT_HOTPOTQA")
    parser.add_argument(
        "--limit",
        type=int,
        default=24,
        help="questions; three times the workers or more, or the "
        "run's tail, where fewer streams are left than workers, decides the figure",
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8], help="the engine's settings")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every setting in turn")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads on both sides")
    parser.add_argument("--n-first", type=int, default=5, help="sentences a search returns")
    parser.add_argument("--grammar", choices=["step"], help="run under the step grammar")
    parser.add_argument("--shared", action="store_true", help="also run each W > 1 with one cache for all streams")
    parser.add_argument("--no-repack", action="store_true", help="also run every setting without weight repacking")
    parser.add_argument("--server", type=int, nargs="+", default=[], metavar="W",
                        help="also run llama-server with W slots and W workers")  # fmt: skip
    parser.add_argument("--server-flags", action="store_true",
                        help="also run each server setting with --kv-unified, and with --cache-ram 0")  # fmt: skip
    parser.add_argument("--model", default="gemma3-270m", help="an embedded model's name or a .gguf file")
    parser.add_argument("--json", help="write every row, and the machine, to this file (for scripts/charts.py)")
    parser.add_argument(
        "--only", nargs="+", metavar="SETTING", help='run only these settings, e.g. plain "engine 8" (plain is kept)'
    )
    args = parser.parse_args()
    data, prompt = load_collection(args.data), load_prompt()
    questions = data.questions[: args.limit]
    settings = [("plain", 1), ("plain+stop", 1)] + [(f"engine {w}", w) for w in args.workers]
    settings += [(f"engine {w} shared", w) for w in args.workers if w > 1 and args.shared]
    settings += [(f"server {w}", w) for w in args.server]
    settings += [
        (f"server {w} {flag}", w) for w in args.server for flag in ("unified", "no-cache-ram") if args.server_flags
    ]
    if args.server and llama_server.server_path() is None:
        parser.error("--server needs llama-server built: python -m rawreact.models.llama_server")
    settings += [(f"{name} no-repack", w) for name, w in settings] if args.no_repack else []
    if args.only:
        unknown = set(args.only) - {name for name, _ in settings}
        if unknown:
            parser.error(f"no setting {', '.join(sorted(unknown))}; the settings: {', '.join(n for n, _ in settings)}")
        settings = [(name, w) for name, w in settings if name == "plain" or name in args.only]
    print(
        f"{len(questions)} questions of {args.data}, {args.model}, greedy, 7 steps, {args.n_first} sentences a "
        f"search, grammar {args.grammar or 'off'}, {args.threads} llama.cpp thread(s), {os.cpu_count()} cores; "
        f"load {os.getloadavg()[0]:.2f} at the start; settings in turn, {args.repeats} rounds; {cpu_name()}"
    )
    print(f"{'setting':>10s} {'round':>5s} {'wall s/q':>8s} {'CPU s/q':>7s} {'load':>11s} {'pass/q':>6s} "
          f"{'gen/pass':>8s} {'ms/pass':>7s} {'eval/q':>6s} {'gen/q':>6s} {'cut/q':>5s} {'EM':>5s}")  # fmt: skip
    found: dict[str, list[dict]] = {name: [] for name, _ in settings}
    for round_ in range(1, args.repeats + 1):
        for name, workers in settings:
            row = measure(data, questions, prompt, name, workers, args.threads, args.grammar, args.n_first, args.model)
            found[name].append(row)
            passes = (
                f"{row['passes']:6.0f} {row['per_pass']:8.2f} {row['ms_pass']:7.1f} {row['evaluated']:6.0f}"
                if "passes" in row
                else f"{'-':>6s} {'-':>8s} {'-':>7s} {row.get('evaluated', 0):6.0f}"
            )
            print(f"{name:>10s} {round_:5d} {row['wall']:8.2f} {row['cpu']:7.2f} "
                  f"{row['load'][0]:5.2f}-{row['load'][1]:5.2f} {passes} {row['generated']:6.0f} {row['cut']:5.2f} "
                  f"{row['em']:5.2f}",
                  flush=True)  # fmt: skip
    plain = statistics.median(r["cpu"] for r in found["plain"])
    print(f"\nload {os.getloadavg()[0]:.2f} at the end. Median over {args.repeats} rounds:")
    print(f"{'setting':>10s} {'CPU s/q':>7s} {'x fewer CPU-s than plain':>24s} {'wall s/q':>8s}")
    for name, rows in found.items():
        cpu = statistics.median(r["cpu"] for r in rows)
        print(f"{name:>10s} {cpu:7.2f} {plain / cpu:24.2f} {statistics.median(r['wall'] for r in rows):8.2f}")
    for name, rows in found.items():
        if rows and rows[0].get("batching"):
            print(f"{name}: tokens a pass by the tokens waiting, as measured: {rows[0]['batching']}")
    print("\nWhere the engine's decode time goes (all rounds; the model's CPU seconds a question, by fitted costs):")
    for (name, workers), rows in zip(settings, found.values(), strict=True):
        if name.startswith("engine"):
            print(f"{name:>10s} {costs(rows, workers)}")
    if args.json:
        kept = {name: [{k: v for k, v in r.items() if k != "pass_log"} for r in rows] for name, rows in found.items()}
        said = {"cpu": cpu_name(), "model": args.model, "cores": os.cpu_count(), "threads": args.threads,
                "questions": len(questions),
                "date": time.strftime("%Y-%m-%d"), "command": "benchmarks/throughput.py " + shlex.join(sys.argv[1:]),
                "rows": kept}  # fmt: skip
        with open(args.json, "w") as out:
            json.dump(said, out, indent=1)


if __name__ == "__main__":
    main()
