"""The cores each pytest-xdist worker keeps to.

Each worker, and every process it starts, keeps to a share of the cores of its own (with 2 workers on 2 cores, one
core each; with 4 workers on 2 cores, one core for every two), so the embedded model's default of a thread a core
gives each worker's model one thread. Two workers
whose models each ran a thread a core put 4 threads on 2 cores, which wait on one another at every pass (a 64-token
greedy call at 2 threads took 3x the wall time of 1 thread on a busy 2-core machine).

`RAWREACT_TESTS_UNPINNED=1` leaves every worker on every core (benchmarks/suite_time.py measures both)."""

import os

EVERY_CORE = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pin_this_worker() -> None:
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if os.environ.get("RAWREACT_TESTS_UNPINNED") == "1" or not (worker.startswith("gw") and count.isdigit()):
        return
    workers, k = int(count), int(worker[2:])
    if workers < 2 or len(EVERY_CORE) < 2:
        return
    if workers <= len(EVERY_CORE):
        os.sched_setaffinity(0, EVERY_CORE[k % workers :: workers])
    else:  # more workers than cores: each core takes its share of workers, each worker one core
        os.sched_setaffinity(0, [EVERY_CORE[k % len(EVERY_CORE)]])


def every_core() -> None:
    """For `subprocess.run(preexec_fn=...)`: the process may use every core the test run may, for a test that
    measures what a free core gives."""
    if EVERY_CORE:
        os.sched_setaffinity(0, EVERY_CORE)
