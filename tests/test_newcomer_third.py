"""A newcomer's third afternoon (issue 70): what a user of lm-eval, inspect, DSPy or `llm` still missed."""

import json
from pathlib import Path

import pytest
from test_runs import _data, _oracle

from rawreact.cli.app import main
from rawreact.core.stats import paired, score_interval
from rawreact.reports.summary import summarize
from rawreact.runs.records import read_run


def test_report_as_json_gives_every_number_with_its_interval_and_the_paired_difference(rows, tmp_path, capsys):
    data = _data(rows, tmp_path, 12)
    runs = []
    for name, every in (("right", 0), ("some", 3)):
        out = tmp_path / f"{name}.jsonl"
        model = _oracle(rows[:12], tmp_path / f"{name}.json", wrong_every=every)
        assert main(["run", str(data), "--model", model, "--out", str(out), "-q"]) == 0
        runs.append(out)
    capsys.readouterr()
    assert main(["report", *map(str, runs), "--format", "json", "--resamples", "500"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["base"] == "right.jsonl" and [r["name"] for r in said["runs"]] == ["right.jsonl", "some.jsonl"]
    right, some = (read_run(path)[1] for path in runs)
    first, second = said["runs"]
    assert first["summary"] == json.loads(json.dumps(summarize(right)))  # every number, unrounded
    assert second["summary"]["em"] == pytest.approx(8 / 12) and first["summary"]["em"] == 1.0
    em = score_interval("em", [r["em"] for r in some], resamples=500, seed=0)
    assert second["scores"]["em"] == {"mean": em.mean, "low": em.low, "high": em.high}
    assert second["scores"]["em"]["low"] < 8 / 12 < second["scores"]["em"]["high"]
    difference = paired([r["em"] for r in right], [r["em"] for r in some], resamples=500, seed=0)
    assert second["paired"]["em"]["difference"]["mean"] == pytest.approx(-4 / 12) == difference.mean
    assert second["paired"]["questions"] == 12 and "paired" not in first
    assert first["model"].startswith("scripted:") and second["method"] == "react"
    assert said["labels"] == said["kinds"] == said["searches"] == said["trials"] == []


def test_report_as_json_keeps_the_reflexion_trials_table(rows, tmp_path, capsys):
    data = _data(rows, tmp_path, 3)
    out = tmp_path / "reflexion.jsonl"
    model = _oracle(rows[:3], tmp_path / "o.json", wrong_every=2)
    script = json.loads((tmp_path / "o.json").read_text())
    (tmp_path / "o.json").write_text(json.dumps(script | {"reflection": "I answered without reading; read first."}))
    code = main(["run", str(data), "--model", model, "--out", str(out), "-q", "--method", "react-reflexion",
                 "--trials", "2", "--evaluator", "em"])  # fmt: skip
    assert code == 0
    capsys.readouterr()
    assert main(["report", str(out), "--format", "json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["trials"] and {row["run"] for row in said["trials"]} == {"reflexion.jsonl"}


def test_the_json_report_block_of_the_docs_runs(rows, tmp_path):
    """The block of "reports.md" on two runs, react and act, made here."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "reports.md").read_text()
    block = re.search(
        r"run by tests/test_newcomer_third.py::test_the_json_report_block_of_the_docs_runs -->\n```bash\n(.*?)\n```",
        page,
        re.S,
    ).group(1)  # noqa: E501
    data = _data(rows, tmp_path, 4)
    for method in ("react", "act"):
        model = _oracle(rows[:4], tmp_path / f"{method}.json")
        if method == "act":  # its steps are action lines alone
            script = json.loads((tmp_path / "act.json").read_text())
            for question, steps in script["questions"].items():
                script["questions"][question] = [" " + step.split(": ", 1)[1] for step in steps]
            (tmp_path / "act.json").write_text(json.dumps(script))
        assert main(["run", str(data), "--model", model, "--method", method, "--out", f"{tmp_path}/runs/{method}.jsonl",
                     "-q"]) == 0  # fmt: skip
    command = block.replace("rawreact ", f"{sys.executable} -m rawreact ", 1)
    subprocess.run(["bash", "-ec", command], cwd=tmp_path, check=True)
    said = json.loads((tmp_path / "report.json").read_text())
    assert [run["method"] for run in said["runs"]] == ["react", "act"] and said["runs"][1]["paired"]["questions"] == 4


def test_every_exit_code_of_the_docs_table_is_the_one_a_command_gives(rows, tmp_path, monkeypatch):
    """The table of "running.md": each code, from the case it names."""
    import re
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from rawreact.cli import app

    page = (Path(__file__).parent.parent / "docs" / "running.md").read_text()
    table = page.split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    assert [int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)] == [0, 2, 1, 130, 143]
    rawreact = [sys.executable, "-m", "rawreact"]
    data, out = _data(rows, tmp_path, 12), tmp_path / "run.jsonl"
    model = _oracle(rows[:12], tmp_path / "o.json", seconds_per_call=0.3)
    assert main(["run", str(data), "--model", _oracle(rows[:12], tmp_path / "fast.json"), "--out", str(out), "-q"]) == 0
    assert subprocess.run([*rawreact, "run", "--no-such-option"], capture_output=True).returncode == 2
    assert subprocess.run([*rawreact, "run", str(tmp_path / "missing.json")], capture_output=True).returncode == 2
    monkeypatch.setattr(app, "report", lambda args: 1 / 0)  # a bug of ours
    assert main(["report", str(out)]) == 1
    reader = subprocess.Popen([*rawreact, "show", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.close()  # the reader went away before the first line
    assert reader.wait(timeout=120) == 1 and b"Traceback" not in reader.stderr.read()
    for sent, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        kept = tmp_path / f"stopped-{code}.jsonl"
        process = subprocess.Popen([*rawreact, "run", str(data), "--model", model, "--out", str(kept), "-q"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        deadline = time.monotonic() + 120
        while not (kept.exists() and kept.read_bytes().count(b"\n")) and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(sent)
        assert process.wait(timeout=120) == code
        assert 1 <= kept.read_bytes().count(b"\n") < 12  # the finished questions are kept


def test_small_things_of_the_newcomers_list(rows, tmp_path, capsys):
    """--verb-timeout stands beside --env; the unknown-model line names every server prefix; the manifest keeps
    the command line; one episode's reward has no interval; Material's end-of-life notice is quieted in the README."""
    from pathlib import Path

    from rawreact.cli.parser import parser
    from rawreact.reports.breakdown import _scores
    from rawreact.runs.records import read_manifest

    groups = {
        g.title: [a.dest for a in g._group_actions]
        for g in parser()._subparsers._group_actions[0].choices["run"]._action_groups
    }  # noqa: E501
    assert "verb_timeout" in groups["the loop (grammar, passages, sentences per search)"]
    assert "env" in groups["the loop (grammar, passages, sentences per search)"]
    assert main(["run", "--model", "nope", "-q"]) == 2
    said = capsys.readouterr().err
    assert all(prefix in said for prefix in ("openai:[MODEL@]URL", "vllm:[MODEL@]URL", "llamacpp:[MODEL@]URL"))
    data, out = _data(rows, tmp_path, 2), tmp_path / "run.jsonl"
    command = ["run", str(data), "--model", _oracle(rows[:2], tmp_path / "o.json"), "--out", str(out), "-q"]
    assert main(command) == 0
    assert read_manifest(out)["command"] == ["rawreact", *command]
    assert main([*command, "--resume"]) == 0
    assert read_manifest(out)["resumes"][-1]["command"] == ["rawreact", *command, "--resume"]
    one = [{"id": "a", "task": "scienceworld", "score": 8.0, "success": 0, "reward": 0.08, "ended": "max_steps"}]
    cells = _scores(one, 100, 0)
    assert cells["score"] == "8.000 (one: no interval)" and cells["reward"] == "0.080 (one: no interval)"
    assert cells["success"] == "0.000 [0.000, 0.793]"  # Wilson's interval of a share holds for one
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "NO_MKDOCS_2_WARNING=1 mkdocs serve" in readme


def test_the_home_page_leads_to_every_guide_and_the_benchmarks_page_opens_with_accuracy():
    """Every guide of the navigation is a row of the home page's "you want to" table; ScienceWorld has a page of
    its own in the navigation; the benchmarks page's first section is about how well methods did."""
    import re
    from pathlib import Path

    docs = Path(__file__).parent.parent / "docs"
    nav = (docs.parent / "mkdocs.yml").read_text()
    section = nav.split("  - Guides:", 1)[1].split("  - Reference:")[0]
    guides = re.findall(r'^      - (?:"[^"]+"|[^:"]+): ([\w-]+\.md)$', section, re.M)
    assert "scienceworld.md" in guides and "lats.md" in guides and "programs.md" in guides and len(guides) == 18
    home = (docs / "index.md").read_text()
    table = home.split("| you want to | read |", 1)[1].split("\n\n", 1)[0]
    linked = set(re.findall(r"\]\(([\w-]+\.md)", table))
    assert set(guides) <= linked, set(guides) - linked
    benchmarks = (docs / "benchmarks.md").read_text()
    assert re.findall(r"^## (.+)$", benchmarks, re.M)[0] == "How well each method did"


DEFINING = '''
from rawreact import Verb, Verbs


class Glossary:
    """Define[word] shows a word's entry; Finish[answer] ends the episode."""

    verbs = Verbs([
        Verb("define", "Define", description="shows what a word means.", parameter="word", evidence=True),
        Verb("finish", "Finish", description="gives the answer and ends the task.", parameter="answer"),
    ])
    style = "react"

    def __init__(self, entries):
        self.entries = entries
        self.reset()

    def reset(self):
        self.answer = None

    def fresh(self):
        return Glossary(self.entries)

    def step(self, action):
        if action.name == "finish":
            self.answer = action.arg
            return "Episode finished.", True
        return self.entries.get(action.arg, f"No entry for {action.arg}."), False


def make(env, row):
    return Glossary(row["glossary"])


make.exemplars = "prompts/exemplars.txt"
make.instruction = "prompts/instruction.txt"
'''
GLOSSARY_PROMPT = {
    "prompts/instruction.txt": "Answer with the glossary: Define[word] shows its entry, Finish[answer] ends.\n",
    "prompts/exemplars.txt": "Question: What is Tam?\nThought 1: I define Tam.\nAction 1: Define[Tam]\n"
    "Observation 1: Tam is a river.\nThought 2: It is a river.\nAction 2: Finish[a river]\n",
}


def test_a_plugin_brings_its_own_prompt_and_runs_with_its_own_verbs(tmp_path):
    """Item 2: a plugin whose only verb is Define declares its instruction and exemplars; `--env glossary` sends
    them (not HotpotQA's, which search and look up), and the model's Define steps are valid. Without its prompt,
    a run says before it starts that the exemplars use verbs the environment lacks."""
    import os
    import subprocess
    import sys

    from plugins import install_plugin

    page = (Path(__file__).parent.parent / "docs" / "environments.md").read_text()
    block = page.split("test_a_plugin_brings_its_own_prompt_and_runs_with_its_own_verbs -->\n```python\n", 1)[1]
    for line in block.split("```", 1)[0].splitlines():  # the page's declaration is the plugin's here
        assert line.split("  #")[0].rstrip() in DEFINING, line
    installed = install_plugin(tmp_path, DEFINING, data=GLOSSARY_PROMPT)
    work = tmp_path / "work"
    work.mkdir()
    row = {"id": "g1", "question": "What is Orlo?", "answer": "a village", "glossary": {"Orlo": "Orlo is a village."}}
    (work / "q.jsonl").write_text(json.dumps(row) + "\n")
    (work / "s.json").write_text(
        json.dumps([" I define Orlo.\nAction 1: Define[Orlo]\n", " So.\nAction 2: Finish[a village]\n"])
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(installed), os.environ.get("PYTHONPATH")]))}
    run = [sys.executable, "-m", "rawreact", "run", "q.jsonl", "--env", "glossary", "--model", "scripted:s.json", "-q"]
    done = subprocess.run([*run, "--out", "r.jsonl"], cwd=work, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "has no verb for" not in done.stderr
    manifest, [record] = read_run(work / "r.jsonl")
    steps = record["trajectory"]["steps"]
    assert [s["action_text"] for s in steps] == ["Define[Orlo]", "Finish[a village]"] and record["em"] == 1.0
    assert steps[0]["observation"] == "Orlo is a village." and steps[0]["error"] is None
    prompt = record["trajectory"]["prompt"]
    assert prompt.startswith(GLOSSARY_PROMPT["prompts/instruction.txt"]) and "Action 1: Define[Tam]" in prompt
    assert "Search[" not in prompt and manifest["config"]["prompt"].endswith("glossary_plugin/prompts/exemplars.txt")
    # The shipped HotpotQA prompt with this environment: one line says which verbs the exemplars use in vain.
    exemplars = str(Path(__file__).parent.parent / "prompts" / "exemplars.txt")
    shipped = subprocess.run([*run, "--out", "h.jsonl", "--prompt", exemplars],
                             cwd=work, capture_output=True, text=True, env=env)  # fmt: skip
    assert shipped.returncode == 0, shipped.stderr
    assert (
        "the prompt's exemplars use Lookup, Search, which the environment of --env glossary has no verb for"
        in shipped.stderr
    )


def test_the_python_api_page_is_grouped_by_task_with_methods_and_every_name_the_guides_use():
    """Item 3: sections by what a user does, short headings (a name, its signature below it), classes with their
    methods and properties, and every name the guides and the README import or call on the page."""
    import re

    from rawreact.cli.reference import PYTHON_GROUPS, python_page

    page = python_page()
    assert re.findall(r"^## (.+)$", page, re.M) == list(PYTHON_GROUPS)
    headings = re.findall(r"^#{3,4} (.+)$", page, re.M)
    assert all(len(heading) <= 40 for heading in headings), [h for h in headings if len(h) > 40]
    for method in ("transcript", "tokens", "to_json"):  # what the README's example calls on a trajectory
        assert f"#### `Trajectory.{method}`" in page
    root = Path(__file__).parent.parent
    texts = [root / "README.md", *(root / "docs").glob("*.md")]
    used = set()
    for text in texts:
        for names in re.findall(r"^from rawreact import ([^\n(]+|\([^)]*\))", text.read_text(), re.M):
            used |= {n.strip() for n in names.strip("()").replace("\n", ",").split(",") if n.strip()}
    assert {"react", "load_model", "PassageEnv"} <= used
    assert "### `CachedModel`" in page  # which the experiments page offers from Python
    assert all(f"### `{name}`" in page for name in used), sorted(n for n in used if f"### `{n}`" not in page)


def test_a_backend_of_your_own_runs_from_python(tmp_path, monkeypatch, capsys):
    """Issue 70 item 2's last point: a backend of one's own is any object of the Model protocol; the servers page's
    wrapper around the embedded model runs as written (a real episode), and every call the agent made went
    through it."""
    page = (Path(__file__).parent.parent / "docs" / "servers.md").read_text()
    mark = "<!-- run by tests/test_newcomer_third.py::test_a_backend_of_your_own_runs_from_python -->\n```python\n"
    block = page[page.index(mark) + len(mark) :].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(block, names)
    model, traj = names["model"], names["traj"]
    assert model.calls == traj.model_calls >= 1
    assert model.name == "counted gemma3-270m"
    assert capsys.readouterr().out.startswith(f"{model.calls} calls: ")
