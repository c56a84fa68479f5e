"""Hardening, fourth round (issue 55): the files a run reads and writes. Games manifests, the call cache,
inspect logs, hand-edited game records, runs of an earlier version, thread counts, printed ids, and the
games command's own inputs and children. Each test failed on the main before the round."""

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_runs import _data, _oracle

import rawreact
from rawreact import DataError, read_run
from rawreact.cli.app import main
from rawreact.tasks.games import read_games

CONSOLE = Path(sys.executable).with_name("rawreact")
PACKAGE = Path(rawreact.__file__).parent  # a traceback frame under it is rawreact's own code
REPLIES = [" I know it.\nAction 1: Finish[148]\n"]
QUESTION = ["--question", "How many years?", "--answer", "148"]


def _rawreact(folder: Path, *args: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run([str(CONSOLE), *map(str, args)], cwd=folder, capture_output=True, text=True, **options)


def _script(folder: Path, replies=REPLIES) -> str:
    """A scripted model answering every question with `replies` (by question: a cache may answer it)."""
    (folder / "script.json").write_text(
        json.dumps({"questions": {q: replies for q in ("How many years?", "Another?")}})
    )
    return f"scripted:{folder / 'script.json'}"


# Items 2, 3 and 11: a games manifest is checked entry by entry when the folder is read.


def _games(folder: Path, entries: list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "games.json").write_text(json.dumps({"made_by": "rawreact games", "games": entries}))
    return folder


def _game(folder: Path, name: str = "g1.z8", json_beside: bool = True) -> dict:
    """A game file's entry (its bytes are no game: reading a folder does not start one)."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not really a game " + name.encode())
    if json_beside:
        path.with_suffix(".json").write_text("{}")
    return {"id": path.stem, "file": name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_a_games_manifest_names_only_plain_files_inside_its_folder(tmp_path):
    outside = _game(tmp_path / "elsewhere")
    cases = {
        "../elsewhere/g1.z8": outside["sha256"],
        str(tmp_path / "elsewhere" / "g1.z8"): outside["sha256"],
    }
    for name, digest in cases.items():
        folder = _games(tmp_path / "games", [{"id": "g1", "file": name, "sha256": digest}])
        with pytest.raises(DataError, match="is not a plain file name in .*not behind a path or a link"):
            read_games(folder)
    (tmp_path / "games" / "link.z8").symlink_to(tmp_path / "elsewhere" / "g1.z8")
    folder = _games(tmp_path / "games", [{"id": "g1", "file": "link.z8", "sha256": outside["sha256"]}])
    with pytest.raises(DataError, match="'link.z8' is not a plain file name"):
        read_games(folder)
    # the command line says the same, in one line, before any model loads
    done = _rawreact(tmp_path, "run", folder, "--method", "act", "--model", "scripted:nothing.json")
    assert done.returncode == 2 and "'link.z8' is not a plain file name" in done.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"id": 7}, "game 1 has 'id' = 7, which is not a string"),
        ({"objective": ["x"]}, "game 1 has 'objective' = [\"x\"], which is not a string"),
        ({"recipe": 3}, "game 1 has 'recipe' = 3, which is not a string"),
        ({"file": 5}, "game 1 has 'file' = 5, which is not a string"),
        ({"file": None}, "game 1 has 'file' = null, which is not a string"),
        ({"id": "a\nb"}, "game 1 has the id .a.nb.: an id is one line of text"),
    ],
)
def test_each_games_entry_is_checked_when_the_folder_is_read(tmp_path, change, said):
    folder = _games(tmp_path, [_game(tmp_path) | change])
    with pytest.raises(DataError, match="games.json: " + said.replace("[", "\\[").replace("]", "\\]")):
        read_games(folder)


def test_a_games_manifest_with_an_id_twice_is_refused(tmp_path):
    one, two = _game(tmp_path, "g1.z8"), _game(tmp_path, "g2.z8")
    folder = _games(tmp_path, [one, two | {"id": "g1"}])
    with pytest.raises(DataError, match="game 2 repeats the id 'g1'"):
        read_games(folder)


def test_a_game_without_its_textworld_json_is_refused_when_read(tmp_path):
    folder = _games(tmp_path, [_game(tmp_path, json_beside=False)])
    with pytest.raises(DataError, match=r"g1.json: missing; TextWorld reads a game's objective"):
        read_games(folder)


# Item 15: the games command's own input, and its tw-make children.


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["games", ""], "give the folder to make the games in"),
        (["games", "g", "--seeds", "99999999999999999999"], "a seed is at most 4294967295"),
    ],
)
def test_the_games_command_refuses_what_tw_make_cannot_take(tmp_path, args, said):
    done = _rawreact(tmp_path, *args)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing made in the current folder


@pytest.mark.parametrize("entries", [[{"file": "a.z8", "sha256": "0"}], ["coin1-s1"]])
def test_the_games_command_refuses_a_tampered_manifest_in_one_line(tmp_path, entries):
    _games(tmp_path / "g", entries)
    done = _rawreact(tmp_path, "games", "g", "--recipe", "coin:1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert "g/games.json: game 1" in line


def _makers(folder: Path) -> list[int]:
    """The processes whose command line names `folder` (the tw-make processes writing into it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(folder).encode() in line and proc.name.isdigit() and int(proc.name) != os.getpid():
            found.append(int(proc.name))
    return found


def test_sigterm_to_the_games_command_ends_its_tw_make_processes_and_exits_143(tmp_path):
    folder = tmp_path / "games"
    run = subprocess.Popen([str(CONSOLE), "games", str(folder), "--recipe", "cooking:3", "--seeds", "1-4"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    for _ in range(600):
        if [p for p in _makers(folder) if p != run.pid]:
            break
        time.sleep(0.05)
    time.sleep(0.5)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGTERM and "Traceback" not in stderr  # as a run (issue 67 item 22)
    assert _makers(folder) == []  # no tw-make left writing
    left = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    made = [json.loads((folder / "games.json").read_text())["games"]] if "games.json" in left else [[]]
    kept = {name for game in made[0] for name in (game["file"], Path(game["file"]).with_suffix(".json").name)}
    assert set(left) - {"games.json"} <= kept  # what stays is the games finished, and nothing half written


# Items 5, 8 and 15: the call cache.


def test_a_cache_that_is_an_input_or_another_programs_file_is_refused(tmp_path):
    model = _script(tmp_path)
    done = _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--cache", "script.json", "--out", "r.jsonl")
    assert done.returncode == 2 and "is an input (--cache would add a table to it)" in done.stderr
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    done = _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--cache", other, "--out", "r.jsonl")
    assert done.returncode == 2 and "an SQLite file with other tables (notes)" in done.stderr
    assert other.read_bytes() == before and not (tmp_path / "r.jsonl").exists()
    done = _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--cache", "", "--out", "r.jsonl")
    assert done.returncode == 2 and "--cache) names no file" in done.stderr


def _damaged(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        db.executemany("INSERT INTO calls VALUES (?, ?)", [(str(k), "x" * 3000) for k in range(200)])
    data = bytearray(path.read_bytes())
    for at in range(5000, len(data), 3001):  # random writes inside its pages
        data[at : at + 40] = os.urandom(40)
    path.write_bytes(bytes(data))


def test_a_damaged_or_unusable_cache_is_one_line_before_the_model_loads(tmp_path):
    model = _script(tmp_path)
    damaged, layout, under = tmp_path / "damaged.sqlite", tmp_path / "layout.sqlite", tmp_path / "script.json" / "c"
    _damaged(damaged)
    with sqlite3.connect(layout) as db:
        db.execute("CREATE TABLE calls (a, b, c)")
    for cache, said in ((damaged, "is damaged"), (layout, "a table calls of another layout"), (under, "its folder")):
        done = _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--cache", cache, "--out", "r.jsonl")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        [line] = done.stderr.splitlines()
        assert said in line and not (tmp_path / "r.jsonl").exists()


def test_a_read_only_cache_is_refused_before_the_model_loads(tmp_path):
    model = _script(tmp_path)
    args = ["run", "--model", model, *QUESTION, "--cache", "c.sqlite"]
    assert _rawreact(tmp_path, *args, "--out", "a.jsonl").returncode == 0
    cache = tmp_path / "c.sqlite"
    cache.chmod(0o444)
    if os.getuid() == 0:  # root writes a file whatever its mode: make it immutable, which root cannot write either
        subprocess.run(["chattr", "+i", str(cache)], check=True)
    try:
        done = _rawreact(tmp_path, *args, "--question", "Another?", "--out", "b.jsonl")
    finally:
        if os.getuid() == 0:
            subprocess.run(["chattr", "-i", str(cache)], check=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "this user cannot write it" in done.stderr and not (tmp_path / "b.jsonl").exists()


def test_cache_rows_that_cannot_be_read_are_misses_made_again(tmp_path):
    model = _script(tmp_path)
    args = ["run", "--model", model, *QUESTION, "--cache", "c.sqlite"]
    assert _rawreact(tmp_path, *args, "--out", "a.jsonl").returncode == 0
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        [(key,)] = db.execute("SELECT key FROM calls").fetchall()
        db.execute("UPDATE calls SET reply = ? WHERE key = ?", ("{not json", key))
    done = _rawreact(tmp_path, *args, "--out", "b.jsonl")
    assert done.returncode == 0, done.stderr
    [record] = read_run(tmp_path / "b.jsonl")[1]
    assert record["em"] == 1.0 and not record["trajectory"]["steps"][0]["calls"][0].get("cached")
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE calls SET reply = ?", (json.dumps({"shape": "another"}),))
    done = _rawreact(tmp_path, *args, "--out", "c.jsonl")
    assert done.returncode == 0, done.stderr
    done = _rawreact(tmp_path, *args, "--out", "d.jsonl")  # the row made again is read again
    assert read_run(tmp_path / "d.jsonl")[1][0]["trajectory"]["steps"][0]["calls"][0]["cached"] is True


# Item 9 and 15: inspect logs.


def test_an_inspect_log_of_a_lone_surrogate_is_written_escaped_and_read_by_inspect_ai(tmp_path):
    from inspect_ai import log as inspect_log

    model = _script(tmp_path, [" I know \udc80.\nAction 1: Finish[148 \udc80]\n"])
    assert _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--out", "a.jsonl").returncode == 0
    done = _rawreact(tmp_path, "report", "a.jsonl", "--inspect", "logs")
    assert done.returncode == 0, done.stderr
    [log] = list((tmp_path / "logs").iterdir())
    assert log.suffix == ".json"  # no .part left beside it
    sample = inspect_log.read_eval_log(str(log)).samples[0]
    assert sample.output.completion == "148 \\udc80"  # the answer, with the surrogate shown as its escape
    assert read_run(tmp_path / "a.jsonl")[1][0]["prediction"] == "148 \udc80"  # the run file keeps it as it was


def test_report_writes_no_inspect_log_when_one_run_cannot_be_logged(tmp_path):
    model = _script(tmp_path)
    assert _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--out", "a.jsonl").returncode == 0
    (tmp_path / "b.jsonl").write_text("")
    (tmp_path / "b.jsonl.manifest.json").write_text((tmp_path / "a.jsonl.manifest.json").read_text())
    done = _rawreact(tmp_path, "report", "a.jsonl", "b.jsonl", "--inspect", "logs")
    assert done.returncode == 2 and "b.jsonl has no finished question" in done.stderr
    assert not (tmp_path / "logs").exists()


# Item 10: a game's fields, edited by hand, are checked where records are read.

GAME = {"task": "game", "success": 1.0, "reward": 1.0, "game": "coin:1"}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"success": "yes"}, "'success' = \"yes\", which is not a number"),
        ({"reward": "lots"}, "'reward' = \"lots\", which is not a number or null"),
        ({"success": None}, "'success' = null, which is not a number"),
        ({"success": 2}, "'success' = 2, where a game is won (1) or not (0)"),
        ({"reward": 1.5}, "'reward' = 1.5, where a reward is a share of points"),
        ({"game": 5}, "'game' = 5, which is not a string"),
        ({"task": "chess"}, "'task' = \"chess\", which is not qa, fever, game, scienceworld or program"),
        ({"lost_on": [{}]}, "'lost_on' entries that are not servers' addresses"),
        ({"lost_on": [["a"]]}, "'lost_on' entries that are not servers' addresses"),
    ],
)
def test_hand_edited_game_fields_are_one_clear_line(tmp_path, change, said):
    model = _script(tmp_path)
    assert _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--out", "a.jsonl").returncode == 0
    run = tmp_path / "a.jsonl"
    record = json.loads(run.read_text()) | GAME
    run.write_text(json.dumps(record) + "\n")
    assert read_run(run)[1][0]["success"] == 1.0  # the record as a game writes it reads
    run.write_text(json.dumps(record | change) + "\n")
    with pytest.raises(DataError, match="line 1 has "):
        read_run(run)
    for command in (["report", "a.jsonl"], ["show", "a.jsonl"]):
        done = _rawreact(tmp_path, *command)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert said in done.stderr and "was the file edited?" in done.stderr


def test_a_missing_success_and_a_trials_game_fields_are_checked(tmp_path):
    model = _script(tmp_path)
    assert _rawreact(tmp_path, "run", "--model", model, *QUESTION, "--out", "a.jsonl").returncode == 0
    run = tmp_path / "a.jsonl"
    record = {k: v for k, v in (json.loads(run.read_text()) | GAME).items() if k != "success"}
    run.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match="has no 'success'"):
        read_run(run)
    trial = {"trial": 1, "passed": True, "answer": "", "em": None, "model_calls": 1, "success": "x", "reward": 1.0}
    run.write_text(json.dumps(record | {"success": 1.0, "trials": [trial]}) + "\n")
    with pytest.raises(DataError, match="trial 1 'success' = \"x\", which is not a number"):
        read_run(run)


# Item 13: a run of an earlier version.


def test_a_run_of_an_earlier_version_says_what_changed_and_what_to_do(tmp_path, rows):
    data = _data(rows, tmp_path, 2)
    script = _oracle(rows[:2], tmp_path / "oracle.json")
    common = [data, "--model", script, "--out", "a.jsonl", "-q"]
    assert _rawreact(tmp_path, "run", *common, "--limit", "1").returncode == 0
    manifest = tmp_path / "a.jsonl.manifest.json"
    made = json.loads(manifest.read_text())
    del made["config"]["call_stop"]  # as rawreact 0.1.0 wrote it, before the call stopped at the action line
    manifest.write_text(json.dumps(made | {"rawreact": "0.1.0"}))
    done = _rawreact(tmp_path, "run", *common, "--resume")
    assert done.returncode == 2 and "call_stop" not in done.stderr
    assert "where a step's call stops was at the observation line alone (rawreact 0.1.0" in done.stderr
    assert "The run was made by rawreact 0.1.0, and this is 0.2.0" in done.stderr
    assert "pip install 'rawreact==0.1.0'" in done.stderr


# Item 14: thread counts.


@pytest.mark.parametrize(
    ("threads", "said"),
    [
        ("100000", "must be at most 512, llama.cpp's most"),
        (str(4 * len(os.sched_getaffinity(0)) + 1), "is more than 4 a core for the"),
    ],
)
def test_a_thread_count_beyond_the_machine_is_refused_before_the_model_loads(tmp_path, threads, said):
    done = _rawreact(tmp_path, "run", "--threads", threads, "--limit", "1", "--out", "r.jsonl")
    assert done.returncode == 2 and said in done.stderr and "loading" not in done.stderr
    (tmp_path / "run.toml").write_text(f"threads = {threads}\n")
    done = _rawreact(tmp_path, "run", "--config", "run.toml", "--limit", "1", "--out", "r.jsonl")
    assert done.returncode == 2 and said in done.stderr and "loading" not in done.stderr


# Item 15: an id cannot forge a line.


def test_an_id_with_a_line_break_cannot_forge_a_result_line(tmp_path, rows):
    row = dict(rows[0]) | {"_id": "q1\nresult [9/9] forged: correct (EM 1, F1 1.00)"}
    data = tmp_path / "dev.json"
    data.write_text(json.dumps([row]))
    script = _oracle([row], tmp_path / "oracle.json")
    done = _rawreact(tmp_path, "run", data, "--model", script, "--out", "r.jsonl")
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stdout.splitlines() if line.startswith("result [9/9]")]
    assert "result [1/1] q1\\nresult [9/9] forged" in done.stdout
    assert "=== q1\\nresult [9/9]" in done.stdout


# Item 15: a Ctrl-C while the command starts is never dropped.


def test_the_command_takes_ctrl_c_before_it_imports_what_it_runs():
    """The handler that sends again a Ctrl-C Python would drop (one landing in an import lock's callback) is in
    place before the command's own modules load, which is most of its start-up."""
    probe = (
        "import builtins, signal, sys\n"
        "import rawreact.console as console\n"
        "from rawreact.cli import terminal\n"
        "seen, real = [], builtins.__import__\n"
        "def spy(name, *args, **kwargs):\n"
        "    if name == 'rawreact.cli.app' and not seen:\n"
        "        seen.append((signal.getsignal(signal.SIGINT) is terminal.interrupt,\n"
        "                     sys.unraisablehook is terminal._unraisable))\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = spy\n"
        "console.main(['show', 'no-such-run.jsonl'])\n"
        "print(seen)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-1] == "[(True, True)]", done.stderr


def test_ctrl_c_while_the_command_starts_always_ends_it(tmp_path):
    model = _script(tmp_path, [" Wait.\nAction 1: Search[x]\n"] * 50)
    for n in range(10):
        run = subprocess.Popen([str(CONSOLE), "run", "--model", model, *QUESTION, "--max-steps", "40", "--out",
                                f"r{n}.jsonl", "-q"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
        time.sleep(0.03 * (n + 1))  # points spread over the interpreter's start, the imports and the run's start
        run.send_signal(signal.SIGINT)
        try:
            _, stderr = run.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
            pytest.fail(f"a Ctrl-C {0.03 * (n + 1):.2f} s after the start was dropped: the command went on")
        assert "Exception ignored" not in stderr  # Python's word for an interrupt it dropped
        # 130 once rawreact's code runs; before it, in the interpreter's own start, Python stops as it does (seen in
        # CI: in site's import of the editable install's finder, __editable___rawreact_*_finder.py; and in importlib's
        # own frames under pip's wrapper's one import line, reading rawreact/console.py before any of it ran). So a
        # traceback is the command's fault only when one of its frames is in rawreact's package.
        assert run.returncode in (0, 130) or f'File "{PACKAGE}{os.sep}' not in stderr, stderr


# Item 15: merging the shards of a game run speaks of games.


def test_merging_game_shards_speaks_of_games(tmp_path):
    from test_games import _script as game_script

    from rawreact.tasks.games import make_games

    folder = tmp_path / "games"
    make_games(folder, ["coin:1", "treasure:1"], [1])
    model = game_script(tmp_path, [" take coin", " look"])
    for k in (1, 2):
        assert main(["run", str(folder), "--model", model, "--method", "act", "--max-steps", "1", "--shard", f"{k}/3",
                     "--out", str(tmp_path / f"s{k}.jsonl"), "-q"]) == 0  # fmt: skip
    done = _rawreact(tmp_path, "merge", "s1.jsonl", "s2.jsonl", "--out", "m.jsonl")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("m.jsonl: 2 games from 2 run files")
    assert "shard 3/3 not given: their games are missing" in done.stderr and "question" not in done.stderr


def test_a_ctrl_c_before_the_manifest_is_written_leaves_no_empty_run_file(tmp_path, monkeypatch):
    """Seen in CI: a Ctrl-C that landed after the run file was opened and before its manifest was written left an
    empty run file with no manifest in a folder that existed. A run that never started now leaves nothing."""
    from rawreact.runs.runfile import RunFile

    def interrupted(self) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(RunFile, "_write_manifest", interrupted)
    out = tmp_path / "run.jsonl"
    with pytest.raises(KeyboardInterrupt):
        RunFile(out, {"method": "react"})
    assert not out.exists() and list(tmp_path.iterdir()) == []
    out.write_bytes(b"")  # a file the user made stays, however empty
    with pytest.raises(KeyboardInterrupt):
        RunFile(out, {"method": "react"})
    assert out.exists()
