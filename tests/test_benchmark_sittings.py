"""The benchmarks' sittings (benchmarks/paper_table.py's `timed`, which humaneval.py shares): a sitting that ends
is appended with its CPU, and one killed outright is not lost, its last reading appended by the next."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# A run that finishes 2 questions, spends 0.4 s of CPU (whatever the load), and then waits to be killed.
RUN = """
import sys, time
open(sys.argv[1], "w").write('{"id": 1}\\n{"id": 2}\\n')
while time.process_time() < 0.4:
    pass
time.sleep(float(sys.argv[2]))
"""

DRIVER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from paper_table import done, timed
out = Path(sys.argv[2])
command = [sys.executable, "-c", sys.argv[3], str(out / "m.jsonl"), sys.argv[4]]

def reading():  # what a ledger does at each reading: keep the questions done so far
    with open(out / "readings", "a") as said:
        said.write(f"{done(out / 'm.jsonl')}\\n")

sys.exit(timed(command, out / "m.jsonl", out, {"method": "m"}, 1, "questions", every=0.1, on_reading=reading))
"""


def drive(out: Path, wait: str, **options) -> subprocess.Popen:
    command = [sys.executable, "-c", DRIVER, str(BENCHMARKS), str(out), RUN, wait]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, **options)


def sittings(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "sittings.jsonl").read_text().splitlines()]


def test_a_sitting_that_ends_is_appended_with_its_cpu_and_questions(tmp_path):
    driver = drive(tmp_path, "0")
    assert driver.wait(timeout=120) == 0
    (said,) = sittings(tmp_path)
    assert (said["method"], said["before"], said["after"], said["code"]) == ("m", 0, 2, 0)
    assert said["cpu"] >= 0.35 and said["wall"] >= said["cpu"] * 0.5
    assert not (tmp_path / "m.sitting.json").exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the reading comes from /proc")
def test_a_sitting_killed_outright_keeps_its_last_reading(tmp_path):
    driver = drive(tmp_path, "600", start_new_session=True)
    reading, deadline = tmp_path / "m.sitting.json", time.monotonic() + 120
    while time.monotonic() < deadline:
        if reading.exists() and json.loads(reading.read_text())["cpu"] >= 0.35:
            break
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its run, as a machine that stops takes them
    driver.wait(timeout=60)
    assert not (tmp_path / "sittings.jsonl").exists()  # the driver wrote nothing at its end
    assert (tmp_path / "readings").read_text().splitlines()[-1] == "2"  # but its readings kept the 2 questions

    again = drive(tmp_path, "0")
    assert again.wait(timeout=120) == 0
    assert "the last sitting was killed" in again.stdout.read()
    killed, after = sittings(tmp_path)
    assert (killed["before"], killed["after"], killed["code"]) == (0, 2, None)
    assert 0.35 <= killed["cpu"] < 5 and killed["wall"] > 0
    assert (after["before"], after["after"], after["code"]) == (2, 2, 0)
    assert not reading.exists()
