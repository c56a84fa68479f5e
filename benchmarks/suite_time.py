"""The test suite's time with each pytest-xdist worker kept to its own cores (tests/pinning.py) against every
worker on every core (`RAWREACT_TESTS_UNPINNED=1`), in one run.

Each repeat runs pytest once each way, the order alternating between repeats (the first of a pair meets a colder
page cache), and prints for each: pytest's wall time, the CPU time of pytest and everything it started, and the
counts pytest said. The ratio is the unpinned wall time over the pinned one. Wall time is what this measures, so
the machine should be idle: the load average before each run is printed beside it.

    python benchmarks/suite_time.py [--repeat 1] [PYTEST ARGS ...]

With no pytest arguments it runs the whole suite as the README's test command does (`python -m pytest`).
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rawreact.models.cores import cpu_name

ROOT = Path(__file__).resolve().parent.parent


def run(pytest_args: list[str], pinned: bool) -> dict:
    env = dict(os.environ)
    env.pop("RAWREACT_TESTS_UNPINNED", None)
    if not pinned:
        env["RAWREACT_TESTS_UNPINNED"] = "1"
    load = os.getloadavg()[0]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args], cwd=ROOT, env=env,
                          capture_output=True, text=True)  # fmt: skip
    wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", summary))
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return {
        "pinned": pinned,
        "wall": wall,
        "cpu": cpu,
        "load": load,
        "counts": counts,
        "code": done.returncode,
        "failed": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs (default 1)")
    args, pytest_args = parser.parse_known_args()
    print(f"on {cpu_name()}; pytest {' '.join(pytest_args) or '(the whole suite)'}", flush=True)
    results = []
    for k in range(args.repeat):
        for pinned in (True, False) if k % 2 == 0 else (False, True):
            result = run(pytest_args, pinned)
            results.append(result)
            said = "pinned" if pinned else "unpinned"
            print(f"{said}: {result['wall']:.0f} s wall, {result['cpu']:.0f} CPU s, load {result['load']:.2f} before, "
                  f"exit {result['code']}, {result['counts']}", flush=True)  # fmt: skip
            for line in result["failed"]:
                print(f"  {line}", flush=True)
    wall = {p: statistics.median(r["wall"] for r in results if r["pinned"] == p) for p in (True, False)}
    cpu = {p: statistics.median(r["cpu"] for r in results if r["pinned"] == p) for p in (True, False)}
    print(f"unpinned over pinned: {wall[False] / wall[True]:.2f}x the wall time, {cpu[False] / cpu[True]:.2f}x the CPU "
          f"time (medians of {args.repeat})")  # fmt: skip


if __name__ == "__main__":
    main()
