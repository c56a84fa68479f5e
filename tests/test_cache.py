"""The call cache (issue 43 item 11): a rerun, or a variant that shares calls, does not pay for them again; the
key is everything that decides the reply; a sampled call is made afresh unless asked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rawreact.core.errors import ModelError
from rawreact.models.base import Completion
from rawreact.models.cache import CachedModel, CallCache
from rawreact.runs.records import read_run

RAWREACT = [str(Path(sys.executable).parent / "rawreact")]


class Counted:
    """A model whose reply is its prompt reversed, counting the calls it computes."""

    name = "counted"
    supports_grammar = True
    concurrent = True

    def __init__(self, temperature: float = 0.0, seed: int = 0) -> None:
        self.temperature, self.seed, self.calls = temperature, seed, 0

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, grammar: str | None = None) -> Completion:
        self.calls += 1
        return Completion(prompt[::-1][:max_tokens], "stop", len(prompt), max_tokens, len(prompt), 0.5)

    def sample(self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int):
        self.calls += n
        return [Completion(f"{prompt}{seed + k}", "stop", 1, 1, 1, 0.1) for k in range(n)]


def test_a_call_made_before_is_answered_from_the_file_and_says_so(tmp_path):
    model = Counted()
    first = CachedModel(model, tmp_path / "c.sqlite").complete("abc", stop=["\n"], max_tokens=5)
    again = CachedModel(model, tmp_path / "c.sqlite")  # a second run over the same file
    reply = again.complete("abc", stop=["\n"], max_tokens=5)
    assert model.calls == 1 and (again.hits, again.made) == (1, 0)
    assert (reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == ("cba", "stop", 3, 5)
    assert (reply.cached, reply.seconds, reply.evaluated_tokens) == (True, 0.0, 0)  # nothing was computed here
    assert first.to_dict() == {k: v for k, v in first.__dict__.items() if k != "cached"}  # records as before
    assert reply.to_dict()["cached"] is True


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": "abd"},
        {"stop": ["\n", "X"]},
        {"max_tokens": 6},
        {"grammar": 'root ::= "a"'},
    ],
)
def test_everything_the_call_says_is_in_the_key(tmp_path, change):
    model = Counted()
    call = {"prompt": "abc", "stop": ["\n"], "max_tokens": 5, "grammar": None}
    cached = CachedModel(model, tmp_path / "c.sqlite")
    cached.complete(call.pop("prompt"), **call)
    call = {"prompt": "abc", "stop": ["\n"], "max_tokens": 5, "grammar": None} | change
    cached.complete(call.pop("prompt"), **call)
    assert model.calls == 2 and cached.hits == 0


@pytest.mark.parametrize("setting", [{"seed": 1}, {"name": "other"}, {"n_ctx": 4096}, {"n_threads": 1}])
def test_the_model_s_settings_are_in_the_key(tmp_path, setting):
    one, other = Counted(), Counted()
    for key, value in setting.items():
        setattr(other, key, value)
    CachedModel(one, tmp_path / "c.sqlite").complete("abc", stop=[], max_tokens=5)
    second = CachedModel(other, tmp_path / "c.sqlite")
    second.complete("abc", stop=[], max_tokens=5)
    assert other.calls == 1 and second.hits == 0


def test_a_sampled_call_is_made_afresh_unless_asked(tmp_path):
    model = Counted(temperature=0.7)
    for _ in range(2):
        CachedModel(model, tmp_path / "c.sqlite").complete("abc", stop=[], max_tokens=5)
        CachedModel(model, tmp_path / "c.sqlite").sample("q", n=3, temperature=0.7, seed=0, stop=[], max_tokens=5)
    assert model.calls == 2 * (1 + 3) and len(CallCache(tmp_path / "c.sqlite")) == 0
    asked = [CachedModel(model, tmp_path / "d.sqlite", sampled=True) for _ in range(2)]
    for cached in asked:
        cached.complete("abc", stop=[], max_tokens=5)
        samples = cached.sample("q", n=3, temperature=0.7, seed=0, stop=[], max_tokens=5)
    assert model.calls == 8 + 4 and asked[1].hits == 2 and [s.text for s in samples] == ["q0", "q1", "q2"]


def test_a_model_that_answers_by_call_order_is_refused():
    from rawreact import ScriptedModel

    with pytest.raises(ModelError, match="answered in call order rather than by prompt"):
        CachedModel(ScriptedModel(["a"]), ":memory:")


def test_a_cache_that_is_not_sqlite_is_one_clear_error(tmp_path):
    bad = tmp_path / "c.sqlite"
    bad.write_text("not a database\n" * 100)
    done = subprocess.run(
        [*RAWREACT, "run", "--cache", bad, "--limit", "1"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"cache {bad} cannot be used: file is not a database; give another file, or remove this one" in done.stderr


def test_a_rerun_on_the_embedded_model_computes_nothing_and_writes_the_same_run(tmp_path):
    """Real: the two commands of the site's cache section ("experiments.md"), as written, in an empty folder, on
    Gemma 270M: two questions of the demo, then again over the same cache."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "experiments.md").read_text(encoding="utf-8")
    block = page.split("```bash\n")[2].split("\n```", 1)[0]
    assert block.count("--cache calls.sqlite") == 2
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-ec", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (_, a), (manifest, b) = read_run(tmp_path / "a.jsonl"), read_run(tmp_path / "b.jsonl")
    calls = sum(len(s["calls"]) for r in a for s in r["trajectory"]["steps"])
    assert calls >= 4
    assert manifest["cache"] == {"file": str(tmp_path / "calls.sqlite"), "sampled": False, "hits": calls, "made": 0}
    said = [line for line in done.stderr.splitlines() if "came from the cache" in line]
    assert said == [
        f"rawreact: 0 of {calls} model calls came from the cache calls.sqlite; the other {calls} were computed",
        f"rawreact: {calls} of {calls} model calls came from the cache calls.sqlite; the other 0 were computed",
    ]
    for one, two in zip(a, b, strict=True):
        assert (one["answer"], one["em"]) == (two["answer"], two["em"])
        steps = [(s["thought"], s["action_text"], s["observation"]) for s in one["trajectory"]["steps"]]
        assert steps == [(s["thought"], s["action_text"], s["observation"]) for s in two["trajectory"]["steps"]]
        assert all(c["cached"] and c["seconds"] == 0 for s in two["trajectory"]["steps"] for c in s["calls"])
        assert not any("cached" in c for s in one["trajectory"]["steps"] for c in s["calls"])


def _one_question(tmp_path: Path, steps: list[str]) -> tuple[Path, Path]:
    """A HotpotQA file of one question, and a script that answers it with `steps` (by question, so cacheable)."""
    data, script = tmp_path / "q.json", tmp_path / "s.json"
    data.write_text(json.dumps([{"_id": "q1", "question": "Who won?", "answer": "Tam", "type": "bridge",
                                 "level": "easy", "supporting_facts": [["Tam", 0]],
                                 "context": [["Tam", ["Tam won the race."]]]}]), encoding="utf-8")  # fmt: skip
    script.write_text(json.dumps({"questions": {"Who won?": steps}}), encoding="utf-8")
    return data, script


def test_compare_variants_share_the_calls_they_have_in_common(tmp_path):
    """A variant with one step more pays only for that step: its first steps are the other variant's calls."""
    steps = [" I search.\nAction 1: Search[Tam]\n", " Again.\nAction 2: Search[Tam]\n", " So.\nAction 3: Finish[Tam]\n"]
    data, script = _one_question(tmp_path, steps)
    done = subprocess.run(
        [*RAWREACT, "compare", data, "--model", f"scripted:{script}", "--variant", "two=max_steps=2",
         "--variant", "three=max_steps=3", "--cache", "c.sqlite", "--out", "cmp", "-q"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    two, three = (read_run(tmp_path / "cmp" / f"{name}.jsonl")[0]["cache"] for name in ("two", "three"))
    assert (two["hits"], two["made"]) == (0, 2) and (three["hits"], three["made"]) == (2, 1)


def test_a_hand_edited_cached_mark_is_one_clear_error(tmp_path):
    """The run file's reader checks the mark a cached call carries, as it checks every field of a call."""
    data, script = _one_question(tmp_path, [" So.\nAction 1: Finish[Tam]\n"])
    for out in ("a.jsonl", "b.jsonl"):
        command = [*RAWREACT, "run", data, "--model", f"scripted:{script}", "--cache", "c.sqlite", "--out", out, "-q"]
        assert subprocess.run(command, capture_output=True, cwd=tmp_path).returncode == 0
    run = tmp_path / "b.jsonl"
    assert read_run(run)[1][0]["trajectory"]["steps"][0]["calls"][0]["cached"] is True
    run.write_text(run.read_text().replace('"cached": true', '"cached": "yes"'))
    done = subprocess.run([*RAWREACT, "report", run], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{run} line 1" in done.stderr and "'cached'" in done.stderr


def test_a_resumed_run_s_manifest_counts_the_cached_calls_of_both_parts(tmp_path):
    """The manifest's counts come from the run file's records, so a run that stopped and was resumed counts the
    calls of its first part too (one process's own counts would hold only the second's)."""
    data, script = tmp_path / "q.json", tmp_path / "s.json"
    rows = [{"_id": f"q{n}", "question": f"Who won race {n}?", "answer": "Tam", "type": "bridge", "level": "easy",
             "supporting_facts": [["Tam", 0]], "context": [["Tam", ["Tam won."]]]} for n in (1, 2)]  # fmt: skip
    data.write_text(json.dumps(rows), encoding="utf-8")
    steps = [" I search.\nAction 1: Search[Tam]\n", " So.\nAction 2: Finish[Tam]\n"]
    script.write_text(json.dumps({"questions": {row["question"]: steps for row in rows}}), encoding="utf-8")

    def run(out: str, *more: str) -> dict:
        command = [*RAWREACT, "run", data, "--model", f"scripted:{script}", "--cache", "c.sqlite", "--out", out, "-q"]
        done = subprocess.run([*command, *more], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return read_run(tmp_path / out)[0]["cache"]

    assert run("a.jsonl", "--limit", "1") == {
        "file": str(tmp_path / "c.sqlite"),
        "sampled": False,
        "hits": 0,
        "made": 2,
    }
    resumed = run("a.jsonl", "--resume")  # the second question only: two calls made in this process
    assert (resumed["hits"], resumed["made"]) == (0, 4)
    again = run("b.jsonl", "--limit", "1")  # the first question's calls, from the cache
    assert (again["hits"], again["made"]) == (2, 0)
    mixed = run("b.jsonl", "--resume", "--cache-sampled")  # the second's too: the resume adds them
    assert (mixed["hits"], mixed["made"], mixed["sampled"]) == (4, 0, True)
