"""Several OpenAI-compatible servers of one model, used as one model: a fleet.

Each episode stays on one endpoint for all its calls (`episode()`), so that server's prompt cache serves
the growing transcript. A new episode goes to the least-loaded healthy endpoint with room: an endpoint
takes at most its slot count (a C++ llama-server's /props says it), else `per_endpoint`, else any number.
An endpoint that refuses, times out or fails mid-episode (`ServerLost`, after its own short retries), or
answers what no retry can fix (a reply that is not JSON, or has no choices, an HTML page, a 404), is
taken out of rotation (said once per server and problem) for a back-off that doubles with each failure
(from `backoff` seconds, at most a minute), and probed (GET /models) before it is used again. The
episode it was running raises `EpisodeLost`, which `run_questions` answers by starting the episode
over on another endpoint. When no endpoint answers, an episode's start raises a `ModelError` that
says so: the run stops, everything finished is written, and `--resume` continues once a server is back.
"""

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rawreact.core.errors import ContextLengthExceeded, EpisodeLost, ModelError
from rawreact.core.text import say
from rawreact.models.base import Completion

BACKOFF_MAX = 60.0


@dataclass
class Endpoint:
    """One server of the fleet and what the fleet knows of it."""

    url: str
    model: object | None = None  # its OpenAIModel, once it has answered
    capacity: int | None = None
    active: int = 0  # episodes on it now
    served: int = 0  # episodes it finished
    lost: int = 0  # episodes that had to start over elsewhere when it failed
    failures: int = 0  # failures in a row
    down_until: float = 0.0  # out of rotation until then (monotonic seconds)
    probing: bool = False
    problem: str = ""
    said: set[str] = field(default_factory=set)  # the problems already said on stderr

    @property
    def down(self) -> bool:
        return self.model is None or self.failures > 0


def parse_urls(url: str) -> list[str]:
    """The base URLs of a fleet spec's URL part (`http://a/v1,http://b/v1`), each once."""
    urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
    for found in urls:
        if not found.startswith(("http://", "https://")):
            raise ModelError(f"{found!r} in the model spec is not a server's base URL, such as http://a:8080/v1")
    return list(dict.fromkeys(urls))


class FleetModel:
    """Several endpoints of one model behind `complete`; see the module's docstring."""

    concurrent = True

    def __init__(
        self,
        urls: list[str],
        model: str | None = None,
        *,
        family: str = "auto",
        per_endpoint: int | None = None,
        backoff: float = 2.0,
        retries: int = 1,
        **options,
    ) -> None:
        from rawreact.models.openai import OpenAIModel

        if len(urls) < 2:
            raise ModelError("a fleet needs two endpoints or more, as in llamacpp:http://a:8080/v1,http://b:8080/v1")
        self._load = lambda url: OpenAIModel(url, model, family=family, retries=retries, **options)
        self.per_endpoint, self.backoff = per_endpoint, backoff
        self.endpoints = [Endpoint(url) for url in urls]
        self._lock = threading.Condition()
        self._local = threading.local()
        for endpoint in self.endpoints:
            self._probe(endpoint)
        up = [e for e in self.endpoints if not e.down]
        if not up:
            said = "; ".join(f"{e.url}: {e.problem}" for e in self.endpoints)
            raise ModelError(f"no endpoint of the fleet answers ({said}); start the servers, or check the URLs")
        names = {e.model.model for e in up}
        if len(names) > 1:
            raise ModelError(f"the fleet's endpoints serve different models ({', '.join(sorted(names))}); name one")
        if len({e.model.served_model["digest"] for e in up}) > 1:
            said = ", ".join(f"{e.url}: {e.model.served_model['digest']}" for e in up)
            raise ModelError(f"the fleet's endpoints serve different files under one name ({said}); serve one file")
        first = up[0].model
        self.model, self.family, self.served_model = first.model, first.family, first.served_model
        self.supports_grammar = all(e.model.supports_grammar for e in up)
        self.name = f"{self.model}@{len(urls)} endpoints"
        for endpoint in self.endpoints:
            if endpoint.down:
                self._say(f"{endpoint.url} does not answer ({endpoint.problem}); out of rotation until it does")

    def _probe(self, endpoint: Endpoint) -> bool:
        """Ask the endpoint whether it is up (loading its model the first time); mark it either way."""
        try:
            if endpoint.model is None:
                endpoint.model = self._load(endpoint.url)
                slots = getattr(endpoint.model, "slots", None)
                endpoint.capacity = slots or self.per_endpoint
            else:
                with urllib.request.urlopen(endpoint.url + "/models", timeout=5.0):
                    pass
        except (ModelError, OSError) as error:
            self._failed(endpoint, str(error).split("; ")[0])
            return False
        with self._lock:
            endpoint.failures, endpoint.problem = 0, ""
            self._lock.notify_all()
        return True

    def _failed(self, endpoint: Endpoint, problem: str) -> None:
        with self._lock:
            endpoint.failures += 1
            endpoint.problem = problem
            wait = min(self.backoff * 2 ** (endpoint.failures - 1), BACKOFF_MAX)
            endpoint.down_until = time.monotonic() + wait
            self._lock.notify_all()

    def _say(self, text: str) -> None:
        say(text)

    @contextmanager
    def episode(self) -> Iterator[str]:
        """Hold one endpoint for the calls of one episode (this thread's), yielding its URL."""
        if self._local.__dict__.get("endpoint") is not None:  # already inside an episode: the same one
            yield self._local.endpoint.url
            return
        endpoint = self._acquire()
        self._local.endpoint = endpoint
        try:
            yield endpoint.url
        except EpisodeLost:
            with self._lock:
                endpoint.lost += 1
            raise
        else:
            with self._lock:
                endpoint.served += 1
        finally:
            self._local.endpoint = None
            with self._lock:
                endpoint.active -= 1
                self._lock.notify_all()

    def _acquire(self) -> Endpoint:
        """The least-loaded healthy endpoint with room (waiting for room; probing one whose back-off is over)."""
        while True:
            with self._lock:
                now = time.monotonic()
                due = [e for e in self.endpoints if e.down and e.down_until <= now and not e.probing]
                if not due:
                    up = [e for e in self.endpoints if not e.down]
                    if not up and not any(e.probing for e in self.endpoints):
                        said = "; ".join(f"{e.url}: {e.problem}" for e in self.endpoints)
                        raise ModelError(f"every endpoint of the fleet is down ({said}); --resume once one is back")
                    free = [e for e in up if e.capacity is None or e.active < e.capacity]
                    if free:
                        chosen = min(free, key=lambda e: (e.active, e.served))
                        chosen.active += 1
                        return chosen
                    self._lock.wait(timeout=0.5)
                    continue
                endpoint = due[0]
                endpoint.probing = True
            try:
                self._probe(endpoint)
            finally:
                endpoint.probing = False

    def complete(self, prompt: str, **options) -> Completion:
        """One completion on this thread's episode's endpoint (or, outside an episode, on one chosen for it)."""
        return self._on_endpoint("complete", prompt, **options)

    def sample(self, prompt: str, **options) -> list[Completion]:
        """CoT-SC's samples, on this thread's episode's endpoint."""
        return self._on_endpoint("sample", prompt, **options)

    def chat(self, messages: list[dict], tools: list[dict], **options):
        """A chat turn with tools (the tools method), on this thread's episode's endpoint."""
        return self._on_endpoint("chat", messages, tools, **options)

    def _on_endpoint(self, method: str, *args, **options):
        endpoint = self._local.__dict__.get("endpoint")
        if endpoint is None:
            with self.episode():
                return self._on_endpoint(method, *args, **options)
        try:
            return getattr(endpoint.model, method)(*args, **options)
        except ContextLengthExceeded:  # the episode's own length, not the server: the loop ends it
            raise
        except ModelError as error:  # lost, or a reply no retry can fix (not JSON, no choices, a 404): its fault
            problem = str(error).split("; ")[0]
            self._failed(endpoint, problem)
            with self._lock:
                new = problem not in endpoint.said
                endpoint.said.add(problem)
            if new:  # said once per server and problem, not once per episode it held
                self._say(f"{endpoint.url} failed ({problem}); out of rotation, its episodes start over elsewhere")
            raise EpisodeLost(f"{endpoint.url} failed mid-episode: {error}", endpoint.url) from None

    def served(self) -> dict[str, dict[str, int]]:
        """Per endpoint: the episodes it finished, and those that started over elsewhere when it failed."""
        with self._lock:
            return {e.url: {"episodes": e.served, "lost": e.lost} for e in self.endpoints}
