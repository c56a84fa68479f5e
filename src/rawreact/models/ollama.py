"""Ollama, through the official `ollama` client: `generate` with `raw=True`, so no chat template."""

import json
import random
import threading
import time

from rawreact.core.errors import ContextLengthExceeded, ModelError
from rawreact.core.text import say
from rawreact.models.base import (
    ChatReply,
    Completion,
    ToolCall,
    arguments_text,
    call_id,
    cut_at_stop,
    next_turn,
    sample_in_flight,
    within,
)

RETRIED = {408, 429, 500, 502, 503, 504}


class OllamaModel:
    """A model served by Ollama (`ollama:NAME`, such as `ollama:qwen2.5:3b`).

    Ollama has no GBNF grammars, so `supports_grammar` is False and a run with a grammar is
    refused before it starts. The host is `host`, else `OLLAMA_HOST`, else Ollama's default
    (127.0.0.1:11434). Current Ollama servers count the whole prompt in `prompt_eval_count`,
    whether or not they reused a cached prefix, so that count is `prompt_tokens` and the
    evaluated tokens are unknown (None). Cut-off replies, timeouts and 5xx answers are retried
    `retries` times with backoff; a refused connection on the first call fails at once.
    """

    supports_grammar = False
    concurrent = True  # the client is thread-safe; Ollama queues or batches requests itself

    def __init__(
        self,
        model: str,
        *,
        host: str | None = None,
        n_ctx: int = 8192,
        temperature: float = 0.0,
        seed: int = 0,
        timeout: float = 300.0,
        retries: int = 4,
        backoff: float = 0.5,
        slow: float = 30.0,
        client=None,
    ) -> None:
        if client is None:
            import ollama  # imported here, so the other backends never pay for it

            client = ollama.Client(host=host, timeout=timeout)
        self.client, self.model, self.name = client, model, f"ollama:{model}"
        self.host = str(getattr(getattr(client, "_client", None), "base_url", host or "the Ollama host"))
        self.n_ctx, self.temperature, self.seed = n_ctx, temperature, seed
        self.timeout, self.retries, self.backoff, self.slow = timeout, retries, backoff, slow
        self._answered = False  # until a call has been answered, a refused connection is not retried

    def complete(
        self,
        prompt: str,
        *,
        stop: list[str],
        max_tokens: int,
        grammar: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        """One raw `generate` call; the text ends before the first stop sequence.

        `temperature` and `seed` override the model's own for this call (self-consistency samples).
        """
        if grammar is not None:
            raise ModelError(
                f"{self.name}: Ollama cannot apply a GBNF grammar; drop --grammar, or use a llama.cpp model"
            )
        start = time.perf_counter()
        options = {"stop": stop} | self._options(max_tokens, temperature, seed)
        reply = self._call(
            lambda: self.client.generate(model=self.model, prompt=prompt, raw=True, think=False, options=options)
        )
        if not isinstance(reply.response, str):
            raise ModelError(f"{self.name}: Ollama at {self.host} answered without a text: {str(reply)[:200]}")
        return self._completion(reply, cut_at_stop(reply.response, stop)[0], start)

    def sample(
        self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """`n` samples as `n` requests at once (Ollama has no `n`); sample k has seed `seed + k`."""
        return sample_in_flight(self, prompt, n=n, temperature=temperature, seed=seed, stop=stop, max_tokens=max_tokens)

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """One `chat` request with `tools` (the tools method): the reply's text and calls.

        Ollama sends a call's arguments as an object and gives calls no id: they are written back
        as JSON text, with the id `call_TURN_K`. `call.text` of the reply is Ollama's message as JSON.
        """
        start = time.perf_counter()
        options = self._options(max_tokens, None, None)
        sent = [_ollama_message(m) for m in messages]
        reply = self._call(
            lambda: self.client.chat(model=self.model, messages=sent, tools=tools, think=False, options=options)
        )
        message, turn = reply.message, next_turn(messages)
        calls = [
            ToolCall(call_id(turn, k), c.function.name, arguments_text(dict(c.function.arguments or {})))
            for k, c in enumerate(message.tool_calls or [])
        ]
        text = json.dumps(message.model_dump(exclude_none=True), ensure_ascii=False, default=str)
        return ChatReply(message.content or "", calls, self._completion(reply, text, start))

    def _options(self, max_tokens: int, temperature: float | None, seed: int | None) -> dict:
        """The options every request (generate or chat) sends; `temperature` and `seed` override the model's."""
        return {
            "num_predict": max_tokens,
            "temperature": self.temperature if temperature is None else temperature,
            "seed": self.seed if seed is None else seed,
            "num_ctx": self.n_ctx,
            "repeat_penalty": 1.0,  # Ollama's default is 1.1; rawreact decodes the same on every backend
        }

    def _completion(self, reply, text: str, start: float) -> Completion:
        """What a reply cost, with `text` as its text; a reply that filled the context window is an error."""
        evaluated, generated = reply.prompt_eval_count or 0, reply.eval_count or 0  # the client checked the types
        if evaluated + generated >= self.n_ctx:  # Ollama shortens an over-long prompt silently
            raise ContextLengthExceeded(
                f"{self.name}: the prompt and completion filled the whole context window of {self.n_ctx} tokens"
            )
        total = reply.total_duration
        return Completion(
            text=text,
            finish_reason="length" if reply.done_reason == "length" else "stop",
            prompt_tokens=evaluated,
            completion_tokens=generated,
            evaluated_tokens=None,  # prompt_eval_count counts the whole prompt, cached or not
            seconds=total / 1e9 if total else time.perf_counter() - start,
        )

    def _call(self, send):
        """One request (`send()`), retried on what a busy, restarting or flaky server answers."""
        import httpx
        import ollama

        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                say(f"{self.name}: {problem}; retrying ({attempt} of {self.retries})")  # it may quote the server
            warning = threading.Timer(self.slow, self._still_waiting)
            warning.daemon = True
            warning.start()
            try:
                reply = within(self.timeout, send)  # the client's timeout bounds each read, this the whole call
                self._answered = True
                return reply
            except ConnectionError:
                problem = f"cannot reach Ollama at {self.host}"
                if not self._answered or attempt == self.retries:
                    raise ModelError(
                        f"{self.name}: {problem}; start it with `ollama serve`, or point --ollama-host "
                        "(or OLLAMA_HOST) at it"
                    ) from None
            except ollama.ResponseError as error:
                if error.status_code not in RETRIED or attempt == self.retries:
                    raise _response_error(self, error) from None
                problem = f"HTTP {error.status_code}: {getattr(error, 'error', error)}"
            except (httpx.TimeoutException, TimeoutError):
                problem = f"no answer within {self.timeout:g} s (--timeout)"
                if attempt == self.retries:
                    raise ModelError(
                        f"{self.name}: Ollama at {self.host}: {problem} after {attempt + 1} attempts"
                    ) from None
            except httpx.TransportError as error:  # the connection closed mid-reply, or the reply was garbled
                problem = f"the reply was cut off ({type(error).__name__})"
                if attempt == self.retries:
                    raise ModelError(
                        f"{self.name}: Ollama at {self.host}: {problem} after {attempt + 1} attempts"
                    ) from None
            except (ValueError, TypeError) as error:  # not JSON, or JSON of another shape (pydantic says which)
                raise ModelError(
                    f"{self.name}: {self.host} did not answer as Ollama does ({type(error).__name__}: "
                    f"{str(error)[:200]}); is --ollama-host (or OLLAMA_HOST) an Ollama server?"
                ) from None
            finally:
                warning.cancel()
            time.sleep(min(self.backoff * 2**attempt * (1 + random.random() / 4), 30.0))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _still_waiting(self) -> None:
        waited = f"after {self.slow:g} s (it gives up after {self.timeout:g} s)"
        say(f"still waiting for {self.name} at {self.host} {waited}")


def _ollama_message(message: dict) -> dict:
    """A message as Ollama's chat takes it: call arguments as objects, a tool result named by its function."""
    if message["role"] == "tool":
        return {"role": "tool", "content": message["content"], "tool_name": message.get("name", "")}
    if not message.get("tool_calls"):
        return {"role": message["role"], "content": message.get("content") or ""}
    calls = []
    for call in message["tool_calls"]:
        try:
            arguments = json.loads(call["function"]["arguments"])
        except (json.JSONDecodeError, RecursionError):
            arguments = {}
        calls.append({"function": {"name": call["function"]["name"], "arguments": arguments}})
    return {"role": "assistant", "content": message.get("content") or "", "tool_calls": calls}


def _response_error(model: OllamaModel, error) -> ModelError:
    said = str(getattr(error, "error", error))
    if error.status_code == 404 and "not found" in said:
        return ModelError(
            f"{model.name}: Ollama at {model.host} has no model {model.model!r}; run `ollama pull {model.model}`"
        )
    if "context" in said.lower():
        return ContextLengthExceeded(f"{model.name}: the prompt no longer fits the context window: {said}")
    return ModelError(f"{model.name}: Ollama at {model.host} answered HTTP {error.status_code}: {said}")
