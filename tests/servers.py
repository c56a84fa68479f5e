"""Servers the tests start on loopback: llama-cpp-python's own OpenAI-compatible server, and a small
Ollama-protocol server that answers `/api/generate` from the embedded model and records requests.
"""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rawreact.core.errors import ContextLengthExceeded
from rawreact.models.llama_server import free_port, serve
from rawreact.models.llama_server import stop as stop_llama_server


def start_llama_server(model_path, *, n_ctx: int = 8192, threads: int = 2, port: int | None = None):
    """Start `python -m llama_cpp.server` serving `model_path` and wait until it answers; returns the
    process and its base URL (ending in /v1). `stop_llama_server` ends it."""
    port = port or free_port()
    # loaded as rawreact loads the model (models.build): on a build with AMX, without AMX tiles
    command = [sys.executable, "-m", "rawreact.models.build", "llama_cpp.server", "--model", str(model_path)]
    command += ["--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--verbose", "False"]
    url = f"http://127.0.0.1:{port}/v1"
    return serve(command, url + "/models", "llama_cpp.server"), url


@contextlib.contextmanager
def llama_server(model_path, *, n_ctx: int = 8192, threads: int = 2):
    """`python -m llama_cpp.server` serving `model_path`; yields its base URL (ending in /v1)."""
    server, url = start_llama_server(model_path, n_ctx=n_ctx, threads=threads)
    try:
        yield url
    finally:
        stop_llama_server(server)


class FakeOllama:
    """An Ollama-protocol server on loopback whose `/api/generate` runs the embedded model.

    It answers raw generate requests for the model names in `models` as Ollama does (the text
    before the stop sequence, `done_reason` "stop" or "length", token counts, durations in
    nanoseconds); an unknown model gets Ollama's 404, and a prompt that does not fit `num_ctx`
    the 400 Ollama gives when it refuses to truncate. `/api/chat` answers the scripted assistant
    messages of `chat`, in order. Every request body is kept in `requests`, every generated text
    in `responses`.
    """

    def __init__(self, model, models=("gemma3:270m",), chat=()) -> None:
        self.model, self.models, self.chat = model, set(models), list(chat)
        self.requests: list[dict] = []
        self.responses: list[str] = []  # the text of every generate reply, in order
        self._lock = threading.Lock()  # one embedded model: one generation at a time
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                status, reply = fake.answer(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        if path == "/api/chat" and self.chat:  # the next scripted assistant message, as Ollama sends it
            message = self.chat.pop(0)
            return 200, {
                "model": body["model"],
                "created_at": "2026-11-29T00:00:00Z",
                "message": message,
                "done": True,
                "done_reason": "stop",
                "total_duration": 1_000_000,
                "prompt_eval_count": 100,
                "eval_count": 10,
            }
        if path != "/api/generate":
            return 404, {"error": "404 page not found"}
        if body.get("model") not in self.models:
            return 404, {"error": f"model '{body.get('model')}' not found"}
        options = body.get("options") or {}
        n_ctx = options.get("num_ctx", 4096)
        started = time.perf_counter_ns()
        with self._lock:
            tokens = len(self.model.tokenize(body["prompt"]))
            if tokens > n_ctx:
                said = (
                    f"request ({tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"
                )
                return 400, {"error": said}
            try:
                done = self.model.complete(
                    body["prompt"], stop=options.get("stop") or [], max_tokens=options.get("num_predict", 128)
                )
            except ContextLengthExceeded as error:
                return 400, {"error": str(error)}
        took = time.perf_counter_ns() - started
        self.responses.append(done.text)
        return 200, {
            "model": body["model"],
            "created_at": "2026-11-29T00:00:00Z",
            "response": done.text,
            "done": True,
            "done_reason": done.finish_reason,
            "total_duration": took,
            "load_duration": 0,
            "prompt_eval_count": done.evaluated_tokens,
            "prompt_eval_duration": took // 2,
            "eval_count": done.completion_tokens,
            "eval_duration": took // 2,
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class RawServer:
    """A TCP server on loopback whose every connection is handed to `reply(connection, request bytes)`.

    For what no well-behaved HTTP server does on demand: a garbage status line, a reply cut off
    mid-body, or no answer at all. It serves at most `limit` connections, then stops by itself.
    """

    def __init__(self, reply, limit: int = 20) -> None:
        self.reply, self.requests = reply, []
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(30)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self._open: list[socket.socket] = []
        threading.Thread(target=self._serve, args=(limit,), daemon=True).start()

    def _serve(self, limit: int) -> None:
        for _ in range(limit):
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self._open.append(connection)
            connection.settimeout(10)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    data += connection.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(body) < length:
                    body += connection.recv(65536)
                self.requests.append(head.split(b"\r\n")[0].decode())
                self.reply(connection, head.split(b"\r\n")[0].decode())
            except OSError:
                pass

    def close(self) -> None:
        self.socket.close()
        for connection in self._open:
            connection.close()


class OpenAIStub:
    """A stub OpenAI-compatible server on loopback that records every completion request.

    `/v1/models` lists `models`, owned by `owned_by` (which tells the family), with `meta` when given;
    `/props` answers
    `props` when given, as llama-server does; each POST answers the next (status, body) of
    `replies`, and `default` once they are used up (bytes are sent as they are, not as JSON).
    """

    def __init__(self, replies=(), *, models=("m",), owned_by="vllm", props=None, default=None, meta=None) -> None:
        self.replies, self.requests, stub = list(replies), [], self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status, body) -> None:
                raw = isinstance(body, bytes)  # bytes go as they are: a page, or a reply that is not JSON
                data = body if raw else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if raw else "application/json")
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/props" and props is not None:
                    self._send(200, props)
                elif self.path == "/v1/models":
                    said = {} if meta is None else {"meta": meta}  # llama-server says this of the model's file
                    self._send(200, {"data": [{"id": name, "owned_by": owned_by, **said} for name in models]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                stub.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self._send(*(stub.replies.pop(0) if stub.replies else (200, default)))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StandInHub:
    """A stand-in for the Hugging Face Hub on loopback, for the real `huggingface_hub` client (through
    HF_ENDPOINT): it lists a repository's files (`/api/models/ORG/REPO/tree/REVISION`) and serves each
    (`/ORG/REPO/resolve/REVISION/FILE`, HEAD and GET) with the headers the client reads, and refuses an
    unknown repository, revision or file with the Hub's own error codes. `repos` maps ORG/REPO to
    {file name: local path}; `requests` records each path asked for. The real Hub is not reachable from
    the machines this project is tested on, which is why the tests talk to this one."""

    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def __init__(self, repos: dict[str, dict[str, str]]):
        self.repos, self.requests = repos, []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _refuse(self, code: str):
                self.send_response(404)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Type", "application/json")
                body = json.dumps({"error": code}).encode()
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(body)

            def _answer(self, body: bytes | None, headers: dict, length: int):
                self.send_response(200)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                if self.command == "GET" and body is not None:
                    self.wfile.write(body)

            def do_GET(self):
                path = urllib.parse.unquote(self.path.split("?", 1)[0])
                hub.requests.append(path)
                if path.startswith("/api/models/"):
                    parts = path.removeprefix("/api/models/").split("/")
                    repo = "/".join(parts[:2])
                    if repo not in hub.repos:
                        return self._refuse("RepoNotFound")
                    if parts[2:3] != ["tree"] or parts[3:4] != ["main"]:
                        return self._refuse("RevisionNotFound")
                    files = [
                        {"type": "file", "path": name, "size": os.path.getsize(local), "oid": _digest(local, "sha1")}
                        for name, local in hub.repos[repo].items()
                    ]
                    body = json.dumps(files).encode()
                    return self._answer(body, {"Content-Type": "application/json"}, len(body))
                parts = path.lstrip("/").split("/")
                repo, rest = "/".join(parts[:2]), parts[2:]
                if repo not in hub.repos:
                    return self._refuse("RepoNotFound")
                if rest[:2] != ["resolve", "main"]:
                    return self._refuse("RevisionNotFound")
                local = hub.repos[repo].get("/".join(rest[2:]))
                if local is None:
                    return self._refuse("EntryNotFound")
                size = os.path.getsize(local)
                headers = {"X-Repo-Commit": hub.COMMIT, "ETag": f'"{_digest(local, "sha256")}"'}
                headers["Content-Type"] = "application/octet-stream"
                if self.command == "HEAD":
                    return self._answer(None, headers, size)
                self._answer(None, headers, size)
                with open(local, "rb") as file:
                    shutil.copyfileobj(file, self.wfile, 1 << 20)

            do_HEAD = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


_DIGESTS: dict[tuple[str, str], str] = {}


def _digest(path: str, kind: str) -> str:
    if (path, kind) not in _DIGESTS:
        digest = hashlib.new(kind)
        with open(path, "rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
        _DIGESTS[path, kind] = digest.hexdigest()
    return _DIGESTS[path, kind]
