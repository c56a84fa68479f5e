"""The reference game loop replayed against the notebook's rules (issue 56 part 3), stated here in this test's
own words, independently of rawreact's code, as tests/test_reference_replay.py states `webthink`'s.

`alfworld.ipynb`'s `alfworld_run`, restated: the first prompt is the notebook's frame around two exemplars
(the string before them, the exemplars `_1` then `_0`, the string after them), then the opening and
`\\n>`; each call continues the whole text, stops at a line break, and its text stripped at both ends is
the action, sent to the environment as it is; an observation that begins `You arrive at loc N. ` loses
that sentence; an action beginning `think:` is answered `OK.` (after the environment was sent it);
` {action}\\n{observation}\\n>` is appended; the episode ends when the environment is done, after 49 calls
at most. The checkout is a stand-in in the reference's layout, written for this test (no reference text).
"""

import json
import sys
import warnings
from pathlib import Path

import pytest

from rawreact import ScriptedModel, read_run
from rawreact.agents.methods import solve
from rawreact.cli.app import main
from rawreact.core.actions import Action
from rawreact.environments.game import GameEnv, clean

EXEMPLARS = {f"{m}_put_{n}": f"You are somewhere {m}{n}.\nYour task is to: put a {m}{n}.\n> go to shelf {n}\nOK.\n"
             for m in ("react", "act") for n in (0, 1)}  # fmt: skip
BEFORE, AFTER = "Solve the household task as the examples do.\n", "\nYour turn.\n"

# An ALFWorld-shaped environment, given through --env: ALFWorld's openings and replies, `You arrive at loc N.`
# included, and done when the key is in the box. Its factory takes the game's row and ignores the TextWorld
# game the run would play.
ALFWORLD = """
from rawreact.core.actions import Action
from rawreact.environments.game import GAME_VERBS

REPLIES = {
    "go to shelf 1": "You arrive at loc 3. On the shelf 1, you see a key 2.",
    "take key 2 from shelf 1": "You pick up the key 2 from the shelf 1.",
    "go to box 1": "You arrive at loc 7. On the box 1, you see nothing.",
    "put key 2 in/on box 1": "You put the key 2 in/on the box 1.",
}


class Household:
    verbs, style = GAME_VERBS, "commands"

    def __init__(self, name):
        self.name, self.answer = name, None
        self.reset()

    def reset(self):
        self.sent, self.won, self.done = [], False, False
        self.opening = f"You are in the middle of a room {self.name}.\\nYour task is to: put a key in the box."

    def fresh(self):
        return Household(self.name)

    @property
    def reward(self):
        return float(self.won)

    def step(self, action):
        line = action if isinstance(action, str) else action.arg
        self.sent.append(line)
        if line == "put key 2 in/on box 1":
            self.won = self.done = True
        return REPLIES.get(line, "Nothing happens."), self.done


def make(env, row):
    return Household(row["id"])
"""

# Lines a model may write: quirky ones included (a leading `>`, two spaces, a thought in another case, an empty
# line, a carriage return, trailing spaces, a line that runs on past its break).
QUIRKY = [
    " think: I need the key first.",
    " > go to shelf 1",
    " Think: where is the box?",
    "",
    " take  key 2 from shelf 1",
    " take key 2 from shelf 1\r",
    " go to box 1   \nand more after the break",
    " put key 2 in/on box 1",
]


def notebook_run(frame: str, env, replies: list[str], steps: int = 49) -> list[str]:
    """`alfworld_run`, restated: the prompts of its calls."""
    first = frame + env.opening + "\n>"
    added, prompts, replies = "", [], iter(replies)
    for _ in range(steps):
        prompts.append(first + added)
        action = next(replies).split("\n")[0].strip()  # the server stops at the line break
        observation, done = env.step(action)
        if observation.startswith("You arrive at loc "):
            observation = observation[observation.find(". ") + 2 :]
        if action.startswith("think:"):
            observation = "OK."
        added += f" {action}\n{observation}\n>"
        if done:
            break
    return prompts


def _checkout(folder: Path) -> Path:
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "alfworld_3prompts.json").write_text(json.dumps(EXEMPLARS))
    # As in the notebook, its loop function sets `prompt = ''` before the loop cell frames the exemplars.
    runner = "def alfworld_run(prompt, ob=''):\n    init_prompt = prompt + ob + '\\n>'\n    prompt = ''\n"
    cell = f"for _ in range(134):\n    prompt = {BEFORE!r} + d[f'react_{{v}}_1'] + d[f'react_{{v}}_0'] + {AFTER!r}\n"
    cells = [{"cell_type": "code", "source": source} for source in (runner, cell)]
    (folder / "alfworld.ipynb").write_text(json.dumps({"cells": cells}))
    return folder


@pytest.fixture(scope="module")
def games(tmp_path_factory) -> Path:
    from rawreact.tasks.games import make_games

    folder = tmp_path_factory.mktemp("games")
    make_games(folder, ["coin:1", "treasure:1"], [3])
    return folder


def _household(tmp_path: Path):
    (tmp_path / "alfworld_stub.py").write_text(ALFWORLD)
    sys.path.insert(0, str(tmp_path))
    try:
        import alfworld_stub

        return alfworld_stub
    finally:
        sys.path.remove(str(tmp_path))


def test_every_call_over_an_alfworld_shaped_environment_is_the_notebooks(games, tmp_path, monkeypatch):
    """Through the command line (--reference, --env) and through the Python API: every prompt is the one the
    notebook's loop makes of the same replies, byte for byte, and the environment is sent the same lines."""
    checkout = _checkout(tmp_path / "ReAct")
    stub = _household(tmp_path)
    frame = BEFORE + EXEMPLARS["react_put_1"] + EXEMPLARS["react_put_0"] + AFTER
    expected = notebook_run(frame, stub.Household("coin1-s3"), QUIRKY)
    assert len(expected) == len(QUIRKY)  # won at the last line

    (tmp_path / "script.json").write_text(json.dumps(QUIRKY * 2))  # both games play the same lines
    monkeypatch.chdir(tmp_path)
    args = ["run", str(games), "--reference", str(checkout), "--env", "alfworld_stub:make", "--model",
            "scripted:script.json", "--workers", "1", "--out", "r.jsonl", "-q"]  # fmt: skip
    assert main(args) == 0
    records = read_run(tmp_path / "r.jsonl")[1]
    first = next(r for r in records if r["id"] == "coin1-s3")
    from rawreact.agents.record import Trajectory

    traj = Trajectory.from_dict(first["trajectory"])
    assert [traj.transcript(k) for k in range(len(traj.steps))] == expected
    assert first["success"] == 1.0 and first["ended"] == "won"
    assert [s["action_text"] for s in first["trajectory"]["steps"]][:4] == [
        "think: I need the key first.", "> go to shelf 1", "Think: where is the box?", ""]  # fmt: skip

    # The Python API, recording what the model is sent and what the environment is sent.
    class Recorded(ScriptedModel):
        def complete(self, prompt, **options):
            self.sent.append(prompt)
            return super().complete(prompt, **options)

    model, household = Recorded(QUIRKY), stub.Household("coin1-s3")
    model.sent = []
    solve("", household, model, frame, method="react", loop="reference", max_tokens=100)
    assert model.sent == expected
    again = stub.Household("coin1-s3")
    notebook_run(frame, again, QUIRKY)
    assert household.sent == again.sent  # the same lines, unrewritten: `> go to shelf 1`, `take  key 2 ...`


def test_act_under_reference_sends_the_notebooks_frame_with_act_exemplars(games, tmp_path, monkeypatch):
    checkout = _checkout(tmp_path / "ReAct")
    _household(tmp_path)
    (tmp_path / "script.json").write_text(json.dumps([" go to shelf 1", " put key 2 in/on box 1"] * 2))
    monkeypatch.chdir(tmp_path)
    args = ["run", str(games), "--reference", str(checkout), "--method", "act", "--env", "alfworld_stub:make",
            "--model", "scripted:script.json", "--out", "a.jsonl", "-q"]  # fmt: skip
    assert main(args) == 0
    manifest = json.loads((tmp_path / "a.jsonl.manifest.json").read_text())
    [prompt] = manifest["prompts"].values()
    assert prompt == BEFORE + EXEMPLARS["act_put_1"] + EXEMPLARS["act_put_0"] + AFTER


def test_over_textworld_games_every_call_is_the_notebooks_but_for_the_listed_differences(games, tmp_path):
    """Over a real TextWorld game, the notebook's loop restated with TextWorld itself as its environment: the
    same prompts, once the listed differences are applied as docs/reference.md states them: the opening laid
    out as ALFWorld's (the room, then `Your task is to: ` and the objective) and each reply without the
    game's prompt and status bar, on one line (`environments.game.clean`)."""
    import textworld

    game = games / "coin1-s3.z8"
    replies = [" think: look first", " look", " > look", " take coin"]

    class TextWorld:  # the notebook's `env`, TextWorld's own, with the listed differences
        def __init__(self):
            infos = textworld.EnvInfos(objective=True, description=True, won=True)
            with warnings.catch_warnings():  # jericho's "not fully supported": TextWorld keeps the score itself
                warnings.simplefilter("ignore")
                self.env = textworld.start(str(game), request_infos=infos)
            state = self.env.reset()
            self.opening = f"{clean(state['description'])}\nYour task is to: {' '.join(state['objective'].split())}"

        def step(self, line):
            state, _, done = self.env.step(line)
            return clean(state.feedback) or "Nothing happens.", done

    frame = BEFORE + EXEMPLARS["react_put_1"] + EXEMPLARS["react_put_0"] + AFTER
    expected = notebook_run(frame, TextWorld(), replies)

    class Recorded(ScriptedModel):
        def complete(self, prompt, **options):
            self.sent.append(prompt)
            return super().complete(prompt, **options)

    model = Recorded(replies)
    model.sent = []
    outcome = solve("", GameEnv(game, opening="alfworld"), model, frame, method="react", loop="reference")
    assert model.sent == expected and outcome.ended == "won"


def test_the_reference_game_loop_refuses_what_the_notebook_does_not_do(games, tmp_path, capsys):
    checkout = _checkout(tmp_path / "ReAct")
    (tmp_path / "s.json").write_text(json.dumps([" look"]))
    for extra, said in ((["--grammar", "commands"], "grammar"), (["--method", "react-reflexion"], "reference")):
        code = main(["run", str(games), "--loop", "reference", "--model", f"scripted:{tmp_path / 's.json'}",
                     "--prompt", str(checkout / "prompts" / "alfworld_3prompts.json"), "--key", "react_put_1",
                     *extra, "--out", str(tmp_path / "x.jsonl")])  # fmt: skip
        assert code == 2 and said in capsys.readouterr().err


def test_a_thought_is_answered_ok_by_the_loop_in_any_environment():
    """G6: `think:` answered `OK.` belongs to the loop: an environment that answers a thought otherwise is
    still shown `OK.`, as the notebook shows it."""

    class Loud:
        verbs, style, answer, won, reward, done = GameEnv.verbs, "commands", None, False, 0.0, False
        opening = "A room.\nYour task is to: wait."

        def reset(self):
            pass

        def fresh(self):
            return self

        def step(self, action):
            return "A thought is not a command here!", False

    traj = solve("", Loud(), ScriptedModel([" think: wait", " wait"]), "", method="react", loop="reference",
                 max_steps=2).trajectory  # fmt: skip
    assert [s.observation for s in traj.steps] == ["OK.", "A thought is not a command here!"]
    assert traj.steps[0].action == Action("think", "wait")


def test_rawreacts_own_game_loop_never_sends_an_empty_line_which_the_reference_loop_sends():
    from rawreact.agents.game import play

    class Recording:
        verbs, style, answer, won, reward = GameEnv.verbs, "commands", None, False, 0.0
        opening, admissible, done = "A room.", ["wait"], False

        def __init__(self):
            self.sent = []

        def reset(self):
            pass

        def fresh(self):
            return self

        def step(self, action):
            self.sent.append(action.arg)
            return "Time passes.", False

    own, reference = Recording(), Recording()
    play(own, ScriptedModel(["", "   ", " wait"]), "", max_steps=3)
    solve("", reference, ScriptedModel(["", "   ", " wait"]), "", method="react", loop="reference", max_steps=3)
    assert own.sent == ["wait"] and reference.sent == ["", "", "wait"]


# Reflexion over games as the Reflexion code's alfworld_runs plays them (`--method react-reflexion --loop
# reference`), its rules restated here in this test's own words, over a stand-in checkout in its layout.

CODE_BASE = "Do the chores as the two examples show.\n"
CODE_EXAMPLES = "Here a trial went wrong.\nNew plan: look in the box first.\n\nHere another did.\nNew plan: ask.\n"


def _code_checkout(folder: Path) -> Path:
    runs = folder / "alfworld_runs"
    (runs / "prompts").mkdir(parents=True)
    (runs / "prompts" / "alfworld_3prompts.json").write_text(json.dumps(EXEMPLARS))
    (runs / "alfworld_trial.py").write_text(
        "def run_trial(name, d, v):\n"
        f"    base_prompt = {CODE_BASE!r} + d[f'react_{{v}}_1'] + d[f'react_{{v}}_0']\n"
        "    return base_prompt\n"
    )
    (runs / "generate_reflections.py").write_text(
        "def query_of(FEW_SHOT_EXAMPLES, scenario):\n"
        '    query: str = f"""Say what went wrong, and plan anew. Examples:\n\n{FEW_SHOT_EXAMPLES}\n\n{scenario}"""\n'
        "    return query\n"
    )
    (runs / "reflexion_few_shot_examples.txt").write_text(CODE_EXAMPLES)
    return runs


def code_run(env, replies: list[str], trials: int) -> list[tuple[str, list[str], int]]:
    """The Reflexion code's trials with memory on one game, restated: every call, as (prompt, stop, max_tokens)."""
    base = CODE_BASE + EXEMPLARS["react_put_1"] + EXEMPLARS["react_put_0"]
    calls, replies, memory = [], iter(replies), []

    def llm(prompt: str) -> str:  # tried again, hotter, while short
        for _ in range(6):
            text = next(replies).split("\n")[0]
            calls.append((prompt, ["\n"], 256))
            if len(text.strip()) >= 5:
                return text
        return ""

    for _ in range(trials):
        shown = memory[-3:]
        query = base
        if shown:
            query += "\n\nYour memory for the task below:" + "".join(
                f"\nTrial {i}:\n{m.strip()}" for i, m in enumerate(shown)
            )
        query += f"\nHere is the task:\n{env.opening}"
        env.reset()
        history, last, exhausted, success = [], "", False, False
        for _ in range(49):
            action = llm(query + "\n" + "\n".join(history) + ">").strip()
            history.append(f"> {action}")
            exhausted, last = exhausted or action == last, action
            observation, done = env.step(action)
            if observation.startswith("You arrive at loc "):
                observation = observation[observation.find(". ") + 2 :]
            history.append("OK." if action.startswith("think:") else observation)
            if done:
                success = True
                break
            if exhausted:
                break
        if success:
            return calls
        totals = "\n-----\nSUCCESS: 0\nADDITIONAL SUCCESS: 0\nFAIL: 1\nTOTAL: 1\nACCURACY: 0.0\n-----"
        log = f"\n#####\n\nEnvironment #0:\n{query}\n" + "\n".join(history) + "\n\nSTATUS: FAIL\n\n#####\n" + totals
        scenario = log.split("Here is the task:")[-1].strip()
        ask = f"Say what went wrong, and plan anew. Examples:\n\n{CODE_EXAMPLES}\n\n{scenario}"
        if memory[-3:]:
            ask += "\n\nPlans from past attempts:\n" + "".join(f"Trial #{i}: {m}\n" for i, m in enumerate(memory[-3:]))
        ask += "\n\nNew plan:"
        calls.append((ask, [], 256))
        memory.append(next(replies))
    return calls


# Four failed trials (a repeated action, a short line made again, a line empty after six tries) and a fifth
# that wins; each failed trial is followed by its reflection, whose text keeps its line breaks.
CODE_REPLIES = (
    [" go to shelf 1", " go to shelf 1", "Plan: take the key.\nThen the box.  "]
    + [" ok", " think: first the key", " look around", " look around", "Plan 2."]
    + ["", "", "", "", "", "", "Plan 3: no empty lines."]
    + [" take key 2 from shelf 1", " take key 2 from shelf 1", " Plan 4"]
    + [" go to shelf 1", " take key 2 from shelf 1", " go to box 1", " put key 2 in/on box 1"]
)


def test_reflexion_over_games_makes_every_call_the_reflexion_codes_makes(games, tmp_path, monkeypatch):
    checkout = _code_checkout(tmp_path / "reflexion")
    stub = _household(tmp_path)
    expected = code_run(stub.Household("coin1-s3"), CODE_REPLIES, trials=5)
    assert sum(stop == [] for _, stop, _ in expected) == 4  # four reflections

    (tmp_path / "script.json").write_text(json.dumps(CODE_REPLIES))
    monkeypatch.chdir(tmp_path)
    args = ["run", str(games), "--limit", "1", "--method", "react-reflexion", "--loop", "reference", "--trials", "5",
            "--prompt", str(checkout / "prompts" / "alfworld_3prompts.json"), "--key", "react_put_1+react_put_0",
            "--instruction", f"{checkout / 'alfworld_trial.py'}#base_prompt",
            "--reflect-prompt", str(checkout / "reflexion_few_shot_examples.txt"),
            "--reflect-instruction", f"{checkout / 'generate_reflections.py'}#query",
            "--env", "alfworld_stub:make", "--model", "scripted:script.json", "--out", "r.jsonl", "-q"]  # fmt: skip
    assert main(args) == 0
    [record] = read_run(tmp_path / "r.jsonl")[1]
    assert [t["passed"] for t in record["trials"]] == [False] * 4 + [True] and record["success"] == 1.0
    from rawreact.agents.reflexion import Trial

    made = [Trial.from_dict(t, record["trajectory"]["prompt"]) for t in record["trials"]]
    prompts = []
    for trial in made:  # every call of each trial (each try of a step), then its reflection's
        for k, step in enumerate(trial.part.steps):
            prompts += [trial.part.transcript(k)] * len(step.calls)
        if trial.reflection is not None:
            prompts.append(None)  # a reflection's prompt is not kept whole in the record: checked below
    assert [p for p in prompts if p is not None] == [p for p, stop, _ in expected if stop]
    assert [t.reflection.text for t in made[:4]] == ["Plan: take the key.\nThen the box.  ", "Plan 2.",
                                                     "Plan 3: no empty lines.", " Plan 4"]  # fmt: skip

    # The Python API, recording every call the model is sent: prompt, stop and token limit, in order.
    from rawreact.agents.reflexion import load_reflect_prompt

    query = f"{checkout / 'generate_reflections.py'}#query"
    reflect = load_reflect_prompt(str(checkout / "reflexion_few_shot_examples.txt"), instruction=query, agent="game")
    frame = CODE_BASE + EXEMPLARS["react_put_1"] + EXEMPLARS["react_put_0"]
    model = ScriptedModel(CODE_REPLIES)
    solve("", stub.Household("coin1-s3"), model, frame, method="react-reflexion", loop="reference",
          reflexion={"trials": 5, "reflect_prompt": reflect})  # fmt: skip
    assert [(h["prompt"], h["stop"], h["max_tokens"]) for h in model.history] == expected
    temperatures = [h.get("temperature", 0.0) for h in model.history]
    # the code's `cur_try * 0.2`, as the floats it sends: the 4th try is 0.6000000000000001 (issue 67 item 16)
    assert temperatures[3:5] == [0.0, 0.2] and temperatures[8:14] == [cur_try * 0.2 for cur_try in range(6)]
    assert temperatures[11] == 0.6000000000000001


def test_reflexion_over_questions_is_still_refused_the_reference_loop_before_any_model(tmp_path, capsys):
    """The reference loop of Reflexion is the Reflexion code's over games; questions run their trials in the
    tolerant loop, as before (the setting is refused where the task is known: before any model loads)."""
    (tmp_path / "s.json").write_text(json.dumps([" x"]))
    code = main(["run", "--question", "q?", "--answer", "a", "--method", "react-reflexion", "--loop", "reference",
                 "--model", f"scripted:{tmp_path / 's.json'}", "--out", str(tmp_path / "r.jsonl")])  # fmt: skip
    assert code == 2 and "runs its trials in the tolerant loop" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()
