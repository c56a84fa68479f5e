"""Hardening, fifth round (issue 67): LATS's score and layout, a clone's templates, and counts without bounds.
Each test failed on the main before the round."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rawreact import DataError, ScriptedModel, Settings
from rawreact.agents.lats import Tree, em_reward
from rawreact.agents.lats_prompts import own_prompts, reference_prompts
from rawreact.agents.lats_records import Search, chosen_trajectory
from rawreact.core.actions import PASSAGE_VERBS
from rawreact.core.errors import PromptError
from rawreact.models.base import Completion, sample_each_in_flight

sys.path.insert(0, str(Path(__file__).parent))
import test_lats  # noqa: E402 (its stand-in checkout of LATS's repository)

CONSOLE = Path(sys.executable).with_name("rawreact")


class SharedEnv:
    """lats.py's one environment of a search, as WikiEnv keeps it: a right finish leaves its answer there, and a
    later step (a search) is not done, but the answer stays."""

    verbs = PASSAGE_VERBS

    def __init__(self) -> None:
        self.answer = None

    def reset(self) -> None:
        self.answer = None

    def step(self, action: str):
        if action.startswith("finish["):
            self.answer = action[len("finish[") : -1]
            return "Episode finished", True
        return "Orlo is a village.", False


def test_under_reference_a_step_rewarded_by_another_branchs_finish_scores_as_lats_py_scores_it():
    """Item 7: a search that ends on a node that is no finish, rewarded 1 by the shared environment's answer from
    another branch's earlier right finish, scores 0 (lats.py returns that node's `em`, which only a finish's info
    sets); its trajectory ends `spent` with no answer, where rawreact answered the earlier finish and scored 1."""
    env = SharedEnv()
    reward = em_reward("a village")
    tree = Tree(
        "Question: Where is Orlo?", env, ScriptedModel([]), own_prompts("", "", None), reward=reward, reference=True
    )
    finish = tree._node(tree.root, thought="I know.", action="Finish[a village]")
    observation, reward, done = tree._act(finish)
    assert (reward, done, finish.answer) == (1.0, True, "a village")
    later = tree._node(tree.root, thought="I look again.", action="Search[Orlo]")
    later.observation, later.reward, done = tree._act(later)
    later.terminal = later.reward == 1 or done
    assert later.reward == 1.0 and later.terminal and not done  # rewarded by the earlier finish, as lats.py
    assert later.answer is None
    search = Search(tree.question, tree.root, later, tree.nodes, tree.calls, [], 1, "found")
    traj = chosen_trajectory(search, "", PASSAGE_VERBS)
    assert traj.answer == "" and traj.ended == "spent"


def test_own_rules_put_each_steps_header_on_a_line_of_its_own():
    """Item 8: rawreact's own LATS rules lay the steps out as its exemplars and --method react do
    (`...?\\nThought 1:`), where lats.py glues the header to the line before (`...?Thought 1: `)."""
    from rawreact import PassageEnv

    env = PassageEnv({"Orlo": "Orlo is a village."})
    model = ScriptedModel([" I search.\nAction 1: Search[Orlo]\n"] * 5)
    tree = Tree("Question: Where is Orlo?", env, model, own_prompts("EXEMPLARS\n", "VALUE\n", None),
                reward=em_reward("a village"), samples=1)  # fmt: skip
    [child] = tree.new_states(tree.root, 1)
    assert model.history[0]["prompt"] == "EXEMPLARS\nQuestion: Where is Orlo?\nThought 1:"
    model2 = ScriptedModel([" I answer.\nAction 2: Finish[a village]\n"] * 5)
    tree.model = model2
    tree.new_states(child, 1)
    assert model2.history[0]["prompt"].endswith("Observation 1: Orlo is a village.\nThought 2:")


BAD_FIELDS = [
    ("reflection_prompt", "Say what went wrong.\n{input}Reflection:", "reflection_prompt names the field {input}"),
    ("cot_prompt", "Answer.\n{question}", "cot_prompt names the field {question}, and LATS fills only {input}"),
    ("value_prompt_reasoning", "Rate it {s}.\n{input} {}", "value_prompt_reasoning names the field {}"),
]


@pytest.mark.parametrize(("name", "template", "said"), BAD_FIELDS)
def test_a_clones_template_naming_a_field_lats_does_not_fill_is_refused_when_read(name, template, said, tmp_path):
    """Item 19: a --reference clone whose template names another field is one line naming the template and the
    field, when the file is read: before the model loads (the scripted model here names no file that exists)."""
    checkout = test_lats._checkout(tmp_path / "LATS")
    strings = dict(test_lats.STRINGS) | {name: template}
    code = "".join(f"{key} = '''{text}'''\n\n" for key, text in strings.items())
    (checkout / "hotpot" / "hotpot.py").write_text(code)
    with pytest.raises(PromptError) as error:
        reference_prompts(str(checkout / "hotpot" / "hotpot.py"), len)
    assert said in str(error.value)
    (tmp_path / "q.json").write_text(json.dumps({"passages": {"Orlo": "Orlo is a village."}, "questions": [
        {"id": "o", "question": "Where is Orlo?", "answer": "a village"}]}))  # fmt: skip
    command = [str(CONSOLE), "run", "q.json", "--method", "lats", "--reference", str(checkout), "--model"]
    done = subprocess.run([*command, "scripted:missing.json"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "KeyError" not in done.stderr
    assert said in done.stderr.splitlines()[-1] and "missing.json" not in done.stderr


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"method": "lats", "lats_samples": 300}, "lats_samples=300 (--lats-samples) must be at most 254"),
        ({"method": "lats", "lats_values": 300}, "lats_values=300 (--lats-values) must be at most 254"),
        ({"method": "lats", "iterations": 10**11}, "iterations=100000000000 (--iterations) must be at most 1000"),
        ({"method": "lats", "lats_depth": 10**6}, "must be at most 100"),
        (
            {"method": "cot-sc", "samples": 100000, "model": "scripted:s.json"},
            "samples=100000 (--samples) must be at most 254",
        ),
    ],
)
def test_counts_of_samples_and_iterations_are_bounded_before_anything_loads(given, said):
    """Item 20: on every backend (the scripted model included) before anything loads."""
    with pytest.raises(DataError) as error:
        Settings(**given)
    assert said in str(error.value)


def test_a_servers_samples_in_flight_open_at_most_32_threads():
    """Item 20: 5,000 samples on a server opened 800+ threads; the samples of one call now wait for one of 32."""
    most, now, lock = [0], [0], threading.Lock()

    class Server:
        def complete(self, prompt, *, stop, max_tokens, temperature, seed):
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
            time.sleep(0.002)
            with lock:
                now[0] -= 1
            return Completion(prompt[-3:], "stop", 1, 1)

    made = sample_each_in_flight(Server(), [f"p{k:03d}" for k in range(400)], temperature=1.0,
                                 seeds=list(range(400)), stop=[], max_tokens=4)  # fmt: skip
    assert [c.text for c in made] == [f"{k:03d}" for k in range(400)]
    assert 1 < most[0] <= 32
