"""The embedded model's threads (issue 42 item 1): a fixed count by default, or `auto`, which follows the
load, measured from /proc/stat less this process's own ticks."""

import json
import os
import resource
import subprocess
import sys

import pinning
import pytest

from rawreact import DataError, load_prompt
from rawreact.config.settings import Settings, parse_spec
from rawreact.core.errors import ModelError
from rawreact.models import build
from rawreact.models.cores import OPENMP, SPIN, Cores, bound_spinning, machine_ticks
from rawreact.models.llama import LlamaModel


class Machine:
    """Ticks as /proc/stat and os.times would give them: `others` cores busy besides this process's `own`."""

    def __init__(self, cpus: int = 2) -> None:
        self.busy = self.total = self.own_ticks = 0.0
        self.now, self.cpus = 0.0, cpus

    def run(self, seconds: float, others: float, own: float) -> None:
        ticks = seconds * 100  # ticks a second of one CPU
        self.busy += (others + own) * ticks
        self.total += self.cpus * ticks
        self.own_ticks += own * ticks
        self.now += seconds

    def cores(self, **options) -> Cores:
        cores = Cores(2, machine=lambda: (self.busy, self.total), own=lambda: self.own_ticks, clock=lambda: self.now,
                      **options)  # fmt: skip
        cores.cpus = self.cpus
        return cores


def test_threads_are_the_cores_others_leave_free_and_this_process_s_own_work_does_not_count():
    machine = Machine()
    cores = machine.cores()
    assert cores.threads() == 2  # nothing measured yet: every core
    machine.run(1.0, others=0.0, own=2.0)  # this process alone, both threads spinning
    assert cores.threads() == 2
    machine.run(1.0, others=1.0, own=1.0)  # another process holds a core
    assert cores.threads() == 1
    machine.run(1.0, others=2.0, own=0.7)  # a burner on every core: at least one thread
    assert cores.threads() == 1
    machine.run(1.0, others=0.2, own=1.0)  # the other process is gone
    assert cores.threads() == 2


def test_threads_are_measured_again_only_every_so_often():
    machine = Machine()
    cores = machine.cores(every=5.0)
    machine.run(1.0, others=1.5, own=0.5)
    assert cores.threads() == 2  # a second is not yet five: the count stands
    machine.run(4.5, others=1.5, own=0.5)
    assert cores.threads() == 1


def test_without_proc_stat_the_threads_stay_the_allowed_cores():
    cores = Cores(2, machine=lambda: None)
    assert cores.threads() == 2
    assert machine_ticks() is None or machine_ticks()[1] >= machine_ticks()[0] > 0


def test_threads_is_a_setting_of_the_embedded_model_only():
    assert (
        Settings(threads=1).threads == 1 and Settings().threads is None and Settings(threads="auto").threads == "auto"
    )
    assert parse_spec("threads=auto,k=1", "--base") == {"threads": "auto", "k": 1}
    for bad in (0, "many"):
        with pytest.raises(DataError, match=r"\(--threads\) must be a whole number of 1 or more, or auto"):
            Settings(threads=bad)
    with pytest.raises(DataError, match="decodes elsewhere, so drop --threads"):
        Settings(threads=2, model="vllm:http://127.0.0.1:9/v1")


class Alternating:
    """Cores that say 1, 2, 1, 2, ... pass after pass: the most a changing load could do."""

    allowed = 2

    def __init__(self) -> None:
        self.n = 0

    def threads(self) -> int:
        self.n += 1
        return 1 + self.n % 2


def test_a_fixed_count_repeats_its_text_and_auto_changes_the_count_between_passes(gemma, demo):
    """Why auto is not the default: llama.cpp's arithmetic depends on the thread count, so only a fixed
    count gives the same greedy text whatever the machine's load."""
    prompt = f"{load_prompt(k=1).text}Question: {demo.questions[0].question}\nThought 1:"
    options = {"stop": ["\nObservation 1:"], "max_tokens": 40}
    fixed = LlamaModel(gemma.path, n_threads=2, n_ctx=2048)
    first, again = fixed.complete(prompt, **options), fixed.complete(prompt, **options)
    assert first.text == again.text and first.text.strip() and set(fixed.engine.stats.threads) == {2}
    assert fixed.cores is None and LlamaModel(gemma.path, n_ctx=2048).cores is None  # the default: fixed
    changing = LlamaModel(gemma.path, n_ctx=2048, n_threads="auto")
    assert changing.cores is not None and changing.cores.allowed >= 1
    changing.cores = Alternating()  # before the first call, which makes the engine
    text = changing.complete(prompt, **options).text
    assert text.strip() and set(changing.engine.stats.threads) == {1, 2}
    with pytest.raises(ModelError, match="n_threads must be a whole number of 1 or more, None or 'auto'"):
        LlamaModel(gemma.path, n_threads=0)


def test_a_run_records_its_thread_count_and_setting(tmp_path):
    from rawreact.cli.app import main
    from rawreact.runs.records import read_manifest

    out = tmp_path / "run.jsonl"
    assert main(["run", "--threads", "1", "--limit", "1", "--max-steps", "1", "-k", "1", "-q", "--out", str(out)]) == 0
    manifest = read_manifest(out)
    assert manifest["threads"] == 1 and manifest["settings"]["threads"] == 1
    assert manifest["openmp"] == bound_spinning() and manifest["openmp"]["set_by"]  # how its threads wait
    # its arithmetic, and where the prefix's state is kept (the tests' folder, conftest.kept_states)
    kept = {"kv_cache": "per stream", "batching": None, "prefix_states": os.environ["RAWREACT_STATES"]}
    assert manifest["llama_cpp"] == build.loads() | kept
    assert manifest["llama_cpp"]["features"]


# In a process of its own (libgomp reads its environment once): load llama.cpp as rawreact does, decode one
# token with 2 threads, then sleep; print what rawreact recorded, the environment after, and the CPU time
# the process used while it slept (llama.cpp's idle OpenMP threads spinning, if they do).
IDLE_SPIN = r"""
import ctypes, json, os, sys, time
if sys.argv[1] == "preloaded":
    ctypes.CDLL("libgomp.so.1")
from rawreact.models.cores import bound_spinning
from rawreact.models.llama import LlamaModel
model = LlamaModel(sys.argv[2], n_threads=2, n_ctx=512)
model.complete("Question: what is two and two?\nThought 1:", stop=["\n"], max_tokens=2)
cpu = time.process_time()
time.sleep(0.5)
print(json.dumps([bound_spinning(), os.environ.get("GOMP_SPINCOUNT"), time.process_time() - cpu]))
"""


def idle_spin(gemma, how: str, **env: str) -> tuple[dict, str | None, float]:
    clean = {k: v for k, v in os.environ.items() if k not in OPENMP} | env
    done = subprocess.run([sys.executable, "-c", IDLE_SPIN, how, str(gemma.path)], env=clean, capture_output=True,
                          text=True, timeout=120, preexec_fn=pinning.every_core)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def others_busy(run):
    """`run()`'s result, and how many cores other processes than `run`'s children kept busy meanwhile (from
    /proc/stat, less the children's own CPU time)."""
    ticks, before = machine_ticks(), resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run()
    after_ticks, after = machine_ticks(), resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * os.sysconf("SC_CLK_TCK")
    busy, total = after_ticks[0] - ticks[0], after_ticks[1] - ticks[1]
    return result, max(0.0, busy - child) / max(total, 1) * (os.cpu_count() or 1)


def test_llama_cpp_s_idle_threads_sleep_after_a_bounded_spin_unless_the_user_chose(gemma):
    """Issue 42 item 1: libgomp's default spins a waiting thread for milliseconds, which on a busy machine takes
    the core that the thread it waits for needs. rawreact bounds the spin before llama.cpp loads; the setting
    reaches libgomp (an idle thread then uses no CPU, where spinning forever uses a core), the processes it
    starts inherit the user's environment, and a user's own choice or an earlier libgomp is kept and recorded.

    A thread spinning for ever gets a core's time only where a core is free: that part is measured only where
    other processes left one free while it ran (issue 67 item 23: at load 11 it got less than 0.3 CPU-s)."""
    said, left, cpu = idle_spin(gemma, "clean")
    assert said == {"GOMP_SPINCOUNT": str(SPIN), "set_by": "rawreact"} and left is None
    (said, left, spun), others = others_busy(lambda: idle_spin(gemma, "clean", OMP_WAIT_POLICY="active"))
    assert said == {"OMP_WAIT_POLICY": "active", "set_by": "the environment"} and left is None
    assert cpu < 0.1, cpu  # a bounded spin sleeps: on a busy machine it gets even less
    if others <= (os.cpu_count() or 1) - 1.25:  # a core was free for the spinning thread
        assert spun > 0.3, (cpu, spun, others)
    else:  # the machine was busy: a thread spinning for ever still takes more than one that sleeps
        assert cpu <= spun, (cpu, spun, others)
    said, left, _ = idle_spin(gemma, "clean", GOMP_SPINCOUNT="50")
    assert said == {"GOMP_SPINCOUNT": "50", "set_by": "the environment"} and left == "50"
    said, left, _ = idle_spin(gemma, "preloaded")
    assert said["set_by"].startswith("unknown: libgomp was loaded before rawreact") and left is None


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_thread_count_is_one_line_naming_auto(value, capsys):
    from rawreact.cli.app import main

    with pytest.raises(SystemExit) as stopped:
        main(["run", "--threads", value])
    assert stopped.value.code == 2 and "is not a whole number of 1 or more, or auto" in capsys.readouterr().err
