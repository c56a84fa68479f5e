"""The distractor leak: a question searched over its own ten paragraphs against the same question over
every question's paragraphs pooled together, in the reference loop of the paper's protocol.

Over its own paragraphs, a failed search's `Similar:` list can only name those ten titles, two of
them gold, so a miss hands the model a gold title; the paper's live Wikipedia did not. Pooled, the
list ranks titles from every question. For each setting: searches, the share that opened a page,
misses, the share of misses whose `Similar:` list names a gold title (HotpotQA's `supporting_facts`),
EM and F1, and seconds per question, on the same questions and model.

    python benchmarks/distractor_leak.py [--data FILE] [--limit 50] [--model gemma3-270m] [--prompt F --key K]
"""

import argparse
import ast
import os
import time

from rawreact import load_collection, load_model, load_prompt
from rawreact.environments.env import NOT_FOUND
from rawreact.models.cores import cpu_name
from rawreact.reports.summary import summarize
from rawreact.runs.run import run_questions
from rawreact.tasks.loading import open_passages

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout


def leaks(record: dict, gold: set[str]) -> tuple[int, int]:
    """(misses, misses whose Similar list names a gold title) of one record's searches."""
    misses = named = 0
    for step in (record["trajectory"] or {}).get("steps", []):
        observation = step["observation"]
        if step["action"] and step["action"][0] == "search" and observation.startswith(NOT_FOUND):
            misses += 1
            listed = observation.rpartition("Similar: ")[2].rstrip().removesuffix(".")
            try:
                titles = ast.literal_eval(listed)
            except (ValueError, SyntaxError):
                titles = []
            named += any(title in gold for title in titles)
    return misses, named


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SAMPLE, required=SAMPLE is None, help="HotpotQA file (RAWREACT_HOTPOTQA)")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--prompt", help="a prompt file (your copy of the reference's prompts_naive.json with --key)")
    parser.add_argument("--key")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    data = load_collection(args.data)
    questions = data.questions[: args.limit]
    gold = {q.id: set(q.supporting) for q in questions}
    prompt = load_prompt(args.prompt, key=args.key)
    model = load_model(args.model)
    settings = {"own paragraphs": data, "pooled": data.over(open_passages(args.data))}
    print(f"{len(questions)} questions of {args.data}, {args.model}, reference loop, 5 sentences, 7 steps, greedy")
    columns = f"{'searches':>8s} {'hits':>6s} {'misses':>6s} {'gold named':>10s} {'EM':>6s} {'F1':>6s} {'s/q':>6s}"
    print(f"{'passages':16s} {columns}")
    for name, collection in settings.items():
        start = time.perf_counter()
        env = lambda q, c=collection: c.env(q, loop="reference")  # noqa: E731
        records = [r.to_dict() for r in run_questions(questions, env, model, prompt, loop="reference")]
        seconds = (time.perf_counter() - start) / len(questions)
        counted = [leaks(r, gold[r["id"]]) for r in records]
        misses, named = sum(m for m, _ in counted), sum(n for _, n in counted)
        summary, searches = summarize(records), sum(r["searches"] for r in records)
        print(
            f"{name:16s} {searches:8d} {summary['search_hit_rate']:6.0%} {misses:6d} "
            f"{named / misses if misses else 0:10.0%} {summary['em']:6.3f} {summary['f1']:6.3f} {seconds:6.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
