"""Grammar off, step, action and titles, side by side on the same HotpotQA questions and model.

For each mode: invalid actions per question, the share of searches that opened a passage, the
finish rate, EM and F1, and seconds per question, with the ratio of seconds to the unconstrained
run measured in the same process. `--grammar-first N` also runs the "step" grammar on the first N
questions through llama-cpp-python's own grammar sampling (which applies the grammar to the whole
vocabulary at every token), the baseline that rawreact's greedy decoder under a grammar replaces.

    python benchmarks/grammar.py [--data FILE] [--limit 30] [--model gemma3-270m] [--grammar-first 5]
"""

import argparse
import os
import time

from rawreact import load_collection, load_grammar, load_model, load_prompt
from rawreact.models.cores import cpu_name
from rawreact.reports.summary import summarize
from rawreact.runs.run import run_questions

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout


def measure(questions, data, model, prompt, grammar) -> tuple[dict, float]:
    start = time.perf_counter()
    records = [r.to_dict() for r in run_questions(questions, data.env, model, prompt, grammar=grammar)]
    return summarize(records), (time.perf_counter() - start) / len(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=SAMPLE,
        required=SAMPLE is None,
        help="a HotpotQA file in the official layout (default: RAWREACT_HOTPOTQA)",
    )
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--grammar-first", type=int, default=0, metavar="N")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    data, prompt = load_collection(args.data), load_prompt()
    questions = data.questions[: args.limit]
    model = load_model(args.model)
    print(f"{len(questions)} questions of {args.data}, {args.model}, n_first 2, 7 steps, greedy")
    print(
        f"{'grammar':24s} {'invalid/q':>9s} {'hits':>6s} {'finish':>7s} {'EM':>6s} {'F1':>6s} {'s/q':>6s} {'x off':>6s}"
    )
    base = None
    runs = [(mode, questions, model, mode and load_grammar(mode)) for mode in (None, "step", "action", "titles")]
    if args.grammar_first:
        slow = load_model(args.model, grammar_first=True)
        few = questions[: args.grammar_first]
        runs += [("off, first N", few, model, None), ("step, grammar_first", few, slow, load_grammar("step"))]
    for label, chosen, used, grammar in runs:
        summary, seconds = measure(chosen, data, used, prompt, grammar)
        if label in (None, "off, first N"):
            base = seconds
        print(
            f"{str(label):24s} {summary['invalid_per_question']:9.2f} {summary['search_hit_rate']:6.0%} "
            f"{summary['finished']:7.0%} {summary['em']:6.3f} {summary['f1']:6.3f} "
            f"{seconds:6.2f} {seconds / base:6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
