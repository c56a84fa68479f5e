"""Every method end to end on the real embedded model, through `rawreact compare --ablation methods`,
and CoT-SC's samples: one prompt evaluation, reproducible from the seed."""

import json
import re
import subprocess
import sys
from html import escape

import pytest

from rawreact import load_prompt
from rawreact.agents.record import Trajectory
from rawreact.config.choices import PAPER as METHODS
from rawreact.reports.export import export
from rawreact.reports.html import write_page
from rawreact.runs.records import read_manifest, read_run

Q = "Which river flows through the town where the author of The Salt Lanterns was born?"


@pytest.fixture(scope="module")
def methods(tmp_path_factory):
    """Every method on one real question, in one `rawreact compare --ablation methods`: (stdout, folder)."""
    out = tmp_path_factory.mktemp("real") / "methods"
    done = subprocess.run(
        [sys.executable, "-m", "rawreact", "compare", "--ablation", "methods", "--limit", "1", "--out", out, "-q",
         "--base", "samples=3,max_steps=2,max_tokens=60,k=1", "--seed", "5"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout, out


def test_every_method_runs_on_the_embedded_model_from_the_command_line(methods):
    stdout, out = methods
    header = stdout.splitlines()[0].split()
    assert header[:3] == ["variant", "method", "n"] and "answered" in header
    records = {}
    for method in METHODS:
        manifest, [record] = read_run(out / f"{method}.jsonl")
        records[method] = record
        assert record["method"] == manifest["config"]["method"] == method
        sampled = method in ("cot-sc", "react-cot-sc", "cot-sc-react")
        assert manifest["config"]["samples"] == (3 if sampled else None)
        assert manifest["config"]["sample_temperature"] == (0.7 if sampled else None)
        assert manifest["config"]["seed"] == 5
    assert all(step["thought"] is None for step in records["act"]["trajectory"]["steps"])
    assert records["act"]["model_calls"] == records["act"]["steps"] >= 1
    for method in ("standard", "cot"):
        assert records[method]["model_calls"] == 1 and records[method]["trajectory"] is None
    samples = records["cot-sc"]["reasoning"]["samples"]
    assert len(samples) == 3 and [s["call"]["evaluated_tokens"] for s in samples][1:] == [0, 0]
    assert samples[0]["call"]["evaluated_tokens"] > 0
    assert records["cot-sc"]["vote_share"] == records["cot-sc"]["reasoning"]["share"]
    back = records["react-cot-sc"]
    react_answered = back["trajectory"]["ended"] == "finish" and back["trajectory"]["answer"].strip() != ""
    assert back["branch"] == ("react" if react_answered else "cot-sc")
    assert (back["reasoning"] is None) == react_answered
    other = records["cot-sc-react"]
    split = 2 * other["reasoning"]["votes"] < 3
    assert other["branch"] == ("react" if split else "cot-sc") and (other["trajectory"] is not None) == split
    # The same seed draws the same samples, whichever variant draws them.
    if other["reasoning"] is not None:
        assert [s["call"]["text"] for s in other["reasoning"]["samples"]] == [s["call"]["text"] for s in samples]
    assert read_manifest(out / "cot-sc.jsonl")["config"]["prompt"] == "prompts/cot/exemplars.txt"
    assert (out / "comparison.csv").read_text().startswith("variant,method,n,")


def test_the_html_report_and_the_export_read_every_methods_real_run(methods, browser, tmp_path):  # noqa: F811
    _, out = methods
    runs = {method: out / f"{method}.jsonl" for method in METHODS}
    records = {method: read_run(path)[1][0] for method, path in runs.items()}
    path = write_page(runs, tmp_path / "methods.html", resamples=200)
    html = path.read_text(encoding="utf-8")
    details = dict(zip(METHODS, re.findall(r'<tr class="detail" hidden>(.*?)</tr>', html, re.S), strict=True))
    for method, record in records.items():
        steps = record["trajectory"]["steps"] if record["trajectory"] else []
        assert details[method].count('<div class="step') == len(steps)
        assert details[method].count('<div class="raw">') == sum(len(s["calls"]) for s in steps)
        if record["reasoning"] is not None:
            assert escape(record["reasoning"]["samples"][0]["call"]["text"]) in details[method]
    assert "<h4>react</h4>" in details["react-cot-sc"] or records["react-cot-sc"]["reasoning"] is None
    browser.open(path)
    assert browser.evaluate("document.querySelectorAll('tr.question').length") == len(METHODS)
    assert browser.problems() == [] and browser.requests() == [path.resolve().as_uri()]
    # Every real step that ran a valid, new action is an example, and each is the transcript it came from.
    traj = Trajectory.from_dict(records["react"]["trajectory"])
    done = export([runs["react"], runs["act"]], tmp_path / "train.jsonl", min_f1=0.0)
    examples = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    targets = sum(s.error is None and s.repeat_of is None and bool(s.calls) for s in traj.steps)
    assert done.examples == len(examples) >= targets >= 1
    for example in examples[:targets]:
        assert traj.transcript().startswith(traj.prompt + example["prompt"] + example["completion"] + "\nObservation")


def test_samples_are_reproducible_from_the_seed_and_evaluate_the_prompt_once(gemma):
    prompt = load_prompt(method="cot").text + f"Question: {Q}\nThought:"
    options = {"n": 2, "temperature": 0.7, "stop": ["\nQuestion:", "\n\n"], "max_tokens": 24}
    first = gemma.sample(prompt, seed=0, **options)
    gemma.complete("Question: Is snow white?\nAnswer:", stop=["\n"], max_tokens=3)  # other work between
    again = gemma.sample(prompt, seed=0, **options)
    other = gemma.sample(prompt, seed=1, **options)
    assert [c.text for c in again] == [c.text for c in first]
    assert [c.text for c in other] != [c.text for c in first]
    assert [c.evaluated_tokens for c in first][1:] == [0] and first[0].evaluated_tokens > 0
    assert all(c.prompt_tokens == first[0].prompt_tokens for c in first + again)
