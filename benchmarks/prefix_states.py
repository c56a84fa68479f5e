"""What a kept prefix state (models.states) saves a process: `rawreact run` in fresh processes, computing the few-shot
prefix (`RAWREACT_STATES=off`) against reading the state an earlier process kept, interleaved.

Each repeat runs the command once each way, the order alternating, and prints each process's CPU seconds (its own and
llama.cpp's threads), its wall time and the load before it; then the medians, their ratio, and whether the records
were the same both ways (they must be: the state read is the computed one, and the first call counts the prefix
either way). A folder of its own is warmed by one run first.

    python benchmarks/prefix_states.py [--model gemma3-270m] [--limit 2] [--repeat 3] [RUN OPTIONS ...]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rawreact.models.cores import cpu_name

BIN = Path(sys.executable).parent


def timeless(found: object) -> object:
    if isinstance(found, dict):
        return {k: timeless(v) for k, v in found.items() if k not in ("started", "finished", "seconds")}
    if isinstance(found, list):
        return [timeless(v) for v in found]
    return found


def run(command: list[str], out: Path, states: str) -> dict:
    env = dict(os.environ, RAWREACT_STATES=states)
    load, before, start = os.getloadavg()[0], resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run([*command, "--out", str(out), "-q"], capture_output=True, text=True, env=env)
    wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"rawreact run failed: {done.stderr.strip()[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    records = [timeless(json.loads(line)) for line in out.read_text().splitlines()]
    out.unlink()
    out.with_name(out.name + ".manifest.json").unlink()
    return {"cpu": cpu, "wall": wall, "load": load, "records": records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--limit", type=int, default=2, help="questions a process (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of processes (default 3)")
    args, more = parser.parse_known_args()
    command = [str(BIN / "rawreact"), "run", "--model", args.model, "--limit", str(args.limit), "--threads", "1"]
    command += more
    print(f"on {cpu_name()}; {' '.join(command[1:])}, one llama.cpp thread", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        kept, out = str(Path(folder) / "states"), Path(folder) / "run.jsonl"
        run(command, out, kept)  # computes and keeps the prefix's state
        size = sum(p.stat().st_size for p in Path(kept).iterdir())
        print(f"kept: {size / 1e6:.1f} MB", flush=True)
        found = {"computed": [], "read": []}
        for k in range(args.repeat):
            for way in ("computed", "read") if k % 2 == 0 else ("read", "computed"):
                result = run(command, out, "off" if way == "computed" else kept)
                found[way].append(result)
                print(f"{way:9s} cpu {result['cpu']:6.2f} s  wall {result['wall']:6.2f} s  load {result['load']:.2f}",
                      flush=True)  # fmt: skip
    computed, read = (statistics.median(r["cpu"] for r in found[w]) for w in ("computed", "read"))
    same = all(r["records"] == found["computed"][0]["records"] for w in found for r in found[w])
    print(f"median CPU s a process: computed {computed:.2f}, read {read:.2f}: {computed / read:.2f}x; saved "
          f"{computed - read:.2f} s; records the same both ways: {same}")  # fmt: skip
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
