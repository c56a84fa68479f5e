"""OpenAI-compatible completion servers: vLLM, the llama.cpp server, llama-cpp-python's server.

Only `/v1/completions` is used (raw text in, raw text out, no chat template). The standard
library's HTTP client is enough for one JSON POST per call, and each call is independent, so
several questions can share one `OpenAIModel` from several threads.
"""

import hashlib
import http.client
import json
import os
import random
import time
import urllib.error
import urllib.request
from functools import partial

from rawreact.core.errors import ModelError, ServerLost
from rawreact.core.text import say
from rawreact.models.base import (
    WORKER,
    ChatReply,
    Completion,
    ToolCall,
    arguments_text,
    call_id,
    cut_at_stop,
    next_turn,
    openai_message,
    sample_each_in_flight,
    sample_in_flight,
)
from rawreact.models.replies import (
    API_KEY,
    content_text,
    evaluated,
    http_error,
    read_reply,
    reply_usage,
    retry_after,
    server_said,
    still_waiting,
)
from rawreact.models.watch import fetch

RETRIED = {408, 409, 429, 500, 502, 503, 504}
# How each server family takes a GBNF grammar. vLLM before 0.12 reads `guided_grammar`, from
# 0.10.2 on `structured_outputs.grammar`; it ignores fields it does not know, so both are sent.
FAMILIES = {"llamacpp": ("grammar",), "vllm": ("guided_grammar", "structured_outputs")}
_OWNERS = {"llamacpp": "llamacpp", "me": "llamacpp", "vllm": "vllm"}  # /v1/models owned_by -> family


def parse_spec(spec: str) -> tuple[str, str | None, str]:
    """`openai:[MODEL@]URL` (or `vllm:`, `llamacpp:`) -> (family or "auto", model or None, base URL)."""
    prefix, rest = spec.split(":", 1)
    model, at, url = rest.rpartition("@")
    if not at:
        model, url = "", rest
    if not url.startswith(("http://", "https://")):
        raise ModelError(
            f"model {spec!r}: give the server's base URL, as in {prefix}:http://127.0.0.1:8080/v1 "
            f"or {prefix}:MODEL@http://127.0.0.1:8000/v1"
        )
    return ("auto" if prefix == "openai" else prefix), (model or None), url.rstrip("/")


def _served(family: str, model: str, entry: dict) -> dict:
    """What a server serves, as a run compares it: the family, the model's name, and a digest of what the
    server says of the model's file (llama-server's `meta`: parameters, size, vocabulary; vLLM's `root`),
    so that two files served under one name are told apart where the server says enough."""
    said = {k: entry[k] for k in ("meta", "root") if entry.get(k) is not None}
    digest = hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest() if said else None
    return {"family": family, "name": model, "digest": digest}


class OpenAIModel:
    """A model behind an OpenAI-compatible `/v1/completions` endpoint.

    `model` is the name the server knows the model by (the only one it serves when omitted).
    `family` says how the server takes a grammar: "llamacpp" (`grammar`), "vllm"
    (`guided_grammar` and `structured_outputs`), or "auto" to read it from `/v1/models`; a server
    of another family is refused a grammar rather than sent one it would ignore. Connection
    errors, timeouts, cut-off replies, 429 and 5xx answers are retried `retries` times with
    exponential backoff; a server that cannot be reached at all when the model is loaded fails at
    once. A call that takes longer than `slow` seconds says so on stderr.
    """

    concurrent = True  # every call is one independent request

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        family: str = "auto",
        temperature: float = 0.0,
        seed: int = 0,
        timeout: float = 300.0,
        retries: int = 4,
        backoff: float = 0.5,
        api_key: str | None = None,
        slow: float = 30.0,
    ) -> None:
        self.base_url, self.temperature, self.seed = base_url.rstrip("/"), temperature, seed
        self.timeout, self.retries, self.backoff, self.slow = timeout, retries, backoff, slow
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY)
        served = self._request("GET", "/models", first=True)
        entries = served.get("data") if isinstance(served, dict) else None
        if not isinstance(entries, list):
            raise ModelError(
                f'{self.base_url}/models answered {str(served)[:100]!r}, not OpenAI\'s {{"data": [models]}}; '
                "is this an OpenAI-compatible API, and does the URL end in /v1?"
            )
        entries = [m for m in entries if isinstance(m, dict) and isinstance(m.get("id"), str)]
        names = [m["id"] for m in entries]
        if model is None:
            if len(names) != 1:
                raise ModelError(
                    f"{self.base_url} serves {len(names)} models ({', '.join(names) or 'none'}); name one, "
                    f"as in openai:MODEL@{self.base_url}"
                )
            model = names[0]
        elif names and model not in names:
            raise ModelError(f"{self.base_url} does not serve {model!r}; it serves {', '.join(names)}")
        self.model = model
        if family == "auto":
            owner = next((m.get("owned_by") for m in entries if m["id"] == model), None)
            family = _OWNERS.get(owner, "other")
        self.family = family
        self.served_model = _served(family, model, next(m for m in entries if m["id"] == model) if names else {})
        self.supports_grammar = family in FAMILIES
        self.name = f"{model}@{self.base_url}"
        self.slots = self._slots() if family == "llamacpp" else None

    def _slots(self) -> int | None:
        """How many slots a C++ llama-server has (its /props says), or None for other llama.cpp servers."""
        root = self.base_url.removesuffix("/v1")
        try:
            with urllib.request.urlopen(root + "/props", timeout=min(self.timeout, 10.0)) as response:
                props = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError, http.client.HTTPException):
            return None
        slots = props.get("total_slots") if isinstance(props, dict) else None
        return slots if isinstance(slots, int) and slots > 0 else None

    def _request(self, method: str, path: str, body: dict | None = None, *, first: bool = False) -> object:
        """One JSON request, retried on what a busy, restarting or flaky server answers; the decoded reply.

        With `first`, a refused connection is not retried: nothing listens there, and saying so at
        once beats retrying in silence.
        """
        url = self.base_url + path
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                say(f"{url}: {problem}; retrying ({attempt} of {self.retries})")  # it may quote the server
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            wait = self.backoff * 2**attempt * (1 + random.random() / 4)
            slow = partial(still_waiting, url, self.slow, self.timeout)
            try:
                return json.loads(fetch(request, self.timeout, self.slow, slow).decode("utf-8"))
            except urllib.error.HTTPError as error:
                said = server_said(error.read())
                if error.code in RETRIED and attempt == self.retries:
                    raise ServerLost(str(http_error(url, error.code, said))) from None
                if error.code not in RETRIED:
                    raise http_error(url, error.code, said) from None
                problem = f"HTTP {error.code}: {said}"
                wait = max(wait, retry_after(error.headers.get("Retry-After")))
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as error:
                reason = getattr(error, "reason", error)
                refused = isinstance(reason, ConnectionRefusedError)
                if isinstance(reason, TimeoutError):
                    problem = f"no answer within {self.timeout:g} s (--timeout)"
                elif isinstance(error, http.client.HTTPException):
                    problem = f"the reply was cut off or garbled ({type(error).__name__})"
                else:
                    problem = f"cannot connect ({reason})"
                if attempt == self.retries or (first and refused):
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise ServerLost(f"{url}: {problem}{tries}; is the server running at {self.base_url}?") from None
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                problem = "the reply is not JSON"
                if attempt == self.retries:
                    raise ModelError(
                        f"{url}: the server's reply is not JSON (after {attempt + 1} attempts); is this an "
                        "OpenAI-compatible API, and does the URL end in /v1?"
                    ) from None
            time.sleep(min(wait, 30.0))
        raise AssertionError("unreachable: the last attempt returns or raises")

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
        """One `/v1/completions` request; the text ends before the first stop sequence.

        `temperature` and `seed` override the model's own for this call (self-consistency samples).
        """
        start = time.perf_counter()
        body = self._body(prompt, stop, max_tokens, temperature, seed)
        if grammar is not None:
            if not self.supports_grammar:
                raise ModelError(
                    f"{self.base_url} is not a llama.cpp or vLLM server, so rawreact does not know how to send it "
                    "a grammar; name the family in the model spec (llamacpp:... or vllm:...), or drop --grammar"
                )
            if self.family == "llamacpp":  # an invalid grammar would crash a llama-cpp-python server
                from rawreact.models.gbnf import check_grammar

                check_grammar(grammar)
            for field in FAMILIES[self.family]:
                body[field] = {"grammar": grammar} if field == "structured_outputs" else grammar
        reply = self._request("POST", "/completions", body)
        text, finish, usage = read_reply(f"{self.base_url}/completions", reply)
        text, _ = cut_at_stop(text, stop)  # servers exclude the stop sequence; make sure of it
        return Completion(
            text=text,
            finish_reason="length" if finish == "length" else "stop",
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            evaluated_tokens=evaluated(reply, usage),
            seconds=time.perf_counter() - start,
        )

    def chat(self, messages: list[dict], tools: list[dict], *, max_tokens: int) -> ChatReply:
        """One `/v1/chat/completions` request with `tools` (the tools method): the reply's text and calls.

        `call.text` of the reply is the server's message as JSON. A call without an id gets
        `call_TURN_K`; arguments sent as an object rather than JSON text are written back as JSON.
        """
        start = time.perf_counter()
        url = f"{self.base_url}/chat/completions"
        body = self._settings(max_tokens, None, None)
        body |= {"messages": [openai_message(m) for m in messages], "tools": tools, "tool_choice": "auto"}
        reply = self._request("POST", "/chat/completions", body)
        try:
            choice = reply["choices"][0]
            message, finish = choice["message"], choice.get("finish_reason")
            content = content_text(message.get("content"))
            listed = message.get("tool_calls") or []
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ModelError(f"{url} answered without a message in choices[0].message: {str(reply)[:200]}") from None
        turn, calls = next_turn(messages), []
        for k, listed_call in enumerate(listed if isinstance(listed, list) else []):
            function = listed_call.get("function") if isinstance(listed_call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or not isinstance(content, str):
                raise ModelError(f"{url} answered with a malformed tool call: {str(listed_call)[:200]}")
            arguments = arguments_text(function.get("arguments"))
            calls.append(ToolCall(str(listed_call.get("id") or call_id(turn, k)), name, arguments))
        usage = reply_usage(url, reply)
        done = Completion(
            text=json.dumps(message, ensure_ascii=False),
            finish_reason="length" if finish == "length" else "stop",
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            evaluated_tokens=evaluated(reply, usage),
            seconds=time.perf_counter() - start,
        )
        return ChatReply(content, calls, done)

    def _body(self, prompt: str, stop: list[str], max_tokens: int, temperature: float | None, seed: int | None) -> dict:
        """The request body every completion request shares."""
        return {"prompt": prompt, "stop": stop} | self._settings(max_tokens, temperature, seed)

    def _settings(self, max_tokens: int, temperature: float | None, seed: int | None) -> dict:
        """What every request (completion or chat) sends: model, decoding, and the family's own settings."""
        body = {
            "model": self.model,
            "max_tokens": max_tokens,
            "temperature": self.temperature if temperature is None else temperature,
            "seed": self.seed if seed is None else seed,
        }
        if self.family == "llamacpp":
            body["repeat_penalty"] = 1.0  # llama.cpp servers penalize repeats by default (1.1)
            body["cache_prompt"] = True  # older llama-server builds default to recomputing the prompt
            if self.slots:  # each worker keeps to its own slot, so each question reuses its own cache
                body["id_slot"] = WORKER.get() % self.slots
        elif self.family == "vllm":
            body["repetition_penalty"] = 1.0  # vLLM applies the model's generation_config.json otherwise
        return body

    def sample_each(
        self, prompts: list[str], *, temperature: float, seeds: list[int], stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """One sample of each prompt, as requests in flight at once (each on a slot of its own, on llama-server)."""
        return sample_each_in_flight(
            self, prompts, temperature=temperature, seeds=seeds, stop=stop, max_tokens=max_tokens
        )

    def sample(
        self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """`n` samples: one request with `n` on vLLM, else `n` requests at once (sample k seeded `seed + k`).

        llama.cpp's servers answer one choice per request, and a server of unknown family may
        ignore `n`. vLLM reports usage for the whole request: it is counted on the first sample.
        """
        if self.family != "vllm" or n == 1:
            return sample_in_flight(
                self, prompt, n=n, temperature=temperature, seed=seed, stop=stop, max_tokens=max_tokens
            )
        start = time.perf_counter()
        url = f"{self.base_url}/completions"
        reply = self._request(
            "POST", "/completions", self._body(prompt, stop, max_tokens, temperature, seed) | {"n": n}
        )
        _, _, usage = read_reply(url, reply)
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not isinstance(choices, list) or len(choices) != n:
            raise ModelError(f"{url} was asked for {n} choices and answered {str(choices)[:200]}")
        seconds, samples = time.perf_counter() - start, []
        for k, choice in enumerate(sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)):
            text, finish, _ = read_reply(url, {"choices": [choice]})
            samples.append(
                Completion(
                    text=cut_at_stop(text, stop)[0],
                    finish_reason="length" if finish == "length" else "stop",
                    prompt_tokens=usage["prompt_tokens"],
                    completion_tokens=usage["completion_tokens"] if k == 0 else 0,
                    evaluated_tokens=evaluated(reply, usage) if k == 0 else 0,
                    seconds=seconds if k == 0 else 0.0,
                )
            )
        return samples
