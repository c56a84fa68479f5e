"""The loop with the scripted model: the exact prompts, the fallback call, truncation, limits."""

import pytest

from rawreact import (
    Action,
    ContextLengthExceeded,
    ModelError,
    PassageEnv,
    ScriptedModel,
    Trajectory,
    load_prompt,
    react,
)

PAGES = {
    "Orlo": "Orlo is a village on Lake Veshna. It holds a lantern festival.",
    "Orlo Lantern Festival": "The Orlo Lantern Festival was founded in 1954. It is held in October.",
}
PROMPT = "Answer questions.\n\n"


def test_episode_prompts_are_the_growing_transcript():
    model = ScriptedModel(
        [
            " I need Orlo.\nAction 1: Search[Orlo]\nObservation 1: invented by the model",
            " Orlo has a festival.\nAction 2: Lookup[festival]",
            " I need the festival.\nAction 3: search[ Orlo Lantern Festival ]\n",
            " It was founded in 1954.\nAction 4: Finish[1954]",
        ]
    )
    traj = react("When was the festival of Orlo founded?", PassageEnv(PAGES), model, PROMPT)
    assert traj.answer == "1954" and traj.ended == "finish" and traj.model_calls == 4
    assert traj.transcript() == (
        "Answer questions.\n\nQuestion: When was the festival of Orlo founded?\n"
        "Thought 1: I need Orlo.\nAction 1: Search[Orlo]\n"
        "Observation 1: Orlo is a village on Lake Veshna. It holds a lantern festival.\n"
        "Thought 2: Orlo has a festival.\nAction 2: Lookup[festival]\n"
        "Observation 2: (Result 1 / 1) It holds a lantern festival.\n"
        "Thought 3: I need the festival.\nAction 3: Search[Orlo Lantern Festival]\n"
        "Observation 3: The Orlo Lantern Festival was founded in 1954. It is held in October.\n"
        "Thought 4: It was founded in 1954.\nAction 4: Finish[1954]\nObservation 4: Episode finished.\n"
    )
    for i, call in enumerate(model.history, 1):
        assert call["prompt"] == traj.transcript(i - 1) + f"Thought {i}:"
        assert call["stop"] == [f"\nObservation {i}:", "]\n"] and call["max_tokens"] == 100
    assert [s.action for s in traj.steps] == [
        Action("search", "Orlo"),
        Action("lookup", "festival"),
        Action("search", "Orlo Lantern Festival"),
        Action("finish", "1954"),
    ]


def test_missing_action_line_asks_again_for_the_action_alone():
    model = ScriptedModel(
        [" I should look for Orlo.\nThen I will see.", " Search[Orlo]\nmore", " done\nAction 2: Finish[x]"]
    )
    traj = react("q?", PassageEnv(PAGES), model, PROMPT)
    first = traj.steps[0]
    assert len(first.calls) == 2 and first.action == Action("search", "Orlo") and first.error is None
    assert model.history[1]["prompt"] == PROMPT + "Question: q?\nThought 1: I should look for Orlo.\nAction 1:"
    assert model.history[1]["stop"] == ["\n"]
    assert model.history[2]["prompt"] == traj.transcript(1) + "Thought 2:"
    assert traj.model_calls == 3 and traj.answer == "x"


def test_an_unreadable_action_becomes_an_observation():
    model = ScriptedModel([" x\nAction 1: Open[Orlo]", " no action here", " still none", " y\nAction 3: Finish[z]"])
    traj = react("q?", PassageEnv(PAGES), model, PROMPT)
    assert traj.steps[0].observation == "Invalid action: Open[Orlo]" and traj.steps[0].error == "no action"
    assert traj.steps[0].action_text == "Open[Orlo]" and len(traj.steps[0].calls) == 1
    assert traj.steps[1].observation == "Invalid action: still none" and len(traj.steps[1].calls) == 2
    assert traj.invalid_actions == 2 and traj.answer == "z"


def test_a_completion_cut_in_its_action_is_never_executed():
    long = " x\nAction 1: Finish[a very long answer that goes on"
    model = ScriptedModel([long, " answer that goes on and on and on", " y\nAction 2: Finish[short]"])
    traj = react("q?", PassageEnv(PAGES), model, PROMPT, max_tokens=6)
    step = traj.steps[0]
    assert step.finish_reason == "length" and step.action is None and step.error == "truncated"
    # Its line was continued by one more call, cut again: the whole of what it wrote is shown.
    said = "Invalid action: Finish[a very long answer that goes on and on (cut off at the token limit)"
    assert step.observation == said and len(step.calls) == 2
    assert traj.answer == "short" and traj.steps[1].finish_reason == "stop"


def test_an_action_line_cut_after_a_long_thought_is_continued_to_its_end():
    whole = " a long thought\nAction 1: Finish[The Hork Bajir Chronicles]"
    model = ScriptedModel([whole, " Bajir Chronicles]\nObservation 1: x"])
    traj = react("q?", PassageEnv(PAGES), model, PROMPT, max_tokens=7)
    assert traj.answer == "The Hork Bajir Chronicles" and traj.steps[0].error is None
    assert [c.finish_reason for c in traj.steps[0].calls] == ["length", "stop"]
    continued = model.history[1]
    assert continued["prompt"] == model.history[0]["prompt"] + " a long thought\nAction 1: Finish[The Hork"
    assert continued["stop"] == ["\n"] and continued["max_tokens"] == 7
    act = ScriptedModel([" Finish[The Hork Bajir Chronicles]", " Bajir Chronicles]"])
    traj = react("q?", PassageEnv(PAGES), act, PROMPT, max_tokens=2, thoughts=False)
    assert traj.answer == "The Hork Bajir Chronicles" and act.history[1]["prompt"].endswith("Action 1: Finish[The Hork")
    # Under a step grammar the line is what the grammar let through: it is not continued.
    graded = ScriptedModel([whole, " y\nAction 2: Finish[short]"])
    traj = react("q?", PassageEnv(PAGES), graded, PROMPT, max_tokens=7, grammar="step")
    assert traj.steps[0].error == "truncated" and len(traj.steps[0].calls) == 1


def test_the_step_limit_ends_with_an_empty_answer():
    env = PassageEnv(PAGES)
    traj = react("q?", env, ScriptedModel([" t\nAction 1: Search[Orlo]"] * 3), PROMPT, max_steps=3)
    assert traj.ended == "max_steps" and traj.answer == "" and env.answer == "" and len(traj.steps) == 3


def test_context_overflow_ends_the_episode():
    class Overflowing(ScriptedModel):
        def complete(self, prompt, **options):
            if len(self.history) == 1:
                raise ContextLengthExceeded("full")
            return super().complete(prompt, **options)

    traj = react("q?", PassageEnv(PAGES), Overflowing([" t\nAction 1: Search[Orlo]"]), PROMPT)
    assert traj.ended == "context" and len(traj.steps) == 1 and traj.answer == ""


def test_default_prompt_and_json_round_trip():
    model = ScriptedModel([" t\nAction 1: Finish[b]"])
    traj = react("  A question\nwith a break? ", PassageEnv(PAGES), model)
    assert traj.prompt == load_prompt().text and traj.question == "  A question\nwith a break? "  # as given
    again = Trajectory.from_json(traj.to_json())
    assert again == traj and again.transcript() == traj.transcript()


def test_on_step_sees_each_step_as_it_happens():
    seen = []
    model = ScriptedModel([" a\nAction 1: Search[Orlo]", " b\nAction 2: Finish[c]"])
    react("q?", PassageEnv(PAGES), model, PROMPT, on_step=lambda step: seen.append((step.i, len(model.history))))
    assert seen == [(1, 1), (2, 2)]


def test_the_script_running_out_is_a_clear_error():
    with pytest.raises(ModelError, match="has 1 completions and was asked for call 2; add completions"):
        react("q?", PassageEnv(PAGES), ScriptedModel([" a\nAction 1: Search[Orlo]"]), PROMPT)


def test_step_json_carries_its_finish_reason_and_token_totals():
    model = ScriptedModel([" a b\nno action", " Search[Orlo]", " c\nAction 2: Finish[d]"])
    traj = react("q?", PassageEnv(PAGES), model, PROMPT)
    first = traj.to_dict()["steps"][0]
    assert first["finish_reason"] == "stop" and len(first["calls"]) == 2
    # "Answer questions. Question: q? Thought 1:" is 6 words; the fallback prompt adds "a b Action 1:"
    assert first["tokens"] == {"prompt": 6 + 10, "evaluated": 6 + 10, "completion": 4 + 1}
    assert traj.tokens()["completion"] == 5 + 4


def test_a_script_by_question_goes_on_with_the_step_whose_line_the_token_limit_cut(tmp_path):
    """The scripted model by question answers the loop's continuation of a cut line with the rest of that step's
    text, as a model goes on from where it stopped: cut again, the line is not carried out."""
    import json

    from rawreact import load_model

    path = tmp_path / "s.json"
    steps = [" Long.\nAction 1: Search[" + "very " * 30 + "long]", " Done.\nAction 2: Finish[z]"]
    path.write_text(json.dumps({"questions": {"q?": steps}}))
    traj = react("q?", PassageEnv(PAGES), load_model(f"scripted:{path}"), PROMPT, max_tokens=8)
    assert traj.steps[0].error == "truncated" and len(traj.steps[0].calls) == 2
    assert traj.steps[0].calls[1].text == " very" * 8 and traj.answer == "z"
    traj = react("q?", PassageEnv(PAGES), load_model(f"scripted:{path}"), PROMPT, max_tokens=30)
    step = traj.steps[0]
    assert step.observation.startswith("Could not find very very") and step.error is None and len(step.calls) == 2
