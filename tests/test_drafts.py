"""Prompt-lookup drafts in the embedded engine: the same text as one token a pass, where the logits allow it.

The logic tests run the engine over a stand-in for llama.cpp whose logits depend only on a
sequence's tokens, never on what shares its pass (the property drafting needs of the real
kernels): with it, any number of drafts must give exactly the texts of no drafts. The stand-in
also refuses a token at a position its sequence's cells do not reach, so a rejected draft left in
the cache fails the test. The real-model tests show the mechanics on Gemma 270M, and what the
drafts cost and change on this build (see docs/benchmarks.md).
"""

import ctypes
import json
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact import DataError, Settings, load_model, load_prompt, react
from rawreact.cli.app import main
from rawreact.core.errors import ModelError
from rawreact.models import batch
from rawreact.models.base import WORKER
from rawreact.models.batch import Engine, Request
from rawreact.models.lookup import Lookup
from rawreact.runs.runfile import changed_settings

VOCAB = 12  # token 0 ends the text; token t > 0 is the letter "abcdefghijk"[t - 1]


def next_token(history: list[int]) -> int:
    """A toy model that mostly copies: what followed the last earlier occurrence of the newest token."""
    last, n = history[-1], len(history)
    if (n * 7 + last) % 5 == 0:
        return (last * 3 + n) % VOCAB
    earlier = [i for i in range(n - 1) if history[i] == last]
    return history[earlier[-1] + 1] if earlier else (last + 1) % VOCAB


class FakeLlamaCpp:
    """The parts of llama.cpp's API the engine calls, over `next_token`: cells per sequence, logits per row."""

    LLAMA_FLASH_ATTN_TYPE_ENABLED, LLAMA_FLASH_ATTN_TYPE_DISABLED = 1, 0

    def __init__(self) -> None:
        self.cells: dict[int, list[int]] = {}
        self.rows: dict[int, np.ndarray] = {}
        self.passes: list[int] = []

    def llama_context_default_params(self):
        return SimpleNamespace()

    def llama_init_from_model(self, model, params):
        self.params = params
        return "ctx"

    def llama_get_memory(self, ctx):
        return "memory"

    def llama_batch_init(self, n, embd, n_seq):
        return SimpleNamespace(
            token=[0] * n, pos=[0] * n, n_seq_id=[0] * n, seq_id=[[0] for _ in range(n)], logits=[False] * n
        )

    def llama_decode(self, ctx, batch):
        assert batch.n_tokens <= self.params.n_batch
        self.rows = {}
        for i in range(batch.n_tokens):
            cells = self.cells.setdefault(batch.seq_id[i][0], [])
            if batch.pos[i] != len(cells):  # a gap, or a cell already there (a rejected draft left behind)
                return -1
            cells.append(batch.token[i])
            if batch.logits[i]:
                logits = np.full(VOCAB, -1.0, dtype=np.float32)
                logits[next_token(cells)] = 1.0
                self.rows[i] = logits
        self.passes.append(batch.n_tokens)
        return 0

    def llama_get_logits_ith(self, ctx, i):
        return self.rows[i].ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def llama_memory_seq_rm(self, memory, seq, p0, p1):
        del self.cells.setdefault(seq, [])[max(p0, 0) :]
        return True

    def llama_memory_seq_cp(self, memory, source, target, p0, p1):
        self.cells[target] = list(self.cells.get(source, []))

    def llama_vocab_is_eog(self, vocab, token):
        return token == 0

    def llama_batch_free(self, batch):
        pass

    def llama_free(self, ctx):
        pass


class FakeLlm:
    """What the engine reads of llama-cpp-python's `Llama`: the vocabulary and its text."""

    _model = SimpleNamespace(model="model", vocab="vocab")

    def n_vocab(self):
        return VOCAB

    def detokenize(self, tokens):
        return bytes(96 + t for t in tokens if t)

    def longest_token_prefix(self, a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n


def fake_engine(monkeypatch, streams: int, drafts: int) -> tuple[Engine, FakeLlamaCpp]:
    fake = FakeLlamaCpp()
    monkeypatch.setattr(batch, "llama_cpp_module", lambda: fake)
    return Engine(FakeLlm(), streams=streams, n_ctx=512, n_threads=1, drafts=drafts, rows=streams), fake


def chooser(log: list[int], forbidden: int | None = None):
    """Greedy, as the embedded model picks; `forbidden` stands for a grammar, which also accepts each pick."""

    def choose(logits):
        if forbidden is not None:
            logits = np.where(np.arange(VOCAB) == forbidden, -np.inf, logits)
        log.append(int(np.argmax(logits)))
        return log[-1]

    return choose


def complete(engine, prompts, *, max_tokens, stop=(), forbidden=None, draft=8):
    """Each prompt's completion, the prompts decoded together (one worker each), and each one's picks."""
    results, picks = [None] * len(prompts), [[] for _ in prompts]

    def work(k):
        WORKER.set(k)
        request = Request(str(prompts[k]), prompts[k], chooser(picks[k], forbidden), list(stop), max_tokens)
        request.draft = draft
        engine.run(request)
        results[k] = (request.text, request.finish, request.completion)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, picks


prompts = st.lists(st.integers(1, VOCAB - 1), min_size=2, max_size=40)


@given(
    prompts=st.lists(prompts, min_size=1, max_size=3),
    drafts=st.integers(1, 6),
    max_tokens=st.integers(1, 60),
    stop=st.sampled_from([(), (b"ab",), (b"c", b"kk")]),
    forbidden=st.sampled_from([None, 2]),
)
def test_drafts_give_the_texts_of_one_token_a_pass_when_the_logits_allow_it(
    prompts, drafts, max_tokens, stop, forbidden
):
    """Over batch-invariant logits, any number of drafts gives the same texts, finish reasons and tokens,
    and asks the chooser (the grammar) about exactly the same tokens, for one prompt or several together."""
    with pytest.MonkeyPatch.context() as m:
        plain, fake_plain = fake_engine(m, len(prompts), 0)
        expected = complete(plain, prompts, max_tokens=max_tokens, stop=stop, forbidden=forbidden)
        drafting, fake = fake_engine(m, len(prompts), drafts)
        got = complete(drafting, prompts, max_tokens=max_tokens, stop=stop, forbidden=forbidden)
    assert got == expected
    assert all(len(tokens) <= max_tokens for _, _, tokens in got[0])
    assert drafting.stats.generated == plain.stats.generated == sum(map(len, got[1]))
    assert drafting.stats.accepted <= drafting.stats.drafted
    if len(prompts) == 1:  # (with several, which requests share a pass depends on the threads' timing)
        assert drafting.stats.passes == plain.stats.passes - drafting.stats.accepted
    assert plain.stats.drafted == 0 and max(fake_plain.passes) <= plain.room
    # each stream's cells hold its prompt and text, but for the last token picked, which is never evaluated
    for k, (prompt, (_, _, tokens)) in enumerate(zip(prompts, got[0], strict=True)):
        assert fake.cells[k] == (prompt + tokens)[: len(prompt) + max(len(got[1][k]) - 1, 0)]


def test_drafts_save_passes_where_the_text_is_copied(monkeypatch):
    """A copying text drafts well: half the drafts are kept, each saving a pass, and the passes halve."""
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] * 3 + [1, 2]
    plain, _ = fake_engine(monkeypatch, 1, 0)
    drafting, _ = fake_engine(monkeypatch, 1, 4)
    assert complete(plain, [prompt], max_tokens=40) == complete(drafting, [prompt], max_tokens=40)
    assert drafting.stats.accepted >= drafting.stats.drafted / 2 > 0
    assert drafting.stats.passes == plain.stats.passes - drafting.stats.accepted <= plain.stats.passes / 2


def test_a_request_that_does_not_draft_is_decoded_one_token_a_pass(monkeypatch):
    """Drafting is the request's choice (the embedded model's greedy calls): `draft` 0 adds no tokens."""
    engine, fake = fake_engine(monkeypatch, 1, 4)
    complete(engine, [[1, 2, 3, 1, 2, 3, 1, 2]], max_tokens=10, draft=0)
    assert engine.stats.drafted == 0 and fake.passes[1:] == [1] * (len(fake.passes) - 1)


def test_lookup_proposes_what_followed_the_latest_match():
    lookup = Lookup([5, 6, 7, 8, 1, 5, 6, 9, 4, 5])
    lookup.extend([5, 6])  # "5 5 6" never occurred before; "5 6" last came before 9
    assert lookup.propose(3) == [9, 4, 5]
    assert Lookup([1, 2, 3]).propose(2) == []  # nothing repeats yet
    lookup.extend([5, 6, 9])
    assert lookup.tokens[-3:] == [5, 6, 9] and lookup.propose(2) == [4, 5]


def test_drafts_must_be_a_whole_number_of_0_or_more():
    with pytest.raises(ModelError, match="drafts must be a whole number from 0"):
        load_model("gemma3-270m", drafts=-1)


def test_drafts_on_the_embedded_model_keep_every_limit_and_save_passes(demo):
    """Gemma 270M drafting 2 tokens a pass on a demo question: drafts are made, most are kept, a pass
    gives more than one token, and the texts keep the loop's stop sequences and token limits."""
    model = load_model("gemma3-270m", drafts=2)
    assert not model.flash_attention  # drafting turns it off unless told otherwise
    prompt = load_prompt()
    traj = react(demo.questions[0].question, demo.env(), model, prompt, max_steps=3)
    stats, calls = model.engine.stats, [c for step in traj.steps for c in step.calls]
    assert stats.drafted > 0 and stats.drafted / 2 < stats.accepted <= stats.drafted
    # A call's first token comes from its prompt's last pass; each later pass gives a token and its kept drafts.
    prompt_passes = stats.passes - (stats.generated - len(calls) - stats.accepted)
    assert len(calls) <= prompt_passes <= sum(-(-c.evaluated_tokens // batch.N_BATCH) + 1 for c in calls)
    assert all(c.completion_tokens <= 100 and "\nObservation" not in c.text for c in calls)
    short = model.complete(prompt.text + "Question: Who founded Orlo?\nThought 1:", stop=["\n"], max_tokens=3)
    assert short.completion_tokens == 3 and short.finish_reason == "length"


def test_drafts_are_a_setting_of_the_embedded_model_only():
    with pytest.raises(DataError, match=r"drafts=-1 \(--drafts\) must be at least 0"):
        Settings(drafts=-1)
    with pytest.raises(DataError, match="drafts=2 .* is for the embedded llama.cpp model.*ollama:qwen2.5:3b decodes"):
        Settings(drafts=2, model="ollama:qwen2.5:3b")
    assert Settings(drafts=2, model="my.gguf").drafts == 2


def test_a_run_with_drafts_records_them_in_its_manifest(tmp_path, capsys):
    """`rawreact run --drafts 2` decodes with drafts on the real model, and its manifest says so, so a
    resume without them (whose text can differ) is refused; a run without drafts records 0."""
    out = tmp_path / "run.jsonl"
    args = ["run", "--limit", "1", "--max-steps", "2", "-k", "1", "-q", "--out", str(out)]
    assert main([*args, "--drafts", "2"]) == 0
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["config"]["drafts"] == 2 and manifest["settings"]["drafts"] == 2
    assert main([*args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume would mix two different runs" in err and "drafts was 2, now 0" in err
    assert main([*args[:-1], str(tmp_path / "plain.jsonl")]) == 0
    assert json.loads(Path(f"{tmp_path / 'plain.jsonl'}.manifest.json").read_text())["config"]["drafts"] == 0


def test_a_run_recorded_before_drafts_existed_resumes_without_them_only():
    old = {"model": "gemma3-270m", "seed": 0}  # a manifest config written before `drafts` was recorded
    assert changed_settings(old, old | {"drafts": 0}) == []
    assert changed_settings(old, old | {"drafts": 2}) == ["drafts"]


class TimedLlamaCpp(FakeLlamaCpp):
    """The stand-in, with each pass costing CPU time by the generating tokens in it (`cost`, in ms)."""

    def __init__(self, cost: dict[int, float]) -> None:
        super().__init__()
        self.cost, self.clock, self.generating = cost, 0.0, []

    def llama_decode(self, ctx, batch):
        rows = sum(bool(batch.logits[i]) for i in range(batch.n_tokens))
        if rows == batch.n_tokens:  # one token a sequence: the passes being timed, and a run's generating passes
            self.clock += self.cost.get(rows, 1.0) / 1000
            self.generating.append(rows)
        return super().llama_decode(ctx, batch)


class TimedLlm(FakeLlm):
    model_path = "timed.gguf"

    def tokenize(self, text, add_bos=False):
        return [1 + k % (VOCAB - 1) for k in range(len(text) // 4)]


def test_an_engine_of_several_streams_times_its_passes_and_batches_only_where_it_saves(monkeypatch):
    """Passes cost as Gemma 270M's did on a 2-core EPYC, where 2 or 3 tokens a pass cost more a token than
    one: a pass then takes one of 2 or 3 waiting tokens, 4 of 4 to 7, and 8 of 8; the manifest's record says so."""
    per_pass = {1: 18.0, 2: 54.0, 3: 60.0, 4: 66.0, 6: 114.0, 8: 90.0}
    fake = TimedLlamaCpp(per_pass)
    monkeypatch.setattr(batch, "llama_cpp_module", lambda: fake)
    monkeypatch.setattr(batch.time, "process_time", lambda: fake.clock)
    monkeypatch.setattr(batch, "_MEASURED", {})
    engine = Engine(TimedLlm(), streams=8, n_ctx=512, n_threads=1)
    assert engine.take == {1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 6: 4, 7: 4, 8: 8}
    assert engine.batching["tokens_a_pass"] == {str(n): k for n, k in engine.take.items()}
    assert engine.batching["cpu_ms_a_token"] == {"1": 18.0, "2": 27.0, "3": 20.0, "4": 16.5, "6": 19.0, "8": 11.25}
    assert all(not cells for cells in fake.cells.values())  # the scratch sequences are emptied
    fake.generating.clear()
    # Two prompts decoded together now take turns, a token a pass, and give the texts they give alone.
    prompts = [[1, 2, 3, 1], [4, 5, 4, 6]]
    together = complete(engine, prompts, max_tokens=6, draft=0)
    assert set(fake.generating) == {1}
    alone = complete(Engine(TimedLlm(), streams=1, n_ctx=512, n_threads=1), prompts[:1], max_tokens=6, draft=0)
    assert together[0][0] == alone[0][0]
    # Measured once a process for a model, thread count, attention and layout: a second engine times nothing.
    timed = fake.clock
    assert Engine(TimedLlm(), streams=8, n_ctx=512, n_threads=1).take == engine.take and fake.clock == timed
    # Where batching saves at every count, every waiting token goes in one pass.
    monkeypatch.setattr(batch, "_MEASURED", {})
    fake.cost, fake.cells = {k: 18.0 + 2 * k for k in per_pass}, {}  # a new context's cells
    assert Engine(TimedLlm(), streams=4, n_ctx=512, n_threads=1).take == {1: 1, 2: 2, 3: 3, 4: 4}
