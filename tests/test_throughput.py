"""Several questions decoded together by the embedded model, and the few-shot prefix computed once."""

import json
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from rawreact import load_model, load_prompt, react, read_run, run_questions
from rawreact.models.base import WORKER
from rawreact.models.batch import Engine, Request
from rawreact.models.gbnf import llama_cpp_module

RAWREACT = [sys.executable, "-m", "rawreact"]


def test_a_batched_run_writes_a_whole_record_for_every_question(demo, tmp_path):
    """Three questions decode together; every record is whole and its token counts add up."""
    model, out = load_model("gemma3-270m", workers=3), tmp_path / "three.jsonl"
    results = run_questions(demo.questions, demo.env, model, load_prompt(), out=out, workers=3, max_steps=2)
    three = {r.question.id: r for r in results}
    records = read_run(out)[1]
    assert sorted(r["id"] for r in records) == sorted(three) == sorted(q.id for q in demo.questions)
    for record in records:
        traj = record["trajectory"]
        calls = [c for step in traj["steps"] for c in step["calls"]]
        assert record["ended"] in ("finish", "max_steps") and 1 <= record["steps"] == len(traj["steps"]) <= 2
        assert record["model_calls"] == len(calls) and all(c["completion_tokens"] > 0 for c in calls)
        assert record["tokens"]["prompt"] == sum(c["prompt_tokens"] for c in calls)
        assert record["tokens"]["evaluated"] == sum(c["evaluated_tokens"] for c in calls)
        assert all(0 < c["evaluated_tokens"] <= c["prompt_tokens"] for c in calls)
        assert traj["steps"][0]["observation"]
    calls = [c for r in records for s in r["trajectory"]["steps"] for c in s["calls"]]
    assert sum(c["evaluated_tokens"] == c["prompt_tokens"] for c in calls) == 1  # one call computed the prefix
    assert all(r.outcome.trajectory.prompt == load_prompt().text for r in three.values())


def test_a_question_does_not_depend_on_the_order_of_the_questions(gemma, demo):
    """The few-shot prefix is computed once and copied: each question evaluates only what it adds,
    and gives the same trajectory whatever questions came before it."""
    prompt, questions = load_prompt(), demo.questions[:3]
    prefix = len(gemma.tokenize(prompt.text))

    def run(order):
        out = {}
        for q in order:
            traj = react(q.question, demo.env(), gemma, prompt, max_steps=1)
            first = traj.steps[0].calls[0]
            assert first.evaluated_tokens == first.prompt_tokens - prefix  # the prefix is copied, never evaluated
            out[q.id] = traj.transcript()
        return out

    gemma.keep_prefix(prompt.text)
    react(questions[0].question, demo.env(), gemma, prompt, max_steps=1)  # the prefix exists before either order
    forward, backward = run(questions), run(list(reversed(questions)))
    assert forward == backward and len(set(forward.values())) == 3


def test_a_prompt_used_again_after_others_is_kept_again(gemma, demo):
    """An engine keeps the prefixes used last; a prompt used again after two others (as a Reflexion run's
    few-shot prompt is, between its reflections) is computed again once, then copied."""
    question = demo.questions[0].question
    prompts = [load_prompt(), load_prompt(method="act"), load_prompt(method="cot")]
    prefix = len(gemma.tokenize(prompts[0].text))
    for prompt in prompts:  # each kept, the first one pushed out by the two after it
        gemma.keep_prefix(prompt.text)
        gemma.complete(prompt.text + f"Question: {question}\nThought 1:", stop=["\n"], max_tokens=2)
    again = [react(question, demo.env(), gemma, prompts[0], max_steps=1).steps[0].calls[0] for _ in range(2)]
    assert again[0].evaluated_tokens == again[0].prompt_tokens  # computed again, into its own sequence
    assert again[1].evaluated_tokens == again[1].prompt_tokens - prefix  # then copied: only the question


def test_a_batched_run_killed_midway_resumes_with_every_question_once(demo, tmp_path):
    out = tmp_path / "run.jsonl"
    command = [*RAWREACT, "run", "--model", "gemma3-270m", "--out", str(out), "-q", "--max-steps", "2", "-k", "1"]
    run = subprocess.Popen([*command, "--workers", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not out.exists() or out.read_text().count("\n") < 2:
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)
    kept = read_run(out)[1]
    assert 2 <= len(kept) < len(demo.questions)
    resumed = subprocess.run([*command, "--workers", "2", "--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(q.id for q in demo.questions)
    assert [r["id"] for r in read_run(out)[1][: len(kept)]] == [r["id"] for r in kept]  # nothing written is lost


def test_self_consistency_samples_decode_together_and_repeat_with_their_seed(gemma):
    text = f"{load_prompt(k=2).text}Question: Which lake feeds the river Tam?\nThought:"
    options = {"n": 4, "temperature": 0.7, "stop": ["\n\n"], "max_tokens": 30}
    first, again = gemma.sample(text, seed=3, **options), gemma.sample(text, seed=3, **options)
    assert [c.text for c in first] == [c.text for c in again] and len({c.text for c in first}) > 1
    assert first[0].evaluated_tokens > 0 and [c.evaluated_tokens for c in first[1:]] == [0, 0, 0]


def test_a_pass_over_separate_caches_is_one_llama_cpp_batch_whatever_order_the_calls_came_in(gemma, monkeypatch):
    """With a cache of its own for each stream, llama.cpp computes a pass in one piece only where its
    sequences ascend by one, and splits it elsewhere (each piece reads all the weights again). The engine
    writes the pass in that order. llama.cpp's node callback counts the graphs computed: each asks once a node."""
    llama_cpp = llama_cpp_module()
    asks = [0]

    @llama_cpp.ggml_backend_sched_eval_callback
    def count(tensor, ask, data):
        asks[0] += ask
        return False

    defaults = llama_cpp.llama_context_default_params

    def counted():
        params = defaults()
        params.cb_eval = count
        return params

    monkeypatch.setattr(llama_cpp, "llama_context_default_params", counted)
    engine = Engine(gemma.llm, streams=3, n_ctx=512, n_threads=1, rows=3)  # every waiting token in one pass
    passes, decode = [], llama_cpp.llama_decode

    def decode_counted(ctx, batch):
        asks[0] = 0
        code = decode(ctx, batch)
        passes.append(([batch.seq_id[k][0] for k in range(batch.n_tokens)], asks[0]))
        return code

    monkeypatch.setattr(llama_cpp, "llama_decode", decode_counted)

    def call(stream: int, prompt: str, max_tokens: int) -> None:
        WORKER.set(stream)
        engine.run(Request(prompt, gemma.tokenize(prompt), lambda logits: int(np.argmax(logits)), [], max_tokens))

    first = threading.Thread(target=call, args=(2, "Monday, Tuesday, Wednesday,", 16))
    first.start()
    while not passes:  # stream 2 decodes first: the calls of 0 and 1 join it later, after it in the engine's list
        time.sleep(0.001)
    later = [threading.Thread(target=call, args=(s, f"{s + 1}, {s + 2}, {s + 3},", 6)) for s in (0, 1)]
    for thread in later:
        thread.start()
    for thread in [first, *later]:
        thread.join()
    engine.close()
    nodes = passes[0][1]  # stream 2's prompt alone: one graph
    together = [asked for seqs, asked in passes if sorted(seqs) == [0, 1, 2]]  # a token of each stream
    assert len(together) >= 3 and set(together) == {nodes}
    assert all(asked % nodes == 0 for _, asked in passes)


def test_questions_in_turn_copy_the_prefix_into_their_stream_once(demo, monkeypatch):
    """Between separate caches llama.cpp copies a stream's whole cache (every one of its n_ctx cells), so a
    stream whose first cells are the prefix's copy keeps them: three questions in turn copy it once."""
    llama_cpp, copies = llama_cpp_module(), []
    copy = llama_cpp.llama_memory_seq_cp
    monkeypatch.setattr(llama_cpp, "llama_memory_seq_cp", lambda *args: copies.append(args[1:3]) or copy(*args))
    model, prompt = load_model("gemma3-270m", n_ctx=2048), load_prompt()  # a new engine: no stream holds a prefix
    prefix = len(model.tokenize(prompt.text))
    model.keep_prefix(prompt.text)
    firsts = [react(q.question, demo.env(), model, prompt, max_steps=1).steps[0].calls[0] for q in demo.questions[:3]]
    assert copies == [(1, 0)]  # the prefix's sequence into stream 0, once it was computed
    assert [c.prompt_tokens - c.evaluated_tokens for c in firsts] == [0, prefix, prefix]
