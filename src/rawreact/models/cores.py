"""How the embedded model's llama.cpp threads share a busy machine: how they wait, and, under
`--threads auto`, how many there are (the cores this process may use, less those other processes keep
busy, measured as the run goes, not guessed once).

llama.cpp's CPU backend waits at an OpenMP barrier after every operation of a pass. When another process
holds one of two cores, a thread of a 2-thread pass is often not running, and the others spin until it
is: on a busy 2-core machine a one-token pass took a median of 3,868 ms with 2 threads and 37 ms with 1
(issue 42). libgomp spins 300,000 rounds before it sleeps; before llama.cpp loads, `bound_spinning` makes
that SPIN rounds, so a waiting thread gives the core up almost at once. That changes no number, only who
gets the core meanwhile, and an idle machine runs as fast as before. Waiting passively (no spin at all)
costs 1.5x there, since every barrier then sleeps.

`--threads auto` goes further: every `every` seconds the busy ticks of /proc/stat, less this process's
own, say how many cores others use, and the next pass uses the rest (at least 1). On an idle machine
that is every core, as with a fixed count. llama.cpp's arithmetic here depends on the thread count (a
40-token greedy completion changed with the count alternating 1, 2: `tests/test_cores.py`), so a run
that follows the load is not bit-reproducible, and it is asked for by name; the default is a fixed count.
"""

import os
import sys
import time
from collections.abc import Callable

# The rounds an idle OpenMP thread spins before it sleeps (libgomp's GOMP_SPINCOUNT), measured by
# benchmarks/busy.py: at 1,000, 2 threads on an idle 2-core machine cost what libgomp's default of 300,000 costs,
# and under a burner on every core a question took 2.2x (at most 2.4x) its idle wall time (libgomp's: 2.2x to 15x).
SPIN = 1000
OPENMP = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # the variables a user sets to choose the waiting themselves
_waiting: dict | None = None  # what bound_spinning found and did, once per process


def allowed_cores() -> int:
    """The cores this process may run on (its affinity), or the machine's count where that is unknown."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


THREADS_A_CORE = 4  # the most llama.cpp threads a run may ask for, a core this process may use


def threads_problem(threads: int | str | None) -> str | None:
    """What is wrong with a count of llama.cpp threads on this machine, or None: more than THREADS_A_CORE a
    core only wait on one another (600 threads on 2 cores ran a question 12x slower than 2)."""
    if not isinstance(threads, int) or isinstance(threads, bool):
        return None
    cores = allowed_cores()
    most = THREADS_A_CORE * cores
    if threads <= most:
        return None
    return (
        f"threads={threads} (--threads) is more than {THREADS_A_CORE} a core for the {cores} cores this process may "
        f"use ({most} at most): llama.cpp's threads each wait for the slowest, so more threads than cores only "
        "slow a run; leave --threads out (a thread a core), or give auto"
    )


def machine_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat", "rb") as file:
            fields = [int(x) for x in file.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def own_ticks() -> float:
    """This process's CPU time (all its threads) in clock ticks."""
    times = os.times()
    return (times.user + times.system) * os.sysconf("SC_CLK_TCK")


def process_seconds(pid: int) -> float:
    """CPU seconds (user and system, every thread) that another process `pid` has used, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", "rb") as file:
        fields = file.read().rsplit(b")", 1)[1].split()  # after the command's name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The vector extensions that decide llama.cpp's speed on a CPU, as /proc/cpuinfo's flags spell them, and as a
# figure names them: two CPUs of one model name can differ in these, and their figures by 3x.
VECTOR_FLAGS = {
    "avx": "AVX",
    "avx2": "AVX2",
    "fma": "FMA",
    "f16c": "F16C",
    "avx_vnni": "AVX-VNNI",
    "avx512f": "AVX-512F",
    "avx512bw": "AVX-512BW",
    "avx512vl": "AVX-512VL",
    "avx512_vnni": "AVX-512-VNNI",
    "avx512_bf16": "AVX-512-BF16",
    "amx_tile": "AMX",
    "asimd": "NEON",
    "sve": "SVE",
}


def cpu_facts(cpuinfo: str | None = None) -> dict:
    """The CPU as a figure must name it: model name, family and model numbers, its vector extensions (by
    `VECTOR_FLAGS`) and the cores this process may use; from /proc/cpuinfo (or the text `cpuinfo`)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                cpuinfo = file.read()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block says it for all
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return {
        "name": fields.get("model name") or fields.get("Processor") or "unknown CPU",
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "vector": [name for flag, name in VECTOR_FLAGS.items() if flag in flags],
        "cores": cores,
    }


def cpu_name(facts: dict | None = None) -> str:
    """The CPU in one label for a figure: `AMD EPYC (family 25, model 17; AVX AVX2 ... AVX-512F; 2 cores)`."""
    facts = facts or cpu_facts()
    numbers = ", ".join(f"{key} {facts[key]}" for key in ("family", "model") if facts.get(key))
    vector = " ".join(facts["vector"]) or "no AVX"
    said = "; ".join(part for part in (numbers, vector, f"{facts['cores']} cores") if part)
    return f"{facts['name']} ({said})"


class Cores:
    """The thread count of the next pass: `threads()`, re-measured at most every `every` seconds.

    `machine` and `own` read the ticks (injected by tests); with no /proc/stat the count stays `allowed`.
    """

    def __init__(
        self,
        allowed: int | None = None,
        *,
        every: float = 1.0,
        machine: Callable[[], tuple[int, int] | None] = machine_ticks,
        own: Callable[[], float] = own_ticks,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allowed = allowed or allowed_cores()
        self.every, self._machine, self._own, self._clock = every, machine, own, clock
        self.cpus = os.cpu_count() or self.allowed
        self.count = self.allowed
        self._last = self._sample()
        self._at = clock()

    def _sample(self) -> tuple[tuple[int, int], float] | None:
        ticks = self._machine()
        return None if ticks is None else (ticks, self._own())

    def threads(self) -> int:
        """The threads for the next pass: the allowed cores less those others kept busy lately, at least 1."""
        now = self._clock()
        if self._last is None or now - self._at < self.every:
            return self.count
        sample = self._sample()
        if sample is None:
            return self.count
        last, self._last, self._at = self._last, sample, now
        if sample[0][1] <= last[0][1]:  # no tick has passed: nothing measured
            return self.count
        others = busy_elsewhere(last, sample, self.cpus)
        self.count = max(1, min(self.allowed, int(self.allowed - others + 0.5)))
        return self.count


def busy_elsewhere(
    before: tuple[tuple[int, int], float] | None, after: tuple[tuple[int, int], float] | None, cpus: int | None = None
) -> float:
    """How many cores' worth other processes kept busy between two samples of (machine ticks, own ticks), out of
    `cpus` (default: the machine's), or 0.0 where /proc/stat is missing or no tick has passed."""
    if before is None or after is None:
        return 0.0
    ((busy0, total0), own0), ((busy, total), own) = before, after
    if total <= total0:
        return 0.0
    return max(0.0, (busy - busy0) - (own - own0)) / (total - total0) * (cpus or os.cpu_count() or 1)


def sample() -> tuple[tuple[int, int], float] | None:
    """(machine ticks, this process's ticks) now, for `busy_elsewhere`; None where /proc/stat is missing."""
    ticks = machine_ticks()
    return None if ticks is None else (ticks, own_ticks())


def busy_line(elsewhere: float, threads: int | None, cores: int) -> str | None:
    """One line for a run whose first question met busy cores, measured (`busy_elsewhere`), or None: llama.cpp's
    threads wait on each other when another process holds a core, so a fixed count of every core then slows down
    more than the cores it is left (bound_spinning keeps that to about 2x on 2 cores; a user's own OpenMP
    settings may not)."""
    if threads is None or elsewhere < 0.5 or threads < 2:
        return None
    return (
        f"other processes kept {elsewhere:.1f} of this machine's {cores} cores busy during the first question, "
        f"and the model decodes with {threads} threads, which wait on each other when a core is taken: expect it "
        "to run at least twice as slow as on an idle machine; close the other work, or run with --threads auto "
        "(or --threads 1)"
    )


def bound_spinning() -> dict:
    """Before llama.cpp's first import: make libgomp's idle threads sleep after SPIN rounds; what its waiting is.

    libgomp reads its environment once, when it loads (with llama.cpp). A user's own OMP_WAIT_POLICY or
    GOMP_SPINCOUNT is kept; so is a libgomp that another library loaded first (then the waiting is unknown).
    The variable is set only while llama.cpp loads: the processes this one starts inherit the user's environment.
    Returns the manifest's record: each variable libgomp read and who chose it.
    """
    global _waiting
    if _waiting is not None:
        return _waiting
    own = {name: os.environ[name] for name in OPENMP if name in os.environ}
    if own:
        _waiting = own | {"set_by": "the environment"}
    elif "llama_cpp" in sys.modules or _libgomp_loaded():
        _waiting = {"set_by": "unknown: libgomp was loaded before rawreact could set GOMP_SPINCOUNT"}
    else:
        os.environ["GOMP_SPINCOUNT"] = str(SPIN)
        try:
            import llama_cpp  # noqa: F401  (libgomp loads with it and reads GOMP_SPINCOUNT)
        except ImportError:
            return {}  # nothing loaded, nothing to record: llama_cpp_module says what to install
        finally:
            del os.environ["GOMP_SPINCOUNT"]
        _waiting = {"GOMP_SPINCOUNT": str(SPIN), "set_by": "rawreact"}
    return _waiting


def _libgomp_loaded() -> bool:
    """Whether this process has libgomp mapped already (False where /proc/self/maps is missing)."""
    try:
        with open("/proc/self/maps") as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return False
