"""Model servers that misbehave: cut-off and garbled replies, silence, and what each server family
must be sent so that greedy decoding and cache reuse mean the same everywhere (audit items 17-22).
"""

import json
import time

import pytest
from servers import OpenAIStub, RawServer, free_port

from rawreact import ModelError, ScriptedModel, load_collection, load_prompt, run_questions
from rawreact.models.base import Completion
from rawreact.models.ollama import OllamaModel
from rawreact.models.openai import OpenAIModel
from rawreact.reports.summary import summarize, summary_line

MODELS = b'{"data": [{"id": "tiny", "owned_by": "vllm"}]}'
COMPLETION = {"choices": [{"text": " Paris", "finish_reason": "stop"}], "usage": {"prompt_tokens": 5}}


def _http(status: str, body: bytes, length: int | None = None) -> bytes:
    length = len(body) if length is None else length
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode() + body


def _models_then(completion):
    """A raw server that lists one model, then answers completions with `completion(connection)`."""

    def reply(connection, line):
        if line.startswith("GET"):
            connection.sendall(_http("200 OK", MODELS))
        else:
            completion(connection)
        connection.close()

    return reply


@pytest.mark.parametrize(
    "name, send",
    [
        ("cut off mid-body", lambda c: c.sendall(_http("200 OK", b'{"choices": [{"te', length=200))),
        ("garbage status line", lambda c: c.sendall(b"NONSENSE\r\n\r\n")),
        ("closed without a reply", lambda c: None),
    ],
)
def test_cut_off_and_garbled_replies_are_retried_then_named(name, send, capsys):
    server = RawServer(_models_then(send))
    model = OpenAIModel(server.url + "/v1", backoff=0.01, retries=2)
    with pytest.raises(ModelError, match=rf"{server.url}/v1/completions: .* after 3 attempts; is the server running"):
        model.complete("Q", stop=[], max_tokens=5)
    assert sum(line.startswith("POST") for line in server.requests) == 3
    assert capsys.readouterr().err.count("retrying (") == 2
    server.close()


def test_a_flaky_reply_is_retried_to_success():
    calls = []

    def send(connection):
        calls.append(1)
        if len(calls) == 1:
            connection.sendall(_http("200 OK", b'{"cho', length=300))
        else:
            connection.sendall(_http("200 OK", json.dumps(COMPLETION).encode()))

    server = RawServer(_models_then(send))
    done = OpenAIModel(server.url + "/v1", backoff=0.01).complete("Q", stop=[], max_tokens=5)
    assert done.text == " Paris" and len(calls) == 2
    server.close()


@pytest.mark.parametrize(
    "body, message",
    [
        ({"choices": [{"text": None}]}, r"answered without a text in choices\[0\]\.text"),
        ({"choices": []}, r"answered without a text in choices\[0\]\.text"),
        ({"choices": [{"text": "x"}], "usage": "many"}, "answered with a malformed usage"),
        ({"choices": [{"text": "x"}], "usage": {"prompt_tokens": "5"}}, "answered with a malformed usage"),
    ],
)
def test_replies_of_the_wrong_shape_are_clear_errors(body, message):
    server = RawServer(_models_then(lambda c: c.sendall(_http("200 OK", json.dumps(body).encode()))))
    with pytest.raises(ModelError, match=message):
        OpenAIModel(server.url + "/v1", backoff=0.01).complete("Q", stop=[], max_tokens=5)
    server.close()


def test_a_models_list_that_is_not_openais_is_a_clear_error():
    server = RawServer(lambda c, line: (c.sendall(_http("200 OK", b'[{"id": "tiny"}]')), c.close()))
    with pytest.raises(ModelError, match=r"/models answered .*not OpenAI's \{\"data\": \[models\]\}"):
        OpenAIModel(server.url + "/v1")
    server.close()


def test_a_silent_server_times_out_with_a_message_while_it_waits(capsys):
    server = RawServer(lambda c, line: c.sendall(_http("200 OK", MODELS)) if line.startswith("GET") else None)
    model = OpenAIModel(server.url + "/v1", timeout=0.6, retries=1, backoff=0.01, slow=0.2)
    with pytest.raises(ModelError, match=r"no answer within 0.6 s \(--timeout\) after 2 attempts"):
        model.complete("Q", stop=[], max_tokens=5)
    err = capsys.readouterr().err
    assert "rawreact: still waiting for" in err and "(it gives up after 0.6 s)" in err
    assert "retrying (1 of 1)" in err
    server.close()


def test_nothing_listening_at_start_up_fails_at_once_without_retries(capsys):
    closed = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelError) as error:
        OpenAIModel(closed, retries=4, backoff=5.0)  # retries would take over a minute
    assert str(error.value).startswith(f"{closed}/models: cannot connect") and "attempts" not in str(error.value)
    assert "retrying" not in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_the_timeout_must_be_a_finite_number_of_seconds(value, capsys):
    from rawreact.cli.app import main

    with pytest.raises(SystemExit) as exit:
        main(["run", "--timeout", value])
    assert exit.value.code == 2 and "argument --timeout:" in capsys.readouterr().err


def Family(owned_by: str, props: dict | None = None, reply: dict | None = None) -> OpenAIStub:
    """A stub server of one family, serving model m, that answers every completion with `reply`."""
    return OpenAIStub(owned_by=owned_by, props=props, default=reply or COMPLETION)


def test_vllm_is_told_not_to_penalize_repeats():
    stub = Family("vllm")
    OpenAIModel(stub.url).complete("Q", stop=[], max_tokens=5)
    assert stub.requests[0]["repetition_penalty"] == 1.0 and "repeat_penalty" not in stub.requests[0]


def test_llama_server_caches_prompts_and_keeps_each_worker_on_its_own_slot(tmp_path):
    stub = Family("llamacpp", props={"total_slots": 2})
    model = OpenAIModel(stub.url)
    assert model.slots == 2
    demo = load_collection()
    # Each call takes a moment, as a real one does: on a busy machine an instant script let one worker take every
    # question before the other started (CI, 2026-12-02), and then only one slot is used.
    script = ScriptedModel(lambda prompt: " t\nAction 1: Finish[x]", seconds_per_call=0.05)

    class Both:  # the server model, with the scripted one deciding nothing: each call goes to the server
        name, supports_grammar, concurrent = "both", False, True

        def complete(self, prompt, **options):
            model.complete(prompt, **options)
            return script.complete(prompt, **options)

    results = list(run_questions(demo.questions[:6], demo.env, Both(), load_prompt(), workers=2))
    assert len(results) == 6
    assert all(r["cache_prompt"] is True and r["repeat_penalty"] == 1.0 for r in stub.requests)
    assert {r["id_slot"] for r in stub.requests} == {0, 1}
    plain = Family("llamacpp")  # llama-cpp-python's server: no /props, so no slot is named
    OpenAIModel(plain.url).complete("Q", stop=[], max_tokens=5)
    assert "id_slot" not in plain.requests[0] and plain.requests[0]["cache_prompt"] is True


def test_evaluated_tokens_are_what_the_server_says_or_unknown():
    cached = dict(COMPLETION, usage={"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 30}})
    assert OpenAIModel(Family("vllm", reply=cached).url).complete("Q", stop=[], max_tokens=5).evaluated_tokens == 20
    timed = dict(COMPLETION, timings={"prompt_n": 7})
    assert OpenAIModel(Family("llamacpp", reply=timed).url).complete("Q", stop=[], max_tokens=5).evaluated_tokens == 7
    assert OpenAIModel(Family("llamacpp").url).complete("Q", stop=[], max_tokens=5).evaluated_tokens is None
    record = {"em": 0, "f1": 0, "ended": "finish", "invalid_actions": 0, "steps": 1, "model_calls": 1, "seconds": 1}
    known = {**record, "tokens": {"prompt": 50, "evaluated": 20, "completion": 3}}
    unknown = {**record, "tokens": {"prompt": 50, "evaluated": None, "completion": 3}}
    assert "20 evaluated tokens" in summary_line(summarize([known, known]))
    assert "unknown evaluated tokens" in summary_line(summarize([known, unknown]))


class FakeClient:
    """An `ollama.Client` stand-in that raises or answers as told, call by call."""

    def __init__(self, outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def generate(self, **request):
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _ollama_reply(text=" Paris"):
    import ollama

    return ollama.GenerateResponse(
        model="m", response=text, done=True, done_reason="stop", prompt_eval_count=12, eval_count=2
    )


def test_ollama_retries_5xx_and_cut_off_replies_and_reports_evaluated_tokens_as_unknown():
    import httpx
    import ollama

    client = FakeClient(
        [ollama.ResponseError("loading", 503), httpx.RemoteProtocolError("peer closed"), _ollama_reply()]
    )
    model = OllamaModel("m", client=client, backoff=0.01)
    done = model.complete("Q", stop=[], max_tokens=5)
    assert client.calls == 3 and done.text == " Paris" and done.prompt_tokens == 12 and done.evaluated_tokens is None
    failing = OllamaModel("m", client=FakeClient([ollama.ResponseError("boom", 500)] * 3), backoff=0.01, retries=2)
    with pytest.raises(ModelError, match="answered HTTP 500: boom"):
        failing.complete("Q", stop=[], max_tokens=5)


def test_ollama_replies_of_another_shape_are_clear_errors():
    import json as json_module

    for problem in (json_module.JSONDecodeError("Expecting value", "<html>", 0), TypeError("not a mapping")):
        model = OllamaModel("m", client=FakeClient([problem]), backoff=0.01)
        with pytest.raises(ModelError, match=r"did not answer as Ollama does .*is --ollama-host"):
            model.complete("Q", stop=[], max_tokens=5)


def test_ollama_against_a_real_server_of_another_kind(tmp_path):
    """A real HTTP server that is not Ollama: the real client's errors become one clear line."""
    server = RawServer(lambda c, line: (c.sendall(_http("200 OK", b"<html>hello</html>")), c.close()))
    model = OllamaModel("m", host=server.url, backoff=0.01)
    with pytest.raises(ModelError, match="did not answer as Ollama does"):
        model.complete("Q", stop=[], max_tokens=5)
    cut = RawServer(lambda c, line: (c.sendall(_http("200 OK", b'{"model": "m", "resp', length=400)), c.close()))
    with pytest.raises(ModelError, match=r"the reply was cut off .* after 3 attempts"):
        OllamaModel("m", host=cut.url, backoff=0.01, retries=2).complete("Q", stop=[], max_tokens=5)
    assert len(cut.requests) == 3
    closed = OllamaModel("m", host=f"http://127.0.0.1:{free_port()}", backoff=5.0)
    with pytest.raises(ModelError, match="cannot reach Ollama at .*; start it with `ollama serve`"):
        closed.complete("Q", stop=[], max_tokens=5)  # the first call fails at once, without retries


def test_a_run_where_most_questions_end_by_context_says_so(tmp_path, capsys, monkeypatch):
    """A server that refuses every prompt as too long (its 400): the run ends, and says so loudly."""
    import rawreact.runs.plan
    from rawreact.cli.app import main
    from rawreact.core.errors import ContextLengthExceeded

    class Overflowing(ScriptedModel):
        def complete(self, prompt, **options) -> Completion:
            raise ContextLengthExceeded("the prompt no longer fits")

    monkeypatch.setattr(rawreact.runs.plan, "load_model", lambda spec, **options: Overflowing([]))
    code = main(["run", "--model", "scripted:unused.json", "--limit", "3", "-q"])
    out, err = capsys.readouterr()
    assert code == 0 and "3 ended by the context window" in out
    assert "rawreact: warning: 3 of 3 questions ended because the prompt outgrew the context window" in err


def test_a_reply_that_trickles_in_is_cut_at_the_timeout():
    """The timeout bounds the whole call, not each read: a reply sent a byte every 0.1 s (about 9 s in
    all) fails at 0.6 s; the one watchdog thread shuts its socket (models/watch.py)."""
    body = json.dumps(COMPLETION).encode()

    def trickle(connection):
        connection.sendall(_http("200 OK", b"", length=len(body)))
        for byte in body:
            try:
                connection.sendall(bytes([byte]))
            except OSError:  # the client shut its end
                return
            time.sleep(0.1)

    server = RawServer(_models_then(trickle))
    model = OpenAIModel(server.url + "/v1", timeout=0.6, retries=0, backoff=0.01)
    with pytest.raises(ModelError, match=r"no answer within 0.6 s \(--timeout\)"):
        model.complete("Q", stop=[], max_tokens=5)
    server.close()
