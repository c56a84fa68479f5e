"""The second hardening round, models and terminals: token counts that cannot be, a timeout that bounds
the whole call, a second signal that stops at once, limits checked before the model loads, and outside
text escaped on stderr (audit items 8, 12, 13, 18, 20)."""

import json
import signal
import subprocess
import sys
import time

import pytest
from servers import OpenAIStub, RawServer
from test_audit_runfiles import _record
from test_audit_servers import MODELS, _http
from test_runs import _data

from rawreact import ModelError, RunFile, load_model, read_run
from rawreact.models.ollama import OllamaModel
from rawreact.models.openai import OpenAIModel

RAWREACT = [sys.executable, "-m", "rawreact"]


def _cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*RAWREACT, *map(str, args)], capture_output=True, text=True, timeout=timeout)


# Item 8: a server's impossible counts are unknown, never a negative cost.


@pytest.mark.parametrize(
    "usage, timings",
    [
        ({"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 50}}, None),
        ({"prompt_tokens": 5, "completion_tokens": 1}, {"prompt_n": -3}),
    ],
)
def test_evaluated_tokens_that_cannot_be_are_unknown(usage, timings):
    reply = {"choices": [{"text": " Paris", "finish_reason": "stop"}], "usage": usage}
    stub = OpenAIStub(default=reply | ({"timings": timings} if timings else {}))
    try:
        call = OpenAIModel(stub.url).complete("Q", stop=[], max_tokens=5)
    finally:
        stub.close()
    assert call.evaluated_tokens is None and call.prompt_tokens == 5


# Item 12: --timeout bounds each attempt's whole time; a second Ctrl-C or SIGTERM stops at once.


def _trickle(seconds: float = 40.0):
    """A reply whose headers come at once and whose body comes a byte a second (for at most `seconds`)."""

    def send(connection):
        body = b'{"choices": [{"text": " x", "finish_reason": "stop"}]}' + b" " * 200
        connection.sendall(_http("200 OK", b"", length=len(body)))
        for byte in body[: int(seconds)]:
            try:
                connection.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(1)

    return send


def test_a_server_that_trickles_its_reply_is_cut_off_at_the_timeout():
    def reply(connection, line):
        if line.startswith("GET"):
            connection.sendall(_http("200 OK", MODELS))
        else:
            _trickle()(connection)
        connection.close()

    server = RawServer(reply, limit=5)
    model = OpenAIModel(server.url + "/v1", timeout=2, retries=1, backoff=0.01)
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"no answer within 2 s \(--timeout\) after 2 attempts"):
        model.complete("Q", stop=[], max_tokens=5)
    assert time.monotonic() - start < 12  # two attempts of 2 s each, not the 40 s the server would take
    server.close()


def test_ollama_that_trickles_its_reply_is_cut_off_at_the_timeout():
    def reply(connection, line):
        body = b'{"model": "m", "response": " x", "done": true, "done_reason": "stop"}' + b" " * 100
        connection.sendall(_http("200 OK", b"", length=len(body)))
        for byte in body[:40]:
            try:
                connection.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(1)
        connection.close()

    server = RawServer(reply, limit=5)
    model = OllamaModel("m", host=server.url, timeout=2, retries=1, backoff=0.01)
    model._answered = True  # as after a first answer: a failure is retried
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"no answer within 2 s \(--timeout\) after 2 attempts"):
        model.complete("Q", stop=[], max_tokens=5)
    assert time.monotonic() - start < 12
    server.close()


def test_a_second_sigterm_stops_a_run_waiting_on_a_server_at_once_and_keeps_the_finished(rows, tmp_path):
    answered = []

    def reply(connection, line):
        if line.startswith("GET"):
            connection.sendall(_http("200 OK", MODELS))
        elif not answered:
            answered.append(line)
            body = json.dumps({"choices": [{"text": " Done.\nAction 1: Finish[x]", "finish_reason": "stop"}]})
            connection.sendall(_http("200 OK", body.encode()))
        else:
            _trickle(60)(connection)
        connection.close()

    server = RawServer(reply, limit=10)
    out = tmp_path / "run.jsonl"
    command = [*RAWREACT, "run", str(_data(rows, tmp_path, 3)), "--model", f"openai:{server.url}/v1"]
    run = subprocess.Popen([*command, "--timeout", "60", "--out", str(out), "-q"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text().count("\n") == 1) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)  # the second question's call is under way, trickling
    run.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    start = time.monotonic()
    run.send_signal(signal.SIGTERM)
    code = run.wait(timeout=30)
    assert time.monotonic() - start < 10 and code == 128 + signal.SIGTERM, run.stderr.read()
    assert "--resume finishes" in run.stderr.read()
    assert [r["prediction"] for r in read_run(out)[1]] == ["x"]
    server.close()


# Item 13: a seed no backend takes is refused before any model time.


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_a_seed_out_of_range_is_refused_up_front(seed, rows, tmp_path):
    done = _cli("run", "--seed", seed, "--limit", "1")
    assert done.returncode == 2 and f"seed={seed}" in done.stderr and "internal error" not in done.stderr
    done = _cli("compare", _data(rows, tmp_path, 1), "--variant", f"a=seed={seed}", "--out", tmp_path / "c")
    assert done.returncode == 2 and f"seed={seed}" in done.stderr
    with pytest.raises(ModelError, match="seed=-1"):
        load_model("gemma3-270m", seed=-1)


# Item 18: outside text on stderr is escaped as transcripts are.


def test_escape_sequences_in_ids_and_server_errors_never_reach_the_terminal(tmp_path):
    out = tmp_path / "run.jsonl"
    sink = RunFile(out, {})
    sink.append(_record("\x1b]0;pwned\x07\x1b[2J"))
    sink.close()
    done = _cli("show", out, "--id", "nope")
    assert done.returncode == 2 and "\x1b" not in done.stderr and "\\x1b]0;pwned\\x07" in done.stderr
    stub = OpenAIStub([(400, {"error": {"message": "bad \x1b[2J\x1b]0;title\x07 request"}})])
    try:
        done = _cli("run", "--model", f"openai:{stub.url}", "--limit", "1")
    finally:
        stub.close()
    assert done.returncode == 2 and "\x1b" not in done.stderr and "bad \\x1b[2J" in done.stderr
    stub = OpenAIStub([(503, {"error": "busy \x1b[31m"})], default={"choices": [{"text": " Finish[x]"}]})
    try:
        done = _cli("run", "--model", f"openai:{stub.url}", "--limit", "1", "--max-steps", "1")
    finally:
        stub.close()
    assert "retrying" in done.stderr and "\x1b" not in done.stderr and "busy \\x1b[31m" in done.stderr


# Item 20: limits of the embedded model, refused before it loads, naming the real limit.


@pytest.mark.parametrize("args", [("--workers", "300"), ("--method", "cot-sc", "--samples", "300")])
def test_more_sequences_than_llama_cpp_has_are_refused_naming_its_limit(args):
    done = _cli("run", *args, "--limit", "1")
    assert done.returncode == 2 and "at most 254" in done.stderr and "n-ctx" not in done.stderr
    assert "Thought 1" not in done.stdout  # refused before any question


def test_the_sequence_limit_is_llama_cpps():
    from rawreact.models.gbnf import llama_cpp_module
    from rawreact.models.specs import LLAMA_MAX_SEQUENCES

    assert llama_cpp_module().llama_max_parallel_sequences() == LLAMA_MAX_SEQUENCES


def test_a_context_beyond_what_the_model_was_trained_for_is_refused_before_it_is_allocated():
    done = _cli("run", "--n-ctx", "100000000", "--limit", "1", timeout=60)
    assert done.returncode == 2 and "trained with a context window of 32,768 tokens" in done.stderr
