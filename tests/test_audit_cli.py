"""The command line as a new user meets it, and input that tries to break it (audit items 1-7, 17, 23-26)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_runs import _data, _oracle

from rawreact import read_run
from rawreact.cli.app import main
from rawreact.runs.records import manifest_path

RAWREACT = [sys.executable, "-m", "rawreact"]
ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).with_name("rawreact")


def _run(*args, timeout: float = 300, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RAWREACT, "run", *map(str, args)], capture_output=True, text=True, timeout=timeout, **options
    )


# Item 1: a fresh machine.


def test_tests_of_real_hotpotqa_skip_without_a_file_and_fail_under_ci(tmp_path):
    test = tmp_path / "test_needs_real.py"
    test.write_text("def test_real(hotpotqa):\n    assert hotpotqa\n")
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    for helper in ("hotpot_rows.py", "pinning.py"):  # the modules conftest.py imports
        (tmp_path / helper).write_text((ROOT / "tests" / helper).read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "RAWREACT_HOTPOTQA")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)]
    alone = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert alone.returncode == 0 and "1 skipped" in alone.stdout
    under_ci = subprocess.run(command, cwd=tmp_path, env={**env, "CI": "true"}, capture_output=True, text=True)
    assert under_ci.returncode == 1 and "set it to a HotpotQA file in the official layout" in under_ci.stdout


def test_the_project_text_names_no_folder_outside_the_project():
    texts = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("src/rawreact/**/*.py")]
    texts += [*ROOT.glob("scripts/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("tests/*.py")]
    texts += [*ROOT.glob("envs/*.md"), *ROOT.glob("prompts/*.md")]
    here = Path(__file__).name
    found = [p.name for p in texts if p.name != here and "../shared" in p.read_text(encoding="utf-8")]
    found += [p.name for p in texts if p.name != here and '"shared" / "data"' in p.read_text(encoding="utf-8")]
    assert found == []


# Item 2: a bare `rawreact`.


def test_a_bare_rawreact_prints_the_help():
    done = subprocess.run(RAWREACT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: rawreact")
    assert "Run ReAct agents on completion models" in done.stdout and "traceback" not in done.stdout.lower()
    for command in ("run", "compare", "compare-runs", "report", "show"):
        assert f"    {command}" in done.stdout


# Item 3: the run header.


def test_the_run_header_says_off_and_counts_in_words(tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text('[" t\\nAction 1: Finish[Tam]"]')
    assert main(["run", "--model", f"scripted:{script}", "--limit", "1", "-k", "1", "-q"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "1 question from calvora" in first and "(1 exemplar)" in first and first.endswith("grammar off")
    assert "\n1 question: EM" in out


# Item 4: --grammar and the data path.


def test_grammar_never_swallows_the_data_path(rows, tmp_path):
    data, model = _data(rows, tmp_path, 2), _oracle(rows, tmp_path / "o.json")
    for args in (["--grammar", data], [data, "--grammar"], ["--grammar", "step", data]):
        out = tmp_path / f"run{len(list(tmp_path.glob('run*.jsonl')))}.jsonl"
        done = _run(*args, "--model", model, "--out", out, "-q")
        assert done.returncode == 0, done.stderr
        manifest, records = read_run(out)
        assert manifest["config"]["grammar"] == "step" and len(records) == 2
    bad = _run("--grammar", "stpe", "--model", model)
    assert bad.returncode == 2 and "--grammar takes off, step, action, titles or commands, not 'stpe'" in bad.stderr
    off = _run(data, "--grammar", "off", "--model", model, "--out", tmp_path / "off.jsonl", "-q")
    assert off.returncode == 0 and read_run(tmp_path / "off.jsonl")[0]["config"]["grammar"] is None


# Item 5: two seeds.


def test_the_sampling_seed_does_not_change_which_questions_are_asked(rows, tmp_path):
    import random

    data, model = _data(rows, tmp_path, 30), _oracle(rows, tmp_path / "o.json")
    picked = {}
    for seed in (0, 5):
        out = tmp_path / f"s{seed}.jsonl"
        args = (data, "--model", model, "--out", out, "-q", "--shuffle", "--shuffle-seed", 233, "--seed", seed)
        assert _run(*args, "--limit", 4).returncode == 0
        manifest, records = read_run(out)
        picked[seed] = [r["question"] for r in records]
        assert (manifest["config"]["seed"], manifest["config"]["shuffle_seed"]) == (seed, 233)
    order = list(range(30))
    random.Random(233).shuffle(order)
    assert picked[0] == picked[5] == [rows[i]["question"] for i in order[:4]]


# Item 6: show lists a run's questions.


def test_show_lists_the_questions_and_opens_the_first_wrong_one(rows, tmp_path):
    data, out = _data(rows, tmp_path, 4), tmp_path / "run.jsonl"
    assert _run(data, "--model", _oracle(rows, tmp_path / "o.json", wrong_every=2), "--out", out, "-q").returncode == 0
    listed = subprocess.run([*RAWREACT, "show", out], capture_output=True, text=True)
    lines = listed.stdout.splitlines()
    head = ["id", "EM", "F1", "ended", "steps", "question", "prediction", "gold"]  # issue 29: which question is which
    assert listed.returncode == 0 and lines[0].split() == head
    assert [line.split()[:2] for line in lines[1:]] == [
        ["case000", "1"],
        ["case001", "0"],
        ["case002", "1"],
        ["case003", "0"],
    ]
    wrong = subprocess.run([*RAWREACT, "show", out, "--first-wrong"], capture_output=True, text=True)
    assert wrong.returncode == 0 and wrong.stdout.startswith("id case001: EM 0,")
    assert f"Question: {rows[1]['question']}\n" in wrong.stdout


# Item 7: compare finished run files from the command line.


def test_compare_runs_puts_finished_run_files_side_by_side(rows, tmp_path):
    data = _data(rows, tmp_path, 8)
    right, wrong = tmp_path / "right.jsonl", tmp_path / "wrong.jsonl"
    assert _run(data, "--model", _oracle(rows, tmp_path / "a.json"), "--out", right, "-q").returncode == 0
    assert (
        _run(data, "--model", _oracle(rows, tmp_path / "b.json", wrong_every=1), "--out", wrong, "-q").returncode == 0
    )
    done = subprocess.run(
        [*RAWREACT, "compare-runs", right, f"bad={wrong}", "--format", "csv", "--resamples", "500"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows_out = [line.split(",") for line in done.stdout.splitlines()]
    assert rows_out[1][:4] == ["right", "react", "8", "1.000000"] and rows_out[2][:4] == [
        "bad",
        "react",
        "8",
        "0.000000",
    ]
    assert rows_out[2][rows_out[0].index("dem_mean")] == "-1.000000"
    assert "8 questions; 95% intervals: Wilson's for a share (EM), the bootstrap for F1, a paired" in done.stderr
    assert "only 8 questions: the intervals are wide" in done.stderr
    assert "(500 resamples, seed 0); Δ is paired against right" in done.stderr


# Item 17: a context window too small for the prompt, caught before the run.


def test_a_context_too_small_for_the_prompt_is_refused_before_the_run(tmp_path):
    out = tmp_path / "run.jsonl"
    small = _run("--n-ctx", "256", "--out", out, timeout=300)
    assert small.returncode == 2 and "Traceback" not in small.stderr
    assert "context window is 256; raise --n-ctx to at least" in small.stderr and not out.exists()
    long = _run("--max-tokens", "9000", "--limit", "1", timeout=300)
    assert long.returncode == 2 and "--max-tokens 9000 needs" in long.stderr


# Item 23: a grammar llama.cpp's parser would crash on.


def test_a_deeply_nested_grammar_is_an_error_not_a_crash(tmp_path):
    grammar = tmp_path / "deep.gbnf"
    grammar.write_text("root ::= thought\nthought ::= " + "(" * 20_000 + '"x"' + ")" * 20_000 + "\n")
    done = _run("--grammar-file", grammar, "--model", "scripted:none.json", timeout=120)
    assert done.returncode == 2, done.stderr
    assert "line 2: groups nested more than 64 deep; flatten them into rules" in done.stderr


# Item 24: one validation for `run` and `compare` settings.


@pytest.mark.parametrize(
    "spec, message",
    [
        ("n_first=0", "n_first=0 (--n-first) must be at least 1"),
        ("max_steps=0", "max_steps=0 (--max-steps) must be at least 1"),
        ("max_tokens=-5", "max_tokens=-5 (--max-tokens) must be at least 1"),
        ("temperature=inf", "temperature=inf must be a finite number"),
    ],
)
def test_compare_specs_are_checked_like_run_options_before_anything_is_written(spec, message, tmp_path):
    out = tmp_path / "cmp"
    done = subprocess.run(
        [*RAWREACT, "compare", "--out", out, "--variant", "a=", "--variant", f"b={spec}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and f"variant b: {message}" in done.stderr and not out.exists()


# Item 26: the smaller ones.


def test_files_with_a_byte_order_mark_load(tmp_path, rows):
    data = tmp_path / "dev.json"
    data.write_text("\ufeff" + json.dumps(rows[:2]), encoding="utf-8")
    prompt = tmp_path / "ex.txt"
    prompt.write_text("\ufeffQuestion: q?\nThought 1: t\nAction 1: Finish[a]\nObservation 1: Episode finished.\n")
    done = _run(data, "--prompt", prompt, "--model", _oracle(rows, tmp_path / "o.json"), "-q")
    assert done.returncode == 0, done.stderr
    assert "2 questions from dev, " in done.stdout and "(1 exemplar)" in done.stdout


@pytest.mark.parametrize("module", ["rawreact.cli.app", "rawreact.reports.summary", "rawreact.runs.run", "numpy"])
def test_ctrl_c_while_the_command_loads_shows_no_traceback(module):
    """Ctrl-C lands while the command imports `module` (simulated exactly there): one line, exit 130."""
    code = f"""
import builtins, sys
real = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name == {module!r}:
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
from rawreact.console import main
sys.exit(main(["report", "missing.jsonl"]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 130 and done.stderr == "\nrawreact: interrupted\n"


@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_just_after_the_command_returned_ends_it_quietly(name, code):
    """Seen in CI once: a second Ctrl-C a moment after a run's last line, in the console script's frame before
    it let its handler go, ended the process with a traceback and -2. The command here returns 0 with the
    signal pending, so that the handler raises in the console script's frame."""
    probe = f"""
import os, signal
import rawreact.console as console
from rawreact.cli import terminal
def command(argv):
    terminal.take_interrupts()
    os.kill(os.getpid(), signal.{name})
    return 0
console.main = command
console.run([])
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (code, "")


def test_the_console_script_loads_nothing_heavy_before_it_can_handle_ctrl_c():
    code = "import sys, rawreact.console; print(sorted(m for m in sys.modules if m.split('.')[0] in SET))"
    code = code.replace("SET", "{'numpy', 'tqdm', 'llama_cpp', 'ollama', 'rawreact'}")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "['rawreact', 'rawreact.console']"


def test_sigterm_during_the_last_question_is_a_complete_run(rows, tmp_path):
    data, out = _data(rows, tmp_path, 1), tmp_path / "run.jsonl"
    model = _oracle(rows, tmp_path / "o.json", seconds_per_call=0.4)
    run = subprocess.Popen(
        [*RAWREACT, "run", str(data), "--model", model, "--out", str(out), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not manifest_path(out).exists():  # written as the run starts its first question
        time.sleep(0.05)
    time.sleep(0.3)
    run.send_signal(signal.SIGTERM)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 0 and "stopped early" not in stderr and "1 question: EM 1.000" in stdout
    assert len(read_run(out)[1]) == 1


def test_out_naming_a_folder_says_so(tmp_path):
    done = _run("--out", tmp_path, "--model", "scripted:none.json")
    assert done.returncode == 2 and f"{tmp_path} is a folder; give --out a file name" in done.stderr


def test_escape_sequences_from_passages_never_reach_the_terminal(tmp_path):
    passages = tmp_path / "p.json"
    passages.write_text(json.dumps({"passages": {"Orlo": "Orlo \x1b]0;pwned\x07is red.\x1b[2J It is small."}}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" t\nAction 1: Search[Orlo]", " t\nAction 2: Finish[red \x1b[31m]"]))
    out = tmp_path / "run.jsonl"
    done = _run(
        "--question", "What colour is Orlo?", "--passages", passages, "--model", f"scripted:{script}", "--out", out
    )
    assert done.returncode == 0 and "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "Orlo \\x1b]0;pwned\\x07is red." in done.stdout
    shown = subprocess.run([*RAWREACT, "show", out, "--id", "question-1"], capture_output=True, text=True)
    assert "\x1b" not in shown.stdout and "\\x1b[31m" in shown.stdout
    assert "\x1b" in read_run(out)[1][0]["prediction"]  # the run file keeps the text as it was


def test_a_question_over_a_hotpotqa_file_searches_all_its_paragraphs(rows, tmp_path):
    data = _data(rows, tmp_path, 3)
    title = rows[2]["context"][0][0]
    script = tmp_path / "s.json"
    script.write_text(json.dumps([f" t\nAction 1: Search[{title}]", " t\nAction 2: Finish[x]"]))
    out = tmp_path / "run.jsonl"
    done = _run("--question", "Which?", "--passages", data, "--model", f"scripted:{script}", "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    step = read_run(out)[1][0]["trajectory"]["steps"][0]
    assert step["observation"].startswith(f"The {title} is a landmark")


def test_workers_on_a_missing_embedded_model_say_the_file_is_missing(tmp_path):
    done = _run("--workers", "2", "--model", str(tmp_path / "missing.gguf"))
    assert done.returncode == 2 and "missing.gguf does not exist" in done.stderr and "Traceback" not in done.stderr
