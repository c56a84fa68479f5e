"""Ollama, through the official `ollama` client: `generate` with `raw=True`, so no chat template."""

import time

from rawreact.errors import ContextLengthExceeded, ModelError
from rawreact.models.base import Completion, cut_at_stop


class OllamaModel:
    """A model served by Ollama (`ollama:NAME`, such as `ollama:qwen2.5:3b`).

    Ollama has no GBNF grammars, so `supports_grammar` is False and a run with a grammar is
    refused before it starts. The host is `host`, else `OLLAMA_HOST`, else Ollama's default
    (127.0.0.1:11434). Ollama reports only the prompt tokens it evaluated (it reuses a cached
    prefix), so `prompt_tokens` and `evaluated_tokens` both hold that count.
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
        client=None,
    ) -> None:
        if client is None:
            import ollama  # imported here, so the other backends never pay for it

            client = ollama.Client(host=host, timeout=timeout)
        self.client, self.model, self.name = client, model, f"ollama:{model}"
        self.host = str(getattr(getattr(client, "_client", None), "base_url", host or "the Ollama host"))
        self.n_ctx, self.temperature, self.seed = n_ctx, temperature, seed

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, grammar: str | None = None) -> Completion:
        """One raw `generate` call; the text ends before the first stop sequence."""
        if grammar is not None:
            raise ModelError(
                f"{self.name}: Ollama cannot apply a GBNF grammar; drop --grammar, or use a llama.cpp model"
            )
        import ollama

        start = time.perf_counter()
        options = {
            "stop": stop,
            "num_predict": max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "num_ctx": self.n_ctx,
            "repeat_penalty": 1.0,  # Ollama's default is 1.1; rawreact decodes the same on every backend
        }
        try:
            reply = self.client.generate(model=self.model, prompt=prompt, raw=True, think=False, options=options)
        except ConnectionError:
            raise ModelError(
                f"{self.name}: cannot reach Ollama at {self.host}; start it with `ollama serve`, or point "
                "--ollama-host (or OLLAMA_HOST) at it"
            ) from None
        except ollama.ResponseError as error:
            raise _response_error(self, error) from None
        evaluated, generated = reply.prompt_eval_count or 0, reply.eval_count or 0
        if evaluated + generated >= self.n_ctx:  # Ollama shortens an over-long prompt silently
            raise ContextLengthExceeded(
                f"{self.name}: the prompt and completion filled the whole context window of {self.n_ctx} tokens"
            )
        text, _ = cut_at_stop(reply.response or "", stop)
        total = reply.total_duration
        return Completion(
            text=text,
            finish_reason="length" if reply.done_reason == "length" else "stop",
            prompt_tokens=evaluated,
            completion_tokens=generated,
            evaluated_tokens=evaluated,
            seconds=total / 1e9 if total else time.perf_counter() - start,
        )


def _response_error(model: OllamaModel, error) -> ModelError:
    said = str(getattr(error, "error", error))
    if error.status_code == 404 and "not found" in said:
        return ModelError(
            f"{model.name}: Ollama at {model.host} has no model {model.model!r}; run `ollama pull {model.model}`"
        )
    if "context" in said.lower():
        return ContextLengthExceeded(f"{model.name}: the prompt no longer fits the context window: {said}")
    return ModelError(f"{model.name}: Ollama at {model.host} answered HTTP {error.status_code}: {said}")
