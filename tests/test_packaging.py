"""A non-editable install carries prompts/ and envs/ inside the package and works from any folder."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_the_data_and_runs_from_elsewhere(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path, ROOT], check=True)
    [wheel] = tmp_path.glob("rawreact-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("prompts", "envs"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file():
                assert f"rawreact/{path.relative_to(ROOT).as_posix()}" in names
    assets = {"rawreact/reports/assets/report.css", "rawreact/reports/assets/report.js"}
    assert assets <= names  # the HTML report's style and script
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, wheel], check=True)
    code = (
        "import rawreact, rawreact.core.resources as r; "
        "print(r.resource('prompts', 'exemplars.txt')); "
        "print(len(rawreact.load_collection().questions), rawreact.load_prompt().exemplars)"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(site)},
    ).stdout.splitlines()
    assert out[0] == str(site / "rawreact" / "prompts" / "exemplars.txt")
    assert out[1] == "7 4"


def _blocks(language: str, page: str = "README.md") -> list[str]:
    """The blocks of `language` on a page: the README, or a page of the site (docs/python.md: "python.md")."""
    text = (ROOT / (page if page == "README.md" else f"docs/{page}")).read_text(encoding="utf-8")
    return [block.split("\n```", 1)[0] for block in text.split(f"```{language}\n")[1:]]


def test_ci_runs_the_readme_test_command():
    install_and_run, install_and_test = _blocks("bash")[:2]
    assert "rawreact run" in install_and_run
    assert install_and_test.strip() in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_python_example_runs(capsys):
    """The README's one Python example, which the site's From Python page begins with."""
    assert _blocks("python")[0] == _blocks("python", "python.md")[0] and len(_blocks("python")) == 1
    exec(_blocks("python")[0], {})
    printed = capsys.readouterr().out
    assert printed.startswith("Answer ") and "Question: When is the festival of Orlo held?\nThought 1:" in printed


def test_the_run_example_runs(tmp_path, monkeypatch):
    """As written, in an empty folder: the demo's first two questions (issue 29 item 15)."""
    from rawreact import load_collection

    monkeypatch.chdir(tmp_path)
    exec(_blocks("python", "python.md")[1], {})
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    assert [json.loads(line)["question"] for line in lines] == [q.question for q in load_collection().questions[:2]]
    assert json.loads((tmp_path / "run.jsonl.manifest.json").read_text())["config"] == {"model": "gemma3-270m"}


def test_the_compare_example_runs(tmp_path, monkeypatch, capsys):
    """As written, in an empty folder: two questions of the demo per variant."""
    monkeypatch.chdir(tmp_path)
    exec(_blocks("python", "python.md")[2], {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| variant | method | n | EM | ΔEM | F1 | ΔF1 |")
    assert printed[2].startswith("| k1 | react | 2 | ") and printed[3].startswith("| k3 | react | 2 | ")
    for name in ("k1", "k3"):
        assert len((tmp_path / "experiments" / "k" / f"{name}.jsonl").read_text().splitlines()) == 2


def test_the_settings_example_runs(tmp_path, monkeypatch, capsys):
    assert len(_blocks("python", "python.md")) == 6  # each runs in a test of this file
    monkeypatch.chdir(tmp_path)
    exec(_blocks("python", "python.md")[4], {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["7 2 5", "max_steps=0 (--max-steps) must be at least 1"]
    assert printed[2].startswith("Settings(method='cot'") and "max_steps=5" in printed[2]


def test_the_plan_example_runs(tmp_path, monkeypatch, capsys):
    """As written, in an empty folder (issue 71): a plan of the demo's first two questions, run on Gemma, writes the
    run file and the manifest `rawreact run` writes."""
    from rawreact import load_collection

    monkeypatch.chdir(tmp_path)
    exec(_blocks("python", "python.md")[5], {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "prompts/exemplars.txt 2 4"
    ids = [q.id for q in load_collection().questions[:2]]
    assert [line.split()[0] for line in printed[1:]] == ids
    lines = (tmp_path / "planned.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ids
    manifest = json.loads((tmp_path / "planned.jsonl.manifest.json").read_text())
    assert manifest["config"]["max_steps"] == 4 and manifest["config"]["model"] == "gemma3-270m"


def test_the_methods_example_runs(capsys):
    exec(_blocks("python", "python.md")[3], {})
    cot_sc, backoff = capsys.readouterr().out.splitlines()
    assert backoff.split()[0] in ("react", "cot-sc")
    assert "[" in cot_sc and cot_sc.count(",") >= 2  # the three samples' answers


def _own_verb(capsys, block: str) -> list[str]:
    exec(block, {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "('148', False)"
    assert printed[1].startswith("('Calculate[2**8] failed: ValueError: only numbers and + - * / are allowed")
    assert (
        printed[2]
        == "(4) Calculate[expression] works out an arithmetic expression, such as 2000-1852, and shows the result."
    )
    return printed


def test_the_own_verb_example_runs_on_the_embedded_model(capsys):
    """Issue 41: the verb of your own (docs/environments.md, where issue 60 moved it), as written, on Gemma 270M."""
    printed = _own_verb(capsys, _blocks("python", "environments.md")[0])
    actions = eval(printed[3])  # the action lines the model wrote, each read by the parser with the new verb
    assert 1 <= len(actions) <= 5 and all(isinstance(a, str) for a in actions)


def test_the_own_verb_example_runs_on_the_scripted_model(capsys):
    """The same block with a scripted model that takes the verb: its observation is the function's result."""
    block = _blocks("python", "environments.md")[0]
    assert 'model = load_model("gemma3-270m")' in block
    script = (
        'ScriptedModel([" Orlo was founded in 1852.\\nAction 1: Calculate[2000-1852]\\n", '
        '" So 148 years.\\nAction 2: Finish[148]\\n"])'
    )
    block = block.replace('load_model("gemma3-270m")', script).replace(
        "import PassageEnv,", "import PassageEnv, ScriptedModel,"
    )
    printed = _own_verb(capsys, block)
    assert printed[3] == "['Calculate[2000-1852]', 'Finish[148]']"


def test_the_own_verb_command_runs(tmp_path):
    """The `--env` commands of docs/environments.md, as written, in an empty folder, on the embedded model."""
    block = _blocks("bash", "environments.md")[0]
    assert block.startswith("printf ") and "rawreact run --env myverbs:with_double" in block
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-ec", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((tmp_path / "double.jsonl.manifest.json").read_text())
    assert manifest["config"]["env"] == "myverbs:with_double"
    assert [v["name"] for v in manifest["config"]["verbs"]] == ["search", "lookup", "think", "finish", "double"]
    [record] = [json.loads(line) for line in (tmp_path / "double.jsonl").read_text().splitlines()]
    prompt = manifest["prompts"][record["trajectory"]["prompt_sha256"]]  # the prompt as sent, stored once
    assert "(4) Double[text] repeats the text twice.\n" in prompt and "one of four kinds" in prompt
