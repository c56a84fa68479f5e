"""Hardening, fifth round (issue 67), Ray: a Ray started for one run listens on loopback only and leaves no token
where others can read it; SIGTERM while it starts is "interrupted" and 143; the tests' own Ray clusters are found
by their own folder and stopped, and no other Ray is touched. Each test failed on the main before the round."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is the [ray] extra: pip install 'rawreact[ray]'")

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import scale  # noqa: E402

BIN = Path(sys.executable).parent
LOOPBACK = ("127.0.0.1", "[::ffff:127.0.0.1]", "[::1]")


def _descendants(root: int) -> set[int]:
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(pid)] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found = {root}
    while True:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        if not more:
            return found
        found |= more


def _listening(pids: set[int]) -> list[tuple[str, str]]:
    """(local address, process name) of every TCP socket these processes listen on, as `ss -ltnp` shows them."""
    shown = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in shown.splitlines():
        owners = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            name = re.search(r'\(\("([^"]+)"', line)
            found.append((line.split()[3], name.group(1) if name else "?"))
    return found


def _run(tmp_path: Path, count: int, latency: float, home: Path, *quiet: str) -> tuple[subprocess.Popen, object]:
    data = tmp_path / "questions.json"
    scale._questions(data, count)
    stub, url = scale.start_stub(latency)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": str(home)}
    command = [str(BIN / "rawreact"), "run", str(data), "--model", f"vllm:{url}", "--ray", "--workers", "4",
               "--out", str(tmp_path / "r.jsonl"), *quiet]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return process, stub


def test_a_ray_started_for_a_run_listens_on_loopback_only_writes_no_token_and_keeps_its_session_private(tmp_path):
    """Item 1: while a `--ray` run answers, every port of its processes (the driver, GCS, raylet, actors, idle
    workers, agents) listens on loopback only, and no token file is written in its home; the run is answered."""
    home = tmp_path / "home"
    home.mkdir()
    process, stub = _run(tmp_path, 60, 0.2, home, "-q")
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # some records written: the actors are up and answering
            path = tmp_path / "r.jsonl"
            if path.exists() and path.read_bytes().count(b"\n") >= 4:
                break
            assert process.poll() is None, process.communicate()[1][-3000:]
            time.sleep(0.1)
        time.sleep(1.0)  # the agents and idle workers listen by now
        listening = _listening(_descendants(process.pid))
        sessions = _session_dirs(_descendants(process.pid))
        assert process.poll() is None, "the run was still under way when its sockets were read"
    finally:
        out, err = process.communicate(timeout=300)
        stub.kill()
    assert process.returncode == 0, err[-3000:]
    names = {name for _, name in listening}
    assert {"gcs_server", "raylet"} <= names, listening  # the run's own Ray was seen
    wide = [(address, name) for address, name in listening if not address.startswith(LOOPBACK)]
    assert wide == [], wide
    assert not (home / ".ray").exists() or not any((home / ".ray").iterdir())
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 60
    # Issue 91 item 10: its session (sockets/, logs/, runtime_resources/, which Ray makes mode 777 without the sticky
    # bit) is in a temp dir of the run's own, mode 0700, not under the shared /tmp/ray; removed when the run ends
    ((session, modes),) = sessions.items()
    temp = session.parent.parent
    assert temp.name.startswith("rawreact-ray-") and temp.parent == Path(tempfile.gettempdir())
    assert modes[-1] == 0o700 and not temp.exists()  # Ray makes its own folder in it 777: this one stays 0700


def _session_dirs(pids: set[int]) -> dict[Path, list[int]]:
    """The session folders (`--session-dir=` or `--session_dir=`) on the command lines of these processes, each
    with the modes of the two folders it is in (nearest first), read while they run."""
    found = set()
    for pid in pids:
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        for word in words:
            if word.startswith(("--session-dir=", "--session_dir=")):
                found.add(Path(word.split("=", 1)[1]))
    return {session: [folder.stat().st_mode & 0o777 for folder in session.parents[:2]] for session in found}


@pytest.mark.parametrize("delay", [0.3, 2.0])  # early in the start, and late in it
def test_sigterm_while_ray_starts_is_interrupted_and_143(tmp_path, delay):
    """Item 21: SIGTERM while `--ray` starts Ray (Ray's driver puts in a SIGTERM handler of its own, which called
    sys.exit(15)) ends the command with "interrupted" and 143, no traceback, and no process of its Ray left."""
    home = tmp_path / "home"
    home.mkdir()
    process, stub = _run(tmp_path, 40, 0.2, home)  # work enough that the signal lands before the run ends
    try:
        line = process.stderr.readline()
        while line and "starting the actors" not in line:
            line = process.stderr.readline()
        time.sleep(delay)
        tree = _descendants(process.pid)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        stub.kill()
    assert process.returncode in (128 + signal.SIGTERM,), (process.returncode, err[-3000:])
    assert "Traceback" not in err and "SystemExit" not in err, err[-3000:]
    assert "interrupted" in err or "stopped early" in err, err[-3000:]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in tree - {process.pid}):
        time.sleep(0.2)
    left = []
    for pid in tree - {process.pid}:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                left.append(Path(f"/proc/{pid}/cmdline").read_bytes()[:80])
        except OSError:
            continue
    assert left == [], left


def test_the_tests_ray_is_found_by_its_own_folder_and_another_ray_is_left_running(tmp_path, monkeypatch):
    """Item 5: the tests' cluster starts with a folder of its own and node address 127.0.0.1 (it listens on
    loopback only); another Ray started on the machine meanwhile (one more head, as another user's would be) keeps
    running when the tests' cluster is stopped, and none of the tests' processes outlives it."""
    read, resolve = [], Path.resolve  # the machine-wide /tmp/ray/session_latest (another Ray may have replaced it)

    def watched(self, *args, **kwargs):
        read.extend([str(self)] if "session_latest" in str(self) else [])
        return resolve(self, *args, **kwargs)

    monkeypatch.setattr(Path, "resolve", watched)
    other = Path(tempfile.mkdtemp(prefix="rr-other-"))  # short: Ray's socket paths live under it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    try:
        with scale.local_nodes(1) as joined:
            from rawreact.models.llama_server import free_port

            folder = joined[scale.FOLDER]
            command = [str(BIN / "ray"), "start", "--head", "--port", str(free_port()), "--num-cpus", "1",
                       "--temp-dir", str(other), "--include-dashboard", "false", "--disable-usage-stats",
                       "--node-ip-address", "127.0.0.1"]  # fmt: skip
            started = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
            assert started.returncode == 0, started.stderr[-2000:]
            mine, theirs = scale.ray_processes(folder), scale.ray_processes(str(other))
            assert mine and theirs and not mine & theirs
            listening = _listening(mine)
            assert {"gcs_server", "raylet"} <= {name for _, name in listening}, listening
            assert all(address.startswith(LOOPBACK) for address, _ in listening), listening
        assert all(Path(f"/proc/{pid}").exists() for pid in theirs), "the other Ray was left running"
        assert not scale.ray_processes(folder), "the tests' cluster left no process"
        assert not Path(folder).exists() and read == []  # found by its folder, never by session_latest
    finally:
        scale.stop_session(str(other))
        shutil.rmtree(other, ignore_errors=True)
    assert not scale.ray_processes(str(other))
