"""A newcomer's fourth day (issue 93): figures that read right, code that reads as code, and no silent waits."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import kept  # noqa: E402  (a benchmark module, beside the scripts that use it)


def _ledger(tmp_path: Path) -> Path:
    """A ledger of questions scored by their answer (success null, as HotpotQA's) under two rows."""
    ledger = tmp_path / "hotpotqa.kept.jsonl"
    lines = [{"row": row, "id": f"q{n}", "success": None, "em": float(n < right), "f1": None, "model_calls": 2}
             for row, right in (("reflexion", 3), ("lats", 1)) for n in range(4)]  # fmt: skip
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return ledger


def test_a_score_the_items_do_not_have_is_never_counted_as_zero(tmp_path):
    """Item 1: `kept.py` defaulted to --score success and read HotpotQA's `success: null` as 0 (`reflexion 100
    0.000`)."""
    ledger = _ledger(tmp_path)
    shown = kept.table(ledger)  # the ledger's own score: em, since no item has a success
    assert "| lats | 4 | 0.250 [0.046, 0.699] | base |" in shown
    assert "| reflexion | 4 | 0.750 [0.301, 0.954] | +0.500" in shown
    asked = kept.table(ledger, metric="success")  # asked for one they lack: said, not zeros
    assert "0.000" not in asked and "| reflexion | 0 of 4 | - |" in asked
    assert "no success in the items of lats, reflexion" in asked


def test_a_base_the_ledger_does_not_hold_is_one_line_naming_its_rows(tmp_path):
    """Item 1: `--base react-tolerant` on a ledger without it gave a table of `-` without a word."""
    ledger = _ledger(tmp_path)
    done = subprocess.run([sys.executable, str(BENCHMARKS / "kept.py"), str(ledger), "--base", "react-tolerant"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.strip() == (
        f"{ledger}: no row 'react-tolerant' to pair against; its rows: lats, reflexion; give --base ROW"
    )


@pytest.mark.parametrize("page", ["benchmarks.md", "lats.md"])
def test_the_docs_ledger_commands_print_what_the_pages_say(page):
    """Item 1: docs/benchmarks.md's command named a row the ledger lacks, and docs/lats.md said 3,999 CPU-s a
    question beside a command that prints 4,639.7."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    ledger = BENCHMARKS / "results" / "hotpotqa-qwen.kept.jsonl"
    if page == "benchmarks.md":
        done = kept.table(ledger, "reflexion", "em")
        assert (
            "`python benchmarks/kept.py benchmarks/results/hotpotqa-qwen.kept.jsonl --base reflexion --score em" in text
        )
        assert "| reflexion | 100 | 0.370 [0.282, 0.468] | base |" in done
    else:
        done = kept.table(ledger, "reflexion", "em")
        cost = next(line for line in done.splitlines() if line.startswith("| lats |")).rsplit("|", 2)[1].strip()
        assert f"{float(cost):,.1f} CPU seconds a finished question as the command prints it" in text


TOY = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Sum two numbers."""\n', "entry_point": "add",
       "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip

# Where each line of a program's cell starts on the page, relative to the cell's text: the indentation is seen
# (a body line starts right of its `def`), and each line is a line of its own (below the one before).
LINE_STARTS = """
(() => {
  const pre = document.querySelector(SELECTOR);
  const text = pre.firstChild, range = document.createRange(), starts = [];
  let at = 0;
  for (const line of text.data.split("\\n")) {
    const first = line.search(/\\S/);
    if (first >= 0) {
      range.setStart(text, at + first); range.setEnd(text, at + first + 1);
      const box = range.getBoundingClientRect(), cell = pre.getBoundingClientRect();
      starts.push([line.trim().slice(0, 12), Math.round(box.left - cell.left), Math.round(box.top - cell.top)]);
    }
    at += line.length + 1;
  }
  return [getComputedStyle(pre).whiteSpace, starts];
})()
"""


@pytest.mark.usefixtures("programs_box")
def test_a_program_on_the_page_keeps_its_lines_and_indentation_at_two_widths(tmp_path, browser):
    """Item 2: in the page's "Problem by problem" view, the problem and each run's program lost their line breaks and
    indentation (the cell's style set only max-width). Checked in Chromium at 1,400 and 1,000 px."""
    from rawreact.cli.app import main
    from rawreact.reports.html import write_page

    data = tmp_path / "toy.jsonl"
    data.write_text(json.dumps(TOY) + "\n")
    runs = {}
    for name, sign in (("simple", "+"), ("wrong", "-")):  # two runs of the problem: one right, one wrong
        script, runs[name] = tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl"
        script.write_text(json.dumps([f"    total = a {sign} b\n    return total\n"]))
        argv = ["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(runs[name])]
        assert main([*argv, "-q"]) == 0
    page = write_page(runs, tmp_path / "page.html", resamples=50)
    browser.open(page)
    for width in (1400, 1000):
        browser.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=900,
                     deviceScaleFactor=1, mobile=False)  # fmt: skip
        program = 'tr.pair td.answer[data-run="simple"] pre.code'
        space, starts = browser.evaluate(LINE_STARTS.replace("SELECTOR", json.dumps(program)))
        assert space == "pre-wrap" and [s[0] for s in starts] == [
            "def add(a, b",
            '"""Sum two n',
            "total = a + ",
            "return total",
        ]
        (_, left, top), *body = starts
        assert all(x > left + 10 and y > top for _, x, y in body), (width, starts)  # indented, each on its own line
        assert [y for _, _, y in body] == sorted(y for _, _, y in body) and len({y for _, _, y in starts}) == 4
        space, asked = browser.evaluate(LINE_STARTS.replace("SELECTOR", json.dumps("tr.pair td.q pre.code")))
        assert space == "pre-wrap" and len(asked) == 2 and asked[1][1] > asked[0][1] + 10 and asked[1][2] > asked[0][2]
    assert browser.problems() == []  # the page of a program run threw on load before (its filters lack "steps")


@pytest.mark.usefixtures("programs_box")
def test_a_humaneval_run_says_which_protocol_it_is_and_how_to_get_the_published_one(tmp_path, capsys):
    """Item 3: the published 0.720 was measured with --prompt chat, and nothing at run time said that a run without
    it is another protocol; `rawreact --help` and `run --help` never named HumanEval or programs."""
    from rawreact.cli.app import main

    script = tmp_path / "s.json"
    script.write_text(json.dumps(["    return []\n"]))
    note = "rawreact: note: HumanEval with the completion prompts (prompts/programs/, the default"
    for prompt, said in (([], True), (["--prompt", "chat"], False)):
        out = tmp_path / f"run{len(prompt)}.jsonl"
        argv = ["run", "humaneval:0", "--method", "simple", "--model", f"scripted:{script}", "--out", str(out), "-q"]
        assert main([*argv, *prompt]) == 0
        err = capsys.readouterr().err
        assert (note in err) is said and ("were measured with --prompt chat" in err) is said
    for argv in ([], ["run"]):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert "HumanEval" in shown and ("--method simple|reflexion|lats" in shown or "--prompt chat" in shown)


@pytest.mark.usefixtures("programs_box")
def test_the_json_report_counts_problems_as_problems_and_carries_the_run_s_cpu_seconds(tmp_path, capsys):
    """Item 5: `report --format json` counted a program run's problems under "games" and carried no CPU seconds,
    though the docs insist on CPU time; the manifest now adds each sitting's CPU seconds, and a resume adds its own."""
    from rawreact.cli.app import main

    data, script, out = tmp_path / "toy.jsonl", tmp_path / "s.json", tmp_path / "run.jsonl"
    data.write_text(json.dumps(TOY) + "\n" + json.dumps(TOY | {"task_id": "Toy/1"}) + "\n")
    script.write_text(json.dumps(["    return a + b\n"] * 2))
    argv = ["run", str(data), "--method", "simple", "--model", f"scripted:{script}", "--out", str(out), "-q"]
    assert main([*argv, "--limit", "1"]) == 0 and main([*argv, "--resume"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--format", "json"]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["summary"]["problems"] == 2 and "games" not in run["summary"] and run["summary"]["unit"] == "problem"
    cpu = run["cpu"]
    assert (
        (cpu["sittings"], cpu["of"]) == (2, 2) and 0 < cpu["seconds"] < 60 and cpu["per_record"] == cpu["seconds"] / 2
    )
    manifest = json.loads((tmp_path / "run.jsonl.manifest.json").read_text())
    assert manifest["cpu_seconds"] == {"seconds": cpu["seconds"], "sittings": 2}


def test_the_pages_say_what_the_code_does_for_the_inspect_task_and_a_plugin_s_files():
    """Item 5: docs/reports.md named the inspect log's task `rawreact/METHOD` (it is `rawreact/qa/demo/react`);
    docs/environments.md showed a plugin shipping prompt files without the `package-data` a wheel needs; the pages
    said `pip install 'rawreact[X]'`, which fails where rawreact is not on an index."""
    reports = " ".join((ROOT / "docs" / "reports.md").read_text().split())
    assert "the task is `rawreact/KIND/DATA/METHOD` (`rawreact/qa/demo/react`" in reports
    from rawreact.reports import inspect_log

    assert "f\"rawreact/{of_records(records).name}/{Path(manifest.get('data') or 'demo').stem}/{method}\"" in (
        Path(inspect_log.__file__).read_text()
    )
    environments = (ROOT / "docs" / "environments.md").read_text()
    assert '[tool.setuptools.package-data]\nglossary_plugin = ["prompts/*.txt"]' in environments
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    assert [page.name for page in pages if re.search(r"pip install 'rawreact\[[a-z]", page.read_text())] == []


def test_the_readme_opens_with_its_two_commands_and_what_a_run_prints():
    """Item 6: the README's first screen was two commands, then long caveats before what a run prints. Now the
    caveats are on the pages they belong to, linked, and what a run prints follows the commands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    top = readme.split("## What a run prints", 1)[0]
    paragraphs = [p for p in top.split("\n\n") if p.strip() and not p.startswith(("```", "# "))]
    assert len(top.splitlines()) <= 30 and all(len(p.splitlines()) <= 8 for p in paragraphs)
    assert top.count("```bash") == 2 and "docs/getting-started.md#the-tests" in top
    guide = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for moved in ("Three groups of tests need Debian packages", "The Ray tests start Ray here",
                  "What a run's numbers can depend on beyond its settings is measured"):  # fmt: skip
        assert moved in guide and moved not in readme
