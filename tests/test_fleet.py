"""A run over several servers of one model (issue 31, item 1), on real servers: two llama_cpp.server
processes of the embedded model on loopback. One is SIGKILLed mid-run, then all of them."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from servers import OpenAIStub, start_llama_server, stop_llama_server
from test_runs import _data

from rawreact import load_collection, load_prompt, read_run, run_questions
from rawreact.core.errors import EpisodeLost, ModelError
from rawreact.models import load_model, model_path
from rawreact.models.fleet import FleetModel

RAWREACT = [sys.executable, "-m", "rawreact"]
OPTIONS = ["--workers", "3", "--per-endpoint", "1", "--max-steps", "2", "--max-tokens", "32", "-k", "1", "-q"]


@pytest.fixture
def fleet():
    # Two servers of one thread each: one per core, so the test measures the fleet, not an oversubscribed CPU.
    started = [start_llama_server(model_path("gemma3-270m"), n_ctx=2048, threads=1) for _ in range(2)]
    yield started
    for server, _ in started:
        stop_llama_server(server)


def _started(data, spec: str, out) -> subprocess.Popen:
    """`rawreact run` over the fleet, in the background, once its first record is written."""
    command = [*RAWREACT, "run", data, "--model", spec, "--out", out, *OPTIONS]
    run = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _wait_for_records(out, 1, run)
    return run


def _wait_for_records(out, count: int, run: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and run.poll() is None:
        if out.exists() and out.read_text().count("\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {count} records in {out} within {seconds} s (exit {run.poll()})")


def test_a_server_killed_mid_run_loses_no_question_and_mixes_no_endpoints(fleet, rows, tmp_path):
    data, out = _data(rows, tmp_path, 6), tmp_path / "run.jsonl"
    urls = [url for _, url in fleet]
    spec = "llamacpp:" + ",".join(urls)
    run = _started(data, spec, out)
    os.kill(fleet[1][0].pid, signal.SIGKILL)  # the second server dies, most likely in the middle of an episode
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr
    manifest, records = read_run(out)
    ids = [r["id"] for r in records]
    assert sorted(ids) == sorted(row["_id"] for row in rows[:6]) and len(set(ids)) == 6  # each exactly once
    assert all(r["endpoint"] in urls for r in records)  # one endpoint per record: an episode is never split
    served = manifest["endpoints"]
    assert sum(e["episodes"] for e in served.values()) == 6
    assert {url: e["episodes"] for url, e in served.items() if e["episodes"]} == dict(
        Counter(r["endpoint"] for r in records)
    )
    restarts = sum(r["restarts"] for r in records)
    assert restarts == sum(e["lost"] for e in served.values())
    after = [r for r in records if r["finished"] > records[0]["finished"] + 1]  # finished well after the kill
    if restarts:  # the killed server had an episode under way: it started over elsewhere
        assert served[urls[1]]["lost"] >= 1 and f"{urls[1]} failed" in stderr
    assert all(r["endpoint"] != urls[1] for r in after)


def test_every_server_killed_stops_the_run_in_one_line_and_resume_finishes(fleet, rows, tmp_path):
    data, out = _data(rows, tmp_path, 6), tmp_path / "run.jsonl"
    urls = [url for _, url in fleet]
    spec = "llamacpp:" + ",".join(urls)
    run = _started(data, spec, out)
    for server, _ in fleet:
        os.kill(server.pid, signal.SIGKILL)
    _, stderr = run.communicate(timeout=600)
    assert run.returncode == 2, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("rawreact: error:")]
    assert len(errors) == 1 and "every endpoint of the fleet is down" in errors[0] and "Traceback" not in stderr
    kept = read_run(out)[1]
    assert 1 <= len(kept) < 6
    # One server back, on its old address: --resume finishes the run on it.
    port = int(urls[-1].rsplit(":", 1)[1].split("/")[0])
    fleet[-1] = start_llama_server(model_path("gemma3-270m"), n_ctx=2048, threads=1, port=port)
    done = subprocess.run([*RAWREACT, "run", data, "--model", spec, "--out", out, "--resume", *OPTIONS],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest, records = read_run(out)
    assert len(records) == 6 and len({r["id"] for r in records}) == 6
    assert [r["id"] for r in records[: len(kept)]] == [r["id"] for r in kept]  # the earlier records untouched
    assert {r["endpoint"] for r in records[len(kept) :]} == {urls[-1]}
    assert sum(e["episodes"] for e in manifest["endpoints"].values()) == 6  # both processes' counts, added


def _reply(text: str) -> dict:
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    return {"choices": [{"text": text, "finish_reason": "stop"}], "usage": usage}


def test_episodes_stay_on_one_endpoint_and_go_to_the_least_loaded(tmp_path):
    """Logic, on stub servers: an episode's calls all go to its endpoint; a failed endpoint is out of rotation."""
    stubs = [OpenAIStub(default=_reply(" ok")) for _ in range(3)]
    try:
        model = load_model("vllm:" + ",".join(s.url for s in stubs), per_endpoint=1)
        assert isinstance(model, FleetModel) and model.name == "m@3 endpoints"
        with model.episode() as first, model.episode() as again:
            assert first == again  # one thread, one episode: the same endpoint
            for _ in range(3):
                model.complete("p", stop=["\n"], max_tokens=4)
        assert [len(s.requests) for s in stubs] == [3, 0, 0]
        stubs[1].close()
        # the least loaded: stubs[1] and [2] have served none; [1] comes first
        with pytest.raises(EpisodeLost, match=f"{stubs[1].url} failed mid-episode"), model.episode():
            model.complete("p", stop=["\n"], max_tokens=4)
        for _ in range(2):
            with model.episode() as url:
                assert url != stubs[1].url  # out of rotation
        assert model.served()[stubs[1].url] == {"episodes": 0, "lost": 1}
        stubs[0].close()
        stubs[2].close()
        for _ in range(4):  # each call now finds its endpoint gone, until none is left
            try:
                with model.episode():
                    model.complete("p", stop=["\n"], max_tokens=4)
            except EpisodeLost:
                continue
            except ModelError as error:
                assert "every endpoint of the fleet is down" in str(error)
                break
        else:
            raise AssertionError("the fleet never said that every endpoint is down")
    finally:
        for stub in stubs:
            stub.close()  # closing twice is harmless


def test_a_fleet_spec_with_a_bad_url_is_one_line(tmp_path):
    done = subprocess.run([*RAWREACT, "run", "--model", "llamacpp:http://127.0.0.1:9/v1,a:8080"], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 2 and "'a:8080' in the model spec is not a server's base URL" in done.stderr


def test_a_server_that_answers_503_or_times_out_is_lost_like_one_that_refuses():
    from rawreact.core.errors import ServerLost
    from rawreact.models.openai import OpenAIModel

    busy = OpenAIStub(default=None, replies=[(503, {"error": "overloaded"})] * 4)
    try:
        with pytest.raises(ServerLost, match="HTTP 503"):
            OpenAIModel(busy.url, retries=1, backoff=0.01).complete("p", stop=["\n"], max_tokens=4)
    finally:
        busy.close()
    silent = OpenAIStub(default=_reply(" ok"))
    well = OpenAIStub(default=_reply(" ok"))
    try:
        model = FleetModel([silent.url, well.url], timeout=0.5, per_endpoint=1)
        original = silent.server.RequestHandlerClass.do_POST
        silent.server.RequestHandlerClass.do_POST = lambda handler: (threading.Event().wait(2), original(handler))
        with pytest.raises(EpisodeLost, match="no answer within 0.5 s"), model.episode() as url:
            assert url == silent.url
            model.complete("p", stop=["\n"], max_tokens=4)
        with model.episode() as url:
            assert url == well.url and model.complete("p", stop=["\n"], max_tokens=4).text == " ok"
    finally:
        silent.close()
        well.close()


def test_hundreds_of_questions_in_flight_through_the_command(tmp_path):
    """Issue 31 item 2: `rawreact run --workers 256` against a server that takes 0.2 s per call (the scale
    benchmark's stub, in its own process): every question once in the run file, every answer right."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import scale

    stub, url = scale.start_stub(0.2)
    try:
        data, out = tmp_path / "questions.json", tmp_path / "run.jsonl"
        scale._questions(data, 600)
        command = [*RAWREACT, "run", data, "--model", f"vllm:{url}", "--workers", "256", "--out", out, "-q", "-k", "1"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        records = read_run(out)[1]
        assert len(records) == len({r["id"] for r in records}) == 600
        assert all(r["em"] == 1 and r["model_calls"] == 2 for r in records)
        # In process: the longer GIL switch interval lasts as long as the run, no longer.
        before = sys.getswitchinterval()
        collection = load_collection(data)
        results = run_questions(collection.questions[:200], collection.env, load_model(f"vllm:{url}"),
                                load_prompt(k=1), workers=200)  # fmt: skip
        assert sum(r.em for r in results) == 200 and sys.getswitchinterval() == before
    finally:
        stub.terminate()


def test_compare_over_a_fleet_counts_each_variants_episodes_per_server(rows, tmp_path):
    from rawreact import Variant, compare

    stubs = [OpenAIStub(default=_reply(" Done.\nAction 1: Finish[Sanne Rook]")) for _ in range(2)]
    try:
        spec = "vllm:" + ",".join(s.url for s in stubs)
        data = _data(rows, tmp_path, 5)
        variants = [Variant("a", model=spec), Variant("b", model=spec, k=1)]
        compare(data, variants, tmp_path / "runs", workers=2, per_endpoint=1, resamples=100)
        for name in ("a", "b"):
            manifest, records = read_run(tmp_path / "runs" / f"{name}.jsonl")
            counted = {url: c["episodes"] for url, c in manifest["endpoints"].items() if c["episodes"]}
            assert counted == dict(Counter(r["endpoint"] for r in records)) and sum(counted.values()) == 5
        assert all(len(s.requests) > 0 for s in stubs)  # both servers took episodes
    finally:
        for stub in stubs:
            stub.close()
