"""llama.cpp's own C++ `llama-server`, for real (issue 59): built here from the llama.cpp that llama-cpp-python
carries (`python -m rawreact.models.llama_server`, which `.ci/run` runs), serving the embedded model's file.

The `llamacpp:` backend and fleets were tested against a stub that answers as llama-server does; these run
rawreact against the server itself: both loops, a grammar, slots and `id_slot`, `cache_prompt`, `--timeout`,
samples in flight on their own slots, and a fleet of two servers with one killed mid-run. Without a build
they skip saying how to make one; under CI they fail.
"""

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections import Counter

import pytest
from test_fleet import _wait_for_records
from test_runs import _data

from rawreact import load_model, read_run
from rawreact.core.errors import ContextLengthExceeded, GrammarError, ModelError
from rawreact.models import llama_server, model_path
from rawreact.models.base import WORKER

RAWREACT = [sys.executable, "-m", "rawreact"]
BINARY = llama_server.server_path()
needs_server = pytest.mark.skipif(
    BINARY is None and not os.environ.get("CI"),
    reason="llama-server is not built; build it with: python -m rawreact.models.llama_server",
)
pytestmark = needs_server


@pytest.fixture(scope="module")
def server():
    """One server of two slots, two threads (the machine's cores)."""
    process, url = llama_server.start(model_path("gemma3-270m"), parallel=2, threads=2, n_ctx=4096)
    yield url
    llama_server.stop(process)


def _get(url: str, path: str) -> object:
    with urllib.request.urlopen(url.removesuffix("/v1") + path, timeout=10) as answer:
        return json.loads(answer.read())


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + "/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


def _run(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*RAWREACT, "run", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_the_backend_reads_the_real_servers_family_slots_and_model(server, gemma):
    model = load_model(f"llamacpp:{server}")
    assert model.family == "llamacpp" and model.supports_grammar and model.slots == 2
    assert _get(server, "/props")["total_slots"] == 2
    (entry,) = _get(server, "/v1/models")["data"]
    assert entry["owned_by"] == "llamacpp" and entry["id"] == model.model
    assert entry["meta"]["n_vocab"] == gemma.llm.n_vocab()  # the file's own figures, digested by the manifest
    assert model.served_model["digest"] is not None


def test_a_tolerant_run_through_the_real_server_counts_what_the_server_computed(server, gemma, rows, tmp_path):
    """The usage and timings the server returns become the record's tokens: the prompt's count is the model's own
    tokenization of it, and `cache_prompt` leaves only the new part of each later call to evaluate."""
    data, out = _data(rows, tmp_path, 2), tmp_path / "run.jsonl"
    done = _run(data, "--model", f"llamacpp:{server}", "--out", out, "-q", "--max-steps", "3", "-k", "1")
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert [r["question"] for r in records] == [row["question"] for row in rows[:2]]
    assert manifest["model_name"].endswith(f"@{server}")
    for record in records:
        calls = [c for s in record["trajectory"]["steps"] for c in s["calls"]]
        assert record["ended"] in ("finish", "max_steps") and len(calls) >= 2
        first = calls[0]
        asked = f"{record['trajectory']['prompt']}Question: {record['question']}\nThought 1:"
        assert first["prompt_tokens"] == len(gemma.tokenize(asked))
        later = calls[1:]  # each extends the call before it: the server keeps its slot's cells
        assert all(0 < c["evaluated_tokens"] < c["prompt_tokens"] // 2 for c in later), later
        assert record["tokens"]["evaluated"] < record["tokens"]["prompt"] // 2


def test_the_reference_loop_runs_through_the_real_server(server, rows, tmp_path):
    data, out = _data(rows, tmp_path, 1), tmp_path / "run.jsonl"
    done = _run(data, "--model", f"llamacpp:{server}", "--loop", "reference", "--out", out, "-q", "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    (record,) = read_run(out)[1]
    assert record["loop"] == "reference" and record["steps"] >= 1
    assert record["trajectory"]["steps"][0]["calls"][0]["completion_tokens"] > 0


def test_the_real_server_applies_the_grammar_in_its_grammar_field(server, rows, tmp_path):
    model = load_model(f"llamacpp:{server}")
    forced = model.complete("Question: anything\nThought 1:", stop=["\n"], max_tokens=20,
                            grammar='root ::= " Nothing to say." ')  # fmt: skip
    assert forced.text == " Nothing to say."  # only a server that applied it writes exactly this
    data, out = _data(rows, tmp_path, 3), tmp_path / "run.jsonl"
    done = _run(data, "--model", f"llamacpp:{server}", "--grammar", "titles", "--out", out, "-q", "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    for record in read_run(out)[1]:
        assert record["invalid_actions"] == 0 and record["search_hits"] == record["searches"]


def test_each_worker_keeps_to_its_own_slot_and_its_cache(server):
    """`id_slot` sends worker k's calls to slot k: a call that extends worker 0's last prompt finds it in slot 0's
    cells (only the new tokens are evaluated), while the same call from worker 1 evaluates it whole."""
    model = load_model(f"llamacpp:{server}")
    base = "Slot test. Question: Which river runs through the old town of Tübingen?\nThought 1:" * 8
    seen = {}

    def call(worker: int, prompt: str, key: str) -> None:
        token = WORKER.set(worker)
        try:
            seen[key] = model.complete(prompt, stop=["\n"], max_tokens=4)
        finally:
            WORKER.reset(token)

    call(0, base, "first")
    call(0, base + " It is", "again")
    call(1, base + " It is", "other")
    first, again, other = seen["first"], seen["again"], seen["other"]
    assert first.evaluated_tokens == first.prompt_tokens  # nothing there yet
    assert 0 < again.evaluated_tokens <= 3  # " It is" and the last token, the rest kept in slot 0
    assert other.evaluated_tokens >= other.prompt_tokens - 1  # slot 1 held none of it (at most the BOS token)
    slots = {slot["id"]: slot for slot in _get(server, "/slots")}
    assert set(slots) == {0, 1} and all(slot["n_ctx"] == 4096 for slot in slots.values())


def test_samples_go_to_every_slot_at_once(server):
    """n samples are n requests in flight: sample k in slot worker + k (modulo the slots), so the server decodes
    them together. Before, every sample asked for slot 0 and waited for the one before it."""
    model = load_model(f"llamacpp:{server}")
    before = {slot["id"]: slot["id_task"] for slot in _get(server, "/slots")}
    samples = model.sample("Question: Name a colour.\nThought 1:", n=2, temperature=1.0, seed=3, stop=["\n"],
                           max_tokens=12)  # fmt: skip
    assert len(samples) == 2 and all(s.prompt_tokens == samples[0].prompt_tokens for s in samples)
    after = {slot["id"]: slot["id_task"] for slot in _get(server, "/slots")}
    assert all(after[k] != before[k] for k in after)  # both slots took a task


def test_a_seeded_sample_depends_on_what_the_slot_had_cached(server):
    """Written down in docs/servers.md: llama-server draws a seeded sample from the prompt's last logits, which it
    computes in a pass of the whole prompt, or of the last token alone when the slot's cells hold the rest
    (`cache_prompt`); the two passes round differently, and at temperature 1 the draw changes. Without the cache
    the same seed gives the same text every time."""
    body = {"prompt": "Question: Name a colour of the sea at dusk.\nThought 1:", "max_tokens": 12, "temperature": 1.0,
            "seed": 4, "stop": ["\n"], "repeat_penalty": 1.0, "id_slot": 1}  # fmt: skip
    fresh = [_post(server, body | {"cache_prompt": False}) for _ in range(3)]
    assert len({r["choices"][0]["text"] for r in fresh}) == 1 and all(r["timings"]["prompt_n"] > 5 for r in fresh)
    cached = _post(server, body | {"cache_prompt": True}), _post(server, body | {"cache_prompt": True})
    assert cached[1]["timings"]["prompt_n"] == 1  # the rest came from the slot's cells


def test_a_call_past_the_timeout_is_one_clear_line(server, rows, tmp_path):
    data, out = _data(rows, tmp_path, 1), tmp_path / "run.jsonl"
    done = _run(data, "--model", f"llamacpp:{server}", "--out", out, "--timeout", "0.05", "--max-tokens", "400",
                "-q")  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("rawreact: error:")]
    assert len(errors) == 1 and server in errors[0] and "0.05" in errors[0], done.stderr
    with pytest.raises(ModelError, match="no answer within"):
        load_model(f"llamacpp:{server}", timeout=0.05, retries=0).complete("Question: x\nThought 1:", stop=[],
                                                                          max_tokens=400)  # fmt: skip


def test_a_fleet_of_two_real_servers_loses_no_question_when_one_is_killed(rows, tmp_path):
    started = [llama_server.start(model_path("gemma3-270m"), parallel=2, threads=1, n_ctx=2048) for _ in range(2)]
    try:
        urls = [url for _, url in started]
        data, out = _data(rows, tmp_path, 6), tmp_path / "run.jsonl"
        command = [*RAWREACT, "run", data, "--model", "llamacpp:" + ",".join(urls), "--out", out, "--workers", "4",
                   "--per-endpoint", "2", "--max-steps", "2", "--max-tokens", "32", "-k", "1", "-q"]  # fmt: skip
        run = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        _wait_for_records(out, 1, run)
        os.kill(started[1][0].pid, signal.SIGKILL)
        _, stderr = run.communicate(timeout=600)
        assert run.returncode == 0, stderr
        manifest, records = read_run(out)
        ids = [r["id"] for r in records]
        assert sorted(ids) == sorted(row["_id"] for row in rows[:6])  # each question exactly once
        served = manifest["endpoints"]
        assert {u: e["episodes"] for u, e in served.items() if e["episodes"]} == dict(
            Counter(r["endpoint"] for r in records)
        )
        assert sum(r["restarts"] for r in records) == sum(e["lost"] for e in served.values())
    finally:
        for process, _ in started:
            llama_server.stop(process)


def test_the_real_servers_refusals_read_as_the_stubs_taught(server):
    """What the stubs answered for llama-server's errors, checked against the server: a prompt past a slot's
    context is a 400 whose message names the context (read as ContextLengthExceeded, which a run records as the
    question's end), and a grammar the server cannot parse is caught before it is sent."""
    model = load_model(f"llamacpp:{server}")
    with pytest.raises(ContextLengthExceeded, match=r"exceeds the available context size \(4096 tokens\)"):
        model.complete("word " * 4200, stop=[], max_tokens=5)
    with pytest.raises(GrammarError, match="cannot parse the grammar"):
        model.complete("hi", stop=[], max_tokens=5, grammar="root ::= ( ")
