"""The Ollama backend against an Ollama-protocol server that runs the embedded model (tests/servers.py).

No Ollama binary can be installed here; the fake server speaks Ollama's `/api/generate` and answers
with real text from Gemma 270M, so the client, the request fields and the loop all run for real.
"""

import json
import os
import subprocess
import sys

import pytest
from servers import FakeOllama, free_port

from rawreact import (
    ContextLengthExceeded,
    ModelError,
    ScriptedModel,
    load_collection,
    load_model,
    load_prompt,
    react,
    read_run,
)

RAWREACT = [sys.executable, "-m", "rawreact"]


@pytest.fixture(scope="module")
def ollama(gemma):
    server = FakeOllama(gemma)
    yield server
    server.close()


def test_a_step_sends_raw_generate_with_the_exact_options(ollama):
    model = load_model("ollama:gemma3:270m", host=ollama.url, n_ctx=4096, seed=7, temperature=0.0)
    ollama.requests.clear()
    done = model.complete("Thought 1:", stop=["\nObservation 1:"], max_tokens=40)
    (sent,) = ollama.requests
    assert sent["model"] == "gemma3:270m" and sent["prompt"] == "Thought 1:"
    assert sent["raw"] is True and sent["think"] is False and sent["stream"] is False
    assert sent["options"] == {
        "stop": ["\nObservation 1:"],
        "num_predict": 40,
        "temperature": 0.0,
        "seed": 7,
        "num_ctx": 4096,
        "repeat_penalty": 1.0,
    }
    assert not {"template", "system", "context"} & set(sent)  # raw mode refuses them
    assert done.text and done.completion_tokens > 0 and done.prompt_tokens > 0 and done.seconds > 0
    assert done.evaluated_tokens is None  # Ollama's prompt_eval_count counts the whole prompt


def test_done_reason_maps_to_the_finish_reason(ollama, gemma):
    model = load_model("ollama:gemma3:270m", host=ollama.url)
    cut = model.complete("The capital of France is", stop=["\nObservation 1:"], max_tokens=3)
    assert cut.finish_reason == "length" and cut.completion_tokens == 3
    direct = gemma.complete("The capital of France is", stop=["\nObservation 1:"], max_tokens=3)
    assert cut.text == direct.text  # the same model's own words came through
    stopped = model.complete("Question: What is 2 + 2?\nAnswer:", stop=["\n"], max_tokens=60)
    assert stopped.finish_reason == "stop" and "\n" not in stopped.text and stopped.completion_tokens < 60


def test_an_episode_through_ollama_sends_the_loops_prompts_and_keeps_the_models_words(ollama):
    """The protocol, on any build: each request is exactly the prompt the loop built, with the stop
    sequence of its step, and the episode is what the server's completions make of it."""
    demo = load_collection()
    question = demo.questions[0]
    prompt = load_prompt(k=2)
    model = load_model("ollama:gemma3:270m", host=ollama.url)
    ollama.requests.clear()
    ollama.responses.clear()
    through = react(question.question, demo.env(question), model, prompt, max_steps=3)
    calls = [c for step in through.steps for c in step.calls]
    assert [c.text for c in calls] == ollama.responses  # the model's words, as the server sent them
    requests = iter(ollama.requests)
    for step in through.steps:
        before = through.transcript(step.i - 1)
        first = next(requests)
        assert first["prompt"] == before + f"Thought {step.i}:"
        assert first["options"]["stop"] == [f"\nObservation {step.i}:", "]\n"]
        if step.fallback:  # the fallback call asks for the action line alone
            second = next(requests)
            assert second["prompt"] == before + f"Thought {step.i}: {step.thought}\nAction {step.i}:"
            assert second["options"]["stop"] == ["\n"]
    assert next(requests, None) is None
    replayed = react(question.question, demo.env(question), ScriptedModel(ollama.responses), prompt, max_steps=3)
    assert [s.render() for s in replayed.steps] == [s.render() for s in through.steps]
    assert (replayed.answer, replayed.ended) == (through.answer, through.ended)


def test_an_episode_through_ollama_is_the_embedded_models_episode(ollama, gemma):
    """The same model's episode, through Ollama's protocol and in process. Both paths start every call
    from the same kept few-shot prefix and extend the same stream, so the engine computes the same
    batches: the equality holds on any build, not only where two batchings happen to round alike."""
    demo = load_collection()
    question = demo.questions[0]
    prompt = load_prompt(k=2)
    gemma.keep_prefix(prompt.text)  # the server's calls start from it too (the Ollama client keeps no prefix)
    through = react(
        question.question, demo.env(question), load_model("ollama:gemma3:270m", host=ollama.url), prompt, max_steps=3
    )
    direct = react(question.question, demo.env(question), gemma, prompt, max_steps=3)
    assert [s.render() for s in through.steps] == [s.render() for s in direct.steps]
    assert through.answer == direct.answer and through.ended == direct.ended
    assert through.tokens()["completion"] == direct.tokens()["completion"]


def test_a_missing_model_says_to_pull_it(ollama):
    model = load_model("ollama:qwen2.5:3b", host=ollama.url)
    with pytest.raises(ModelError, match=r"has no model 'qwen2.5:3b'; run `ollama pull qwen2.5:3b`"):
        model.complete("Thought 1:", stop=["\n"], max_tokens=5)


def test_a_closed_port_says_to_start_ollama():
    model = load_model("ollama:gemma3:270m", host=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(
        ModelError, match=r"cannot reach Ollama at http://127\.0\.0\.1:\d+; start it with `ollama serve`"
    ):
        model.complete("Thought 1:", stop=["\n"], max_tokens=5)


def test_a_prompt_longer_than_the_context_ends_the_episode(ollama):
    model = load_model("ollama:gemma3:270m", host=ollama.url, n_ctx=256)
    with pytest.raises(ContextLengthExceeded, match=r"exceeds the available context size \(256 tokens\)"):
        model.complete("word " * 400, stop=["\n"], max_tokens=5)
    demo = load_collection()
    traj = react(demo.questions[0].question, demo.env(demo.questions[0]), model)
    assert traj.ended == "context" and traj.steps == []


def _cli(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RAWREACT, "run", *map(str, args)], capture_output=True, text=True, env={**os.environ, **env}, timeout=600
    )


def test_the_cli_runs_hotpotqa_on_ollama_with_the_host_from_the_environment(ollama, rows, tmp_path):
    data, out = tmp_path / "dev.json", tmp_path / "run.jsonl"
    data.write_text(json.dumps(rows[:2]))
    done = _cli(data, "--model", "ollama:gemma3:270m", "--out", out, "-q", "--max-steps", "2", OLLAMA_HOST=ollama.url)
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert [r["question"] for r in records] == [row["question"] for row in rows[:2]]
    assert manifest["config"]["model"] == "ollama:gemma3:270m" and manifest["model_name"] == "ollama:gemma3:270m"
    for record in records:
        calls = [c for step in record["trajectory"]["steps"] for c in step["calls"]]
        assert calls and all(c["completion_tokens"] > 0 for c in calls)
        assert record["ended"] in ("finish", "max_steps") and record["steps"] >= 1


def test_the_cli_refuses_a_grammar_and_explains_ollama_errors(ollama, tmp_path):
    refused = _cli("--model", "ollama:gemma3:270m", "--ollama-host", ollama.url, "--grammar")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "model ollama:gemma3:270m cannot apply a grammar; drop --grammar" in refused.stderr
    missing = _cli("--model", "ollama:llama3:8b", "--ollama-host", ollama.url, "-q")
    assert missing.returncode == 2 and "run `ollama pull llama3:8b`" in missing.stderr
    closed = _cli("--model", "ollama:gemma3:270m", "--ollama-host", f"127.0.0.1:{free_port()}", "-q")
    assert closed.returncode == 2 and "start it with `ollama serve`" in closed.stderr
    assert "Traceback" not in missing.stderr + closed.stderr
