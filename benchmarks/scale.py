"""How many episodes rawreact keeps in flight against servers that take their time, as a large model does.

A stub OpenAI-compatible server (asyncio, in its own process, on loopback) answers every completion after
a fixed latency (1 s by default): the first step of an episode searches, the second finishes. rawreact runs
invented questions through `openai:URL` (a fleet of `--servers` stub processes when more than one) with 1,
64, 256 and 1,024 workers, in this process, and the benchmark prints for each: episodes per second, the
ratio to the ideal (workers / (steps x latency)), the client's CPU seconds per model call, and its peak
resident memory. The stub's own CPU is not the client's: it runs in other processes.

    python benchmarks/scale.py [--workers 1 64 256 1024] [--latency 1.0] [--seconds 20] [--servers 2]

With `--ray`, the questions go to Ray actors on two Ray nodes started on this machine (`ray start --head`, then
a second node joined to it, 2 CPUs each): 1, 2 and 4 actors (`--actors`) of `--per-actor` questions in hand
each, and beside each setting one process with as many in flight, interleaved and repeated (`--repeat`). Each
writes a run file, as `rawreact run` does. It prints episodes per second and the CPU a question of the driver
(the process that hands out the questions and writes the records), of the actors, and of the one process.

    python benchmarks/scale.py --ray [--actors 1 2 4] [--per-actor 16] [--latency 0.2] [--seconds 10] [--json F]
"""

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rawreact import load_collection, load_model, load_prompt, run_questions
from rawreact.core.processes import kill_until_gone
from rawreact.models.cores import cpu_name
from rawreact.runs.ray_start import LOCAL_ONLY  # Ray's switch for a machine that is no cluster's node

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


def start_stub(latency: float) -> tuple[multiprocessing.Process, str]:
    """The stub in a process of its own (spawned, a daemon), once it listens, and its URL (http://127.0.0.1:PORT/v1)."""
    context = multiprocessing.get_context("spawn")
    box = context.Queue()
    stub = context.Process(target=_serve, args=(box, latency), daemon=True)
    stub.start()
    return stub, f"http://127.0.0.1:{box.get(timeout=60)}/v1"


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


FOLDER = "RAWREACT_RAY_FOLDER"  # where `local_nodes` says its cluster's temporary folder is
# `ray start` with its node address taken as given (127.0.0.1), for a node that joins a cluster on this machine.
AS_GIVEN = (
    "import sys, ray._private.services as services; services.resolve_ip_for_localhost = lambda host: host; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; sys.exit(main())"
)


@contextlib.contextmanager
def local_nodes(cpus: int = 2, second: dict | None = None):
    """A Ray cluster of two nodes on this machine (`ray start --head`, then `ray start --address`), `cpus` CPUs
    each, the second with the extra resources `second`; on loopback (node address 127.0.0.1), with a temporary
    folder of its own and token authentication with a token of its own. Yields the environment that joins it
    (RAY_ADDRESS, the token, and its folder as FOLDER); stops exactly this cluster's processes at the end, found
    by its folder."""
    from rawreact.models.llama_server import free_port

    temp = tempfile.mkdtemp(prefix="rr-ray-")  # short: Ray's socket paths live under it
    # On loopback only: the head and the drivers with Ray's switch for a machine that is no cluster's node (its node
    # address is then 127.0.0.1, and it listens there alone); the second node, which that switch would refuse,
    # with its --node-ip-address taken as given (Ray turns 127.0.0.1 into the machine's address, and then listens
    # on every interface).
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32), **{LOCAL_ONLY: "0"})
    env.pop("RAY_ADDRESS", None)
    port, ray = str(free_port()), str(Path(sys.executable).parent / "ray")
    common = ["--num-cpus", str(cpus), "--disable-usage-stats", "--node-ip-address", "127.0.0.1", "--temp-dir", temp]
    head = [ray, "start", "--head", "--port", port, "--include-dashboard", "false", *common]
    joined = [sys.executable, "-c", AS_GIVEN, "start", "--address", f"127.0.0.1:{port}", "--resources",
              json.dumps(second or {}), *common]  # fmt: skip
    try:
        for command in (head, joined):
            own = env if command is head else {k: v for k, v in env.items() if k != LOCAL_ONLY}
            started = subprocess.run(command, capture_output=True, text=True, timeout=120, env=own)
            if started.returncode != 0:
                raise RuntimeError(f"{' '.join(command[1:3])} failed: {started.stderr[-2000:]}")
        yield env | {"RAY_ADDRESS": f"127.0.0.1:{port}", FOLDER: temp}
    finally:
        stop_session(temp)
        shutil.rmtree(temp, ignore_errors=True)


def ray_processes(mark: str) -> set[int]:
    """The processes of one Ray: those whose command line or environment names `mark` (its temporary folder), and
    their children."""
    parents, marked, needle = {}, set(), mark.encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(pid)] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if (
                needle in Path(f"/proc/{pid}/cmdline").read_bytes()
                or needle in Path(f"/proc/{pid}/environ").read_bytes()
            ):
                marked.add(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    marked.discard(os.getpid())
    doomed = set(marked)
    while True:
        more = {pid for pid, parent in parents.items() if parent in doomed} - doomed
        if not more:
            return doomed
        doomed |= more


def stop_session(mark: str) -> None:
    """Kill the processes of one Ray (`ray_processes(mark)`), and no other Ray's: `ray stop` would stop every Ray
    on the machine, and the machine-wide /tmp/ray/session_latest may name another user's."""
    kill_until_gone(lambda: ray_processes(mark), rounds=3, pause=0.2)  # one may start another while they die


def measure_ray(spec: str, data, prompt, actors: int, per_actor: int, latency: float, seconds: float, folder) -> dict:
    """One Ray setting: `actors` actors of `per_actor` questions in hand, the records written by this process."""
    from rawreact.config.settings import Settings
    from rawreact.runs.cluster import Cluster, Plan, ray_questions
    from rawreact.runs.runfile import RunFile
    from rawreact.runs.setup import solve_options

    flying = actors * per_actor
    questions = data.questions[: max(flying, int(flying / (STEPS * latency) * seconds))]
    settings = Settings(model=spec, ray="auto", actors=actors, workers=per_actor, max_steps=4, timeout=60.0)
    plan = Plan(settings, data, prompt, solve_options(settings, None, None), tuple(questions))
    with Cluster(settings, plan) as cluster:
        sink = RunFile(Path(folder) / f"ray-{actors}-{time.monotonic_ns()}.jsonl", {"benchmark": "scale"})
        actor_cpu, cpu, start = cluster.cpu_seconds(), time.process_time(), time.perf_counter()
        results = list(ray_questions(questions, cluster, out=sink))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        actor_cpu = cluster.cpu_seconds() - actor_cpu
        nodes = len({slot.node for slot in cluster.slots})
    assert len(results) == len(questions) and all(r.em == 1 for r in results), "the stub's episodes all finish right"
    return {
        "actors": actors,
        "nodes": nodes,
        "in flight": flying,
        "episodes": len(results),
        "ray/s": len(results) / wall,
        "of ideal": len(results) / wall / (flying / (STEPS * latency)),
        "driver ms/q": 1000 * cpu / len(results),
        "actors ms/q": 1000 * actor_cpu / len(results),
    }


def measure_one(spec: str, data, prompt, workers: int, latency: float, seconds: float, folder) -> dict:
    """The same number in flight from one process, which writes its run file as a run does."""
    from rawreact.runs.runfile import RunFile

    questions = data.questions[: max(workers, int(workers / (STEPS * latency) * seconds))]
    model = load_model(spec, timeout=60.0, workers=workers)
    sink = RunFile(Path(folder) / f"one-{workers}-{time.monotonic_ns()}.jsonl", {"benchmark": "scale"})
    cpu, start = time.process_time(), time.perf_counter()
    results = list(run_questions(questions, data.env, model, prompt, workers=workers, max_steps=4, out=sink))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    sink.close()
    assert len(results) == len(questions) and all(r.em == 1 for r in results), "the stub's episodes all finish right"
    return {"one/s": len(results) / wall, "one ms/q": 1000 * cpu / len(results)}


def main_ray(args) -> None:
    """The Ray rows: each setting beside one process with as many in flight, interleaved, `--repeat` times."""
    stub, url = start_stub(args.latency)
    spec = f"vllm:{url}"
    rows = []
    with tempfile.TemporaryDirectory() as folder, local_nodes(2) as env:
        os.environ.update({k: env[k] for k in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")})
        import ray  # after the environment names the cluster's token: Ray reads it as it loads

        timing = (args.latency, args.seconds, folder)
        path = Path(folder) / "questions.json"
        most = max(a * args.per_actor for a in args.actors)
        _questions(path, max(most, int(most / (STEPS * args.latency) * args.seconds)))
        data, prompt = load_collection(path), load_prompt(k=1)
        print(f"{cpu_name()}, Ray {ray.__version__}, two nodes of 2 CPUs on this machine")
        print(f"stub latency {args.latency} s per call, {STEPS} calls per episode, {args.per_actor} in hand an actor")
        heads = ("actors", 6), ("in flight", 9), ("Ray eps/s", 10), ("one eps/s", 10), ("driver ms/q", 11)
        heads += ("actors ms/q", 11), ("one ms/q", 9), ("of ideal", 8)
        print(" ".join(f"{name:>{width}}" for name, width in heads))
        for repeat in range(args.repeat):
            for actors in args.actors:
                flying = actors * args.per_actor
                pair = [
                    lambda a=actors: measure_ray(spec, data, prompt, a, args.per_actor, *timing),
                    lambda f=flying: measure_one(spec, data, prompt, f, *timing),
                ]
                first, second = pair if (repeat + actors) % 2 == 0 else pair[::-1]  # which goes first alternates
                got = {}
                for run in (first, second):
                    got |= run()
                row = got | {"repeat": repeat + 1}
                rows.append(row)
                print(
                    f"{row['actors']:>6} {row['in flight']:>9} {row['ray/s']:>10.1f} {row['one/s']:>10.1f} "
                    f"{row['driver ms/q']:>11.3f} {row['actors ms/q']:>11.3f} {row['one ms/q']:>9.3f} "
                    f"{row['of ideal']:>8.0%}",
                    flush=True,
                )
    stub.terminate()
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), "latency": args.latency, "rows": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 64, 256, 1024])
    parser.add_argument(
        "--latency", type=float, default=None, help="seconds the stub takes per call (default: 1, 0.2 with --ray)"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="about how long each setting runs")
    parser.add_argument("--servers", type=int, default=1, help="stub processes (a fleet when more than one)")
    parser.add_argument("--ray", action="store_true", help="Ray actors on two local nodes, beside one process")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4], help="with --ray: actor counts")
    parser.add_argument("--per-actor", type=int, default=16, help="with --ray: questions in hand an actor")
    parser.add_argument("--repeat", type=int, default=2, help="with --ray: rounds of the settings, interleaved")
    parser.add_argument("--json", help="with --ray: write the rows to this file")
    args = parser.parse_args()
    if args.latency is None:
        args.latency = 0.2 if args.ray else 1.0
    if args.ray:
        return main_ray(args)
    stubs, urls = zip(*(start_stub(args.latency) for _ in range(args.servers)), strict=True)
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
