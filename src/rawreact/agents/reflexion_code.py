"""Reflexion's trials as the Reflexion code makes them, where its checkout's prompts are given.

Its HotpotQA `CoTAgent` answers in two calls, a thought and then the action, each stopped at the line
break with 250 tokens, and keeps every text through `format_step`, which deletes line breaks. rawreact's
own CoT trial is one call on its own prompt (`reasoning.reason`): docs/reflexion.md says why.
"""

import time

from rawreact.agents.answers import parse_answer
from rawreact.agents.prompts import Prompt
from rawreact.agents.reasoning import Reasoning, Sample
from rawreact.core.errors import ContextLengthExceeded
from rawreact.core.metrics import is_answer
from rawreact.models.base import Completion, Model, keep_prefix


def format_step(text: str) -> str:
    """A call's text as the Reflexion code keeps it: stripped, its line breaks deleted."""
    return text.strip("\n").strip().replace("\n", "")


# The Reflexion code's CoT agent: a thought, then the action, each a call stopped at the line break with
# this many tokens (its `action_llm`).
REFERENCE_COT_TOKENS = 250


def reference_cot(question: str, model: Model, prompt: Prompt | str, *, header: str, preamble: str) -> Reasoning:
    """One CoT trial as the Reflexion code's `CoTAgent.step` makes it: `Thought:` is completed to the line
    break, then `Action:` (after the thought, stripped), whose `Finish[...]` is the answer. Both calls are
    kept; the sample's text is what the transcript shows after `Thought:`."""
    text = prompt if isinstance(prompt, str) else prompt.text
    keep_prefix(model, text)
    result = Reasoning("cot", question, text, header=header, preamble=preamble)
    start = time.perf_counter()
    try:
        thought = model.complete(result.transcript(), stop=["\n"], max_tokens=REFERENCE_COT_TOKENS)
        shown = f" {format_step(thought.text)}\nAction:"
        action = model.complete(result.transcript() + shown, stop=["\n"], max_tokens=REFERENCE_COT_TOKENS)
    except ContextLengthExceeded:
        result.ended, result.seconds = "context", time.perf_counter() - start
        return result
    result.seconds = time.perf_counter() - start
    calls = [thought, action]
    both = Completion(
        text=shown + action.text,
        finish_reason=action.finish_reason,
        prompt_tokens=thought.prompt_tokens,
        completion_tokens=thought.completion_tokens + action.completion_tokens,
        evaluated_tokens=None
        if None in (thought.evaluated_tokens, action.evaluated_tokens)
        else thought.evaluated_tokens + action.evaluated_tokens,
        seconds=thought.seconds + action.seconds,
    )
    result.samples = [Sample(parse_answer("Action: " + format_step(action.text)), both, calls)]
    result.ended = "finish" if is_answer(result.answer) else "no_answer"
    return result
