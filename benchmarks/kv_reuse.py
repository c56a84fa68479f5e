"""What reusing the KV cache of the growing prompt saves, on the embedded model.

Runs the demo questions twice with the same greedy model: once reusing the cache (each call only
evaluates what the transcript added since the last call), and once re-evaluating the whole prompt
at every call, which is what a loop over a stateless API pays. Prints seconds per question, the
prompt tokens actually evaluated, and the ratios per model call. It also counts the questions whose greedy
trajectories agree: the two runs batch the same tokens differently, floating point sums then
differ in the last bits, and a near tie between two tokens can go the other way.

    python benchmarks/kv_reuse.py [--model gemma3-270m] [--limit N]
"""

import argparse
import os
import time

from rawreact import load_collection, load_model, load_prompt, react
from rawreact.models.cores import cpu_name

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")


def run(model, collection, prompt, limit):
    start, evaluated, read, calls, trajectories = time.perf_counter(), 0, 0, 0, []
    for question in collection.questions[:limit]:
        traj = react(question.question, collection.env(), model, prompt)
        tokens = traj.tokens()
        evaluated, read, calls = evaluated + tokens["evaluated"], read + tokens["prompt"], calls + traj.model_calls
        trajectories.append(traj.transcript())
    return time.perf_counter() - start, evaluated, read, calls, trajectories


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    collection, prompt = load_collection(), load_prompt()
    n = len(collection.questions[: args.limit])
    rows = {}
    for label, reuse in (("full re-evaluation", False), ("KV cache reuse", True)):
        model = load_model(args.model, reuse_cache=reuse)
        seconds, evaluated, read, calls, transcripts = run(model, collection, prompt, args.limit)
        rows[label] = (seconds / calls, evaluated / calls, transcripts)
        print(
            f"{label:20s} {seconds / n:6.2f} s/question  {seconds / calls:5.2f} s/call  "
            f"{evaluated / calls:6.0f} prompt tokens evaluated/call (of {read / calls:.0f} read)"
        )
    # Per call, because the two runs' greedy trajectories (and so their lengths) can differ.
    (slow, slow_tokens, a), (fast, fast_tokens, b) = rows.values()
    same = sum(x == y for x, y in zip(a, b, strict=True))
    print(
        f"{n} questions on {args.model}: per call, reuse is {slow / fast:.2f}x faster and evaluates "
        f"{slow_tokens / max(fast_tokens, 1):.1f}x fewer prompt tokens; identical trajectories: {same}/{n}"
    )


if __name__ == "__main__":
    main()
