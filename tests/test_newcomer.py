"""What a newcomer's first afternoon met (issue 43, items 5 to 11): each item's test is here."""

import json
import re

import pytest

from rawreact import load_collection
from rawreact.cli.app import main
from rawreact.core.stats import interval, score_interval, wilson


def test_a_share_on_a_few_questions_gets_an_honest_interval():
    """Item 6: 0 of 3 right is [0.000, 0.561] (Wilson's), not the bootstrap's [0.000, 0.000]."""
    assert str(wilson(0, 3)) == "0.000 [0.000, 0.561]"
    assert str(wilson(3, 3)) == "1.000 [0.439, 1.000]"
    assert str(interval([0, 0, 0], share=True)) == "0.000 [0.000, 0.561]"
    assert str(interval([0.0, 0.0, 0.0])) == "0.000 [0.000, 0.000]"  # not a share (F1): the bootstrap, as before
    with pytest.raises(ValueError, match="each 0 or 1"):
        interval([0.5, 1.0], share=True)
    # every report picks the interval by the metric: a share (EM, a game's success) gets Wilson's
    assert str(score_interval("em", [0, 0, 0])) == str(score_interval("success", [0, 0, 0])) == "0.000 [0.000, 0.561]"
    assert str(score_interval("f1", [0.0, 0.0, 0.0])) == "0.000 [0.000, 0.000]"
    half = wilson(5, 10)  # symmetric about one half: [0.2366, 0.7634]
    assert (round(half.low, 4), round(half.high, 4)) == (0.2366, 0.7634)
    z2 = 1.959963984540054**2  # with no success the upper bound is z^2 / (n + z^2), in closed form
    assert wilson(0, 12).high == pytest.approx(z2 / (12 + z2))


def test_a_small_comparison_says_its_intervals_are_wide(tmp_path, capsys):
    """Item 6: compare-runs on 3 questions shows Wilson's EM interval and says 3 questions mean little."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" I know.\nAction 1: Finish[nobody]\n"] * 6))
    for name in ("a", "b"):
        args = ["run", "--model", f"scripted:{script}", "--limit", "3", "--out", str(tmp_path / f"{name}.jsonl"), "-q"]
        assert main(args) == 0
    capsys.readouterr()
    assert main(["compare-runs", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--format", "markdown"]) == 0
    printed = capsys.readouterr()
    assert "| a | react | tolerant | 3 | 0.000 [0.000, 0.561] | base |" in printed.out or (
        "| a | react | 3 | 0.000 [0.000, 0.561] | base |" in printed.out
    )
    assert "only 3 questions: the intervals are wide" in printed.err


def test_a_typo_is_one_line_that_says_where_the_options_are(capsys):
    """Item 10: no screen of usage before the one useful line."""
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--limt", "3"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1
    assert err == (
        "rawreact run: error: unrecognized arguments: --limt; did you mean --limit? "
        "(rawreact run --help lists the options)\n"
    )


def test_run_s_usage_starts_with_the_options_most_runs_use():
    """Item 10: the Reflexion options come last in `rawreact run`'s usage, as in its help."""
    from rawreact.cli.parser import parser

    usage = parser()._subparsers._group_actions[0].choices["run"].format_usage()
    assert usage.index("--model") < usage.index("--method") < usage.index("--trials")


@pytest.mark.parametrize("name", ["one_line.json", "collection.json"])
def test_a_question_file_given_as_a_run_is_refused_in_one_line(tmp_path, capsys, name):
    """Item 10: `report dev.json` and `show dev.json` used to exit 0 with an empty row."""
    from rawreact.core.resources import resource

    data = tmp_path / name
    text = resource("envs", "demo.json").read_text()
    data.write_text(json.dumps(json.loads(text)) if name == "one_line.json" else text)  # HotpotQA's is one line
    for command in (["report", str(data)], ["show", str(data)], ["compare-runs", f"a={data}", f"b={data}"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"{data} is not a run file: it has no manifest beside it" in err and "a question file goes to" in err


def test_compare_takes_run_s_flags_as_the_base_of_every_variant(tmp_path, capsys):
    """Item 5: `--max-steps 3` and `--model X` used to be `unrecognized arguments` to compare."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" Done.\nAction 1: Finish[x]\n"] * 8))
    out = tmp_path / "cmp"
    args = ["compare", "--model", f"scripted:{script}", "--max-steps", "3", "-k", "1", "--limit", "2"]
    assert main([*args, "--variant", "a=", "--variant", "b=max_steps=5", "--out", str(out), "-q"]) == 0
    configs = {n: json.loads((out / f"{n}.jsonl.manifest.json").read_text())["config"] for n in ("a", "b")}
    assert configs["a"]["model"] == configs["b"]["model"] == f"scripted:{script}"
    assert (configs["a"]["max_steps"], configs["b"]["max_steps"], configs["a"]["exemplars"]) == (3, 5, 1)
    again = tmp_path / "again"
    assert main([*args, "--base", "max_steps=4", "--variant", "a=", "--variant", "b=", "--out", str(again), "-q"]) == 0
    assert json.loads((again / "a.jsonl.manifest.json").read_text())["config"]["max_steps"] == 4  # --base wins
    capsys.readouterr()


def test_reflexion_s_live_output_numbers_its_trials_and_shows_each_reflection(tmp_path, capsys):
    """Item 9: trial 2 used to print under the same `=== ID` header as trial 1, with no reflection."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" I guess.\nAction 1: Finish[Oslo]\n", " I guessed without searching.",
                                  " Now I know.\nAction 1: Finish[Petra Lind]\n"]))  # fmt: skip
    args = ["run", "--model", f"scripted:{script}", "--method", "react-reflexion", "--trials", "2"]
    assert main([*args, "--question", "Who founded the observatory?", "--answer", "Petra Lind"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(("===", "trial ", "reflection "))]
    assert lines == [
        "=== question-1 (trial 1)",
        "trial 1 of question-1: failed (em), answer 'Oslo', ended by finish",
        "reflection on trial 1 of question-1: I guessed without searching.",
        "=== question-1 (trial 2)",
        "trial 2 of question-1: passed (em), answer 'Petra Lind', ended by finish",
    ]


@pytest.mark.parametrize("width", [1400, 1000])
def test_the_page_fits_its_window_and_marks_the_line_that_differs(tmp_path, width):
    """Item 8: at 1,400 px the Inputs table and the second Comparison table were cut at the right, the scatter's
    title was clipped, and the `first difference` badge sat on an action line both runs shared."""
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from browser import Browser, find_chromium

    from rawreact import load_collection
    from rawreact.reports.html import write_page

    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium to check the HTML report in; install Debian's chromium package")
        pytest.skip("no Chromium")
    deep = tmp_path / ("a-folder-with-a-long-name-" * 3)
    deep.mkdir()
    runs = {}
    pairs = (("first-run-with-a-long-name", "I search Orlo."), ("second-run-with-a-long-name", "Orlo is the place."))
    for name, thought in pairs:
        script = deep / f"{name}.json"
        script.write_text(json.dumps([f" {thought}\nAction 1: Search[Orlo]\n", " Done.\nAction 2: Finish[October]\n"]))
        runs[name] = deep / f"{name}-run-with-a-long-name.jsonl"
        assert main(["run", "--model", f"scripted:{script}", "--limit", "1", "--out", str(runs[name]), "-q"]) == 0
    page = write_page(runs, tmp_path / "page.html", resamples=200)
    browser = Browser(binary, width=width, height=1600)
    try:
        browser.open(page)
        spilled = "[...document.querySelectorAll('.scroll')].filter(e => e.scrollWidth > e.clientWidth + 1)"
        assert browser.evaluate(f"{spilled}.map(e => e.firstElementChild.className || 'questions')") == []
        clipped = (
            "[...document.querySelectorAll('svg.chart')].flatMap(s => [...s.querySelectorAll('.heading')].filter("
            "t => t.getBBox().x + t.getBBox().width > s.viewBox.baseVal.width).map(t => t.textContent))"
        )
        assert browser.evaluate(clipped) == []
        left = (
            "[...document.querySelectorAll('svg.chart text')].filter(t => t.getBBox().x < -1).map(t => t.textContent)"
        )
        assert browser.evaluate(left) == []  # a long run name keeps its end in the label column, whole in its tooltip
        question = json.dumps(f"pair/{load_collection().questions[0].id}")
        browser.evaluate(f"document.getElementById({question}).click()")
        badges = (
            "[...document.querySelectorAll('.side .first-difference .badge.warn')].map(b => b.parentElement.className)"
        )
        assert browser.evaluate(badges) == ["thought", "thought"]  # the thoughts differ; the action is the same
    finally:
        browser.close()


def test_a_run_without_out_is_kept_and_says_where(tmp_path, monkeypatch, capsys):
    """Item 7: the demo's result used to vanish without --out, so report, show and --html needed a second run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAWREACT_RUNS")
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" I know.\nAction 1: Finish[October]\n"] * 4))
    for _ in range(2):
        assert main(["run", "--model", f"scripted:{script}", "--limit", "2", "-q"]) == 0
    err = capsys.readouterr().err
    kept = sorted((tmp_path / "runs").glob("*.jsonl"))
    data = load_collection().name
    named = re.compile(rf"{data}-react-s-\d{{8}}-\d{{6}}(-2)?\.jsonl")  # the data, method, model and time
    assert len(kept) == 2 and all(named.fullmatch(k.name) for k in kept), kept
    assert kept[1].name.endswith("-2.jsonl") or kept[0].name != kept[1].name
    assert f"the run is kept in runs/{kept[0].name} (--out chooses the file)" in err
    assert main(["show", str(kept[0])]) == 0 and len(capsys.readouterr().out.splitlines()) == 3  # header, 2 rows


def test_the_first_run_says_what_it_loads_and_what_the_first_question_took(tmp_path, capsys):
    """Item 4: the load and the first question are said, with their times."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" I know.\nAction 1: Finish[October]\n"] * 3))
    assert main(["run", "--model", f"scripted:{script}", "--limit", "3", "--out", str(tmp_path / "r.jsonl")]) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("rawreact: the first question took ")]
    first = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert len(said) == 1 and f"(1 call, {first['tokens']['completion']} tokens written)" in said[0]


def test_a_busy_machine_is_said_from_the_measured_load_not_a_guess():
    """Item 4: the warning's numbers are the ticks other processes used while the first question ran."""
    from rawreact.models import cores

    before, after = ((100, 1000), 40.0), ((100 + 300, 1000 + 400), 40.0 + 100)  # others: 200 of 400 ticks
    import os

    elsewhere = cores.busy_elsewhere(before, after)
    assert elsewhere == pytest.approx(0.5 * (os.cpu_count() or 1))
    line = cores.busy_line(1.4, threads=2, cores=2)
    assert line.startswith("other processes kept 1.4 of this machine's 2 cores busy during the first question")
    assert "--threads auto" in line
    assert cores.busy_line(0.2, threads=2, cores=2) is None  # an idle machine says nothing
    assert cores.busy_line(1.4, threads=1, cores=2) is None  # one thread waits on nobody
    assert cores.busy_elsewhere(None, after) == 0.0  # no /proc/stat: nothing measured, nothing said


def test_the_shell_completes_commands_options_and_their_choices(tmp_path):
    """Item 10: tab completion through argcomplete (the `completion` extra), reading the parser as it is."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    console = Path(sys.executable).with_name("rawreact")

    def complete(line: str) -> list[str]:
        out = tmp_path / "completions"
        env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line))}
        env["_ARGCOMPLETE_STDOUT_FILENAME"] = str(out)
        done = subprocess.run([str(console)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [word.strip() for word in out.read_text().split("\x0b")]

    assert complete("rawreact ru") == ["run"]
    assert complete("rawreact run --meth") == ["--method"]
    assert complete("rawreact run --method co") == ["cot", "cot-sc", "cot-sc-react", "cot-reflexion"]
    assert complete("rawreact games g --recipe") == ["--recipe"]
