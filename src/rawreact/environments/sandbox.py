"""Model-written programs, run apart from rawreact: never in its process, never with its rights unchecked.

Each program runs in a process of its own, started by a small launcher (a fresh interpreter, so no lock of
rawreact's threads is held in it) that limits it before it runs a line: wall time (the parent kills it), CPU
seconds, address space, processes, open files and the size of any file it writes (its output included: its
stdout and stderr are files in its folder, so a flood ends at the limit). Its folder is an empty temporary
one, its home and its working folder, removed afterwards. Where rawreact runs as root, the program also runs
as a user id of its own (a random one, in no group, owning only its folder: it can write nowhere else, signal
no process but its own, and every process it leaves behind is found by that id and killed) and in a network
namespace of its own (no network); elsewhere it gets a user and network namespace where the system allows
unprivileged ones, and only the limits where it does not. `isolation()` says which, once, and a run records it.

A program passes only if its harness, after the tests, prints a token it was given on its standard input before
the program's code ran: a program that exits at import (`sys.exit(0)`, `os._exit(0)`) does not pass.
"""

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rawreact.core.errors import EnvironmentSetupError
from rawreact.core.processes import kill_until_gone

# The launcher: run as `python -I -c LAUNCHER CONFIG` in the program's folder. It applies the isolation the config
# names and replaces itself with the harness; exit code 125 means a step the config requires failed.
LAUNCHER = r"""
import ctypes, json, os, resource, sys
config = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
NEWNET, NEWNS, NEWUSER = 0x40000000, 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 262144
def mount(source, target, kind, flags, data):
    if libc.mount(source.encode(), target.encode(), kind and kind.encode(), flags, data and data.encode()) != 0:
        sys.exit(125)
if config["uid"] is not None:
    if libc.unshare(NEWNS | (NEWNET if config["network"] else 0)) != 0:
        sys.exit(125)
    mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    here = os.getcwd()
    folder = os.open(".", os.O_PATH)
    for shared in config["private"]:  # the folders anyone may write in: fresh and empty, gone with the program
        mount("tmpfs", shared, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777")
    if any(here.startswith(shared + "/") for shared in config["private"]):
        os.makedirs(here)
        mount("/proc/self/fd/%d" % folder, here, None, MS_BIND, None)
    os.chdir(here)
elif config["network"] and libc.unshare(NEWNET | NEWUSER) != 0:
    sys.exit(125)
for name, (soft, hard) in config["limits"].items():
    resource.setrlimit(getattr(resource, name), (soft, hard))
if config["uid"] is not None:
    os.setgroups([])
    os.setgid(config["uid"])
    os.setuid(config["uid"])
    if os.getuid() != config["uid"]:
        sys.exit(125)
os.execv(config["python"], [config["python"], "-I", "-B", "harness.py"])
"""

# The harness: reads its token, runs the program's code and then the tests' code in one namespace, and prints the
# token once they all ran without an error, with what the tests left in `__report__` (JSON) after it.
HARNESS = r"""
import json, sys
token = sys.stdin.readline().strip()
sys.stdin.close()
namespace = {"__name__": "__main__"}
with open("program.py", encoding="utf-8") as file:
    code = compile(file.read(), "program.py", "exec")
exec(code, namespace)
with open("tests.py", encoding="utf-8") as file:
    code = compile(file.read(), "tests.py", "exec")
exec(code, namespace)
sys.stdout.flush()
report = namespace.get("__report__")
print("\n" + token + ("" if report is None else " " + json.dumps(report)), flush=True)
"""

UID_BASE, UID_SPAN = 2_000_000, 1_000_000  # a program's own user id, as root: one no account has
# Folders anyone may write in: as root, a program sees fresh, empty ones (its mount namespace's own).
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
FAILED_SETUP = 125  # (120 is what Python exits with when it cannot flush its output)


@dataclass(frozen=True)
class Limits:
    """What a program may take: wall and CPU seconds, bytes of address space, processes (its own included), open
    files, and bytes of any file it writes (its stdout and stderr among them); `kept`: bytes of its output kept."""

    seconds: float = 10.0
    cpu_seconds: int = 10
    memory: int = 1 << 30
    processes: int = 32
    files: int = 64
    file_size: int = 1 << 20
    kept: int = 2000


@dataclass(frozen=True)
class Ran:
    """How a program ran: `passed` (its tests all ran and held), why not (`reason`, in words), its exit status
    (negative: the signal that ended it), the ends of its output, and its wall seconds."""

    passed: bool
    reason: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    report: object = None  # what the tests left in `__report__`, where they passed and left one
    uid: int | None = None  # the user id it ran as (its own, as root): its processes are found by it


@cache
def isolation() -> dict:
    """What this process can give a program, found once by trying it: its own user id (as root), no network (a
    namespace of its own), the limits (always), and the Python it runs on (as root, one its user id can run: a
    virtual environment under /root is not; the system's then, whose standard library the programs use)."""
    root = os.geteuid() == 0
    candidates = list(dict.fromkeys([os.path.realpath(sys.executable), *_system_pythons()]))
    for network in (True, False):
        for python in candidates:
            if _works(python, network, root):
                said = ", ".join(["own user id", "own /tmp"] * root + ["no network"] * network + ["limits"])
                return {"own_uid": root, "network": "none" if network else "shared", "limits": True,
                        "python": python, "said": said}  # fmt: skip
    return {"own_uid": root, "network": "shared", "limits": True, "python": None, "said": "none"}


def _system_pythons() -> list[str]:
    found = [shutil.which("python3"), "/usr/bin/python3", "/usr/local/bin/python3"]
    return [os.path.realpath(p) for p in found if p and os.path.isfile(p)]


def _works(python: str, network: bool, root: bool) -> bool:
    """Whether the launcher can run `python` here, with or without a network namespace."""
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "harness.py").write_text("", encoding="utf-8")
        config = {"network": network, "uid": _uid() if root else None, "limits": {}, "python": python,
                  "private": _private()}  # fmt: skip
        if root:
            os.chown(folder, config["uid"], config["uid"])
        done = subprocess.run([sys.executable, "-I", "-c", LAUNCHER, json.dumps(config)], cwd=folder, env=_env(folder),
                              capture_output=True, timeout=60, check=False)  # fmt: skip
        return done.returncode == 0


def run_program(program: str, tests: str, limits: Limits = Limits()) -> Ran:
    """Run `program` and then `tests` (Python source, in one namespace) apart from rawreact (see the module), and
    say whether the tests held."""
    facts = isolation()
    if facts["python"] is None:
        raise EnvironmentSetupError(
            "no Python interpreter here can run a program apart from rawreact (as root, its own user id must be "
            "able to run it): install the system's python3 (apt-get install python3)"
        )
    uid = _uid() if facts["own_uid"] else None
    folder = Path(tempfile.mkdtemp(prefix="rawreact-program-"))
    token = secrets.token_hex(16)
    started = time.perf_counter()
    try:
        (folder / "program.py").write_text(program, encoding="utf-8")
        (folder / "tests.py").write_text(tests, encoding="utf-8")
        (folder / "harness.py").write_text(HARNESS, encoding="utf-8")
        if uid is not None:
            os.chown(folder, uid, uid)
        processes = limits.processes if uid is not None else _own_processes() + limits.processes
        rlimits = {
            "RLIMIT_CPU": (limits.cpu_seconds, limits.cpu_seconds + 1),  # SIGXCPU at the limit, SIGKILL a second on
            "RLIMIT_AS": (limits.memory, limits.memory),
            "RLIMIT_NPROC": (processes, processes),
            "RLIMIT_NOFILE": (limits.files, limits.files),
            "RLIMIT_FSIZE": (limits.file_size, limits.file_size),  # Python ignores SIGXFSZ: a write over it fails
            "RLIMIT_CORE": (0, 0),
        }
        config = {"network": facts["network"] == "none", "uid": uid, "limits": rlimits, "python": facts["python"],
                  "private": _private()}  # fmt: skip
        with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err:
            process = subprocess.Popen([sys.executable, "-I", "-c", LAUNCHER, json.dumps(config)], cwd=folder,
                                       env=_env(folder), stdin=subprocess.PIPE, stdout=out, stderr=err,
                                       start_new_session=True)  # fmt: skip
            try:
                process.stdin.write(f"{token}\n".encode())
                process.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                code = process.wait(timeout=limits.seconds)
                timed_out = False
            except subprocess.TimeoutExpired:
                code, timed_out = None, True
            _kill(process, uid)
            if code is None:
                code = process.wait()
        stdout = _tail(folder / "stdout", limits.kept)
        stderr = _tail(folder / "stderr", limits.kept)
        shown, _, last = stdout.rstrip().rpartition("\n")
        said, _, report = last.partition(" ")
        passed = not timed_out and code == 0 and said == token
        reason = "passed" if passed else _reason(code, timed_out, stderr, limits)
        report = _report(report) if passed else None
        return Ran(passed, reason, code, shown.rstrip() if passed else stdout, stderr, time.perf_counter() - started,
                   report, uid)  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _report(text: str) -> object:
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


def _reason(code: int | None, timed_out: bool, stderr: str, limits: Limits) -> str:
    if timed_out:
        return f"timed out after {limits.seconds:g} s"
    if code == FAILED_SETUP:
        return "its isolation could not be set up"
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        why = {"SIGXCPU": f"CPU limit of {limits.cpu_seconds} s", "SIGXFSZ": f"wrote over {limits.file_size:,} bytes",
               "SIGKILL": "killed"}.get(name, "a signal")  # fmt: skip
        return f"{why} ({name})"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if "[Errno 27] File too large" in stderr:
        return f"wrote over {limits.file_size:,} bytes (its output or a file)"
    if code == 0:
        return "exited before its tests finished"
    return lines[-1].strip()[:200] if lines else f"exit status {code}"


def _kill(process: subprocess.Popen, uid: int | None) -> None:
    """End the program and everything it started: its session's group, and (with a user id of its own) every
    process of that id, until none is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if uid is not None:
        kill_until_gone(lambda: processes_of(range(uid, uid + 1)))


def processes_of(uids: range) -> list[int]:
    """The live processes (not zombies) whose user id is in `uids`: one program's (its own id), or any program's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:"):
                if int(line.split()[1]) in uids and "State:\tZ" not in status:
                    found.append(int(entry.name))
                break
    return found


def _private() -> list[str]:
    """The shared folders a program gets its own of: those that are there and anyone may write in."""
    return [path for path in SHARED if os.path.isdir(path) and os.stat(path).st_mode & 0o002]


def _own_processes() -> int:
    return len(processes_of(range(os.getuid(), os.getuid() + 1)))


def _uid() -> int:
    return UID_BASE + secrets.randbelow(UID_SPAN)


def _env(folder: str | Path) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": str(folder), "TMPDIR": str(folder), "LANG": "C.UTF-8"}


def _tail(path: Path, size: int) -> str:
    """The last `size` bytes of a file, as text."""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - size))
            return file.read().decode("utf-8", "replace")
    except OSError:
        return ""
