"""The tools method: the same environment driven through a chat model's native tool calls.

The environment's verbs that are tools (`Verb.tool`) are advertised as functions with JSON-schema
parameters: the passage verbs' schemas are prompts/tools/tools.json, and a verb of the user's gets
one made from its declaration (`schema_of`). Each call the model makes is checked before it runs (a known name,
arguments that parse as a JSON object with exactly the function's parameters, each a non-empty
string); a failed check, like every observation, goes back to the model as the tool's result
(a call whose arguments the token limit cut off is told so, and counted as "truncated"),
paired with the call's id. The episode ends when `finish` runs (its argument is the answer), when
the model answers in plain text instead (ended "text": the answer is what the answer parser reads
in the text, else the whole text), at the step
limit, or by a guardrail. Each call is one step of the usual record: the action is the call, the
observation its result; the whole message history is kept as well.
"""

import json
import time
from collections.abc import Callable
from functools import cache

from rawreact.agents.answers import parse_answer
from rawreact.agents.guardrails import Guard
from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import PASSAGE_VERBS, Action, Verbs
from rawreact.core.errors import ContextLengthExceeded, ModelError, PromptError
from rawreact.core.metrics import is_answer
from rawreact.core.resources import resource
from rawreact.core.text import one_line
from rawreact.core.verbs import Verb
from rawreact.environments.env import PassageEnv
from rawreact.models.base import ChatReply, ToolCall

NOT_RUN = "Not run: the episode ended before this call."


@cache
def shipped_tools() -> tuple[dict, ...]:
    """The functions of prompts/tools/tools.json, in OpenAI's `tools` layout."""
    path = resource("prompts", "tools/tools.json")
    try:
        tools = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PromptError(f"{path} line {error.lineno}: not valid JSON: {error.msg}") from None
    names = [t.get("function", {}).get("name") for t in tools] if isinstance(tools, list) else []
    wanted = [verb.name for verb in PASSAGE_VERBS if verb.tool]
    if sorted(n for n in names if n) != sorted(wanted):
        raise PromptError(f"{path}: the functions must be {', '.join(wanted)}, found {names}")
    return tuple(tools)


def tools_for(verbs: Verbs) -> tuple[dict, ...]:
    """The functions the tools method advertises for an environment's verbs: the shipped schema of each
    passage verb, and one made from the declaration of any other (`schema_of`)."""
    shipped = {t["function"]["name"]: t for t in shipped_tools()}
    return tuple(
        shipped[v.name] if v.name in shipped and PASSAGE_VERBS.get(v.name) == v else schema_of(v)
        for v in verbs
        if v.tool
    )


def schema_of(verb: Verb) -> dict:
    """A verb's function in OpenAI's `tools` layout: its name, its description, and its argument (if any)."""
    properties = {} if verb.arg == "none" else {verb.parameter: {"type": "string", "description": verb.parameter}}
    parameters = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {"name": verb.name, "description": verb.description, "parameters": parameters},
    }


def _example(schema: dict) -> str:
    return json.dumps({key: "..." for key in schema.get("required", [])})


def check_call(call: ToolCall, tools: tuple[dict, ...]) -> tuple[Action | None, str]:
    """The action a call asks for, or None and what is wrong with it (the text the model is shown)."""
    specs = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if call.name not in specs:
        return None, f"Error: there is no function {call.name!r}; the functions are {', '.join(specs)}."
    schema = specs[call.name]
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as error:
        return None, (
            f"Error: the arguments of {call.name} are not valid JSON ({error.msg} at character {error.pos}); "
            f"send one JSON object, such as {_example(schema)}."
        )
    except RecursionError:  # nested deeper than the JSON reader goes: no call's arguments are
        return None, f"Error: the arguments of {call.name} are nested too deep; send one flat JSON object."
    if not isinstance(arguments, dict):
        return None, f"Error: the arguments of {call.name} must be a JSON object, such as {_example(schema)}."
    required, known = schema.get("required", []), schema.get("properties", {})
    missing, extra = [k for k in required if k not in arguments], [k for k in arguments if k not in known]
    if missing or extra:
        wrong = [f"missing {', '.join(missing)}"] * bool(missing) + [f"unknown {', '.join(extra)}"] * bool(extra)
        return None, f"Error: {call.name} takes {_example(schema)}; {' and '.join(wrong)}."
    for key in required:
        if not isinstance(arguments[key], str) or not arguments[key].strip():
            return None, f"Error: {key} of {call.name} must be a non-empty string."
        if call.name == "finish" and not is_answer(arguments[key]):  # `。` or a zero-width space says nothing
            return None, f"Error: {key} of {call.name} must be an answer, in letters or digits."
    return Action(call.name, one_line(arguments[required[0]]) if required else ""), ""


def check_model(model) -> None:
    """Refuse a model that cannot take tool calls, saying what to use instead."""
    problem = getattr(model, "chat_problem", None)
    if not callable(getattr(model, "chat", None)):
        problem = f"{model.name} has no chat API with tools"
    if problem:
        raise ModelError(
            f"the tools method needs a chat model with tools, and {problem}; use smollm2-135m, an "
            "ollama:MODEL, or an openai:URL chat server"
        )


def tool_react(
    question: str,
    env: PassageEnv,
    model,
    instruction: str,
    *,
    max_steps: int = 7,
    max_tokens: int = 100,
    on_step: Callable[[Step], None] | None = None,
    repeats: str = "off",
    budget: int | None = None,
    tools: tuple[dict, ...] | None = None,
) -> Trajectory:
    """One episode of native tool calls on `question`; every call a step, the message history kept."""
    tools = tools_for(env.verbs) if tools is None else tools
    check_model(model)
    messages = [{"role": "system", "content": instruction}, {"role": "user", "content": f"Question: {question}"}]
    traj = Trajectory(question, instruction, loop="tools", messages=messages, verbs=env.verbs)
    guard = Guard(repeats, budget, env.verbs)
    env.reset()
    while True:
        if len(traj.steps) >= max_steps:
            traj.ended = "max_steps"
            return traj
        if not guard.allows([c for s in traj.steps for c in s.calls], max_tokens):
            traj.ended = "budget"
            return traj
        start = time.perf_counter()
        try:
            reply = model.chat(messages, list(tools), max_tokens=max_tokens)
        except ContextLengthExceeded:
            traj.ended = "context"
            return traj
        messages.append(_assistant(reply))
        if not reply.tool_calls:  # a plain-text answer: the fallback the record marks
            step = Step(
                len(traj.steps) + 1, reply.content, None, "", "", [reply.call], seconds=time.perf_counter() - start
            )
            traj.steps.append(step)
            if on_step is not None:
                on_step(step)
            traj.answer = text_answer(reply.content)
            traj.ended = "text" if is_answer(traj.answer) else "no_answer"
            return traj
        for k, call in enumerate(reply.tool_calls):
            if traj.ended:
                messages.append(_result(call, NOT_RUN))
                continue
            step = _run(len(traj.steps) + 1, call, reply, k, env, tools)
            step.seconds = time.perf_counter() - start if k == 0 else 0.0
            stop = guard.check(step)
            traj.steps.append(step)
            messages.append(_result(call, step.observation + step.note))
            if on_step is not None:
                on_step(step)
            if env.answer is not None:
                traj.answer, traj.ended = env.answer, "finish" if is_answer(env.answer) else "no_answer"
            elif stop:
                traj.ended = "repeat"
            elif len(traj.steps) >= max_steps and k + 1 < len(reply.tool_calls):
                traj.ended = "max_steps"
        if traj.ended:
            return traj


def text_answer(text: str) -> str:
    """The answer a plain-text reply gives: what the answer parser reads in it (an `Answer:` line, a
    `Finish[...]`, "the answer is X", as for CoT), else the whole text on one line."""
    return parse_answer(text) or one_line(text)


def _run(i: int, call: ToolCall, reply: ChatReply, k: int, env: PassageEnv, tools: tuple[dict, ...]) -> Step:
    """One call checked and run as step `i`; the reply's model call is recorded on its first call's step."""
    action, problem = check_call(call, tools)
    error = "invalid call" if problem else None
    if problem and k == len(reply.tool_calls) - 1 and reply.call.finish_reason == "length":
        error, problem = (
            "truncated",
            (
                f"Error: the call of {call.name} was cut off at the token limit before its arguments ended; "
                "keep the arguments short."
            ),
        )
    observation = problem or env.step(action)[0]
    shown = f"{call.name}({call.arguments})"
    thought = (reply.content or None) if k == 0 else None
    calls = [reply.call] if k == 0 else []
    return Step(i, thought, action, shown, observation, calls, error=error)


def _assistant(reply: ChatReply) -> dict:
    message: dict = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return message


def _result(call: ToolCall, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
