"""How many episodes rawreact keeps in flight against servers that take their time, as a large model does.

A stub OpenAI-compatible server (asyncio, in its own process, on loopback) answers every completion after
a fixed latency (1 s by default): the first step of an episode searches, the second finishes. rawreact runs
invented questions through `openai:URL` (a fleet of `--servers` stub processes when more than one) with 1,
64, 256 and 1,024 workers, in this process, and the benchmark prints for each: episodes per second, the
ratio to the ideal (workers / (steps x latency)), the client's CPU seconds per model call, and its peak
resident memory. The stub's own CPU is not the client's: it runs in other processes.

    python benchmarks/scale.py [--workers 1 64 256 1024] [--latency 1.0] [--seconds 20] [--servers 2]
"""

import argparse
import asyncio
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path

from rawreact import load_collection, load_model, load_prompt, run_questions

STEPS = 2  # a search, then a finish


def _serve(port_box, latency: float) -> None:
    """The stub: /v1/models, and /v1/completions after `latency` seconds (HTTP/1.1, one request a connection)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = next((int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length:")), 0)
            body = await reader.readexactly(length) if length else b""
            if method == "GET":
                reply = {"data": [{"id": "stub", "owned_by": "vllm"}]}
            else:
                prompt = json.loads(body)["prompt"]
                question = prompt.rsplit("\nQuestion: ", 1)[-1]
                step = question.count("\nObservation ") + 1
                title = question.split("(", 1)[-1].split(")", 1)[0]
                action = f"Search[{title}]" if step < STEPS else f"Finish[{title}]"
                text = f" I act.\nAction {step}: {action}"
                await asyncio.sleep(latency)
                usage = {
                    "prompt_tokens": len(prompt) // 4,
                    "completion_tokens": 8,
                    "total_tokens": len(prompt) // 4 + 8,
                }
                reply = {"choices": [{"text": text, "finish_reason": "stop"}], "usage": usage}
            data = json.dumps(reply).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
        port_box.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _questions(path: Path, count: int) -> None:
    """`count` invented questions in HotpotQA's layout, each answered by the title it names."""
    rows = []
    for k in range(count):
        title = f"Place {k}"
        rows.append(
            {
                "_id": f"q{k}",
                "question": f"Where is the place ({title})?",
                "answer": title,
                "supporting_facts": [[title, 0]],
                "context": [[title, [f"{title} is a place."]], [f"Other {k}", ["Another place."]]],
                "type": "bridge",
                "level": "hard",
            }
        )
    path.write_text(json.dumps(rows))


def measure(spec: str, data, prompt, workers: int, latency: float, seconds: float) -> dict:
    ideal = workers / (STEPS * latency)  # episodes per second with no overhead at all
    questions = data.questions[: max(workers, int(ideal * seconds))]
    model = load_model(spec, timeout=60.0)
    cpu, start = time.process_time(), time.perf_counter()
    results = list(run_questions(questions, data.env, model, prompt, workers=workers, max_steps=4))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    calls = sum(r.outcome.model_calls for r in results)
    assert len(results) == len(questions) and all(r.em == 1 for r in results), "the stub's episodes all finish right"
    return {
        "workers": workers,
        "episodes": len(results),
        "episodes/s": len(results) / wall,
        "ideal/s": ideal,
        "of ideal": len(results) / wall / ideal,
        "cpu ms/call": 1000 * cpu / calls,
        "peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 64, 256, 1024])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the stub takes per call")
    parser.add_argument("--seconds", type=float, default=20.0, help="about how long each setting runs")
    parser.add_argument("--servers", type=int, default=1, help="stub processes (a fleet when more than one)")
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    boxes = [context.Queue() for _ in range(args.servers)]
    stubs = [context.Process(target=_serve, args=(box, args.latency), daemon=True) for box in boxes]
    for stub in stubs:
        stub.start()
    urls = [f"http://127.0.0.1:{box.get(timeout=30)}/v1" for box in boxes]
    spec = "vllm:" + ",".join(urls)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "questions.json"
        most = max(max(w, int(w / (STEPS * args.latency) * args.seconds)) for w in args.workers)
        _questions(path, most)
        data, prompt = load_collection(path), load_prompt(k=1)
        print(f"stub latency {args.latency} s per call, {STEPS} calls per episode, {args.servers} server process(es)")
        heads = ("workers", 8), ("episodes", 9), ("episodes/s", 11), ("ideal/s", 8), ("of ideal", 9)
        heads += ("cpu ms/call", 12), ("peak MB", 8)
        print(" ".join(f"{name:>{width}}" for name, width in heads))
        for workers in args.workers:
            row = measure(spec, data, prompt, workers, args.latency, args.seconds)
            print(
                f"{row['workers']:>8} {row['episodes']:>9} {row['episodes/s']:>11.1f} {row['ideal/s']:>8.1f} "
                f"{row['of ideal']:>9.0%} {row['cpu ms/call']:>12.3f} {row['peak MB']:>8.0f}",
                flush=True,
            )
    for stub in stubs:
        stub.terminate()


if __name__ == "__main__":
    sys.exit(main())
