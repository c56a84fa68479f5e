"""Wall time a question on a busy machine (issue 42 item 1): llama.cpp's threads fixed at every core (the
default) with rawreact's bounded OpenMP spin and with libgomp's own, passive waiting, fixed at 1, and
`--threads auto` (the cores other processes leave free), idle and under a CPU burner on every core that
this benchmark starts itself and that stops by itself.

Each setting runs in its own process (OpenMP reads its settings once per process), the settings in
turn, idle then burned, `--repeat` times; it prints wall and CPU seconds a question, and each setting's
burned wall time against its idle one. A run that cannot finish a question within `--seconds` says so.

    RAWREACT_HOTPOTQA=dev.json python benchmarks/busy.py [--limit 3] [--seconds 120] [--repeat 1] [--policies NAME...]
"""

import argparse
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import time

from rawreact.models.cores import OPENMP, cpu_name  # OPENMP: the variables that choose how OpenMP waits

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

# a policy: llama.cpp's thread count and the OpenMP environment its process starts with. rawreact bounds
# libgomp's spinning unless the environment chooses (models.cores.bound_spinning); GOMP_SPINCOUNT=300000 is
# libgomp's own default, which rawreact kept before.
POLICIES = {
    "every core": (None, {}),
    "libgomp's": (None, {"GOMP_SPINCOUNT": "300000"}),
    "passive": (None, {"OMP_WAIT_POLICY": "passive"}),
    "spin 10k": (None, {"GOMP_SPINCOUNT": "10000"}),
    "1 thread": (1, {}),
    "auto": ("auto", {}),
}


def _burn(until: float) -> None:
    """Keep one core busy until `until` (a monotonic time), then stop."""
    while time.monotonic() < until:
        pass


def _one(threads, limit: int, seconds: float, data: str) -> None:
    """In a process of its own: questions on the embedded model until `limit` are done or `seconds` pass."""
    from rawreact import load_collection, load_model, load_prompt, run_questions

    collection = load_collection(data)
    model = load_model("gemma3-270m", n_ctx=4096, n_threads=threads)
    prompt = load_prompt(k=1)
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    for question in collection.questions[:limit]:
        list(run_questions([question], collection.env, model, prompt, max_steps=4))
        done += 1
        if time.perf_counter() - start > seconds:
            break
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"done": done, "wall": wall, "cpu": cpu, "threads": model.engine.stats.threads}))


def measure(name: str, policy, burned: bool, args) -> dict:
    threads, settings = policy
    burners = []
    if burned:
        until = time.monotonic() + args.seconds + 60  # bounded: they stop by themselves
        context = multiprocessing.get_context("spawn")
        burners = [context.Process(target=_burn, args=(until,), daemon=True) for _ in range(os.cpu_count() or 1)]
        for burner in burners:
            burner.start()
    try:
        command = [sys.executable, __file__, "--one", json.dumps(threads), "--limit", str(args.limit)]
        command += ["--seconds", str(args.seconds), "--data", args.data]
        env = {k: v for k, v in os.environ.items() if k not in OPENMP} | settings
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.seconds + 300, env=env)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        for burner in burners:
            burner.terminate()
    found |= {"setting": name, "burned": burned, "load": os.getloadavg()[0]}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--data", default=os.environ.get("RAWREACT_HOTPOTQA"))
    parser.add_argument("--policies", nargs="+", choices=list(POLICIES), default=list(POLICIES))
    parser.add_argument("--json", help="write every row, and the machine, to this file (for scripts/charts.py)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        _one(json.loads(args.one), args.limit, args.seconds, args.data)
        return
    rows = []
    for repeat in range(args.repeat):
        names = args.policies if repeat % 2 == 0 else list(reversed(args.policies))
        for name in names:
            for burned in (False, True):
                rows.append(measure(name, POLICIES[name], burned, args))
                row, done = rows[-1], max(rows[-1]["done"], 1)
                state = "burned" if burned else "idle"
                print(f"{name:10} {state:6} {row['done']} q, wall {row['wall'] / done:.1f} s/q, CPU "
                      f"{row['cpu'] / done:.1f} s/q, passes by threads {row['threads']}, load {row['load']:.1f}",
                      flush=True)  # fmt: skip
    print(f"\n{os.cpu_count()} cores; {args.limit} questions a run (k=1, 4 steps), a burner process on every core")
    for name in args.policies:
        idle = [r for r in rows if r["setting"] == name and not r["burned"]]
        burned = [r for r in rows if r["setting"] == name and r["burned"]]
        per = [sum(r["wall"] for r in rs) / max(sum(r["done"] for r in rs), 1) for rs in (idle, burned)]
        print(f"{name:10} idle {per[0]:.1f} s/q, burned {per[1]:.1f} s/q: {per[1] / per[0]:.2f}x the idle wall time")
    if args.json:
        said = {"cpu": cpu_name(), "cores": os.cpu_count(), "questions": args.limit, "date": time.strftime("%Y-%m-%d"),
                "command": "benchmarks/busy.py " + shlex.join(sys.argv[1:]), "rows": rows}  # fmt: skip
        with open(args.json, "w") as out:
            json.dump(said, out, indent=1)


if __name__ == "__main__":
    main()
