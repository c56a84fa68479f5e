"""Text games (issue 41 part 2): games made offline by TextWorld, played in alfworld.ipynb's loop, with the
admissible commands as a grammar, scored by success and reward through run, report, compare and resume."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rawreact import ScriptedModel, load_collection, load_prompt, read_run, solve
from rawreact.agents.commands import load_commands_grammar
from rawreact.agents.game import play
from rawreact.cli.app import main
from rawreact.core.actions import Action, parse_command
from rawreact.core.errors import DataError
from rawreact.environments.game import GAME_VERBS, GameEnv, clean
from rawreact.models.gbnf import check_grammar
from rawreact.tasks.games import make_games, read_games

CONSOLE = Path(sys.executable).with_name("rawreact")


@pytest.fixture(scope="session")
def games(tmp_path_factory) -> Path:
    """Three tiny games, made once: a coin to take, a key to take, and a one-ingredient meal."""
    folder = tmp_path_factory.mktemp("games")
    make_games(folder, ["coin:1", "treasure:1", "cooking:1"], [1])
    return folder


def test_games_are_made_by_recipe_with_a_manifest_of_what_was_made(games):
    manifest = json.loads((games / "games.json").read_text())
    assert [g["id"] for g in manifest["games"]] == ["coin1-s1", "treasure1-s1", "cooking1-s1"]
    import hashlib

    for game in manifest["games"]:
        assert hashlib.sha256((games / game["file"]).read_bytes()).hexdigest() == game["sha256"]
        assert game["walkthrough_steps"] >= 1 and game["objective"]
    assert manifest["textworld"]  # the version that made them
    stamp = (games / "coin1-s1.z8").stat().st_mtime_ns
    make_games(games, ["coin:1"], [1])  # the same game again is kept, not made again
    assert (games / "coin1-s1.z8").stat().st_mtime_ns == stamp
    make_games(games, ["coin:1", "treasure:1", "cooking:1"], [1])  # the manifest lists the whole set again


def test_a_games_folder_reads_as_questions_of_task_game(games, tmp_path):
    collection = load_collection(games)
    assert collection.task == "game" and [q.task for q in collection.questions] == ["game"] * 3
    assert collection.questions[0].question.startswith("Hey, thanks for coming over to TextWorld!")
    assert isinstance(collection.env(collection.questions[0]), GameEnv)
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in games.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    (copy / "coin1-s1.z8").write_bytes(b"changed")
    with pytest.raises(DataError, match="coin1-s1.z8: the game file changed since it was made"):
        read_games(copy)
    (copy / "coin1-s1.z8").unlink()
    with pytest.raises(DataError, match="coin1-s1.z8: the game is missing"):
        read_games(copy)


def test_the_game_environment_answers_commands_thoughts_and_ends_when_won(games):
    env = GameEnv(games / "coin1-s1.z8")
    env.reset()
    assert env.opening.splitlines()[1].startswith("-= Studio =-")
    assert "take coin" in env.admissible
    assert env.step(Action("think", "the coin is here")) == ("OK.", False)
    assert env.moves == 0  # the game never saw it
    assert env.step("   ") == ("Nothing happens.", False)
    assert env.step("go west")[0] == "You can't go that way."
    observation, done = env.step("take coin")
    assert done and env.won and env.reward == 1.0
    assert observation == "You pick up the coin from the ground. Your score has just gone up by one point."
    assert env.step("look") == (observation, True)  # a game over answers as it ended


def test_a_games_reply_loses_its_status_bar_and_its_end_banner():
    assert clean("\nYou can't go that way.\n\n\n>          -= Studio =-0/2") == "You can't go that way."
    assert clean("Score up.\n\n   *** The End ***\n\nYou scored 1 out of 1") == "Score up."


def test_a_command_line_is_read_as_the_notebook_reads_it():
    assert parse_command(" take coin", GAME_VERBS) == Action("command", "take coin")
    assert parse_command("> open  wooden door\nYou open it.", GAME_VERBS) == Action("command", "open wooden door")
    assert parse_command(" think: the key opens it", GAME_VERBS) == Action("think", "the key opens it")
    assert parse_command("Think:x", GAME_VERBS) == Action("think", "x")
    assert parse_command("  \n", GAME_VERBS) is None
    assert parse_command(" take co", GAME_VERBS, truncated=True) is None  # cut at the token limit


def test_the_commands_grammar_is_the_admissible_commands_and_thoughts_only_for_react():
    grammar = load_commands_grammar()
    react = grammar.for_commands(["take coin", "go east", 'say "hi"'])
    assert '"go east" | "say \\"hi\\"" | "take coin" | "think: " thought' in react
    act = grammar.for_commands(["take coin"], thoughts=False)
    assert "think" not in act.split("root ::=")[1].split("\n")[0]
    check_grammar(react, source="test")
    check_grammar(act, source="test")


def test_the_game_loop_writes_the_notebooks_transcript(games):
    env = GameEnv(games / "coin1-s1.z8")
    model = ScriptedModel([" think: the coin is on the floor", " go west", " take coin", " look"])
    prompt = load_prompt(method="react", task="game", k=1)
    traj = play(env, model, prompt, grammar=load_commands_grammar())
    assert traj.ended == "won" and traj.reward == 1.0 and len(traj.steps) == 3
    assert [s.error for s in traj.steps] == [None, "inadmissible", None]
    assert [call["stop"] for call in model.history] == [["\n"]] * 3
    expected = (
        prompt.text
        + f"Task: {env.opening}\n>"
        + " think: the coin is on the floor\nOK.\n>"
        + " go west\nYou can't go that way.\n>"
        + " take coin\nYou pick up the coin from the ground. Your score has just gone up by one point.\n>"
    )
    assert traj.transcript() == expected
    assert model.history[1]["prompt"] == expected[: expected.index(" go west")]
    assert '"take coin"' in model.history[0]["grammar"]


def test_the_game_loop_stops_at_its_limit_and_by_the_guardrails(games):
    env = GameEnv(games / "coin1-s1.z8")
    traj = play(env, ScriptedModel([" look"] * 10), load_prompt(method="act", task="game"), max_steps=4)
    assert (traj.ended, len(traj.steps), traj.reward) == ("max_steps", 4, 0.0)
    traj = play(env, ScriptedModel([" look"] * 10), load_prompt(method="act", task="game"), repeats="stop")
    assert (traj.ended, len(traj.steps)) == ("repeat", 2)


def test_a_game_takes_the_papers_alfworld_methods_only(games):
    env = GameEnv(games / "coin1-s1.z8")
    with pytest.raises(ValueError, match="games are played by react or act"):
        solve("x", env, ScriptedModel([""]), "", method="cot")


def _script(tmp_path, lines):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(lines))
    return f"scripted:{path}"


def test_a_game_run_is_scored_reported_and_compared_by_success(games, tmp_path, capsys):
    won = _script(tmp_path, [" take coin", " take passkey", " look", " look", " look"])
    assert (
        main(
            [
                "run",
                str(games),
                "--model",
                won,
                "--method",
                "act",
                "--max-steps",
                "3",
                "--out",
                str(tmp_path / "a.jsonl"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "3 games: success 0.667, reward" in printed and "result [1/3] coin1-s1: won (reward 1.00)" in printed
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [(r["task"], r["success"], r["em"]) for r in records] == [("game", 1.0, None)] * 2 + [("game", 0.0, None)]
    assert records[2]["ended"] == "max_steps" and records[2]["reward"] == 0.0
    config = json.loads((tmp_path / "a.jsonl.manifest.json").read_text())["config"]
    assert config["max_steps"] == 3 and config["method"] == "act"
    lost = _script(tmp_path, [" look"] * 20)
    assert (
        main(
            [
                "run",
                str(games),
                "--model",
                lost,
                "--method",
                "act",
                "--max-steps",
                "3",
                "--out",
                str(tmp_path / "b.jsonl"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["compare-runs", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:7] == ["variant", "method", "loop", "n", "success", "Δsuccess", "reward"]
    assert " -0.667 [" in table[2] and "EM" not in table[0]
    assert main(["show", str(tmp_path / "a.jsonl")]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:5] == ["coin1-s1", "coin:1", "yes", "1.00", "won"]


def test_a_game_run_refuses_what_a_game_cannot_take(games, tmp_path, capsys):
    model = _script(tmp_path, [" look"])
    for args, message in (
        (["--method", "cot"], "games are played by react or act"),
        (["--grammar", "step"], "a game's grammar is its admissible commands: --grammar commands"),
        # the Reflexion code's loop (--loop reference) needs its reflection query; rawreact's shipped one is not it
        (["--method", "react-reflexion", "--loop", "reference"], "reflects as the Reflexion code's alfworld_runs"),
    ):
        assert main(["run", str(games), "--model", model, *args]) == 2
        assert message in capsys.readouterr().err
    assert main(["run", "--model", model, "--grammar", "commands", "--question", "x"]) == 2
    assert "--grammar commands is a game's" in capsys.readouterr().err


def test_the_games_command_makes_games_and_refuses_a_bad_recipe(tmp_path, capsys):
    assert main(["games", str(tmp_path / "g"), "--recipe", "coin:1", "--seeds", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "coin1-s2: coin:1, seed 2, won in 1 step",
        f"1 game in {tmp_path / 'g'}; run them with: rawreact run {tmp_path / 'g'} --method react",
    ]
    assert main(["games", str(tmp_path / "g"), "--recipe", "pizza:1"]) == 2
    assert "recipe 'pizza:1': give KIND:LEVEL, one of coin:1..300" in capsys.readouterr().err
    assert main(["games", str(tmp_path / "g"), "--seeds", "5-2"]) == 2
    assert "--seeds '5-2'" in capsys.readouterr().err


def test_real_react_and_act_runs_on_games_are_scored_compared_and_resumed_after_a_kill(games, tmp_path):
    """Gemma 270M through the CLI: ReAct with the commands grammar, killed after its first game and resumed;
    Act free; both compared by success."""
    react_run, act_run = tmp_path / "react.jsonl", tmp_path / "act.jsonl"
    args = [str(CONSOLE), "run", str(games), "--max-steps", "3", "--threads", "1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [*args, "--method", "react", "--grammar", "commands", "--out", str(react_run)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    ) as process:  # fmt: skip
        for line in process.stdout:
            if line.startswith("result [1/3]"):
                process.send_signal(signal.SIGKILL)
                break
    first = react_run.read_text().splitlines()
    assert len(first) == 1
    done = subprocess.run([*args, "--method", "react", "--grammar", "commands", "--out", str(react_run), "--resume"],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 already in" in done.stdout and "3 games: success" in done.stdout
    lines = react_run.read_text().splitlines()
    assert lines[0] == first[0] and len(lines) == 3  # the finished game kept, byte for byte
    records = [json.loads(line) for line in lines]
    assert all(r["task"] == "game" and r["success"] in (0.0, 1.0) for r in records)
    assert all(s["error"] != "inadmissible" for r in records for s in r["trajectory"]["steps"])  # the grammar holds
    done = subprocess.run([*args, "--method", "act", "--out", str(act_run)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    compared = subprocess.run(
        [str(CONSOLE), "compare-runs", str(react_run), str(act_run)], capture_output=True, text=True
    )
    assert compared.returncode == 0 and "Δsuccess" in compared.stdout.splitlines()[0]


def test_reference_over_games_sends_the_notebooks_frame_and_two_exemplars_and_says_it_is_not_the_task(
    games, tmp_path, capsys
):
    """--reference DIR over games: alfworld_3prompts.json's two `put` exemplars, joined as the notebook joins
    them (`_1` then `_0`), inside the words the notebook's loop cell puts around them, in the notebook's own
    loop; the header says what is not the paper's. (The checkout here is a stand-in in the reference's layout,
    written for this test, not its text.)"""
    checkout = tmp_path / "ReAct"
    (checkout / "prompts").mkdir(parents=True)
    keys = {f"{m}_put_{n}": f"You are in room {m}{n}.\nYour task is to: put a {m}{n}.\n> go to shelf {n}\nOK.\n"
            for m in ("react", "act") for n in (0, 1)}  # fmt: skip
    (checkout / "prompts" / "alfworld_3prompts.json").write_text(json.dumps(keys))
    framed = "prompt = 'Play as shown.\\n' + d[f'react_{v}_1'] + d[f'react_{v}_0'] + '\\nNow yours.\\n'"
    cell = f"for game in games:\n    {framed}\n"
    (checkout / "alfworld.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "source": cell}]}))
    out = tmp_path / "ref.jsonl"
    model = _script(tmp_path, [" take coin"] * 5)
    args = ["run", str(games), "--reference", str(checkout), "--model", model, "--limit", "1", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr()
    assert (
        "its exemplars are ALFWorld's household, of each game's kind (put, the nearest, for a game that names "
        "none), so this is the paper's format, not its task" in printed.out
    )
    assert "react_{kind}_1+react_{kind}_0" in printed.out
    assert "paper's: loop: alfworld.ipynb's alfworld_run, byte for byte" in printed.out
    manifest = json.loads((tmp_path / "ref.jsonl.manifest.json").read_text())
    [prompt] = manifest["prompts"].values()
    assert prompt == "Play as shown.\n" + keys["react_put_1"] + keys["react_put_0"] + "\nNow yours.\n"
    assert manifest["config"]["prompt"].endswith("alfworld_3prompts.json#react_{kind}_1+react_{kind}_0")
    assert manifest["config"]["loop"] == "reference"
    [record] = read_run(out)[1]
    opening = record["trajectory"]["question"]
    assert "\nYour task is to: " in opening and opening.index("-= ") < opening.index("Your task is to: ")
    assert record["trajectory"]["steps"][0]["action_text"] == "take coin"


def test_a_game_run_exports_its_won_games_and_shows_on_the_page(games, tmp_path, capsys):
    from rawreact.reports.export import export
    from rawreact.reports.html import page

    run = tmp_path / "a.jsonl"
    model = _script(tmp_path, [" think: the coin is here", " take coin", " take passkey", " look", " look", " look"])
    assert main(["run", str(games), "--model", model, "--max-steps", "3", "--out", str(run), "-q"]) == 0
    done = export([run], tmp_path / "ex.jsonl")
    assert (done.questions, done.not_selected, done.games) == (2, 1, 3)  # the two won games, not the lost one
    first = json.loads((tmp_path / "ex.jsonl").read_text().splitlines()[0])
    assert first["prompt"].startswith("Task: Hey, thanks") and first["prompt"].endswith("\n>")
    assert first["completion"] == " think: the coin is here"
    html = page({"a": run})
    assert "Success per run, with its 95% interval" in html and "EM per run" not in html
    assert '<th data-type="number">won</th>' in html and "not a command the game admits" not in html
    assert "Ended by won: won, reward 1.00." in html


def test_a_game_run_splits_into_shards_that_merge(games, tmp_path, capsys):
    model = _script(tmp_path, [" take coin", " take passkey", " look", " look"])
    for k in (1, 2):
        out = str(tmp_path / f"s{k}.jsonl")
        assert main(["run", str(games), "--model", model, "--method", "act", "--max-steps", "2", "--shard", f"{k}/2",
                     "--out", out, "-q"]) == 0  # fmt: skip
    assert (
        main(["merge", str(tmp_path / "s1.jsonl"), str(tmp_path / "s2.jsonl"), "--out", str(tmp_path / "m.jsonl")]) == 0
    )
    merged = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in merged) == ["coin1-s1", "cooking1-s1", "treasure1-s1"]
    assert all(r["task"] == "game" for r in merged)


def test_reflexion_plays_a_game_again_after_a_reflection_until_it_is_won(games, tmp_path, capsys):
    """react-reflexion over games: each trial judged by the game (evaluator won, the default for games); the
    reflection on a lost game is in the next trial's prompt, with the game's own memory wording."""
    script = [" look", " look", " I only looked around; next time I take the coin.", " take coin"]
    out = tmp_path / "r.jsonl"
    args = ["run", str(games), "--limit", "1", "--model", _script(tmp_path, script), "--method", "react-reflexion"]
    assert main([*args, "--trials", "3", "--max-steps", "2", "--out", str(out)]) == 0
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["success"], record["ended"], len(record["trials"])) == (1.0, "won", 2)
    assert record["reflexion"]["evaluator"] == "won"
    first, second = record["trials"]
    assert (first["passed"], first["success"], second["passed"], second["success"]) == (False, 0.0, True, 1.0)
    assert first["reflection"]["text"] == "I only looked around; next time I take the coin."
    assert second["trajectory"]["preamble"].startswith("You have played this game before and did not win.")
    assert "- I only looked around; next time I take the coin.\n" in second["trajectory"]["preamble"]
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "success after" in capsys.readouterr().out
    assert main([*args, "--evaluator", "em", "--out", str(tmp_path / "em.jsonl")]) == 2
    assert "a game's trial is judged by the game: --evaluator won" in capsys.readouterr().err


def test_reflexion_on_a_game_runs_on_the_embedded_model(games, tmp_path):
    """Gemma 270M loses the cooking game in 2 steps, writes a reflection, and plays it again with it."""
    folder = tmp_path / "one"
    folder.mkdir()
    manifest = json.loads((games / "games.json").read_text())
    manifest["games"] = [g for g in manifest["games"] if g["id"] == "cooking1-s1"]
    (folder / "games.json").write_text(json.dumps(manifest))
    for suffix in (".z8", ".json"):
        (folder / f"cooking1-s1{suffix}").write_bytes((games / f"cooking1-s1{suffix}").read_bytes())
    out = tmp_path / "r.jsonl"
    args = [str(CONSOLE), "run", str(folder), "--method", "react-reflexion", "--trials", "2", "--max-steps", "2"]
    done = subprocess.run([*args, "--grammar", "commands", "--threads", "1", "--out", str(out)], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    first = record["trials"][0]
    assert (first["passed"], first["ended"], len(record["trials"])) == (False, "max_steps", 2)  # 2 steps cannot win
    assert first["reflection"]["text"] and first["reflection"]["call"]["completion_tokens"] > 0
    assert first["reflection"]["text"] in record["trials"][1]["trajectory"]["preamble"]


def test_a_game_run_goes_over_a_fleet_of_servers(games, tmp_path):
    """Games through a fleet (stub vLLM servers): each game on one server, the counts from the records, and
    the commands grammar sent as vLLM's guided grammar."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from servers import OpenAIStub

    reply = {
        "choices": [{"text": " look", "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1},
    }
    stubs = [OpenAIStub(default=reply) for _ in range(2)]
    try:
        out = tmp_path / "fleet.jsonl"
        spec = "vllm:" + ",".join(s.url for s in stubs)
        args = ["run", str(games), "--model", spec, "--workers", "2", "--per-endpoint", "1", "--max-steps", "2",
                "--grammar", "commands", "--out", str(out), "-q"]  # fmt: skip
        assert main(args) == 0
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted(r["id"] for r in records) == ["coin1-s1", "cooking1-s1", "treasure1-s1"]
        assert {r["endpoint"] for r in records} <= {s.url for s in stubs}
        assert all(r["task"] == "game" and r["steps"] == 2 and r["ended"] == "max_steps" for r in records)
        served = json.loads((tmp_path / "fleet.jsonl.manifest.json").read_text())["endpoints"]
        assert sum(e["episodes"] for e in served.values()) == 3
        sent = [r for s in stubs for r in s.requests]
        assert len(sent) == 6 and all('"look"' in r["guided_grammar"] for r in sent)  # each call's admissible commands
    finally:
        for stub in stubs:
            stub.close()


def test_compare_runs_variants_over_games_and_compares_their_success(games, tmp_path, capsys):
    script = _script(tmp_path, [" take coin", " take passkey", " look", " look"] * 2)
    args = ["compare", str(games), "--base", f"model={script},max_steps=2,method=act", "--variant", "free=",
            "--variant", "gram=grammar=commands", "--out", str(tmp_path / "cmp")]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "gram coin1-s1: won, reward 1.00" in out and "free cooking1-s1: not won, reward 0.00" in out
    header = next(line for line in out.splitlines() if line.startswith("variant"))
    assert header.split()[:8] == ["variant", "method", "loop", "n", "success", "Δsuccess", "reward", "Δreward"]
    assert json.loads((tmp_path / "cmp" / "gram.jsonl").read_text().splitlines()[0])["task"] == "game"
