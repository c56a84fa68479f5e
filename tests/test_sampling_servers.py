"""CoT-SC samples on the server backends: vLLM's `n`, n requests in flight elsewhere, each seeded."""

import pytest
from servers import FakeOllama, OpenAIStub

from rawreact import ModelError, load_model
from rawreact.models.base import WORKER
from rawreact.models.openai import OpenAIModel

USAGE = {"prompt_tokens": 9, "completion_tokens": 6}


def test_vllm_draws_the_samples_in_one_request_with_n():
    choices = [{"index": 1, "text": " b\nQuestion: x", "finish_reason": "stop"},
               {"index": 0, "text": " a", "finish_reason": "length"},
               {"index": 2, "text": " c", "finish_reason": "stop"}]  # fmt: skip
    stub = OpenAIStub([(200, {"choices": choices, "usage": USAGE})], owned_by="vllm")
    samples = OpenAIModel(stub.url).sample("Q", n=3, temperature=0.7, seed=5, stop=["\nQuestion:"], max_tokens=20)
    [sent] = stub.requests
    assert (sent["n"], sent["temperature"], sent["seed"], sent["prompt"]) == (3, 0.7, 5, "Q")
    assert [s.text for s in samples] == [" a", " b", " c"]  # in index order, cut at the stop
    assert [s.finish_reason for s in samples] == ["length", "stop", "stop"]
    assert [s.completion_tokens for s in samples] == [6, 0, 0]  # the request's usage, counted once
    assert [s.prompt_tokens for s in samples] == [9, 9, 9]


def test_vllm_answering_the_wrong_number_of_choices_is_an_error():
    stub = OpenAIStub([(200, {"choices": [{"text": " a", "finish_reason": "stop"}], "usage": USAGE})])
    with pytest.raises(ModelError, match="was asked for 3 choices"):
        OpenAIModel(stub.url).sample("Q", n=3, temperature=0.7, seed=5, stop=[], max_tokens=20)


@pytest.mark.parametrize("owned_by", ["llamacpp", "someone"])
def test_other_servers_get_one_seeded_request_per_sample(owned_by):
    reply = {"choices": [{"text": " x", "finish_reason": "stop"}], "usage": USAGE}
    stub = OpenAIStub(owned_by=owned_by, default=reply)
    model = OpenAIModel(stub.url, temperature=0.0, seed=1)
    samples = model.sample("Q", n=4, temperature=0.7, seed=10, stop=[], max_tokens=20)
    assert len(samples) == 4 and len(stub.requests) == 4 and all("n" not in r for r in stub.requests)
    assert sorted(r["seed"] for r in stub.requests) == [10, 11, 12, 13]
    assert {r["temperature"] for r in stub.requests} == {0.7}
    model.complete("Q", stop=[], max_tokens=5)
    assert (stub.requests[-1]["temperature"], stub.requests[-1]["seed"]) == (0.0, 1)  # greedy calls unchanged


def test_llama_server_samples_go_to_the_workers_slot_and_the_slots_after_it():
    """Sample k of worker w asks for slot (w + k) mod slots, so the samples decode side by side. Before, each
    pool thread lost the worker and asked for slot 0: a llama-server decoded the samples one after another."""
    reply = {"choices": [{"text": " x", "finish_reason": "stop"}], "usage": USAGE}
    stub = OpenAIStub(owned_by="llamacpp", props={"total_slots": 4}, default=reply)
    model = OpenAIModel(stub.url)
    token = WORKER.set(2)
    try:
        model.sample("Q", n=3, temperature=0.7, seed=10, stop=[], max_tokens=20)
        model.complete("Q", stop=[], max_tokens=5)  # the worker's own calls stay on its slot
    finally:
        WORKER.reset(token)
    by_seed = {r["seed"]: r["id_slot"] for r in stub.requests[:3]}
    assert by_seed == {10: 2, 11: 3, 12: 0} and stub.requests[3]["id_slot"] == 2


def test_one_sample_of_each_prompt_goes_in_flight_each_on_its_own_slot():
    """LATS's values of sibling nodes on a server: one request a prompt, each seeded as given, sent as worker + k."""
    stub = OpenAIStub(owned_by="llamacpp", props={"total_slots": 4},
                      default={"choices": [{"text": " 7", "finish_reason": "stop"}], "usage": USAGE})  # fmt: skip
    token = WORKER.set(0)
    try:
        made = OpenAIModel(stub.url).sample_each(["A", "B", "C"], temperature=1.0, seeds=[7, 8, 9], stop=[],
                                                 max_tokens=5)  # fmt: skip
    finally:
        WORKER.reset(token)
    assert [c.text for c in made] == [" 7"] * 3
    sent = {r["prompt"]: (r["seed"], r["id_slot"], r["temperature"]) for r in stub.requests}
    assert sent == {"A": (7, 0, 1.0), "B": (8, 1, 1.0), "C": (9, 2, 1.0)}


def test_ollama_gets_one_seeded_request_per_sample(gemma):
    server = FakeOllama(gemma)
    try:
        model = load_model("ollama:gemma3:270m", host=server.url, seed=1)
        samples = model.sample(
            "Question: Is snow white?\nAnswer:", n=2, temperature=0.7, seed=3, stop=["\n"], max_tokens=5
        )
        assert len(samples) == 2 and all(s.completion_tokens > 0 for s in samples)
        assert sorted((r["options"]["seed"], r["options"]["temperature"]) for r in server.requests) == [
            (3, 0.7),
            (4, 0.7),
        ]
    finally:
        server.close()
