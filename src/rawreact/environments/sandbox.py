"""Model-written programs, run in a box apart from rawreact (`environments.box`), and judged by a verdict they
cannot give themselves.

rawreact hands the box nothing on disk: the program, its tests and a fresh token reach the harness on its standard
input, which it reads whole and closes before a line of the program runs, so the tests are in no file the program
could read or rewrite. The program runs first, in a namespace of its own (not `__main__`, as in HumanEval's
harness), then the tests, with the builtins as they were before the program ran (a program that replaces `exec` or
`abs` changes nothing the tests use). Only then does the harness write the token, with what the tests left in
`__report__`, into a file rawreact opened: a program that exits early, prints, or writes that file itself has no
token to write. The program's standard output and error, and that verdict, are files rawreact opened and keeps
open, with no name in any folder; rawreact reads them through its own descriptors, never more than a limit.

What no harness in the program's own process stops: a program that reads the harness's memory (its frames) can find
the token, and a result whose `__eq__` is always true passes an `assert f(x) == y` (as in HumanEval's harness).
"""

import contextlib
import json
import os
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from rawreact.core.errors import EnvironmentSetupError
from rawreact.core.processes import kill_until_gone
from rawreact.environments.box import Box, Cgroups, as_user, box, own_uid, unboxed_python

# The harness, run as `python -I -B -c HARNESS`: it takes everything from its standard input, limits itself,
# runs the program and then the tests, and writes the verdict. Nothing of it is left in `__main__` for a program.
HARNESS = r"""
def _main():
    import _thread, builtins, json, os, resource, signal, sys
    given = json.loads(sys.stdin.buffer.read())
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    def watch(end, read=os.read, exit=os._exit):  # rawreact holds the only other end: when it dies, so does this
        try:
            read(end, 1)
        finally:
            exit(137)
    _thread.start_new_thread(watch, (given["watch"],))
    def over(number, frame, exit=os._exit):  # the box's first process ignores a signal it has no handler for
        exit(128 + number)
    signal.signal(signal.SIGXCPU, over)
    for name, pair in given["limits"].items():
        resource.setrlimit(getattr(resource, name), tuple(pair))
    token, verdict, run, dumps = given["token"], given["verdict"], exec, json.dumps
    ftruncate, pwrite, exit, out = os.ftruncate, os.pwrite, os._exit, sys.stdout
    pristine = dict(builtins.__dict__)
    program = compile(given["program"], "program.py", "exec")
    tests = given["tests"]
    namespace = {} if given["name"] is None else {"__name__": given["name"]}
    given = None
    run(program, namespace)
    namespace["__builtins__"] = pristine
    run(compile(tests, "tests.py", "exec"), namespace)
    report = namespace.get("__report__")
    try:
        out.flush()
    except BaseException:
        pass
    line = token + ("" if report is None else " " + dumps(report)) + "\n"
    ftruncate(verdict, 0)
    pwrite(verdict, line.encode(), 0)
    exit(0)
_main()
"""

VERDICT_MOST = 4 << 20  # bytes of a verdict read: the token and the tests' report


@dataclass(frozen=True)
class Limits:
    """What a program may take: wall and CPU seconds, bytes of memory (the whole program's where cgroups hold it, a
    process's address space in any case), processes (its own included), open files, bytes of any one file it writes
    (its stdout and stderr among them), bytes it may write in all (its folder, /tmp and /dev/shm, each a tmpfs of a
    share of it); `kept`: bytes of its output kept."""

    seconds: float = 10.0
    cpu_seconds: int = 10
    memory: int = 1 << 30
    processes: int = 32
    files: int = 64
    file_size: int = 1 << 20
    written: int = 64 << 20
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
    uid: int | None = None  # the user id it ran as outside its box (its own, as root): its processes are found by it


def isolation() -> dict:
    """What this process can give a program, in the words and facts a manifest records (`box.box`)."""
    made = box()
    return {"boxed": made.boxed, "python": made.python, "said": made.said, "cgroups": bool(made.cgroups)}


def run_program(program: str, tests: str, limits: Limits = Limits(), *, unboxed: bool = False,
                name: str | None = None) -> Ran:  # fmt: skip
    """Run `program` and then `tests` (Python source, in one namespace named `name`; None: HumanEval's, an empty
    one) in the box, and say whether the tests held. Where this machine has no box, raise, unless `unboxed` says
    the user chose to run programs with their own rights."""
    made = box()
    if not made.boxed and not unboxed:
        raise EnvironmentSetupError(made.refusal())
    uid = own_uid()
    token = secrets.token_hex(16)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as verdict:
        watch, held = os.pipe()  # the harness ends itself when `held` closes: when rawreact dies, however it dies
        given = {"token": token, "verdict": verdict.fileno(), "program": program, "tests": tests, "name": name,
                 "limits": _rlimits(limits, uid, made.boxed), "watch": watch}  # fmt: skip
        try:
            if made.boxed:
                code, timed_out, oom = _in_box(made, uid, given, limits, out, err, verdict)
            else:
                code, timed_out, oom = _unboxed(uid, given, limits, out, err, verdict)
        finally:
            os.close(watch)
            os.close(held)
        # 128 + N: the harness ended by signal N (bwrap says so of its command, and the harness of SIGXCPU itself)
        code = -(code - 128) if code is not None and code > 128 and code - 128 in signal.valid_signals() else code
        stdout, stderr = _tail(out.fileno(), limits.kept), _tail(err.fileno(), limits.kept)
        said = _tail(verdict.fileno(), VERDICT_MOST + 1, start=True)
    passed = not timed_out and code == 0 and (said == token + "\n" or said.startswith(token + " "))
    passed = passed and said.endswith("\n") and said.count("\n") == 1 and len(said) <= VERDICT_MOST
    reason = "passed" if passed else _reason(code, timed_out, oom, stderr, limits)
    report = _report(said[len(token) + 1 :]) if passed else None
    return Ran(passed, reason, code, stdout, stderr, time.perf_counter() - started, report, uid)


def _rlimits(limits: Limits, uid: int | None, boxed: bool) -> dict:
    """The limits the harness sets on itself before the program runs. RLIMIT_NPROC counts a user's processes: in the
    box, its own user namespace's; unboxed as root, the program's own user id's; unboxed as a user, theirs."""
    processes = limits.processes if boxed or uid is not None else _own_processes() + limits.processes
    return {
        "RLIMIT_CPU": (limits.cpu_seconds, limits.cpu_seconds + 1),  # SIGXCPU at the limit, SIGKILL a second on
        "RLIMIT_AS": (limits.memory, limits.memory),
        "RLIMIT_NPROC": (processes, processes),
        "RLIMIT_NOFILE": (limits.files, limits.files),
        "RLIMIT_FSIZE": (limits.file_size, limits.file_size),  # Python ignores SIGXFSZ: a write over it fails
        "RLIMIT_CORE": (0, 0),
    }


def _in_box(made: Box, uid: int | None, given: dict, limits: Limits, out, err, verdict) -> tuple:
    """Start the harness in a box and wait for it: its exit status (negative: a signal), whether it timed out, and
    whether the whole program's memory limit killed a process of it."""
    read, write = os.pipe()
    shares = {"folder": limits.written // 2, "tmp": limits.written // 4, "shm": limits.written // 4}
    argv = made.argv([made.python, "-I", "-B", "-c", HARNESS], info_fd=write, **shares)
    groups = Cgroups(made.cgroups, uid, limits.memory, limits.processes + 1) if made.cgroups else None  # (+ bwrap)
    namespace = None
    try:
        argv = argv if groups is None else groups.joining(argv)
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env={}, cwd="/",
                                   pass_fds=(write, verdict.fileno(), given["watch"]), start_new_session=True,
                                   **as_user(uid))  # fmt: skip
        os.close(write)
        write = -1
        first = _first_pid(read)  # the box's first process: killing it ends every process in the box
        namespace = _namespace(first)
        code, timed_out = _wait(process, json.dumps(given).encode(), limits.seconds, first)
        return code, timed_out, groups is not None and groups.out_of_memory()
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
        if groups is not None:
            groups.remove()
        if namespace is not None:  # the kernel kills the rest when the first ends, but does not wait for them
            kill_until_gone(lambda: _in_namespace(namespace), rounds=1000)


def _unboxed(uid: int | None, given: dict, limits: Limits, out, err, verdict) -> tuple:
    """The harness without a box (the user's choice, `--unboxed-programs`): in an empty folder of its own, removed
    after, with the limits, and as root under a user id of its own."""
    folder = tempfile.mkdtemp(prefix="rawreact-program-")
    try:
        if uid is not None:
            os.chown(folder, uid, uid)
        env = {"PATH": "/usr/bin:/bin", "HOME": folder, "TMPDIR": folder, "LANG": "C.UTF-8"}
        python = unboxed_python()
        process = subprocess.Popen([python, "-I", "-B", "-c", HARNESS], stdin=subprocess.PIPE, stdout=out,
                                   stderr=err, env=env, cwd=folder, pass_fds=(verdict.fileno(), given["watch"]),
                                   start_new_session=True, **as_user(uid))  # fmt: skip
        code, timed_out = _wait(process, json.dumps(given).encode(), limits.seconds, None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if uid is not None:
            kill_until_gone(lambda: processes_of(range(uid, uid + 1)))
    finally:  # `chmod -R` and `rm -rf` walk a tree of any depth; a folder the program locked is opened first
        subprocess.run(["chmod", "-R", "u+rwx", folder], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", folder], capture_output=True, check=False)
    return code, timed_out, False


def _wait(process: subprocess.Popen, payload: bytes, seconds: float, first: int | None) -> tuple[int | None, bool]:
    """Hand the harness its payload and wait for it, ending the program at the wall limit (or where rawreact is
    interrupted meanwhile: Ctrl-C leaves nothing running); its exit status and whether it timed out."""
    try:
        process.communicate(payload, timeout=seconds)
        return process.returncode, False
    except subprocess.TimeoutExpired:
        _end(process, first)
        return None, True
    except BaseException:
        _end(process, first)
        raise


def _end(process: subprocess.Popen, first: int | None) -> None:
    """Kill the box's first process (so the kernel ends every other process in the box), or the process's group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(first if first else process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _namespace(pid: int | None) -> str | None:
    """The pid namespace of a box's first process (`pid:[INODE]`), or None where it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") if pid else None
    except OSError:
        return None


def _in_namespace(namespace: str) -> list[int]:
    """The live processes (not zombies) of a box's pid namespace: those the kernel has not yet ended."""
    return _live(lambda pid, status: os.readlink(f"/proc/{pid}/ns/pid") == namespace)


def _first_pid(read: int) -> int | None:
    """The pid of the box's first process, from what bwrap writes on its info descriptor (None if it wrote none)."""
    text = b""
    while not text.rstrip().endswith(b"}"):
        chunk = os.read(read, 4096)
        if not chunk:
            break
        text += chunk
    try:
        return int(json.loads(text)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _report(text: str) -> object:
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None


def _reason(code: int | None, timed_out: bool, oom: bool, stderr: str, limits: Limits) -> str:
    if timed_out:
        return f"timed out after {limits.seconds:g} s"
    if oom:
        return f"over its memory limit of {limits.memory:,} bytes, all its processes together (killed)"
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        why = {"SIGXCPU": f"CPU limit of {limits.cpu_seconds} s", "SIGXFSZ": f"wrote over {limits.file_size:,} bytes",
               "SIGKILL": "killed"}.get(name, "a signal")  # fmt: skip
        return f"{why} ({name})"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if "[Errno 27] File too large" in stderr:
        return f"wrote over {limits.file_size:,} bytes (its output or a file)"
    if "[Errno 28] No space left on device" in stderr:
        return f"wrote over its share of {limits.written:,} bytes (its folder or /tmp)"
    if code == 0:
        return "exited before its tests finished"
    return lines[-1].strip()[:200] if lines else f"exit status {code}"


def processes_of(uids: range) -> list[int]:
    """The live processes (not zombies) whose user id is in `uids`: one program's (its own id), or any program's."""
    return _live(lambda pid, status: _uid(status) in uids)


def _uid(status: str) -> int | None:
    """The real user id a `/proc/PID/status` names."""
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), None)


def _live(chosen: Callable[[str, str], bool]) -> list[int]:
    """The live processes (not zombies) that `chosen(pid, status)` accepts, `status` their `/proc/PID/status`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as file:
                status = file.read()
            if "State:\tZ" not in status and chosen(entry.name, status):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _own_processes() -> int:
    return len(processes_of(range(os.getuid(), os.getuid() + 1)))


def _tail(fd: int, size: int, *, start: bool = False) -> str:
    """The last `size` bytes (with `start`, the first) of an open file, read through its descriptor, as text."""
    try:
        length = os.fstat(fd).st_size
        return os.pread(fd, min(size, length), 0 if start else max(0, length - size)).decode("utf-8", "replace")
    except OSError:
        return ""
