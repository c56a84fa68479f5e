"""Task types as declarations, and games and question files that others made (issue 56, parts 1 and 2).

A task type is one declaration (`core.tasks`): records, report, compare, show and the inspect log read
it. Games made by TextWorld's own `tw-make` (a file, or a folder without games.json, with or without the
`.json` beside each game) and a question file for an environment of one's own run from the CLI."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rawreact import read_run
from rawreact.cli.app import main
from rawreact.core import tasks
from rawreact.core.tasks import GAME, QA, Score, TaskType
from rawreact.reports.comparison import Comparison
from rawreact.reports.inspect_log import inspect_log
from rawreact.reports.show import listing
from rawreact.reports.summary import drop_unused, row_of
from rawreact.tasks.games import read_games

CONSOLE = Path(sys.executable).with_name("rawreact")
TW_MAKE = Path(sys.executable).with_name("tw-make")


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """Two games made by TextWorld's own tw-make, as anyone would make them: no games.json."""
    folder = tmp_path_factory.mktemp("tw-made")
    for name, args in (
        ("coins", ["tw-coin_collector", "--level", "1"]),
        ("keys", ["tw-treasure_hunter", "--level", "1"]),
    ):
        subprocess.run([str(TW_MAKE), *args, "--seed", "7", "--output", str(folder / f"{name}.z8"), "--silent", "-f"],
                       check=True, capture_output=True)  # fmt: skip
    return folder


def _unbuffered() -> dict:
    """This process's environment as it is when a test runs (the session's fixtures set some of it), unbuffered."""
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _killed_after_the_first(args: list, out: Path, cwd: Path | None = None) -> list[str]:
    """Run the command, SIGKILL it once its first result is printed, and return the run file's lines then."""
    with subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=_unbuffered()) as process:  # fmt: skip
        for line in process.stdout:
            if line.startswith("result [1/2]"):
                process.send_signal(signal.SIGKILL)
                break
    first = out.read_text().splitlines()
    assert len(first) == 1
    return first


def _script(folder: Path, replies: list[str]) -> str:
    (folder / "script.json").write_text(json.dumps(replies))
    return f"scripted:{folder / 'script.json'}"


# Part 1: the declarations.


def test_a_new_kind_of_task_is_one_declaration_that_every_report_reads(tmp_path, monkeypatch):
    """A made-up benchmark scored by its environment (won, and a share of points), declared once: its records
    are read and checked, and report, compare, show and the inspect log say its scores, by its own names."""
    sim = TaskType(
        "sim",
        unit="task",
        header="Task",
        prompts="games/",
        scores=(Score("success", "solved", share=True, said="a task is solved (1) or not (0)"), GAME.scores[1]),
        scoring="outcome",
        style="commands",
        fields=GAME.fields,
    )
    monkeypatch.setitem(tasks.TASK_TYPES, "sim", sim)
    model = _script(tmp_path, [" take coin", " look"])
    games = _one_game(tmp_path)
    assert main(["run", str(games), "--model", model, "--method", "act", "--max-steps", "2", "--out",
                 str(tmp_path / "a.jsonl"), "-q"]) == 0  # fmt: skip
    run = tmp_path / "a.jsonl"
    record = json.loads(run.read_text()) | {"task": "sim"}
    run.write_text(json.dumps(record) + "\n")
    manifest, records = read_run(run)
    assert records[0]["task"] == "sim"
    row = drop_unused([row_of("a", manifest, records)])[0]
    assert row["success"] == "1.000" and "EM" not in row and "finished" not in row
    assert Comparison(["a", "b"], {"a": records, "b": records}).labels == {"success": "solved", "reward": "reward"}
    assert "won" in listing(records).splitlines()[0]
    log = inspect_log("a", manifest, records)
    assert [score["name"] for score in log["results"]["scores"]] == ["success", "reward"]
    assert log["samples"][0]["scores"]["success"]["value"] == 1.0
    run.write_text(json.dumps(record | {"success": 0.5}) + "\n")
    with pytest.raises(Exception, match="where a task is solved \\(1\\) or not \\(0\\)"):
        read_run(run)


def _one_game(tmp_path: Path) -> Path:
    from rawreact.tasks.games import make_games

    folder = tmp_path / "one"
    make_games(folder, ["coin:1"], [1])
    return folder


def test_a_game_beside_questions_in_a_report_says_won_not_finished(tmp_path, rows):
    from test_runs import _data, _oracle

    games = _one_game(tmp_path)
    assert main(["run", str(games), "--model", _script(tmp_path, [" take coin"]), "--method", "act", "--out",
                 str(tmp_path / "g.jsonl"), "-q"]) == 0  # fmt: skip
    data = _data(rows, tmp_path, 1)
    assert main(["run", str(data), "--model", _oracle(rows[:1], tmp_path / "o.json"), "--out",
                 str(tmp_path / "q.jsonl"), "-q"]) == 0  # fmt: skip
    rows_ = drop_unused([row_of(n, *read_run(tmp_path / f"{n}.jsonl")) for n in ("g", "q")])
    game, question = rows_
    assert game["success"] == "1.000" and game["finished"] == "-"  # no longer "0%" for a game it won
    assert question["EM"] == "1.000" and question["finished"] == "100%" and question["success"] == "-"


def test_each_declared_type_reads_as_before():
    assert [t.name for t in tasks.TASK_TYPES.values()][:3] == ["qa", "fever", "game"]
    assert QA.keys == ("em", "f1") and GAME.keys == ("success", "reward")
    assert QA.step_limit("react") == 7 and tasks.FEVER.step_limit("react-cot-sc") == 5 and GAME.step_limit("act") == 49
    assert QA.outcome({"em": None}) == "not scored (no gold answer)" and QA.outcome({"em": 1.0}) == "correct"
    assert GAME.outcome({"success": 0.0}) == "not won"
    assert tasks.of_records([{"task": "game"}, {"task": "game"}]) is GAME
    assert tasks.of_records([{"task": "game"}, {}]) is QA and tasks.of_records([]) is QA


# Part 2: games that someone else made.


def test_a_folder_of_tw_make_games_reads_as_games_with_their_digests(made, tmp_path):
    collection = read_games(made)
    assert [q.id for q in collection.questions] == ["coins", "keys"]
    assert collection.task == "game" and all(q.question for q in collection.questions)  # TextWorld's objectives
    again = tmp_path / "again"
    shutil.copytree(made, again)
    assert read_games(again).sha256 == collection.sha256
    (again / "keys.z8").write_bytes((again / "keys.z8").read_bytes() + b"\0")
    assert read_games(again).sha256 != collection.sha256  # a changed game is another run: --resume refuses it
    [one] = read_games(made / "coins.z8").questions
    assert one.id == "coins" and one.game == str(made / "coins.z8")


def test_a_game_without_its_json_is_played_from_its_text(made, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(made / "coins.z8", bare / "coins.z8")
    model = _script(tmp_path, [" take coin"])
    out = tmp_path / "bare.jsonl"
    assert main(["run", str(bare), "--model", model, "--method", "act", "--out", str(out), "-q"]) == 0
    [record] = read_run(out)[1]
    assert record["success"] == 1.0 and record["reward"] == 1.0 and record["invalid_actions"] == 0
    assert "coin" in record["trajectory"]["question"]
    done = subprocess.run([str(CONSOLE), "run", str(bare), "--model", model, "--method", "act", "--grammar",
                           "commands", "--out", str(tmp_path / "g.jsonl")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "does not say which commands it admits" in done.stderr


def test_a_resume_refuses_a_game_changed_since(made, tmp_path):
    folder = tmp_path / "games"
    shutil.copytree(made, folder)
    model = _script(tmp_path, [" look"] * 4)
    args = ["run", str(folder), "--model", model, "--method", "act", "--max-steps", "1", "--out", "r.jsonl"]
    assert subprocess.run([str(CONSOLE), *args, "--limit", "1"], cwd=tmp_path, capture_output=True).returncode == 0
    (folder / "keys.z8").write_bytes((folder / "keys.z8").read_bytes() + b"\0")
    done = subprocess.run([str(CONSOLE), *args, "--resume"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "data_sha256" in done.stderr


def test_tw_make_games_run_on_the_embedded_model_and_resume_after_a_kill(made, tmp_path):
    out = tmp_path / "real.jsonl"
    args = [str(CONSOLE), "run", str(made), "--method", "act", "--max-steps", "2", "--threads", "1", "--out", str(out)]
    first = _killed_after_the_first(args, out)
    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, env=_unbuffered())
    assert done.returncode == 0, done.stderr
    assert "1 already in" in done.stdout and "2 games: success" in done.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["coins", "keys"] and records[0] == json.loads(first[0])


# Part 2: a question file for an environment of one's own.

GLOSSARY = '''
from rawreact import PassageEnv


def make(env, row):
    """The question's own glossary, from its row."""
    return PassageEnv(row["glossary"])
'''


def _glossary(folder: Path) -> Path:
    (folder / "glossary.py").write_text(GLOSSARY)
    rows = [
        {"id": "g1", "question": "What is Orlo?", "answer": "a village", "glossary": {"Orlo": "Orlo is a village."}},
        {"id": "g2", "question": "What is Tam?", "glossary": {"Tam": "Tam is a river."}},
    ]
    (folder / "q.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder / "q.jsonl"


def test_a_question_file_for_an_own_environment_gives_each_row_to_the_factory(tmp_path):
    data = _glossary(tmp_path)
    script = {"What is Orlo?": [" Look.\nAction 1: Search[Orlo]\n", " So.\nAction 2: Finish[a village]\n"],
              "What is Tam?": [" Look.\nAction 1: Search[Tam]\n", " So.\nAction 2: Finish[a river]\n"]}  # fmt: skip
    (tmp_path / "s.json").write_text(json.dumps({"questions": script}))
    done = subprocess.run([str(CONSOLE), "run", data, "--env", "glossary:make", "--model", "scripted:s.json",
                           "--out", "r.jsonl", "-q"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = read_run(tmp_path / "r.jsonl")[1]
    assert [r["trajectory"]["steps"][0]["observation"] for r in records] == ["Orlo is a village.", "Tam is a river."]
    assert [r["em"] for r in records] == [1.0, None]  # a row without an answer is not scored
    # without --env, such a row is refused as before, in one line
    done = subprocess.run([str(CONSOLE), "run", data, "--model", "scripted:s.json", "--out", "x.jsonl"],
                          cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "has no 'context'" in done.stderr


def test_an_own_environment_runs_on_the_embedded_model_and_resumes_after_a_kill(tmp_path):
    data = _glossary(tmp_path)
    out = tmp_path / "real.jsonl"
    args = [str(CONSOLE), "run", str(data), "--env", "glossary:make", "--max-steps", "2", "--threads", "1",
            "--out", str(out)]  # fmt: skip
    first = _killed_after_the_first(args, out, cwd=tmp_path)
    done = subprocess.run([*args, "--resume"], cwd=tmp_path, capture_output=True, text=True, env=_unbuffered())
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["g1", "g2"] and records[0] == json.loads(first[0])
    assert json.loads((tmp_path / "real.jsonl.manifest.json").read_text())["config"]["env"] == "glossary:make"
