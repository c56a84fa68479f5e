"""What CoT-SC's samples cost on the embedded model, against one greedy CoT call.

CoT-SC draws n samples of one prompt. The embedded model evaluates that prompt once per question
and each sample only generates (`LlamaModel.sample`), so its evaluated prompt tokens per question
should be those of one greedy CoT call, and a sample should cost about what the generation part
of a CoT call costs. Measured in the same run, on the same questions: first one greedy CoT call
per question (the baseline), then n samples per question, each question after a different one
(as in a run). With --naive it also draws the n samples as n separate calls that re-evaluate the
whole prompt, which is what a stateless API pays.

    RAWREACT_HOTPOTQA=FILE python benchmarks/self_consistency.py [--limit 10] [--samples 21] [--naive]
"""

import argparse
import os
import sys
import time

from rawreact import load_collection, load_model, load_prompt
from rawreact.agents.reasoning import STOPS, reason
from rawreact.models.cores import cpu_name

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SHARED = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout


def run(model, prompt, questions, method: str, samples: int) -> tuple[float, int, int, int]:
    """(seconds, evaluated prompt tokens, generated tokens, calls) over the questions."""
    start, evaluated, generated, calls = time.perf_counter(), 0, 0, 0
    for question in questions:
        result = reason(question.question, model, prompt, method=method, samples=samples, seed=0)
        evaluated += sum(s.call.evaluated_tokens for s in result.samples)
        generated += sum(s.call.completion_tokens for s in result.samples)
        calls += len(result.samples)
    return time.perf_counter() - start, evaluated, generated, calls


def naive(model, prompt, questions, samples: int) -> tuple[float, int, int, int]:
    """n calls per question, each re-evaluating the whole prompt (the cache reset before each)."""
    start, evaluated, generated, calls = time.perf_counter(), 0, 0, 0
    for question in questions:
        text = f"{prompt.text}Question: {question.question}\nThought:"
        for k in range(samples):
            model.llm.reset()
            model._last_prompt, model._aligned = None, 0
            one = model.sample(text, n=1, temperature=0.7, seed=k, stop=STOPS["cot"], max_tokens=100)[0]
            evaluated, generated, calls = evaluated + one.evaluated_tokens, generated + one.completion_tokens, calls + 1
    return time.perf_counter() - start, evaluated, generated, calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SHARED, help="HotpotQA questions (default: RAWREACT_HOTPOTQA)")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--samples", type=int, default=21)
    parser.add_argument("--naive", action="store_true", help="also time n separate calls per question")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    if not args.data or not os.path.isfile(args.data):
        print(f"no question file at {args.data}; give one with --data or RAWREACT_HOTPOTQA", file=sys.stderr)
        return 2
    questions = load_collection(args.data).questions[: args.limit]
    model, prompt, n = load_model(args.model), load_prompt(method="cot"), len(questions)
    rows = {"greedy CoT, 1 call": run(model, prompt, questions, "cot", 1)}
    rows[f"CoT-SC, {args.samples} samples"] = run(model, prompt, questions, "cot-sc", args.samples)
    if args.naive:
        rows[f"{args.samples} separate calls"] = naive(model, prompt, questions, args.samples)
    for label, (seconds, evaluated, generated, calls) in rows.items():
        print(
            f"{label:24s} {seconds / n:7.2f} s/question  {seconds / calls:5.2f} s/call  "
            f"{evaluated / n:7.0f} evaluated prompt tokens/question  {generated / calls:5.1f} generated tokens/call"
        )
    (cot_s, cot_e, cot_g, _), (sc_s, sc_e, sc_g, sc_calls) = list(rows.values())[:2]
    per_sample, per_call = sc_s / sc_calls, cot_s / n
    print(
        f"\n{n} questions, {args.model}: CoT-SC evaluates {sc_e / cot_e:.2f}x the prompt tokens of one CoT call "
        f"per question; a sample takes {per_sample / per_call:.2f}x the seconds of one greedy CoT call "
        f"({per_sample / (sc_g / sc_calls) * 1000:.0f} vs {per_call / (cot_g / n) * 1000:.0f} ms per generated token)"
    )
    if args.naive:
        naive_s, naive_e, _, _ = rows[f"{args.samples} separate calls"]
        print(f"separate calls take {naive_s / sc_s:.2f}x the seconds and {naive_e / sc_e:.1f}x the evaluated tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
