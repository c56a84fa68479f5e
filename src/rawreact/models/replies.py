"""Talking to an OpenAI-compatible server: the server's error text, Retry-After, and the text and token
counts read out of a reply, each checked, so a malformed reply is one clear error (the request itself is
`watch.fetch`'s)."""

import json

from rawreact.core.errors import ContextLengthExceeded, ModelError
from rawreact.core.text import say

API_KEY = "RAWREACT_API_KEY"  # sent as a bearer token when set


def content_text(content: object) -> str | object:
    """A chat message's text: a string as sent, or the text parts of a list of content parts joined
    (`[{"type": "text", "text": ...}]`, as some servers send); anything else is left for the caller to refuse."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return content


def still_waiting(url: str, slow: float, timeout: float) -> None:
    say(f"still waiting for {url} after {slow:g} s (it gives up after {timeout:g} s)")


def read_reply(url: str, reply: object) -> tuple[str, object, dict[str, int]]:
    """(text, finish reason, usage) of a completion reply, or a clear error naming what is missing."""
    try:
        choice = reply["choices"][0]
        text, finish = choice["text"], choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        text = None
    if not isinstance(text, str):
        raise ModelError(f"{url} answered without a text in choices[0].text: {str(reply)[:200]}")
    return text, finish, reply_usage(url, reply)


def reply_usage(url: str, reply: dict) -> dict[str, int]:
    """The token counts of a reply (0 where the server leaves them out), or a clear error when malformed."""
    usage = reply.get("usage") or {}
    counts = {key: usage.get(key, 0) if isinstance(usage, dict) else None for key in _USAGE}
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values()):
        raise ModelError(f"{url} answered with a malformed usage (token counts): {str(usage)[:200]}")
    return counts


_USAGE = ("prompt_tokens", "completion_tokens")


def evaluated(reply: dict, usage: dict[str, int]) -> int | None:
    """Prompt tokens the server computed, where it says (llama.cpp's timings, vLLM's cached tokens); else None.

    A count below 0 (from a server that reports more cached than prompt tokens) is unknown, never a
    negative cost that a token budget would take as credit.
    """
    found = None
    timings = reply.get("timings")
    usage_reply = reply.get("usage")
    details = usage_reply.get("prompt_tokens_details") if isinstance(usage_reply, dict) else None
    if isinstance(timings, dict) and whole(timings.get("prompt_n")):
        found = timings["prompt_n"]
    elif isinstance(details, dict) and whole(details.get("cached_tokens")):
        found = usage["prompt_tokens"] - details["cached_tokens"]
    return None if found is None or found < 0 else found


def whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def server_said(raw: bytes) -> str:
    """The message in an error reply: OpenAI's {"error": {"message"}}, or whatever text came back."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text[:300] or "no message"
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        error = error.get("message") or error.get("detail") or error
    return str(error)[:300]


def http_error(url: str, code: int, said: str) -> ModelError:
    lowered = said.lower()
    if code == 400 and ("context" in lowered or "exceed" in lowered and "token" in lowered):
        return ContextLengthExceeded(f"{url}: the prompt no longer fits the context window: {said}")
    if code in (401, 403):
        return ModelError(f"{url}: HTTP {code}: {said}; set {API_KEY} to the server's API key")
    if code == 404:
        return ModelError(f"{url}: HTTP 404: {said}; is the base URL right (it usually ends in /v1)?")
    return ModelError(f"{url}: HTTP {code}: {said}")


def retry_after(value: str | None) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0
