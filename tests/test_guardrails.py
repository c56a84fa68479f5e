"""Guardrails: repeat policies, the token budget, answers checked against the trace, and the table of endings."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact import ScriptedModel
from rawreact.agents.guardrails import ENDINGS, Guard, spent, supported
from rawreact.agents.methods import solve
from rawreact.core.errors import DataError
from rawreact.experiments.variants import Variant, ablation
from rawreact.reports.summary import summarize
from rawreact.runs.run import Result
from rawreact.tasks.collection import Collection, Question

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Solve it.\n"
PAGES = {
    "Orlo": "Orlo is a fishing village. It lies on Lake Veshna. Its festival is held in October.",
    "Lake Veshna": "Lake Veshna is a lake in Calvora. It is fed by the river Tam.",
}


def step(i: int, action: str, thought: str = "t") -> str:
    return f" {thought}\nAction {i}: {action}"


def episode(actions: list[str], *, loop="tolerant", method="react", gold="Orlo", **options):
    """Run the scripted actions: (trajectory, model history, result record)."""
    q = Question("q1", "Where is the festival?", gold)
    collection = Collection("t", PAGES, (q,), "envs")
    texts = [step(i, a) for i, a in enumerate(actions, 1)] if method == "react" else [f" {a}" for a in actions]
    model = ScriptedModel(texts)
    env = collection.env(q, loop=loop)
    outcome = solve(q.question, env, model, PROMPT, method=method, loop=loop, **options)
    return outcome.trajectory, model.history, Result(q, outcome).to_dict()


REPEATING = ["Search[Orlo]", "Search[ orlo ]", "Finish[Orlo]"]


def test_off_counts_a_repeat_and_changes_nothing():
    traj, history, record = episode(REPEATING)
    assert [s.repeat_of for s in traj.steps] == [None, 1, None]
    assert record["repeats"] == 1 and record["ended"] == "finish" and traj.steps[1].note == ""
    assert traj.steps[1].observation == traj.steps[0].observation
    plain, plain_history, _ = episode(REPEATING, repeats="off")
    assert [h["prompt"] for h in history] == [h["prompt"] for h in plain_history]


def test_note_tells_the_model_in_the_next_prompt():
    traj, history, record = episode(REPEATING, repeats="note")
    note = " (Note: step 1 already did Search[orlo] and saw the same. Try a different action.)"
    assert traj.steps[1].note == note and record["repeats"] == 1
    assert history[2]["prompt"].endswith(f"Observation 2: {traj.steps[0].observation}{note}\nThought 3:")
    assert traj.steps[1].observation == traj.steps[0].observation  # the environment's text, kept apart
    assert "Note:" not in history[1]["prompt"]


def test_stop_ends_the_episode_at_the_repeat():
    traj, history, record = episode(REPEATING, repeats="stop")
    assert (record["ended"], record["prediction"], len(history), record["steps"]) == ("repeat", "", 2, 2)
    assert traj.steps[-1].repeat_of == 1


@pytest.mark.parametrize(
    ("actions", "repeats"),
    [
        (["Lookup[lake]", "Search[Orlo]", "Lookup[festival]", "Lookup[festival]", "Finish[x]"], [None] * 5),
        (["Search[Orlo]", "Lookup[festival]", "Lookup[festival]", "Lookup[festival]", "Finish[x]"],
         [None, None, None, 3, None]),
        (["Think[hm]", "Think[HM]", "Finish[x]"], [None, 1, None]),
        (["Search[Nowhere]", "Search[nowhere]", "Finish[x]"], [None, 1, None]),
        (["Search[Orlo]", "Search[Lake Veshna]", "Search[Orlo]", "Finish[x]"], [None, None, 1, None]),
        (["Go home", "Go home", "Finish[x]", "Finish[x]"], [None, None, None]),
    ],
    ids=["lookup-moves-on", "lookup-runs-out", "think", "search-miss", "not-consecutive", "invalid-and-finish"],
)  # fmt: skip
def test_what_counts_as_a_repeat(actions, repeats):
    traj, _, _ = episode(actions)
    assert [s.repeat_of for s in traj.steps] == repeats


def test_the_policies_apply_to_act_and_the_reference_loop():
    traj, _, record = episode(REPEATING, method="act", repeats="stop")
    assert record["ended"] == "repeat" and [s.thought for s in traj.steps] == [None, None]
    traj, _, record = episode(["search[Orlo]", "search[Orlo]", "finish[Orlo]"], loop="reference", repeats="stop")
    assert record["ended"] == "repeat" and record["steps"] == 2  # the reference's closing finish[] is no step taken
    assert len(traj.steps) == 3 and traj.steps[-1].calls == []  # it is logged, with no call
    _, _, record = episode(["search[Orlo]", "search[Orlo]", "finish[Orlo]"], loop="reference")
    assert (record["repeats"], record["ended"], record["em"]) == (1, "finish", 1.0)
    with pytest.raises(ValueError, match="repeats=note"):
        episode(REPEATING, loop="reference", repeats="note")
    with pytest.raises(DataError, match="repeats=note"):
        Variant("n", loop="reference", repeats="note")
    with pytest.raises(DataError, match="method cot takes none"):
        Variant("c", method="cot", repeats="stop")
    with pytest.raises(DataError, match="budget=0"):
        Variant("b", budget=0)
    assert [v.repeats for v in ablation("repeats", Variant("base"))] == ["off", "note", "stop"]
    assert [v.repeats for v in ablation("repeats", Variant("base", loop="reference"))] == ["off", "stop"]
    assert {v.repeats for v in ablation("methods", Variant("base", repeats="stop")) if v.method == "cot"} == {"off"}


def test_the_budget_ends_an_episode_before_a_step_that_could_overspend():
    actions = ["Search[Orlo]", "Search[Lake Veshna]", "Think[x]", "Finish[Orlo]"]
    full, history, _ = episode(actions)
    costs = [spent(s.calls) for s in full.steps]
    # Room for the first two steps and the 100 tokens the third could write, less one token: two steps.
    budget = costs[0] + costs[1] + 100 - 1
    traj, _, record = episode(actions, budget=budget)
    assert (record["ended"], len(traj.steps), record["prediction"]) == ("budget", 2, "")
    traj, _, record = episode(actions, budget=budget + 1)
    assert len(traj.steps) >= 3
    traj, _, record = episode(actions, budget=50)  # not even one call's 100 tokens fit
    assert (record["ended"], record["model_calls"]) == ("budget", 0)
    assert costs[0] == len(history[0]["prompt"].split()) + len(full.steps[0].calls[0].text.split())  # words here


def test_spent_counts_evaluated_tokens_where_known_and_the_prompt_where_not():
    from rawreact.models.base import Completion

    known = Completion("x", "stop", prompt_tokens=900, completion_tokens=7, evaluated_tokens=40)
    unknown = Completion("x", "stop", prompt_tokens=900, completion_tokens=7, evaluated_tokens=None)
    assert spent([known]) == 47 and spent([unknown]) == 907 and spent([]) == 0
    assert Guard(budget=147).allows([known], 100) and not Guard(budget=146).allows([known], 100)


@pytest.mark.parametrize(
    ("answer", "observations", "opened", "verdict"),
    [
        ("Orlo", ["Orlo is a fishing village."], True, True),
        ("the Orlo Lantern Festival.", ["It holds the orlo lantern festival, every year."], True, True),
        ("Meet Corliss Archer", ["Could not find Archer. Similar: ['Meet Corliss Archer', 'A Kiss']."], False, True),
        ("Orlo", ["Orlovsky is a name."], True, False),
        ("2,140", ["Its population was 2140."], True, True),
        ("Tam", [], False, False),
        ("yes", [], True, True),
        ("No", ["Could not find x. Similar: []."], False, False),
        ("", ["anything"], True, None),
        ("  .  ", ["anything"], True, None),
    ],
    ids=["exact", "case-and-punctuation", "similar-list", "part-of-a-word", "digits", "nothing-seen", "yes-opened",
         "no-unopened", "empty", "only-punctuation"],
)  # fmt: skip
def test_an_answer_is_supported_when_it_occurs_in_an_observation(answer, observations, opened, verdict):
    assert supported(answer, observations, opened) is verdict


def test_records_say_whether_the_answer_was_seen():
    _, _, seen = episode(["Search[Orlo]", "Finish[fishing village]"])
    _, _, made_up = episode(["Search[Orlo]", "Finish[Paris]"])
    _, _, own_words = episode(
        ["Paris is it", "Think[Paris]", "Finish[Paris]"]
    )  # invalid and think steps are no evidence
    _, _, empty = episode(["Think[x]", "Finish[]"])
    assert (seen["supported"], made_up["supported"], own_words["supported"], empty["supported"]) == (
        True, False, False, None
    )  # fmt: skip
    q = Question("q1", "Where?", "Orlo")
    cot = solve(q.question, None, ScriptedModel([" It is Orlo.\nAnswer: Orlo"]), PROMPT, method="cot")
    assert Result(q, cot).to_dict()["supported"] is None  # no passage seen


def test_the_report_shows_repeats_support_and_every_ending():
    def record(em, ended, repeats, supported):
        return {"em": em, "f1": em, "ended": ended, "invalid_actions": 0, "fallback_calls": 0, "repeats": repeats,
                "supported": supported, "steps": 1, "model_calls": 1, "seconds": 1.0,
                "tokens": {"prompt": 1, "evaluated": 1, "completion": 1}}  # fmt: skip

    records = [record(1, "finish", 0, True), record(1, "finish", 2, True), record(0, "finish", 1, False),
               record(0, "repeat", 1, None), record(0, "budget", 0, None), record(0, "max_steps", 3, None)]  # fmt: skip
    s = summarize(records)
    assert s["repeats_per_question"] == 7 / 6 and s["supported"] == 2 / 3
    assert (s["em_supported"], s["em_unsupported"]) == (1.0, 0.0)
    assert s["endings"] == {"finish": 3, "max_steps": 1, "repeat": 1, "budget": 1}
    old = summarize([{k: v for k, v in r.items() if k not in ("repeats", "supported")} for r in records])
    assert old["repeats_per_question"] is None and "supported" not in old


def test_every_ending_is_in_the_docs_table():
    text = (ROOT / "docs" / "guardrails.md").read_text(encoding="utf-8")
    section = text[text.index("| `ended` |") :]
    section = section[: section.index("\n\n")]
    assert re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE)[1:] == list(ENDINGS)  # after the header


def test_the_repeats_ablation_runs_from_the_command_line(rows, tmp_path):
    """Every policy through `compare`, on scripts that search the same title twice."""
    from rawreact.runs.records import read_run

    data = tmp_path / "rows.json"
    data.write_text(json.dumps(rows[:3]), encoding="utf-8")
    scripts = {}
    for row in rows[:3]:
        title = row["supporting_facts"][0][0]
        scripts[row["question"]] = [step(1, f"Search[{title}]"), step(2, f"Search[{title}]"),
                                    step(3, f"Finish[{row['answer']}]")]  # fmt: skip
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"questions": scripts}), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "rawreact", "compare", data, "--ablation", "repeats", "--base",
         f"model=scripted:{script}", "--out", tmp_path / "cmp", "-q"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    assert "repeats/q" in header and "supported" in header and header[-1] == "ended"
    ended = {
        p: [r["ended"] for r in read_run(tmp_path / "cmp" / f"repeats-{p}.jsonl")[1]] for p in ("off", "note", "stop")
    }
    assert ended == {"off": ["finish"] * 3, "note": ["finish"] * 3, "stop": ["repeat"] * 3}
    for line in done.stdout.splitlines()[1:4]:
        assert line.split()[-2:] in (["finish", "3"], ["repeat", "3"])
    manifest = read_run(tmp_path / "cmp" / "repeats-stop.jsonl")[0]
    assert (manifest["config"]["repeats"], manifest["config"]["budget"]) == ("stop", None)
    shown = subprocess.run(
        [sys.executable, "-m", "rawreact", "show", tmp_path / "cmp" / "repeats-note.jsonl", "--id", rows[0]["_id"]],
        capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    assert "ended by finish after 3 steps" in shown and ", 1 repeat," in shown
    assert "; the answer occurs in an observation" in shown.splitlines()[0]
    assert "Observation 2: " in shown and "(Note: step 1 already did Search[" in shown
    bad = subprocess.run([sys.executable, "-m", "rawreact", "run", "--budget", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--budget" in bad.stderr and "Traceback" not in bad.stderr


ACTIONS = ["Search[Orlo]", "Search[Lake Veshna]", "Search[Nowhere]", "Lookup[lake]", "Think[a]", "Think[b]"]


@given(st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=6))
def test_a_policy_changes_nothing_before_the_first_repeat(actions):
    actions = [*actions, "Finish[Orlo]"]
    off, off_history, _ = episode(actions, max_steps=len(actions))
    first = next((s.i for s in off.steps if s.repeat_of is not None), None)
    for policy in ("note", "stop"):
        traj, history, record = episode(actions, repeats=policy, max_steps=len(actions))
        before = len(off_history) if first is None else first
        assert [h["prompt"] for h in history[:before]] == [h["prompt"] for h in off_history[:before]]
        assert [s.repeat_of for s in traj.steps] == [s.repeat_of for s in off.steps][: len(traj.steps)]
        if policy == "stop":
            assert record["ended"] == ("finish" if first is None else "repeat")
            assert len(traj.steps) == (len(off.steps) if first is None else first)
        else:
            assert len(history) == len(off_history) and record["ended"] == "finish"
            assert all(("Note: step" in s.note) == (s.repeat_of is not None) for s in traj.steps)
