"""HotpotQA runs end to end: run files, manifests, resume after SIGKILL and SIGINT, report and show."""

import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import rawreact
from rawreact import DataError, RunFile, read_run
from rawreact.runs.records import manifest_path

RAWREACT = [sys.executable, "-m", "rawreact"]


def _oracle(rows: list[dict], path, *, wrong_every: int = 0, seconds_per_call: float = 0.0) -> str:
    """A script by question that searches the gold titles and finishes with the gold answer.

    With `wrong_every` = n, every n-th question is answered wrongly, so scores vary by question.
    """
    scripts = {}
    for n, row in enumerate(rows, 1):
        titles = list(dict.fromkeys(title for title, _ in row["supporting_facts"]))
        steps = [f" I need {t}.\nAction {i}: Search[{t}]" for i, t in enumerate(titles, 1)]
        answer = "nobody knows" if wrong_every and n % wrong_every == 0 else row["answer"]
        steps.append(f" So the answer is {answer}.\nAction {len(steps) + 1}: Finish[{answer}]")
        scripts[row["question"]] = steps
    path.write_text(json.dumps({"questions": scripts, "seconds_per_call": seconds_per_call}))
    return f"scripted:{path}"


def _data(rows, tmp_path, n: int):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(rows[:n]))
    return path


def _run(*args, **options) -> subprocess.CompletedProcess:
    return subprocess.run([*RAWREACT, "run", *map(str, args)], capture_output=True, text=True, **options)


def _scores(out) -> dict[str, tuple]:
    return {r["id"]: (r["prediction"], r["em"], r["f1"], r["ended"], r["steps"]) for r in read_run(out)[1]}


def test_an_oracle_scores_one_and_everything_lands_in_the_run_file(rows, tmp_path):
    data, out = _data(rows, tmp_path, 12), tmp_path / "run.jsonl"
    done = _run(data, "--model", _oracle(rows, tmp_path / "o.json"), "--out", out, "-q", "--n-first", "5")
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert len(records) == 12 and {r["em"] for r in records} == {1.0} and {r["f1"] for r in records} == {1.0}
    assert all(r["ended"] == "finish" and r["invalid_actions"] == 0 for r in records)
    assert all(r["search_hits"] == r["searches"] >= 1 for r in records)
    first = records[0]
    assert first["question"] == rows[0]["question"] and first["answer"] == first["prediction"] == rows[0]["answer"]
    title, sentences = next(pair for pair in rows[0]["context"] if pair[0] == rows[0]["supporting_facts"][0][0])
    assert first["trajectory"]["steps"][0]["observation"] == "".join(sentences)
    config = manifest["config"]
    assert config["n_first"] == 5 and config["max_steps"] == 7 and config["grammar"] is None
    assert len(config["data_sha256"]) == 64 and len(config["prompt_sha256"]) == 64
    assert manifest["data"] == str(data) and manifest["layout"] == "hotpotqa"
    assert manifest["rawreact"] == rawreact.__version__
    assert manifest["limit"] is None and manifest["model_file"] is None and manifest["versions"]["llama-cpp-python"]
    assert "12 questions: EM 1.000, F1 1.000, finished 12/12, 0.00 invalid actions" in done.stdout


def test_shuffle_follows_the_reference_protocol(rows, tmp_path):
    import random

    data, out = _data(rows, tmp_path, 30), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    assert (
        _run(
            data, "--model", model, "--out", out, "-q", "--shuffle", "--shuffle-seed", "233", "--limit", "5"
        ).returncode
        == 0
    )
    order = list(range(30))
    random.Random(233).shuffle(order)  # the reference notebook's shuffle of the dev set's indices
    expected = [rows[i]["question"] for i in order[:5]]
    assert [r["question"] for r in read_run(out)[1]] == expected


@pytest.fixture(scope="module")
def uncut(rows, tmp_path_factory):
    """24 questions, a slowed oracle that gets every third wrong, and its run left to finish: (data, model, run)."""
    folder = tmp_path_factory.mktemp("uncut")
    data = _data(rows, folder, 24)
    model = _oracle(rows, folder / "o.json", wrong_every=3, seconds_per_call=0.04)
    assert _run(data, "--model", model, "--out", folder / "whole.jsonl", "-q").returncode == 0
    return data, model, folder / "whole.jsonl"


@pytest.mark.parametrize(
    "how, workers",
    [(signal.SIGKILL, 1), (signal.SIGINT, 1), (signal.SIGTERM, 1), (signal.SIGKILL, 3), (signal.SIGINT, 3)],
)
def test_a_killed_run_resumes_to_the_same_scores_with_every_id_once(uncut, tmp_path, how, workers):
    data, model, whole = uncut
    cut = tmp_path / "cut.jsonl"
    run = subprocess.Popen(
        [*RAWREACT, "run", str(data), "--model", model, "--out", str(cut), "-q", "--workers", str(workers)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not cut.exists() or cut.read_text().count("\n") < 5:
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.02)
    run.send_signal(how)
    _, stderr = run.communicate(timeout=60)
    kept = read_run(cut)[1]
    assert 5 <= len(kept) < 24
    if how != signal.SIGKILL:  # stops after the question under way, with a message and exit 128 + signal
        assert run.returncode == 128 + how and "--resume finishes" in stderr and "Traceback" not in stderr
    else:
        assert run.returncode == -signal.SIGKILL
    resumed = _run(data, "--model", model, "--out", cut, "-q", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"; {len(kept)} already in {cut}" in resumed.stdout
    ids = [json.loads(line)["id"] for line in cut.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 24
    assert _scores(cut) == _scores(whole) and len({s[1] for s in _scores(whole).values()}) == 2
    assert "24 questions: EM 0.667" in resumed.stdout  # the summary covers the whole run


def test_resume_redoes_a_half_written_last_line_and_refuses_a_corrupt_one(rows, tmp_path):
    data, out = _data(rows, tmp_path, 4), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    assert _run(data, "--model", model, "--out", out, "-q", "--limit", "2").returncode == 0
    with out.open("a") as sink:
        sink.write('{"id": "h1234", "prediction": "half wri')  # what a crash mid-write leaves
    assert len(read_run(out)[1]) == 2  # readers skip the unfinished line
    assert _run(data, "--model", model, "--out", out, "-q", "--resume").returncode == 0
    assert [json.loads(line)["em"] for line in out.read_text().splitlines()] == [1.0] * 4
    lines = out.read_text().splitlines()
    out.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    broken = _run(data, "--model", model, "--out", out, "-q", "--resume")
    assert broken.returncode == 2
    assert (
        broken.stderr == f"rawreact: error: {out} line 2 is not a result line; was the file edited? remove that line\n"
    )


def test_a_run_file_is_never_overwritten_or_mixed_with_another_run(rows, tmp_path):
    data, out = _data(rows, tmp_path, 3), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    assert _run(data, "--model", model, "--out", out, "-q").returncode == 0
    before = out.read_text()
    again = _run(data, "--model", model, "--out", out, "-q")
    assert again.returncode == 2 and "already holds results; pass --resume to finish that run" in again.stderr
    mixed = _run(data, "--model", model, "--out", out, "-q", "--resume", "--max-steps", "5")
    assert mixed.returncode == 2
    assert "--resume would mix two different runs" in mixed.stderr and "max_steps was 7, now 5" in mixed.stderr
    assert out.read_text() == before
    manifest_path(out).unlink()
    orphan = _run(data, "--model", model, "--out", out, "-q", "--resume")
    assert orphan.returncode == 2 and "has no manifest run.jsonl.manifest.json" in orphan.stderr
    assert _run("--resume", "-q").stderr.startswith("rawreact: error: --resume continues the run file given with --out")


def test_resume_of_a_missing_file_starts_the_run_and_a_larger_limit_extends_it(rows, tmp_path):
    data, out = _data(rows, tmp_path, 6), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    assert _run(data, "--model", model, "--out", out, "-q", "--resume", "--limit", "2").returncode == 0
    extended = _run(data, "--model", model, "--out", out, "-q", "--resume", "--limit", "5")
    assert extended.returncode == 0 and "5 questions from dev, " in extended.stdout
    assert [r["question"] for r in read_run(out)[1]] == [row["question"] for row in rows[:5]]


def test_report_puts_runs_side_by_side_and_show_prints_one_transcript(rows, tmp_path):
    data = _data(rows, tmp_path, 6)
    right, mixed = tmp_path / "right.jsonl", tmp_path / "mixed.jsonl"
    _run(data, "--model", _oracle(rows, tmp_path / "a.json"), "--out", right, "-q")
    _run(data, "--model", _oracle(rows, tmp_path / "b.json", wrong_every=2), "--out", mixed, "-q", "--grammar", "step")
    text = subprocess.run([*RAWREACT, "report", right, mixed], capture_output=True, text=True).stdout.splitlines()
    assert text[0].split() == [
        "run",
        "method",
        "model",
        "grammar",
        "n",
        "EM",
        "F1",
        "finished",
        "invalid/q",
        "fallback/q",
        "repeats/q",
        "supported",
        "EM",
        "supp",
        "EM",
        "unsupp",
        "search",
        "hits",
        "steps/q",
        "calls/q",
        "gen",
        "tok/q",
        "eval",
        "tok/q",
        "s/q",
        "q/min",  # issue 29: throughput beside each question's own time
        "ended",
    ]
    assert text[1].split()[:7] == [
        "right.jsonl",
        "react",
        f"scripted:{tmp_path / 'a.json'}",
        "off",
        "6",
        "1.000",
        "1.000",
    ]
    assert text[2].split()[3:7] == ["step", "6", "0.500", "0.500"]
    assert text[1].split()[-2:] == ["finish", "6"]
    assert text[2].split()[9:11] == ["0.00", "0.00"]  # no fallback calls, no repeats
    markdown = subprocess.run([*RAWREACT, "report", right, "--format", "markdown"], capture_output=True, text=True)
    assert markdown.stdout.splitlines()[1] == "|" + "|".join([" --- "] * 22) + "|"  # 21 columns and q/min
    assert markdown.stdout.splitlines()[2].endswith("| finish 6 |")
    csv = subprocess.run([*RAWREACT, "report", right, mixed, "--format", "csv"], capture_output=True, text=True)
    assert csv.stdout.splitlines()[2].startswith("mixed.jsonl,")
    first = read_run(right)[1][0]["id"]
    shown = subprocess.run([*RAWREACT, "show", right, "--id", first], capture_output=True, text=True).stdout
    gold = rows[0]["answer"]
    assert shown.startswith(
        f"id {first}: EM 1, F1 1.00; prediction {gold!r}, gold {gold!r}; ended by finish after 3 steps"
    )
    assert f"\n\nQuestion: {rows[0]['question']}\nThought 1: I need {rows[0]['supporting_facts'][0][0]}.\n" in shown
    assert "Answer a question" not in shown
    with_prompt = subprocess.run([*RAWREACT, "show", right, "--id", first, "--prompt"], capture_output=True, text=True)
    assert "\n\nAnswer a question by alternating Thought, Action and Observation steps." in with_prompt.stdout
    missing = subprocess.run([*RAWREACT, "show", right, "--id", "nope"], capture_output=True, text=True)
    assert missing.returncode == 2 and f"has no question with id 'nope'; its ids: {first}, " in missing.stderr


def test_the_embedded_model_runs_hotpotqa_questions_from_the_cli(hotpotqa, tmp_path):
    data, out = _data(hotpotqa, tmp_path, 2), tmp_path / "run.jsonl"
    done = _run(data, "--out", out, "-q", "--max-steps", "3", "--grammar", "step", timeout=600)
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert [r["question"] for r in records] == [row["question"] for row in hotpotqa[:2]]
    assert manifest["config"]["model"] == "gemma3-270m" and manifest["config"]["grammar"] == "step"
    assert manifest["model_file"].endswith(".gguf")
    for record in records:
        assert record["invalid_actions"] == 0 and 1 <= record["steps"] <= 3
        assert record["tokens"]["evaluated"] < record["tokens"]["prompt"] / 2  # the KV cache is reused
        assert record["em"] in (0.0, 1.0) and 0.0 <= record["f1"] <= 1.0 and record["seconds"] > 0


def test_runs_from_python_write_the_same_lines(rows, tmp_path):
    from rawreact import ScriptedModel, load_collection, load_prompt, run_questions

    data = load_collection(_data(rows, tmp_path, 2))
    model = ScriptedModel([f" t\nAction 1: Finish[{row['answer']}]" for row in rows[:2]])
    out = tmp_path / "py.jsonl"
    sink = RunFile(out, {"model": "scripted"})
    results = list(run_questions(data.questions, data.env, model, load_prompt(), out=sink))
    assert [r.em for r in results] == [1.0, 1.0] and [r["id"] for r in read_run(out)[1]] == [
        q.id for q in data.questions
    ]
    with pytest.raises(DataError, match="already holds results"):
        RunFile(out)


def _parallel_setup(rows, tmp_path, n=12, **script):
    from rawreact import ScriptedModel, load_collection

    data = load_collection(_data(rows, tmp_path, n))
    model = ScriptedModel.from_file(_oracle(rows, tmp_path / "o.json", **script).removeprefix("scripted:"))
    return data, model


def _same(records: list[dict]) -> dict[str, dict]:
    """Records by id, without what depends on timing."""
    strip = lambda r: {k: v for k, v in r.items() if k not in ("seconds", "started", "finished", "trajectory")}  # noqa: E731
    steps = lambda r: [(s["thought"], s["action_text"], s["observation"]) for s in r["trajectory"]["steps"]]  # noqa: E731
    return {r["id"]: {**strip(r), "steps": steps(r)} for r in records}


def test_workers_write_the_records_a_sequential_run_writes(rows, tmp_path):
    from rawreact import load_prompt, run_questions

    data, model = _parallel_setup(rows, tmp_path, wrong_every=4, seconds_per_call=0.01)
    runs = {}
    for workers in (1, 4):
        out = tmp_path / f"w{workers}.jsonl"
        order = [
            r.question.id
            for r in run_questions(data.questions, data.env, model, load_prompt(), out=out, workers=workers)
        ]
        runs[workers] = read_run(out)[1]
        assert sorted(order) == sorted(q.id for q in data.questions)
    assert [r["id"] for r in runs[1]] == [q.id for q in data.questions]
    assert _same(runs[4]) == _same(runs[1]) and {r["em"] for r in runs[1]} == {0.0, 1.0}


def test_with_workers_a_stop_or_an_error_keeps_every_finished_question(rows, tmp_path):
    from rawreact import ModelError, load_prompt, run_questions

    data, model = _parallel_setup(rows, tmp_path, seconds_per_call=0.02)
    seen = []
    out = tmp_path / "stopped.jsonl"
    results = run_questions(
        data.questions, data.env, model, load_prompt(), out=out, workers=3, stop=lambda: len(seen) >= 2
    )
    for result in results:
        seen.append(result.question.id)
    kept = read_run(out)[1]
    assert [r["id"] for r in kept] == seen and 2 <= len(kept) < 12
    asked = {call["prompt"].rsplit("\nQuestion: ", 1)[1].split("\n", 1)[0] for call in model.history}
    assert asked == {r["question"] for r in kept}  # every question started was finished and written
    broken = (
        data.questions[:5] + (replace(data.questions[5], question="a question with no script"),) + data.questions[6:]
    )
    out = tmp_path / "broken.jsonl"
    with pytest.raises(ModelError, match="no script for the question 'a question with no script'"):
        for _ in run_questions(broken, data.env, model, load_prompt(), out=out, workers=3):
            pass
    kept = {r["id"] for r in read_run(out)[1]}
    assert 5 <= len(kept) <= 8 and data.questions[5].id not in kept


def test_a_model_loaded_for_one_worker_says_how_to_load_it_for_more(gemma, demo):
    from rawreact import ModelError, load_prompt, run_questions

    with pytest.raises(ModelError, match=r"load it with load_model\(\.\.\., workers=2\)"):
        run_questions(demo.questions, demo.env, gemma, load_prompt(), workers=2)


@pytest.mark.parametrize("loop", ["tolerant", "reference"])
def test_the_reproduction_script_runs_the_reference_protocol(rows, tmp_path, loop):
    import random

    data, out = _data(rows, tmp_path, 100), tmp_path / "repro.jsonl"
    model = _oracle(rows, tmp_path / "o.json")
    script = Path(__file__).resolve().parent.parent / "scripts" / "reproduce_hotpotqa.py"
    chosen = [] if loop == "tolerant" else ["--loop", loop]  # tolerant is the default
    done = subprocess.run(
        [sys.executable, script, data, "--model", model, "--out", out, "--limit", "12", *chosen],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    config = manifest["config"]
    assert (config["shuffle"], config["shuffle_seed"], config["max_steps"], config["n_first"]) == (True, 233, 7, 5)
    assert config["loop"] == loop and {r["loop"] for r in records} == {loop}
    order = list(range(100))
    random.Random(233).shuffle(order)
    assert [r["question"] for r in records] == [rows[i]["question"] for i in order[:12]]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"reproduce_hotpotqa: the reference protocol in the {loop} loop")
    assert lines[-1] == f"reproduce_hotpotqa: ran the {loop} loop"
    header, row = lines[-3].split(), lines[-2].split()  # the report table closes the output
    assert header[:3] == ["run", "method", "loop" if loop == "reference" else "model"]
    assert row[header.index("n") : header.index("n") + 3] == ["12", "1.000", "1.000"]


def test_the_progress_bar_shows_running_scores_on_a_terminal(rows, tmp_path):
    import fcntl
    import os
    import pty
    import struct
    import termios

    data = _data(rows, tmp_path, 3)
    model = _oracle(rows, tmp_path / "o.json", wrong_every=2)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    run = subprocess.Popen(
        [*RAWREACT, "run", str(data), "--model", model, "-q"], stdout=subprocess.PIPE, stderr=follower, text=True
    )
    stdout, _ = run.communicate(timeout=60)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    bar = shown.decode("utf-8", "replace")
    assert run.returncode == 0 and "3/3" in bar and "EM 0.667 F1 0.667" in bar
    assert "result [3/3]" in stdout and "\r" not in stdout  # the bar stays on the terminal, off stdout


def test_report_of_a_run_stopped_midway_says_how_many_of_how_many_in_text_and_json(rows, tmp_path):
    """Issue 91 item 8: a run stopped at 5 of 10 with a half last line read as a finished run of 5."""
    data, out = _data(rows, tmp_path, 10), tmp_path / "run.jsonl"
    assert _run(data, "--model", _oracle(rows, tmp_path / "o.json"), "--out", out, "-q").returncode == 0
    lines = out.read_bytes().split(b"\n")
    out.write_bytes(b"\n".join(lines[:5]) + b"\n" + lines[5][: len(lines[5]) // 2])  # 5 whole, the 6th cut
    said = subprocess.run([*RAWREACT, "report", out], capture_output=True, text=True)
    assert said.returncode == 0 and said.stdout.splitlines()[1].split()[4] == "5"
    assert (
        "rawreact: run.jsonl stopped after 5 of 10 questions, and its last line was cut short (left out): the figures "
        "are of those only; `rawreact run` with --resume and the same --out finishes it" in said.stderr
    )
    (run,) = json.loads(subprocess.run([*RAWREACT, "report", out, "--format", "json"], capture_output=True,
                                       text=True).stdout)["runs"]  # fmt: skip
    assert run["progress"] == {"finished": False, "records": 5, "planned": 10, "cut_line": True}
    whole = tmp_path / "whole.jsonl"
    assert _run(data, "--model", _oracle(rows, tmp_path / "o.json"), "--out", whole, "-q").returncode == 0
    (run,) = json.loads(subprocess.run([*RAWREACT, "report", whole, "--format", "json"], capture_output=True,
                                       text=True).stdout)["runs"]  # fmt: skip
    assert run["progress"] == {"finished": True, "records": 10, "planned": 10, "cut_line": False}
    assert "stopped" not in subprocess.run([*RAWREACT, "report", whole], capture_output=True, text=True).stderr
