"""Prompts as data: the shipped instruction and exemplars, k, reference JSON files, errors."""

import json

import pytest

from rawreact import PromptError, load_collection, load_prompt
from rawreact.agents.prompts import read_exemplars, read_instruction
from rawreact.core.actions import parse_step
from rawreact.core.resources import resource


def test_default_prompt_is_instruction_then_exemplars():
    prompt = load_prompt()
    exemplars = read_exemplars()
    assert len(exemplars) >= 3 and prompt.exemplars == len(exemplars)
    assert prompt.text == read_instruction() + "".join(e + "\n" for e in exemplars)
    assert prompt.text.endswith("]\n\n")  # the question line follows a blank line


def test_k_takes_the_first_exemplars():
    one, two = load_prompt(k=1), load_prompt(k=2)
    assert one.exemplars == 1 and two.text.startswith(one.text) and len(two.text) > len(one.text)
    assert load_prompt(k=0).text == read_instruction()
    with pytest.raises(PromptError, match="k=99 exemplars asked for, but .* has 4"):
        load_prompt(k=99)


def test_every_exemplar_replays_exactly_on_its_passages():
    """The exemplars' observations are what PassageEnv really answers, and each ends with Finish."""
    collection = load_collection(resource("envs", "exemplars.json"))
    for exemplar in read_exemplars():
        lines = exemplar.splitlines()
        env = collection.env()
        steps = [lines[i : i + 3] for i in range(1, len(lines), 3)]
        for n, step in enumerate(steps, 1):
            thought, action = parse_step(step[0].removeprefix(f"Thought {n}:") + "\n" + step[1], n)
            assert thought and action is not None, step
            observation, done = env.step(action)
            if done:
                assert action.name == "finish" and len(step) == 2 and n == len(steps)
            else:
                assert step[2] == f"Observation {n}: {observation}"
        assert env.answer


def test_reference_json_prompt_is_used_whole(tmp_path):
    text = "Question: q?\nThought 1: t\nAction 1: Finish[a]\n"
    path = tmp_path / "prompts_naive.json"
    path.write_text(json.dumps({"webthink_simple6": text, "other": "x"}))
    instruction = tmp_path / "instruction.txt"
    instruction.write_text("Solve it.\nHere are some examples.\n")
    prompt = load_prompt(path, key="webthink_simple6", instruction=instruction)
    assert prompt.text == "Solve it.\nHere are some examples.\n" + text
    assert prompt.source.endswith("#webthink_simple6") and prompt.exemplars == 1
    with pytest.raises(PromptError, match="has no key 'nope'; choose one with --key: other, webthink_simple6"):
        load_prompt(path, key="nope")
    with pytest.raises(PromptError, match="no key was given"):
        load_prompt(path)
    with pytest.raises(PromptError, match="used whole; drop -k"):
        load_prompt(path, key="other", k=2)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "line 1: not valid JSON"),
        ('["a list"]', "must be a JSON object of prompt strings"),
    ],
)
def test_bad_reference_files(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(PromptError, match=message):
        load_prompt(path, key="x")


def test_bad_exemplar_file_names_the_line(tmp_path):
    path = tmp_path / "ex.txt"
    path.write_text("Question: a\nThought 1: b\n\nQuestion: c\n\nThought 1: orphan\n")
    with pytest.raises(PromptError, match=r"ex.txt line 6: an exemplar must start with 'Question:'"):
        load_prompt(path)
    with pytest.raises(PromptError, match="cannot read the prompt file"):
        load_prompt(tmp_path / "missing.txt")


def test_every_reflexion_exemplar_replays_on_its_passages_and_ends_with_one_reflection():
    """The failed trials of prompts/reflexion/ are what PassageEnv really answers; CoT's and the context
    prompt's paragraphs are the passages' own sentences."""
    collection = load_collection(resource("envs", "exemplars.json"))
    for exemplar in read_exemplars(method="reflect-react"):
        lines = exemplar.splitlines()
        assert lines[-1].startswith("Reflection: ") and lines[0].startswith("Question: ")
        env = collection.env()
        for n, k in enumerate(range(1, len(lines) - 1, 3), 1):
            thought, action = parse_step(lines[k].removeprefix(f"Thought {n}:") + "\n" + lines[k + 1], n)
            assert thought and action is not None, lines[k : k + 2]
            observation, _ = env.step(action)
            assert lines[k + 2] == f"Observation {n}: {observation}"
    for exemplar in read_exemplars(method="reflect-cot"):
        lines = exemplar.splitlines()
        assert [line.split(":")[0] for line in lines] == ["Question", "Thought", "Answer", "Reflection"]
    sentences = [s for t in collection.passages for s in collection.env().pages.sentences(t)]
    for exemplar in read_exemplars(method="cot-context"):
        context, *rest = exemplar.split("\nQuestion: ")
        paragraphs = context.removeprefix("Context: ").splitlines()
        assert paragraphs and all(any(paragraph.startswith(s) for s in sentences) for paragraph in paragraphs), (
            paragraphs
        )
        assert "\nAnswer: " in rest[0]
