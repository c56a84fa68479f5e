"""Questions per minute of the embedded model's settings: workers, flash attention, prompt-lookup drafts, and how
often their trajectories equal each other's (wall time: run it on a quiet machine; `throughput.py` measures CPU
time against the plain loop, which load cannot fool).

Runs the same HotpotQA questions (Gemma 270M, greedy, 7 steps, `--n-first` sentences per search)
through rawreact's loop and prompt in each setting, each a fresh model, and prints questions per
minute with two ratios measured in the same run: against the plain loop, and against rawreact's
default engine with as many workers.

- `plain`: rawreact's loop and prompt over llama-cpp-python's own `Llama` (its completion call,
  with its reuse of the prompt prefix it shares with the last call), one question at a time:
  the same prompt and settings (greedy, stops, token limit, context, threads, flash attention),
  without rawreact's engine.
- `default`: rawreact's engine as it ships (flash attention on, no drafts).
- `flash off`: the same without flash attention, the setting drafting needs to be exact.
- `drafts K`: up to K tokens guessed by prompt lookup per pass (flash attention off).

Columns: decode passes per question, generated tokens per pass (over all streams), logit rows
per pass, milliseconds per pass (inside llama_decode), drafts kept, how many trajectories equal
those of the `flash off` row with as many workers (for `flash off`, of `default`), and EM. The
drafts kept are then split by what the draft continued: a thought, the action's name, or a
search, lookup or finish argument. `--again` runs `flash off` a second time at every worker
count, to show how much batching alone changes. `--without-prefix` adds one worker without the
kept few-shot prefix (every new episode evaluates its whole prompt).

    python benchmarks/engine_settings.py [--data FILE] [--limit 20] [--workers 1 4 8 16] [--drafts 2]
        [--n-first 5] [--grammar step] [--again] [--without-prefix]
"""

import argparse
import functools
import os
import re
import time
from collections import Counter

from throughput import PlainLlama  # this folder's; a script's folder is on its path

from rawreact import load_collection, load_model, load_prompt, run_questions
from rawreact.models.cores import cpu_name

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout
ACTION = re.compile(r"Action \d+: *(\w+)(\[?)")


def kind(text: bytes) -> str:
    """What a draft continues, from the completion before it: a thought, an action's name, or its argument."""
    line = text.decode("utf-8", "ignore").rsplit("\n", 1)
    if len(line) == 1 or not line[-1].startswith("Action"):
        return "thought"
    found = ACTION.match(line[-1])
    return found.group(1).lower() if found and found.group(2) else "action name"


def measure(data, questions, prompt, setting: str, workers: int, drafts: int, grammar, n_first: int) -> dict:
    """One run: its rate, cost and each question's transcript."""
    if setting == "plain":
        model = PlainLlama(8192, os.cpu_count() or 1, early_stop=True)
    else:
        model = load_model("gemma3-270m", workers=workers, drafts=drafts, flash_attention=setting == "default")
        if setting == "without prefix":
            model.keep_prefix = lambda text: None
        model.engine.trace = []
    env = functools.partial(data.env, n_first=n_first)
    start = time.perf_counter()
    results = list(run_questions(questions, env, model, prompt, workers=workers, grammar=grammar))
    seconds = time.perf_counter() - start
    row = {
        "rate": 60 * len(results) / seconds,
        "seconds": seconds / len(results),
        "em": sum(r.em for r in results) / len(results),
        "transcripts": {r.question.id: r.outcome.trajectory.transcript() for r in results},
    }
    if setting != "plain":
        stats, kinds = model.engine.stats, Counter()
        for before, drafted, kept in model.engine.trace:
            kinds[kind(before), "drafted"] += drafted
            kinds[kind(before), "kept"] += kept
        row.update(stats=stats, kinds=kinds)
        model.engine.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SAMPLE, required=SAMPLE is None, help="default: RAWREACT_HOTPOTQA")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--drafts", type=int, default=2, help="tokens drafted per pass in the drafts rows")
    parser.add_argument("--n-first", type=int, default=5, help="sentences a search returns")
    parser.add_argument("--grammar", choices=["step"], help="run under the step grammar")
    parser.add_argument("--again", action="store_true", help="run `flash off` twice at every worker count")
    parser.add_argument("--without-prefix", action="store_true", help="add one worker without the kept prefix")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    data, prompt = load_collection(args.data), load_prompt()
    questions = data.questions[: args.limit]
    print(
        f"{len(questions)} questions of {args.data}, gemma3-270m, greedy, 7 steps, {args.n_first} sentences "
        f"a search, grammar {args.grammar or 'off'}, {os.cpu_count()} cores"
    )
    print(
        f"{'setting':>14s} {'workers':>7s} {'q/min':>6s} {'x plain':>7s} {'x dflt':>6s} {'s/q':>5s} {'pass/q':>6s} "
        f"{'gen/pass':>8s} {'rows/pass':>9s} {'ms/pass':>7s} {'kept':>11s} {'same':>5s} {'EM':>5s}"
    )
    plans = [("plain", 1, 0)] + ([("without prefix", 1, 0)] if args.without_prefix else [])
    for workers in args.workers:
        plans += [("default", workers, 0), ("flash off", workers, 0)]
        plans += [("flash off again", workers, 0)] if args.again else []
        plans += [(f"drafts {args.drafts}", workers, args.drafts)]
    rows, kinds = {}, {}
    for setting, workers, drafts in plans:
        row = rows[setting, workers] = measure(
            data, questions, prompt, setting.removesuffix(" again"), workers, drafts, args.grammar, args.n_first
        )
        base = rows.get(("default", workers))
        against = rows.get(("default" if setting == "flash off" else "flash off", workers))
        same = (
            ""
            if against is None or row is against
            else sum(t == against["transcripts"][q] for q, t in row["transcripts"].items())
        )
        line = f"{setting:>14s} {workers:7d} {row['rate']:6.2f} {row['rate'] / rows['plain', 1]['rate']:7.2f} "
        line += f"{row['rate'] / base['rate']:6.2f} " if base else f"{'-':>6s} "
        line += f"{row['seconds']:5.2f} "
        stats = row.get("stats")
        if stats:
            n = len(questions)
            kept = f"{stats.accepted}/{stats.drafted}" if stats.drafted else "-"
            line += f"{stats.passes / n:6.0f} {stats.generated / stats.passes:8.2f} {stats.rows / stats.passes:9.2f} "
            line += f"{1000 * stats.seconds / stats.passes:7.1f} {kept:>11s} "
        else:
            line += f"{'-':>6s} {'-':>8s} {'-':>9s} {'-':>7s} {'-':>11s} "
        print(line + f"{same!s:>5s} {row['em']:5.2f}", flush=True)
        if drafts:
            kinds[workers] = row["kinds"]
    for workers, counts in kinds.items():
        parts = sorted({k for k, _ in counts}, key=lambda k: -counts[k, "drafted"])
        shares = ", ".join(
            f"{k} {counts[k, 'kept']}/{counts[k, 'drafted']} ({counts[k, 'kept'] / counts[k, 'drafted']:.0%})"
            for k in parts
            if counts[k, "drafted"]
        )
        print(f"drafts kept by what they continued, {workers} workers: {shares}")


if __name__ == "__main__":
    main()
