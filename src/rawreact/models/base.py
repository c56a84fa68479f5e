"""The narrow waist every model backend implements."""

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

# Which worker of a run is calling (0 to workers - 1): a server backend can keep each worker on
# a cache slot of its own.
WORKER: ContextVar[int] = ContextVar("rawreact_worker", default=0)


@dataclass(frozen=True)
class Completion:
    """What one model call returned, and what it cost.

    `finish_reason` is "stop" (a stop sequence or the end of text) or "length" (the token limit
    cut it). `evaluated_tokens` counts the prompt tokens the backend actually computed, which is
    fewer than `prompt_tokens` when it reused a cached prefix; None when the backend does not say.
    `cached` is True for a reply a call cache gave (`models.cache`): made by an earlier run, with 0 seconds
    and 0 evaluated tokens here.
    """

    text: str
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    evaluated_tokens: int | None = 0
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict:
        """A JSON-ready dict of every field (`cached` only when True, so records of computed calls are as before)."""
        found = asdict(self)
        if not self.cached:
            del found["cached"]
        return found


@dataclass(frozen=True)
class ToolCall:
    """One function call a chat model asked for: its id, the function's name, the arguments as JSON text."""

    id: str
    name: str
    arguments: str


def next_turn(messages: list[dict]) -> int:
    """The number of the assistant turn that answers `messages` (1 for the first)."""
    return sum(m["role"] == "assistant" for m in messages) + 1


def call_id(turn: int, k: int) -> str:
    """The id rawreact gives the k-th call of an assistant turn when the backend gives it none."""
    return f"call_{turn}_{k}"


def arguments_text(arguments: object) -> str:
    """A tool call's arguments as JSON text, as the tools method checks them: text stays as sent, any
    other JSON value (an object, or an array, which the check then refuses) is written as JSON. A value
    nested too deep to write is given as text that is not JSON, so the call is refused as invalid."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (RecursionError, TypeError, ValueError):
        return "(arguments nested too deep to read)"


def openai_message(message: dict) -> dict:
    """A message in OpenAI's chat layout: a tool result is paired by its call's id, without the function's
    `name` that rawreact's history also keeps (for Ollama, which pairs by name, and for reading)."""
    return {k: v for k, v in message.items() if k != "name"} if message["role"] == "tool" else message


@dataclass(frozen=True)
class ChatReply:
    """One assistant turn of a chat model with tools: its text, the calls it asked for, and the model call.

    `call.text` is the reply as the backend gave it (the completion, or the server's message as JSON).
    """

    content: str
    tool_calls: list[ToolCall]
    call: Completion


class Model(Protocol):
    """A completion model: raw text in, raw text out, no chat template.

    `supports_grammar` says whether `complete` can apply a GBNF grammar; a backend that cannot
    (Ollama has no GBNF) says False, and a run with a grammar is refused before it starts.
    `concurrent` says whether several threads may call `complete` at once (a server backend);
    `run_questions` runs more than one worker only on such a model.
    """

    name: str
    supports_grammar: bool
    concurrent: bool

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, grammar: str | None = None) -> Completion:
        """Continue `prompt`; the text ends before the first stop sequence, which is not included."""
        ...

    def sample(
        self, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
    ) -> list[Completion]:
        """`n` samples of `prompt` at `temperature`, reproducible from `seed` where the backend allows."""
        ...


def keep_prefix(model, text: str) -> None:
    """Tell a model that keeps prefix states (the embedded one) that episodes will begin with `text`."""
    keep = getattr(model, "keep_prefix", None)
    if keep is not None:
        keep(text)


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop sequence, and whether one was found."""
    cut = min((found for s in stop if s and (found := text.find(s)) >= 0), default=-1)
    return (text, False) if cut < 0 else (text[:cut], True)


IN_FLIGHT_MAX = 32  # threads one call's samples open on a server: each holds a request (and a watchdog's thread)


def sample_in_flight(
    model, prompt: str, *, n: int, temperature: float, seed: int, stop: list[str], max_tokens: int
) -> list[Completion]:
    """`n` samples as `n` requests in flight at once, sample k seeded with `seed + k` (server backends).

    `model.complete` must take `temperature` and `seed` keywords that override its own settings. Sample 0
    is the calling worker's, and sample k goes as worker + k's: a server with slots answers sample 0 in the
    worker's own slot, whose cells hold the prompt, and the others in the slots after it, so that they decode
    beside it rather than queue behind it for one slot (where every sample went before).
    """
    seeds = [seed + k for k in range(n)]
    return sample_each_in_flight(model, [prompt] * n, temperature=temperature, seeds=seeds, stop=stop,
                                 max_tokens=max_tokens)  # fmt: skip


def sample_each_in_flight(
    model, prompts: list[str], *, temperature: float, seeds: list[int], stop: list[str], max_tokens: int
) -> list[Completion]:
    """One sample of each prompt, as requests in flight at once (LATS's values of sibling nodes on a server):
    prompt k seeded `seeds[k]` and sent as worker + k's, so that a server with slots answers them side by side."""

    def one(k: int, worker: int) -> Completion:
        WORKER.set(worker + k)  # a pool thread starts from an empty context
        return model.complete(prompts[k], stop=stop, max_tokens=max_tokens, temperature=temperature, seed=seeds[k])

    worker = WORKER.get()
    threads = min(len(prompts), IN_FLIGHT_MAX)  # more requests wait for a thread, as a server's slots make them wait
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rawreact-sample") as pool:
        futures = [pool.submit(one, k, worker) for k in range(len(prompts))]
        return [future.result() for future in futures]


def within(seconds: float, send: Callable[[], T]) -> T:
    """`send()`'s result, or TimeoutError once `seconds` have passed, however the reply trickles in.

    An HTTP client's timeout bounds each read of the socket, so a server that sends a byte a second
    holds a call for as long as it likes; this bounds the whole call. `send` runs in a daemon thread,
    left to end on its own (its socket's timeout ends it if the server goes quiet) while the caller
    moves on. The wait is interruptible: a second Ctrl-C stops a run at once.
    """
    done, box = threading.Event(), {}

    def run() -> None:
        try:
            box["value"] = send()
        except BaseException as error:  # handed to the caller, which raises it
            box["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="rawreact-call").start()
    if not done.wait(seconds):
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
