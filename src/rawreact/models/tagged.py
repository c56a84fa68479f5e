"""Tool calls in a model's own chat template, for the templates that call tools in `<tool_call>` tags.

Qwen2.5's template (and the Hermes models' it follows) lists the tools as JSON inside `<tools></tools>` in
the system turn, and the model calls one by writing `<tool_call>` and a JSON object with the function's
`name` and `arguments`, then `</tool_call>`; a tool's result goes back in a user turn, inside
`<tool_response>` tags. The prompt is rendered by the model's own template (the Jinja text its GGUF file
carries, as Hugging Face renders it, with jinja2, which llama-cpp-python installs), so the model sees the
layout it was trained on; a grammar (prompts/grammars/tagged.gbnf) keeps each reply to one well-formed call
or to text. `ChatML` (models/chatml.py) is the layout of the other chat models.
"""

import json
import re
from functools import cache

from rawreact.core.errors import PromptError
from rawreact.models.base import ChatReply, ToolCall, call_id, next_turn
from rawreact.models.chatml import Constrained, shipped_template, string_arguments

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def speaks_tagged(template: str | None) -> bool:
    """Whether a chat template calls tools in `<tool_call>` tags (Qwen2.5, Hermes)."""
    return bool(template) and CALL_OPEN in template and "tools" in template


@cache
def _environment():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def tojson(value, indent=None, ensure_ascii=False, sort_keys=False):  # as transformers' chat templates have it
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)

    environment.filters["tojson"] = tojson
    return environment


def render(template: str, messages: list[dict], tools: list[dict]) -> str:
    """The prompt for the next assistant turn, by the model's own template: every message, the tools, and the
    assistant's opening. A call's arguments are given to the template as the object they are (the template
    writes them as JSON)."""
    shown = []
    for message in messages:
        message = dict(message, content=message.get("content") or "")
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c["function"]["name"], "arguments": _loaded(c)}}
                for c in message["tool_calls"]
            ]
        shown.append(message)
    try:
        return _environment().from_string(template).render(messages=shown, tools=tools, add_generation_prompt=True)
    except Exception as error:  # noqa: BLE001 (jinja2's errors: a template this layout cannot render)
        raise PromptError(f"the model's chat template could not render the tools method's turns: {error}") from None


def _loaded(call: dict):
    arguments = call["function"].get("arguments") or "{}"
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def read_reply(text: str, turn: int) -> tuple[str, list[ToolCall]]:
    """The text and the calls of a reply: each `<tool_call>` block's JSON object (its `name` and `arguments`,
    kept as JSON text), and the text before the first block. A block that is not such an object is a call with
    no name and the block as its arguments, which the tools method hands back to the model as an error."""
    first = text.find(CALL_OPEN)
    if first < 0:
        return text.strip(), []
    calls = []
    for k, found in enumerate(_CALL.finditer(text[first:])):
        body = found.group(1)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            arguments = data.get("arguments", {})
            calls.append(ToolCall(call_id(turn, k), data["name"], json.dumps(arguments, ensure_ascii=False)))
        else:
            calls.append(ToolCall(call_id(turn, k), "", body))
    return text[:first].strip(), calls


def tools_grammar(tools: list[dict]) -> str:
    """The GBNF of a reply: one call, in tags, whose arguments are the function's string parameters, or text."""
    alternatives = [
        f'"{{\\"name\\": \\"{name}\\", \\"arguments\\": " {arguments} "}}"'
        for name, arguments in string_arguments(tools)
    ]
    return shipped_template("grammars/tagged.gbnf").substitute(calls=" | ".join(alternatives))


class Tagged(Constrained):
    """A chat model with tools over a completion model whose template calls tools in `<tool_call>` tags.

    `end` is the text that ends the assistant's turn (ChatML's `<|im_end|>`); `constrain` sends the tools
    grammar with each call.
    """

    grammar = staticmethod(tools_grammar)

    def __init__(self, model, template: str, end: str, constrain: bool) -> None:
        super().__init__(model, constrain)
        self.template, self.end = template, end

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """The next assistant turn after `messages`."""
        prompt = render(self.template, messages, tools)
        call = self.model.complete(prompt, stop=[self.end], max_tokens=max_tokens, grammar=self.grammar_for(tools))
        content, calls = read_reply(call.text, next_turn(messages))
        return ChatReply(content, calls, call)
