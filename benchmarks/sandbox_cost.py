"""The box's cost a program: CPU seconds (and wall seconds) to run one small program and its tests apart from rawreact.

Three ways of running the same right program (a function and three asserts) are interleaved, round by round:

- `interpreter`: the baseline, a bare `python -I -c` of the same program, with no harness and no isolation;
- `box`: `sandbox.run_program`, as a run judges a program (bwrap, the harness, and as root the cgroups);
- `before`: the sandbox of an earlier revision (`--against REV`, read from git), where one is named.

CPU time is counted for every process a program starts, wherever it lands: the benchmark moves itself into a
cgroup v1 `cpuacct` group of its own (so root is needed) and reads its usage; a process's rusage would miss the
box's processes, which bwrap's init reaps, not rawreact.

    sudo python benchmarks/sandbox_cost.py [--programs 40] [--rounds 5] [--against 2f43876]
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rawreact.environments import sandbox
from rawreact.models.cores import cpu_name

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

PROGRAM = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\nassert add(0, 0) == 0\n"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _earlier(revision: str):
    """The sandbox module as it was at `revision` (its imports are today's rawreact's)."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "show", f"{revision}:src/rawreact/environments/sandbox.py"], cwd=root,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "sandbox_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("sandbox_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpuacct() -> Path:
    """A cpuacct cgroup of this process's own, that it and everything it starts are in."""
    group = CPUACCT / f"rawreact-bench-{os.getpid()}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(os.getpid()))
    return group


def _measure(group: Path, run, count: int) -> tuple[float, float]:
    """CPU and wall seconds a program, over `count` programs."""
    cpu, wall = int((group / "cpuacct.usage").read_text()), time.perf_counter()
    for _ in range(count):
        run()
    return (int((group / "cpuacct.usage").read_text()) - cpu) / 1e9 / count, (time.perf_counter() - wall) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=40, help="programs a measurement (default 40)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each measuring every way once (default 5)")
    parser.add_argument("--against", metavar="REV", help="also measure the sandbox of this git revision")
    args = parser.parse_args()
    if os.geteuid() != 0 or not (CPUACCT / "cgroup.procs").is_file():
        sys.exit("sandbox_cost.py: counts CPU in a cgroup v1 cpuacct group of its own: run it as root, where "
                 "/sys/fs/cgroup/cpuacct is mounted")  # fmt: skip
    python = sandbox.box().python
    ways = {
        "interpreter": lambda: subprocess.run([python, "-I", "-c", PROGRAM + TESTS], check=True),
        "box": lambda: _check(sandbox.run_program(PROGRAM, TESTS)),
    }
    if args.against:
        before = _earlier(args.against)
        ways["before"] = lambda: _check(before.run_program(PROGRAM, TESTS))
    print(f"# {cpu_name()}, load {os.getloadavg()[0]:.2f}; programs run with "
          f"{sandbox.isolation()['said']}")  # fmt: skip
    group = _cpuacct()
    try:
        for run in ways.values():  # warm: the box is found, files are in the page cache
            run()
        found = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, run in ways.items():
                found[name].append(_measure(group, run, args.programs))
    finally:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()
    base = statistics.median(cpu for cpu, _ in found["interpreter"])
    print(f"{'way':12} {'CPU ms a program':>17} {'wall ms':>8} {'CPU / interpreter':>18}  (median of {args.rounds})")
    for name, pairs in found.items():
        cpu = statistics.median(c for c, _ in pairs)
        wall = statistics.median(w for _, w in pairs)
        print(f"{name:12} {cpu * 1000:17.1f} {wall * 1000:8.1f} {cpu / base:18.2f}")
    print(f"# load after: {os.getloadavg()[0]:.2f}")


def _check(ran) -> None:
    if not ran.passed:
        raise SystemExit(f"sandbox_cost.py: the right program failed: {ran.reason}")


if __name__ == "__main__":
    main()
