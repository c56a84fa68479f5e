"""Questions per minute of the embedded model with 1, 2, 4 and 8 workers decoded together.

Runs the same HotpotQA questions (Gemma 270M, greedy, 7 steps) with each number of workers, each
a fresh model with that many streams, and prints questions per minute with the ratio to one
worker measured in the same run. It also prints the evaluated prompt tokens per question against
the tokens that the question and its steps add to the few-shot prompt (the last call's prompt
minus the prompt), first without the shared prefix (every new episode evaluates its whole
prompt, as a model that keeps no prefix state must) and then with it; and how many questions
came out with the same trajectory as with one worker (see the README on batching and
determinism). `--grammar step` runs it all under the step grammar instead.

    python benchmarks/throughput.py [--data FILE] [--limit 20] [--workers 1 2 4 8] [--grammar step]
"""

import argparse
import os
import time

from rawreact import load_collection, load_model, load_prompt, run_questions

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout


def measure(data, questions, prompt, workers: int, grammar: str | None, prefix: bool) -> dict:
    """One run: its rate, tokens per question, and each question's transcript."""
    model = load_model("gemma3-270m", workers=workers)
    if not prefix:
        model.keep_prefix = lambda text: None  # no prefix state: each new episode evaluates all of its prompt
    prompt_tokens = len(model.tokenize(prompt.text))
    start = time.perf_counter()
    results = list(run_questions(questions, data.env, model, prompt, workers=workers, grammar=grammar))
    seconds = time.perf_counter() - start
    evaluated = sum(r.outcome.tokens()["evaluated"] for r in results)
    added = sum(r.outcome.trajectory.steps[-1].calls[-1].prompt_tokens - prompt_tokens for r in results)
    model.engine.close()
    return {
        "rate": 60 * len(results) / seconds,
        "seconds": seconds / len(results),
        "evaluated": evaluated / len(results),
        "added": added / len(results),
        "transcripts": {r.question.id: r.outcome.trajectory.transcript() for r in results},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SAMPLE, required=SAMPLE is None, help="default: RAWREACT_HOTPOTQA")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--grammar", choices=["step"], help="run under the step grammar")
    args = parser.parse_args()
    data, prompt = load_collection(args.data), load_prompt()
    questions = data.questions[: args.limit]
    print(f"{len(questions)} questions of {args.data}, gemma3-270m, greedy, 7 steps, {os.cpu_count()} cores")
    header = f"{'grammar':>7s} {'workers':>7s} {'prefix':>6s} {'q/min':>7s} {'x 1':>6s} {'s/q':>6s}"
    print(f"{header} {'eval/q':>7s} {'added/q':>7s} {'ratio':>6s} {'same as 1':>9s}")
    for grammar in [args.grammar]:
        base = None
        plans = [(1, False)] + [(w, True) for w in args.workers]
        for workers, prefix in plans:
            row = measure(data, questions, prompt, workers, grammar, prefix)
            if workers == 1 and prefix:
                base = row
            same = "" if base is None else sum(t == base["transcripts"][q] for q, t in row["transcripts"].items())
            ratio = f"{row['rate'] / base['rate']:6.2f}" if base is not None else f"{'-':>6s}"
            print(
                f"{grammar or 'off':>7s} {workers:7d} {'yes' if prefix else 'no':>6s} {row['rate']:7.2f} {ratio} "
                f"{row['seconds']:6.2f} {row['evaluated']:7.0f} {row['added']:7.0f} "
                f"{row['evaluated'] / row['added']:6.2f} {same!s:>9s}",
                flush=True,
            )


if __name__ == "__main__":
    main()
