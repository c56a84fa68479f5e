"""FEVER: claims read from their files, asked as `Claim:` by every method over a passage store, answers
read as labels, scored by label accuracy, and counted per label in the report."""

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact import PassageEnv, ScriptedModel, load_collection, load_prompt, solve
from rawreact.agents.answers import parse_answer
from rawreact.agents.prompts import read_exemplars
from rawreact.config.choices import PAPER
from rawreact.core.actions import parse_action, parse_step
from rawreact.core.errors import DataError, PromptError
from rawreact.core.resources import resource
from rawreact.environments.build import build_store
from rawreact.environments.store import PassageStore
from rawreact.experiments.compare import compare
from rawreact.experiments.variants import Variant, ablation
from rawreact.reports import html as htmlreport
from rawreact.runs.records import read_run
from rawreact.runs.run import run_questions
from rawreact.tasks.corpus import read_sources
from rawreact.tasks.fever import LABELS, read_label

CLAIMS = [
    {
        "id": 7,
        "verifiable": "VERIFIABLE",
        "label": "SUPPORTS",
        "claim": "Ostrel lies on the river Tam.",
        "evidence": [],
    },
    {
        "id": 8,
        "verifiable": "VERIFIABLE",
        "label": "REFUTES",
        "claim": "Ostrel is the capital of Norway.",
        "evidence": [],
    },
    {"id": 9, "verifiable": "NOT VERIFIABLE", "label": "NOT ENOUGH INFO", "claim": "Ostrel has a zoo.", "evidence": []},
]
WIKI = [
    {"id": "", "text": "", "lines": ""},
    {"id": "Ostrel", "text": "t", "lines": "0\tOstrel is the capital of Calvora .\n1\tIt lies on the river Tam ."},
    {"id": "Calvora", "text": "t", "lines": "0\tCalvora is a small country in the north ."},
]


@pytest.fixture
def fever(tmp_path):
    claims, wiki = tmp_path / "claims.jsonl", tmp_path / "wiki-001.jsonl"
    claims.write_text("".join(json.dumps(row) + "\n" for row in CLAIMS))
    wiki.write_text("".join(json.dumps(row) + "\n" for row in WIKI))
    build_store(read_sources([wiki]), tmp_path / "fever.sqlite")
    return claims, tmp_path / "fever.sqlite"


@pytest.mark.parametrize(
    "answer, label",
    [
        ("SUPPORTS", "SUPPORTS"),
        ("Supported.", "SUPPORTS"),
        ("supports the claim", "SUPPORTS"),
        ("REFUTES", "REFUTES"),
        ("refuted", "REFUTES"),
        ("NOT ENOUGH INFO", "NOT ENOUGH INFO"),
        ("Not enough information", "NOT ENOUGH INFO"),
        ("NEI", "NOT ENOUGH INFO"),
        ("true", "SUPPORTS"),
        ("False.", "REFUTES"),
        ("Ostrel", None),
        ("", None),
        ("unsupported", None),
        ("not supported", None),
    ],
)
def test_labels_are_read_tolerantly(answer, label):
    assert read_label(answer) == label


@given(st.text())
def test_reading_a_label_never_raises_and_gives_a_label_or_none(text):
    assert read_label(text) in (*LABELS, None)


def test_claim_files_load_with_their_labels(fever, tmp_path):
    claims, _ = fever
    collection = load_collection(claims)
    assert collection.layout == "fever" and collection.task == "fever" and collection.passages == {}
    assert [(q.id, q.answer, q.header) for q in collection.questions] == [
        ("7", "SUPPORTS", "Claim"),
        ("8", "REFUTES", "Claim"),
        ("9", "NOT ENOUGH INFO", "Claim"),
    ]
    listed = tmp_path / "claims.json"
    listed.write_text(json.dumps(CLAIMS))
    assert [q.question for q in load_collection(listed).questions] == [c["claim"] for c in CLAIMS]
    unlabelled = tmp_path / "test.jsonl"
    unlabelled.write_text(json.dumps({"id": 1, "claim": "x"}) + "\n")
    with pytest.raises(DataError, match=r"test.jsonl line 1: label None is not one of SUPPORTS, REFUTES"):
        load_collection(unlabelled)


def test_fever_exemplars_replay_on_their_passages_and_give_labels():
    collection = load_collection(resource("envs", "exemplars.json"))
    for method in ("react", "act"):
        exemplars = read_exemplars(method=method, task="fever")
        assert len(exemplars) == 4
        for exemplar in exemplars:
            lines = exemplar.splitlines()
            assert lines[0].startswith("Claim: ")
            env, size = collection.env(), 3 if method == "react" else 2
            steps = [lines[i : i + size] for i in range(1, len(lines), size)]
            for n, step in enumerate(steps, 1):
                if method == "react":
                    _, action = parse_step(step[0].removeprefix(f"Thought {n}:") + "\n" + step[1], n)
                else:
                    action = parse_action(step[0].removeprefix(f"Action {n}: "))
                observation, done = env.step(action)
                if not done:
                    assert step[-1] == f"Observation {n}: {observation}"
            assert read_label(env.answer) in LABELS
    answers = [
        parse_answer(block.splitlines()[-1])
        for m in ("standard", "cot")
        for block in read_exemplars(method=m, task="fever")
    ]
    assert sorted(set(answers)) == sorted(LABELS) and all(read_label(a) == a for a in answers)
    prompt = load_prompt(method="cot", task="fever")
    assert prompt.source == "prompts/fever/cot/exemplars.txt" and prompt.text.startswith("Decide each claim")
    with pytest.raises(PromptError, match="the tools method answers questions"):
        load_prompt(method="tools", task="fever")


def _script(method: str) -> dict:
    """A FEVER answer for each claim in the layout of `method`'s prompt."""
    out = {}
    for claim in CLAIMS:
        label = claim["label"]
        if method in ("standard", "cot", "cot-sc"):
            out[claim["claim"]] = [f" {label}" if method == "standard" else f" It is so.\nAnswer: {label}"]
        elif method == "act":
            out[claim["claim"]] = [" Search[Ostrel]", f" Finish[{label.lower()}]"]
        else:
            out[claim["claim"]] = [" Find it.\nAction 1: Search[Ostrel]", f" So.\nAction 2: Finish[{label.lower()}]"]
    return out


@pytest.mark.parametrize("method", PAPER)
def test_every_method_checks_claims_over_a_store(fever, tmp_path, method):
    claims, store = fever
    script = tmp_path / "script.json"
    # cot-sc-react: the CoT-SC sample reads ReAct's first step, which has no answer, so ReAct runs.
    script.write_text(json.dumps({"questions": _script("react" if "react" in method else method)}))
    variant = Variant(method, method=method, model=f"scripted:{script}", passages=str(store), samples=1)
    comparison = compare(claims, [variant], tmp_path / "runs")
    manifest, records = read_run(tmp_path / "runs" / f"{method}.jsonl")
    assert comparison.names == [method] and len(records) == 3
    assert [r["label"] for r in records] == [c["label"] for c in CLAIMS] and all(
        r["em"] == 1.0 == r["f1"] for r in records
    )
    assert all(r["task"] == "fever" and r["supported"] is None for r in records)  # a label is never "seen"
    assert manifest["config"]["prompt"].startswith("prompts/fever/")
    part = records[0]["trajectory"] or records[0]["reasoning"]
    assert (
        part["header"] == "Claim"
        and "Claim: Ostrel lies on the river Tam.\n" in part["prompt"] + "Claim: " + part["question"] + "\n"
    )
    if records[0]["trajectory"]:
        assert (
            records[0]["trajectory"]["steps"][0]["observation"]
            == "Ostrel is the capital of Calvora. It lies on the river Tam."
        )


def test_the_reference_loop_rewards_the_label_and_reads_a_reference_prompt(fever, tmp_path):
    claims, store = fever
    prompts = tmp_path / "fever.json"
    shot = "Claim: A is B.\nThought 1: Check.\nAction 1: Search[A]\nObservation 1: A is B.\n"
    shot += "Thought 2: Yes.\nAction 2: Finish[SUPPORTS]\n"
    prompts.write_text(json.dumps({"webthink_simple3": shot + "\n" + shot}))
    prompt = load_prompt(
        prompts, key="webthink_simple3", instruction=resource("prompts", "fever/react/instruction.txt")
    )
    assert prompt.exemplars == 2 and prompt.text.startswith("Check a claim")
    # The reference's FEVER prompt carries its own instruction: by default nothing goes in front, as in FEVER.ipynb.
    assert load_prompt(prompts, key="webthink_simple3", task="fever").text == shot + "\n" + shot
    collection = Variant("r", passages=str(store)).collection(load_collection(claims))
    from rawreact.models.scripted import ScriptedModel

    model = ScriptedModel(
        [" Look.\nAction 1: search[Ostrel]", " Yes.\nAction 2: finish[SUPPORTS]"]
        + [" Look.\nAction 1: search[Ostrel]", " Yes.\nAction 2: finish[SUPPORTS]"]
    )
    results = list(
        run_questions(
            collection.questions[:2], lambda q: collection.env(q, loop="reference"), model, prompt, loop="reference"
        )
    )
    assert [r.outcome.steps[-1].observation for r in results] == [
        "Episode finished, reward = 1\n",
        "Episode finished, reward = 0\n",
    ]
    assert model.history[0]["prompt"].endswith("Claim: Ostrel lies on the river Tam.\nThought 1:")


def test_claims_need_a_store_to_act_on_and_the_report_counts_labels(fever, tmp_path):
    claims, store = fever
    with pytest.raises(DataError, match="FEVER claims are checked against Wikipedia: build a store"):
        Variant("x").collection(load_collection(claims))
    assert Variant("x", method="cot").collection(load_collection(claims)).questions  # CoT needs no passages
    script = tmp_path / "script.json"
    answers = {c["claim"]: [" x\nAnswer: SUPPORTS"] for c in CLAIMS}
    script.write_text(json.dumps({"questions": answers}))
    out = tmp_path / "cot.jsonl"
    done = _rawreact("run", claims, "--method", "cot", "--model", f"scripted:{script}", "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    lines = _rawreact("report", out, "--format", "csv").stdout.splitlines()
    at = lines.index("run,gold label,n,accuracy,lenient,predicted")
    assert lines[at + 1 :] == [
        "cot.jsonl,SUPPORTS,1,1.000,1.000,SUPPORTS 1",
        "cot.jsonl,REFUTES,1,0.000,0.000,SUPPORTS 1",
        "cot.jsonl,NOT ENOUGH INFO,1,0.000,0.000,SUPPORTS 1",
    ]
    page = htmlreport.page({"cot": out})
    row = "<td>NOT ENOUGH INFO</td><td>1</td><td>0.000</td><td>0.000</td><td>SUPPORTS 1</td>"
    assert "<h3>Labels</h3>" in page and row in page
    tools = _rawreact("run", claims, "--method", "tools", "--passages", store, "--model", f"scripted:{script}")
    assert tools.returncode == 2 and "the tools method answers questions" in tools.stderr


def _rawreact(*args):
    return subprocess.run([sys.executable, "-m", "rawreact", *map(str, args)], capture_output=True, text=True)


def test_gemma_checks_a_claim_over_a_store(gemma, fever, recorder):
    """The real model, FEVER's ReAct prompt, a store: a well-formed episode whose observations are the store's."""
    claims, store = fever
    collection = Variant("g", passages=str(store)).collection(load_collection(claims))
    model = recorder(gemma)
    (result,) = run_questions(collection.questions[:1], collection.env, model, load_prompt(task="fever"), max_steps=4)
    traj = result.outcome.trajectory
    assert model.calls[0][0].endswith("Claim: Ostrel lies on the river Tam.\nThought 1:")
    assert traj.ended in ("finish", "max_steps") and traj.header == "Claim"
    for step in traj.steps:
        assert (step.action is not None) != (step.error is not None)
        if step.action is not None and step.action.name == "search":
            opened = PassageStore(store).sentences(step.action.arg)
            assert step.observation.startswith("Could not find") == (opened is None)
    assert result.em == (read_label(traj.answer) == "SUPPORTS")


def test_the_prompt_ablations_count_the_fever_prompt_files():
    (fever,) = ablation("instructions", Variant("b"), task="fever")
    assert fever.name == "instruction" and fever.instruction.endswith("fever/react/instruction.txt")
    assert len(ablation("instructions", Variant("b"))) == 2  # the QA instructions: instruction and -brief
    assert [v.k for v in ablation("exemplars", Variant("b", method="cot"), task="fever")] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "answer, gold, reference",
    [
        ("SUPPORTS", "SUPPORTS", 1),
        ("supports.", "SUPPORTS", 1),
        ("Not enough info", "NOT ENOUGH INFO", 1),
        ("SUPPORTED", "SUPPORTS", 0),
        ("True", "SUPPORTS", 0),
        ("Refuted", "REFUTES", 0),
        ("REFUTES because it was built in 1900", "REFUTES", 0),
        ("NOT ENOUGH INFORMATION", "NOT ENOUGH INFO", 0),
        ("NEI", "NOT ENOUGH INFO", 0),
        ("supports, refutes", "SUPPORTS", 0),
    ],
)
def test_a_claims_em_is_the_references_reward_and_the_lenient_reading_has_its_own_column(answer, gold, reference):
    from rawreact.environments.reference import ReferenceEnv
    from rawreact.runs.run import Result
    from rawreact.tasks.collection import Question

    env = ReferenceEnv({}, gold=gold)
    observation, _ = env.step(f"finish[{answer}]")
    assert observation == f"Episode finished, reward = {reference}\n"
    model = ScriptedModel([f" It is so.\nAction 1: Finish[{answer}]"])
    question = Question("c1", "Orlo is a village.", gold, task="fever")
    outcome = solve(question.question, PassageEnv({"Orlo": "Orlo is a village."}), model, load_prompt(task="fever"),
                    header="Claim")  # fmt: skip
    record = Result(question, outcome).to_dict()
    assert record["em"] == record["f1"] == reference
    assert record["lenient_em"] == float(read_label(answer) == gold)
