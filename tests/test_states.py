"""Prefix states kept on disk (models.states): a later process reads the few-shot prefix's cells instead of computing
them, and writes the same records as the process that computed them, and as a run that keeps none."""

import json
import os
import subprocess
import sys
from pathlib import Path

from rawreact.agents.prompts import load_prompt
from rawreact.models import states
from rawreact.models.llama import LlamaModel

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from prefix_states import timeless  # noqa: E402 (the benchmark's: a record without when it ran, or how long)

BIN = Path(sys.executable).parent
QUESTIONS = ["Question: Who founded the Orlo Lantern Festival?\nThought 1:", "Question: Where is Calvora?\nThought 1:"]


def _prefix() -> str:
    """The demo prompt's instruction and first exemplar: a few hundred tokens, as a kept prefix is."""
    return load_prompt(k=1).text


def _answers(model: LlamaModel, prefix: str) -> list:
    model.keep_prefix(prefix)
    done = [model.complete(prefix + q, stop=["\nObservation 1:"], max_tokens=12) for q in QUESTIONS]
    return [(c.text, c.prompt_tokens, c.evaluated_tokens, c.completion_tokens) for c in done]


def test_a_second_model_reads_the_prefix_the_first_computed_and_answers_as_it_did(gemma, tmp_path, monkeypatch):
    """The first engine computes the prefix and keeps its state; a second, made later as another process's would be,
    reads it: it computes the prefix's tokens fewer in its passes, and its calls give the same texts and the same
    counts, the prefix counted as evaluated by the first call as when it is computed. (Without a folder none is kept:
    the last test runs that way.)"""
    monkeypatch.setenv("RAWREACT_STATES", str(tmp_path / "states"))
    prefix = _prefix()
    first = LlamaModel(gemma.path, n_ctx=4096, n_threads=1)
    computed = _answers(first, prefix)
    kept = list((tmp_path / "states").glob("*.state"))
    assert len(kept) == 1 and first.engine.states.written == 1 and first.engine.states.read_count == 0
    second = LlamaModel(gemma.path, n_ctx=4096, n_threads=1)
    read = _answers(second, prefix)
    assert second.engine.states.read_count == 1 and second.engine.states.written == 0
    assert read == computed and computed[0][2] == computed[0][1]  # the first call counts the prefix either way
    length = len(first.tokenize(prefix))
    assert length > 200 and first.engine.stats.tokens - second.engine.stats.tokens == length  # the second read it
    # at more threads none is kept: there a state read gave other text than a computed one (models.states)
    assert LlamaModel(gemma.path, n_ctx=4096, n_threads=2).states_folder is None


def test_a_state_cut_short_or_altered_is_computed_again_and_kept_whole(gemma, tmp_path, monkeypatch):
    """A kept state whose bytes do not match their digest is not read: the prefix is computed again, the answers are
    the same, and the state is written again whole."""
    monkeypatch.setenv("RAWREACT_STATES", str(tmp_path / "states"))
    prefix = _prefix()
    computed = _answers(LlamaModel(gemma.path, n_ctx=4096, n_threads=1), prefix)
    (path,) = (tmp_path / "states").glob("*.state")
    whole = path.read_bytes()
    for spoilt in (whole[: len(whole) // 2], whole[:-1] + bytes([whole[-1] ^ 1])):
        path.write_bytes(spoilt)
        model = LlamaModel(gemma.path, n_ctx=4096, n_threads=1)
        assert _answers(model, prefix) == computed
        assert model.engine.states.read_count == 0 and model.engine.states.written == 1
        assert path.read_bytes() == whole


def test_states_are_keyed_by_everything_that_decides_them_and_the_folder_is_trimmed(tmp_path, monkeypatch):
    """Another model file, build or context layout is another state; the folder keeps the states used last within
    its size; one that cannot be written keeps nothing and raises nothing."""
    basis = {"model_sha256": "a" * 64, "llama_cpp": "0.3.36", "features": ["AVX2"], "repack": True, "flash": True,
             "unified": False, "sequences": 3, "chunk": 512}  # fmt: skip
    kept = states.States(tmp_path, lambda: basis)
    tokens = (2, 17, 99)
    paths = {kept.path(tokens), kept.path(tokens[:-1])}
    for key in basis:
        paths.add(states.States(tmp_path, lambda key=key: basis | {key: "other"}).path(tokens))
    assert len(paths) == 2 + len(basis)
    for k in range(4):
        kept.write((k,), bytes(100))
        os.utime(kept.path((k,)), ns=(k * 10**9, k * 10**9))
    states.trim(tmp_path, 2 * 132)
    assert sorted(p.name for p in tmp_path.glob("*.state")) == sorted(kept.path((k,)).name for k in (2, 3))
    assert kept.read((3,)) == bytes(100) and kept.read((0,)) is None
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    states.States(blocked, lambda: basis).write(tokens, b"x")  # nothing kept, nothing raised
    monkeypatch.setenv("RAWREACT_STATES", "off")
    assert states.folder() is None
    monkeypatch.delenv("RAWREACT_STATES")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert states.folder() == tmp_path / "cache" / "rawreact" / "states"


def _run(out: Path, folder: str) -> list[dict]:
    env = dict(os.environ, RAWREACT_STATES=folder)
    command = ["run", "--limit", "2", "-k", "1", "--max-steps", "2", "--threads", "1", "-q", "--out", str(out)]
    done = subprocess.run([str(BIN / "rawreact"), *command], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["llama_cpp"]["prefix_states"] == (None if folder == "off" else folder)
    return [timeless(json.loads(line)) for line in out.read_text().splitlines()]  # without when, or how long


def test_the_command_line_writes_the_same_records_with_a_state_kept_read_or_none(tmp_path):
    """`rawreact run` three times on the demo (one exemplar): computing and keeping the prefix's state, reading it,
    and keeping none. The records are the same, step for step and token for token; the manifest names the folder,
    or none."""
    folder = str(tmp_path / "states")
    computed = _run(tmp_path / "computed.jsonl", folder)
    assert len(list(Path(folder).glob("*.state"))) == 1
    read = _run(tmp_path / "read.jsonl", folder)
    none = _run(tmp_path / "none.jsonl", "off")
    assert len(computed) == 2 and computed == read == none
    first = computed[0]["trajectory"]["steps"][0]["calls"][0]
    assert first["evaluated_tokens"] == first["prompt_tokens"]  # the first call counts the prefix, read or not
