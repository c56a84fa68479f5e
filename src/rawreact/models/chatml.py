"""Tool calls on a completion model in the ChatML function-calling layout, rendered and read here.

The layout is llama-cpp-python's `chatml-function-calling`: ChatML turns, the functions and their
JSON schemas described in the system turn, and a reply that is either `functions.NAME:` followed by
the arguments as one JSON object, or `message:` followed by text. rawreact renders it itself,
because llama-cpp-python 0.3's handler drops every tool result (its template has no `tool` turn,
so the model never sees what a call returned) and HTML-escapes every message (`&` becomes `&amp;`,
a quote `&#34;`). Here a result is a `tool` turn, text stays as it is, and on a llama.cpp model a
grammar (prompts/grammars/tools.gbnf) keeps each reply to one well-formed call or a message, as
llama-cpp-python's handler constrains the function's name and arguments.
"""

import json
from functools import cache
from string import Template

from rawreact.core.errors import PromptError
from rawreact.core.resources import resource
from rawreact.models.base import ChatReply, ToolCall, call_id, next_turn

START, END = "<|im_start|>", "<|im_end|>"
CALL, MESSAGE = "functions.", "message:"


def system_text(instruction: str, tools: list[dict]) -> str:
    """The system turn: the instruction, then each function with its JSON schema, then the reply layout."""
    functions = "".join(
        f"\n{CALL}{t['function']['name']}: {t['function'].get('description', '')}\n"
        f"{json.dumps(t['function']['parameters'], ensure_ascii=False)}\n"
        for t in tools
    )
    try:
        return shipped_template("tools/chatml.txt").substitute(instruction=instruction.strip(), functions=functions)
    except (KeyError, ValueError) as error:
        path = resource("prompts", "tools/chatml.txt")
        raise PromptError(f"{path}: a placeholder is not $instruction or $functions ({error})") from None


@cache
def shipped_template(name: str) -> Template:
    """A shipped template under prompts/, read once (the system turn is rendered on every call)."""
    return Template(resource("prompts", name).read_text(encoding="utf-8"))


def render(messages: list[dict], tools: list[dict]) -> str:
    """The prompt for the next assistant turn: every message as a ChatML turn, tool results included."""
    out = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            content = system_text(content, tools)
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            content = (
                "".join(f"{CALL}{c['function']['name']}:\n{c['function']['arguments']}\n" for c in calls).rstrip("\n")
                or f"{MESSAGE}\n{content}"
            )
        out.append(f"{START}{role}\n{content}{END}\n")
    return "".join(out) + f"{START}assistant\n"


def read_reply(text: str, turn: int) -> tuple[str, list[ToolCall]]:
    """The text and the function calls of a reply; each call's id is `call_TURN_K`.

    A reply that starts with `functions.` is read as calls, one at each line that starts so, its
    arguments being the lines after it, as written (they are checked when the call runs). Anything
    else is a text message, without its `message:` label.
    """
    body = text.strip()
    if not body.startswith(CALL):
        return body.removeprefix(MESSAGE).strip(), []
    calls, lines = [], body.split("\n")
    for line in lines:
        if line.startswith(CALL):
            calls.append([line[len(CALL) :].strip().removesuffix(":").strip(), []])
        else:
            calls[-1][1].append(line)
    return "", [ToolCall(call_id(turn, k), name, "\n".join(args).strip()) for k, (name, args) in enumerate(calls)]


def string_arguments(tools: list[dict]) -> list[tuple[str, str]]:
    """Each function's name and, in GBNF, the JSON object of its arguments: its string parameters, in order (the
    tools grammars take string parameters only)."""
    found = []
    for tool in tools:
        function = tool["function"]
        properties = function["parameters"].get("properties", {})
        if any(spec.get("type") != "string" for spec in properties.values()):
            raise PromptError(f"function {function['name']}: the tools grammar takes string parameters only")
        pairs = ' ", " '.join(f'"\\"{key}\\": " string' for key in properties)
        found.append((function["name"], f'"{{" {pairs} "}}"'))
    return found


def tools_grammar(tools: list[dict]) -> str:
    """The GBNF of a reply: one call whose arguments are the function's string parameters, or a message."""
    alternatives = [f'"{CALL}{name}:\\n" {arguments}' for name, arguments in string_arguments(tools)]
    return shipped_template("grammars/tools.gbnf").substitute(calls=" | ".join(alternatives))


class Constrained:
    """A tools adapter's grammar for a list of tools, built once (`grammar` makes it)."""

    grammar = staticmethod(tools_grammar)

    def __init__(self, model, constrain: bool) -> None:
        self.model, self.constrain = model, constrain
        self._grammars: dict[str, str] = {}

    def grammar_for(self, tools: list[dict]) -> str | None:
        """The grammar of a reply to `tools` when the adapter constrains its replies, else None."""
        if not self.constrain:
            return None
        key = json.dumps(tools, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = self.grammar(tools)
        return self._grammars[key]


class ChatML(Constrained):
    """A chat model with tools over a completion model that speaks ChatML (`model.complete`).

    `constrain` sends the tools grammar with each call (llama.cpp models); without it the model
    may write anything, and a malformed call is handed back to it as the tool's error.
    """

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """The next assistant turn after `messages`."""
        grammar = self.grammar_for(tools)
        call = self.model.complete(render(messages, tools), stop=[END], max_tokens=max_tokens, grammar=grammar)
        content, calls = read_reply(call.text, next_turn(messages))
        return ChatReply(content, calls, call)
