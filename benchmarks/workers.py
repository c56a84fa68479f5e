"""Questions per minute with 1, 2 and 4 workers against a llama-cpp-python server on loopback.

Starts `python -m llama_cpp.server` on the embedded model (the tests' launcher), runs the same
HotpotQA questions with each number of workers through `openai:URL`, and prints questions per
minute with the ratio to one worker measured in the same run, wall seconds per question, model
calls per question and EM (the records should not depend on the number of workers).

    python benchmarks/workers.py [--data FILE] [--limit 8] [--workers 1 2 4] [--threads 2]
"""

import argparse
import os
import sys
import time
from pathlib import Path

from rawreact import load_collection, load_model, load_prompt, run_questions
from rawreact.models.specs import model_path
from rawreact.reports.summary import summarize

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout
sys.path.insert(0, str(ROOT / "tests"))
from servers import llama_server  # noqa: E402  (the tests' server launcher)

from rawreact.models.cores import cpu_name  # noqa: E402

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=SAMPLE,
        required=SAMPLE is None,
        help="a HotpotQA file in the official layout (default: RAWREACT_HOTPOTQA)",
    )
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--threads", type=int, default=2, help="the server's llama.cpp threads")
    parser.add_argument("--max-steps", type=int, default=7)
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    data, prompt = load_collection(args.data), load_prompt()
    questions = data.questions[: args.limit]
    with llama_server(model_path("gemma3-270m"), threads=args.threads) as url:
        model = load_model(f"openai:{url}")
        served = f"gemma3-270m behind llama_cpp.server ({args.threads} threads)"
        print(f"{len(questions)} questions of {args.data}, {served}")
        print(f"{'workers':>7s} {'q/min':>7s} {'x 1':>6s} {'s/q':>6s} {'calls':>6s} {'EM':>6s} {'F1':>6s}")
        base = None
        for workers in args.workers:
            start = time.perf_counter()
            results = run_questions(questions, data.env, model, prompt, workers=workers, max_steps=args.max_steps)
            records = [r.to_dict() for r in results]
            minutes = (time.perf_counter() - start) / 60
            summary = summarize(records)
            rate = len(records) / minutes
            base = base or rate
            print(
                f"{workers:7d} {rate:7.2f} {rate / base:6.2f} {60 * minutes / len(records):6.2f} "
                f"{summary['calls']:6.2f} {summary['em']:6.3f} {summary['f1']:6.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
