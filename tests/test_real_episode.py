"""Whole episodes of the real embedded model in both loops, on the demo and on real HotpotQA."""

from pathlib import Path

from rawreact import PassageEnv, load_prompt, react
from rawreact.agents.guardrails import supported
from rawreact.core.actions import split_step
from rawreact.tasks.hotpotqa import from_rows


def _check_episode(traj, calls):
    for step in traj.steps:
        # every step either ran a parsed action or says why not
        assert (step.action is not None) != (step.error is not None), step
        assert step.error in (None, "no action", "truncated")
        assert all(c.finish_reason in ("stop", "length") and c.completion_tokens > 0 for c in step.calls)
        # a call stops once its action line is complete: no text follows a closed action line
        assert "]\n" not in step.calls[0].text, step.calls[0].text
        _, line, last = split_step(step.calls[0].text)
        assert line is None or last or not line.rstrip().endswith("]"), step.calls[0].text
    assert traj.ended in ("finish", "max_steps")
    assert len(calls) == traj.model_calls
    # the trajectory renders back to exactly the prompt text the model saw at every step
    n = 0
    for step in traj.steps:
        before = traj.transcript(step.i - 1)
        assert calls[n][0] == before + f"Thought {step.i}:"
        if len(step.calls) == 2:
            assert calls[n + 1][0] == before + f"Thought {step.i}: {step.thought}\nAction {step.i}:"
        n += len(step.calls)


def test_embedded_model_runs_a_demo_episode(gemma, demo, recorder):
    model = recorder(gemma)
    question = demo.questions[0]
    traj = react(question.question, demo.env(), model, load_prompt(), max_steps=5)
    _check_episode(traj, model.calls)
    assert traj.steps[0].action is not None and traj.steps[0].action.name == "search"
    # the cache of the growing prompt is reused: later calls evaluate far less than they read
    later = [c for _, c in model.calls[1:]]
    assert later and all(c.evaluated_tokens < c.prompt_tokens / 2 for c in later)


def test_embedded_model_runs_a_hotpotqa_episode(gemma, hotpotqa, recorder):
    row = hotpotqa[1]
    env = PassageEnv({title: sentences for title, sentences in row["context"]})
    model = recorder(gemma)
    traj = react(row["question"], env, model, load_prompt(k=2), max_steps=4)
    _check_episode(traj, model.calls)
    searches = [s for s in traj.steps if s.action is not None and s.action.name == "search"]
    assert searches, traj.transcript()


def test_an_episode_does_not_depend_on_the_episodes_before_it(gemma, demo):
    """Cache reuse keeps greedy runs reproducible: a question gives the same trajectory on a fresh
    model as on one that has just answered other questions (which share a prefix with it)."""
    from rawreact.models.llama import LlamaModel

    prompt, question = load_prompt(), demo.questions[1]
    react(demo.questions[0].question, demo.env(), gemma, prompt, max_steps=1)
    warm = react(question.question, demo.env(), gemma, prompt, max_steps=2)
    cold = react(question.question, demo.env(), LlamaModel(gemma.path), prompt, max_steps=2)
    assert warm.transcript() == cold.transcript()
    assert warm.steps[0].calls[0].evaluated_tokens < cold.steps[0].calls[0].evaluated_tokens


def test_the_reference_loop_runs_a_hotpotqa_episode_on_the_embedded_model(gemma, hotpotqa, recorder):
    """The reference loop on real completions: each call's prompt is the notebook's, and replaying the
    same completions through the loop makes exactly the same calls and the same trajectory."""
    from rawreact import ScriptedModel
    from rawreact.agents.reference import reference_react
    from rawreact.tasks.collection import Question

    row = hotpotqa[1]
    collection = from_rows(Path("hotpotqa.json"), "", [(1, row)])
    question: Question = collection.questions[0]
    model, prompt = recorder(gemma), load_prompt(k=2)
    traj = reference_react(question.question, collection.env(question, loop="reference"), model, prompt, max_steps=3)
    assert traj.loop == "reference" and model.calls[0][0] == prompt.text + f"Question: {row['question']}\nThought 1:"
    n = 0
    for step in [s for s in traj.steps if s.calls]:
        before = traj.transcript(step.i - 1)
        assert model.calls[n][0] == before + f"Thought {step.i}:"
        first = model.calls[n][1].text.strip()
        if step.fallback:
            assert model.calls[n + 1][0] == before + f"Thought {step.i}: {first.split(chr(10))[0]}\nAction {step.i}:"
        else:
            assert f"{step.thought}\nAction {step.i}: {step.action_text}" == first
        n += len(step.calls)
    assert n == len(model.calls) == traj.model_calls
    replay = ScriptedModel([c.text for _, c in model.calls])
    again = reference_react(question.question, collection.env(question, loop="reference"), replay, prompt, max_steps=3)
    assert [h["prompt"] for h in replay.history] == [p for p, _ in model.calls]
    assert [s.render() for s in again.steps] == [s.render() for s in traj.steps]
    assert (again.answer, again.ended) == (traj.answer, traj.ended)


def test_the_repeat_policies_on_the_embedded_model(gemma, hotpotqa, recorder):
    """Gemma 270M searches the same title again; "note" tells it so in the next prompt, "stop" ends
    the episode at that very step, and both make the same calls up to it."""
    from rawreact.agents.methods import solve
    from rawreact.runs.run import Result

    row = hotpotqa[0]
    collection = from_rows(Path("hotpotqa.json"), "", [(1, row)])
    question = collection.questions[0]
    runs = {}
    for policy in ("note", "stop"):
        model = recorder(gemma)
        out = solve(question.question, collection.env(question), model, load_prompt(k=2), max_steps=3, repeats=policy)
        runs[policy] = (out, model.calls, Result(question, out).to_dict())
    note, note_calls, note_record = runs["note"]
    stop, stop_calls, stop_record = runs["stop"]
    first = next(s for s in note.steps if s.repeat_of is not None)  # it does repeat itself
    assert first.note.startswith(f" (Note: step {first.repeat_of} already did ")
    if first.i < len(note.steps):
        assert first.note in note_calls[sum(len(s.calls) for s in note.steps[: first.i])][0]
    assert (stop_record["ended"], len(stop.steps), stop_record["repeats"]) == ("repeat", first.i, 1)
    assert [p for p, _ in stop_calls] == [p for p, _ in note_calls[: len(stop_calls)]]
    evidence = note.trajectory.evidence
    assert note_record["supported"] == supported(note.answer, evidence, note.trajectory.search_hits > 0)
