"""OpenAI-compatible completion servers: llama-cpp-python's own server on loopback, serving the
embedded model, end to end; and a stub server for what a real one will not do on demand (fail,
throttle, or be vLLM).
"""

import json
import subprocess
import sys

import pytest
from servers import OpenAIStub, free_port, llama_server

from rawreact import ContextLengthExceeded, ModelError, load_model, read_run
from rawreact.models import build
from rawreact.models.openai import OpenAIModel, parse_spec
from rawreact.models.specs import model_path

RAWREACT = [sys.executable, "-m", "rawreact"]


@pytest.fixture(scope="module")
def server():
    with llama_server(model_path("gemma3-270m")) as url:
        yield url


def _data(questions, tmp_path, chosen):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([questions[i] for i in chosen]))
    return path


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*RAWREACT, "run", *map(str, args)], capture_output=True, text=True, timeout=900)


def test_specs_name_the_family_the_model_and_the_url():
    assert parse_spec("openai:http://127.0.0.1:8080/v1/") == ("auto", None, "http://127.0.0.1:8080/v1")
    assert parse_spec("vllm:Qwen/Qwen2.5-7B@http://gpu:8000/v1") == ("vllm", "Qwen/Qwen2.5-7B", "http://gpu:8000/v1")
    assert parse_spec("llamacpp:m@x@https://h/v1") == ("llamacpp", "m@x", "https://h/v1")
    with pytest.raises(ModelError, match="give the server's base URL, as in openai:http://127.0.0.1:8080/v1"):
        parse_spec("openai:localhost:8000")


def test_the_server_model_writes_what_llama_cpp_python_writes_for_the_request(server, gemma, demo):
    """What rawreact sends the server is what it decodes: the server's completion equals llama-cpp-python's
    own greedy completion of the same prompt and settings (the library the server runs, with the same
    batch size and threads, so the same arithmetic on any build; rawreact's batched engine is another
    computation, whose last bits may round otherwise on other CPU kernels)."""
    import llama_cpp

    model = load_model(f"openai:{server}")
    assert model.family == "llamacpp" and model.supports_grammar and model.model.endswith(".gguf")
    prompt = demo.questions[0].question + "\nThought 1:"
    via = model.complete(prompt, stop=["\nObservation 1:"], max_tokens=30)
    with build.loading(llama_cpp):  # as the server loads it (tests/servers.py)
        library = llama_cpp.Llama(str(gemma.path), n_ctx=8192, n_batch=512, n_threads=2, verbose=False)
    direct = library.create_completion(
        prompt, max_tokens=30, stop=["\nObservation 1:"], temperature=0.0, repeat_penalty=1.0, seed=0
    )
    assert via.text == direct["choices"][0]["text"]
    assert via.finish_reason == ("length" if direct["choices"][0]["finish_reason"] == "length" else "stop")
    assert via.prompt_tokens == direct["usage"]["prompt_tokens"] == len(gemma.tokenize(prompt))
    assert via.completion_tokens == direct["usage"]["completion_tokens"]
    assert via.evaluated_tokens is None  # llama-cpp-python's server does not say what it computed


def test_hotpotqa_questions_run_through_the_server(server, hotpotqa, tmp_path):
    data, out = _data(hotpotqa, tmp_path, [0, 1]), tmp_path / "run.jsonl"
    done = _run(data, "--model", f"openai:{server}", "--out", out, "-q", "--max-steps", "2")
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert [r["question"] for r in records] == [hotpotqa[0]["question"], hotpotqa[1]["question"]]
    assert manifest["model_name"].endswith(f"@{server}")
    for record in records:
        assert record["ended"] in ("finish", "max_steps") and record["tokens"]["prompt"] > 1000
        assert record["tokens"]["evaluated"] is None
        assert all(c["completion_tokens"] > 0 for s in record["trajectory"]["steps"] for c in s["calls"])


def test_the_server_applies_the_grammar(server, rows, tmp_path):
    # With the titles grammar every search must name one of the question's titles: only a server
    # that applied the grammar makes every search a hit.
    data, out = _data(rows, tmp_path, [2]), tmp_path / "run.jsonl"
    done = _run(
        data, "--model", f"openai:{server}", "--grammar", "titles", "--out", out, "-q", "--max-steps", "4", "-k", "1"
    )
    assert done.returncode == 0, done.stderr
    (record,) = read_run(out)[1]
    assert record["invalid_actions"] == 0 and record["searches"] >= 1
    assert record["search_hits"] == record["searches"]


def test_two_workers_answer_every_question_once(server, rows, tmp_path):
    data, out = _data(rows, tmp_path, [3, 4, 5]), tmp_path / "run.jsonl"
    done = _run(data, "--model", f"openai:{server}", "--workers", "2", "--out", out, "--max-steps", "3", "-k", "1")
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert sorted(r["question"] for r in records) == sorted(rows[i]["question"] for i in (3, 4, 5))
    assert manifest["workers"] == 2 and "3 questions: EM" in done.stdout
    for record in records:  # each transcript is printed whole when its question is done
        assert f"=== {record['id']}\nQuestion: {record['question']}\nThought 1:" in done.stdout
        assert record["steps"] >= 1 and record["model_calls"] >= record["steps"]


def Stub(replies, owned_by="vllm") -> OpenAIStub:
    """A stub `/v1` server serving models tiny and big: answers from a list of (status, body) in turn."""
    return OpenAIStub(replies, models=("tiny", "big"), owned_by=owned_by)


OK = {"choices": [{"text": " Paris\nObservation 1: x", "finish_reason": "stop"}], "usage": {"prompt_tokens": 5}}


def test_busy_and_failing_servers_are_retried_with_backoff():
    stub = Stub([(503, {"error": "loading"}), (429, {"error": {"message": "slow down"}}), (200, OK)])
    model = OpenAIModel(stub.url, "tiny", backoff=0.01)
    done = model.complete("Q", stop=["\nObservation 1:"], max_tokens=5)
    assert len(stub.requests) == 3 and done.text == " Paris" and done.prompt_tokens == 5
    failing = Stub([(500, {"error": "boom"})] * 3)
    with pytest.raises(ModelError, match=r"/v1/completions: HTTP 500: boom"):
        OpenAIModel(failing.url, "tiny", backoff=0.01, retries=2).complete("Q", stop=[], max_tokens=5)
    assert len(failing.requests) == 3


def test_errors_name_the_url_and_what_the_server_said():
    stub = Stub([(400, {"error": {"message": "This model's maximum context length is 8192 tokens"}})])
    with pytest.raises(ContextLengthExceeded, match="maximum context length is 8192"):
        OpenAIModel(stub.url, "tiny").complete("Q", stop=[], max_tokens=5)
    with pytest.raises(ModelError, match=r"serves 2 models \(tiny, big\); name one, as in openai:MODEL@http"):
        OpenAIModel(stub.url)
    with pytest.raises(ModelError, match=r"does not serve 'huge'; it serves tiny, big"):
        OpenAIModel(stub.url, "huge")
    closed = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelError, match=rf"{closed}/models: cannot connect \(.*\); is the server running at"):
        OpenAIModel(closed, retries=1, backoff=0.01)  # nothing listens: said at once, without retries


def test_a_vllm_server_gets_the_grammar_in_its_own_fields():
    stub = Stub([(200, OK)])
    model = OpenAIModel(stub.url, "big", seed=3, temperature=0.5)
    assert model.family == "vllm"
    model.complete("Q", stop=["\n"], max_tokens=9, grammar='root ::= "x"')
    (sent,) = stub.requests
    assert sent["guided_grammar"] == 'root ::= "x"' and sent["structured_outputs"] == {"grammar": 'root ::= "x"'}
    assert "grammar" not in sent
    assert {k: sent[k] for k in ("model", "prompt", "stop", "max_tokens", "temperature", "seed")} == {
        "model": "big",
        "prompt": "Q",
        "stop": ["\n"],
        "max_tokens": 9,
        "temperature": 0.5,
        "seed": 3,
    }
    unknown = OpenAIModel(Stub([], owned_by="someone").url, "tiny")
    assert not unknown.supports_grammar
