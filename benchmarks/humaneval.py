"""HumanEval on one model: pass@1 of `simple` beside the model's published number, then `reflexion` at 2 and 5
implementations and `lats`, paired against `simple` (on the problems both ran), each a resumable run in one
folder with the CPU every sitting took.

    python benchmarks/humaneval.py --model qwen2.5-coder-1.5b --prompt chat --out runs/humaneval-qwen \\
        [--problems 0-163] [--threads N] [--methods simple reflexion-2 reflexion-5 lats] [--report-only]

Each row is one `rawreact run humaneval:PROBLEMS --method M --out OUT/ROW.jsonl --resume`, so an interrupted
sitting goes on where it stopped when the same command is given again. `--prompt chat` sends the shipped ChatML
prompts (prompts/programs/chat/), for a model with Qwen's chat template; without it, the completion prompts
(the model continues the function's body after two exemplars). Greedy decoding (rawreact's default
temperature 0), one program a problem.

The published number: Qwen2.5-Coder-1.5B-Instruct's HumanEval pass@1, 70.7 (the Qwen2.5-Coder technical
report, greedy, under EvalPlus's chat prompt). rawreact's chat prompt is its own words, not EvalPlus's, and its
model file is a third party's Q4_K_M quantisation (issue 68): the report says whether 70.7 lies in the run's
interval, not that the protocols are one.

Every sitting appends what it took to `OUT/sittings.jsonl`; the report gives `rawreact compare-runs`' table
(pass@1 with Wilson's interval, each row paired against `simple`) and the CPU seconds a problem of each row.

`--keep LEDGER` (benchmarks/kept.py; the team's is benchmarks/results/humaneval-qwen.kept.jsonl) adds each sitting's
problems and CPU to a ledger, runs only the problems it does not hold yet (the choice is written once, to
OUT/ROW.problems, so a resume in the same folder runs the same problems), and prints the ledger's table, which
counts the problems of every sitting that kept there, on any machine.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import kept
from paper_table import cpu_a_question, done, timed  # run as a script: its folder is on the path

from rawreact.core.stats import wilson
from rawreact.models.cores import cpu_name
from rawreact.tasks.loading import load_collection

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

# LATS at its repository's programming settings (run_lats_gpt4.sh: max_iters 8, number_of_tests 2; n 5), under
# rawreact's rules: the search never sees the hidden tests.
ROWS = {"simple": ["--method", "simple"], "reflexion-2": ["--method", "reflexion", "--trials", "2"],
        "reflexion-5": ["--method", "reflexion", "--trials", "5"],
        "lats": ["--method", "lats", "--iterations", "8", "--lats-samples", "5", "--number-of-tests", "2"]}  # fmt: skip
PUBLISHED = {"qwen2.5-coder-1.5b": 70.7}  # HumanEval pass@1 (%), the model's technical report


def sitting(row: str, args, out: Path) -> int:
    """Run (or resume) one row, recording what the sitting took (paper_table's sittings); the run's exit code."""
    run = out / f"{row}.jsonl"
    problems = args.problems if args.keep is None else not_kept(row, args, out)
    if not problems:
        print(f"{row}: {args.keep} holds every problem asked for", flush=True)
        return 0
    prompt = ["--prompt", args.prompt] if args.prompt else []
    threads = [] if args.threads is None else ["--threads", str(args.threads)]
    command = [sys.executable, "-m", "rawreact", "run", f"humaneval:{problems}", *ROWS[row], *prompt,
               "--model", args.model, "--out", str(run), "--resume", "-q", *threads]  # fmt: skip
    if args.keep is not None:
        kept.hold(args.keep, row, "all")  # a second process adding the row to the ledger is refused until this ends
    added = [0]  # the problems this sitting added, over every reading

    def keep() -> None:
        added[0] += kept.keep(args.keep, row, run, out / "sittings.jsonl")

    code = timed(command, run, out, {"row": row}, args.threads, "problems", on_reading=keep if args.keep else None)
    if args.keep is not None:
        keep()
        print(f"{row}: this sitting added {added[0]} problems to {args.keep}", flush=True)
    return code


def not_kept(row: str, args, out: Path) -> str:
    """The asked-for problems the ledger does not hold under the row, as numbers and ranges; chosen once a folder
    (OUT/ROW.problems), so that the run's resumes ask for the same problems."""
    chosen = out / f"{row}.problems"
    if chosen.exists():
        return chosen.read_text().strip()
    held = kept.kept_ids(args.keep, row)
    asked = load_collection(f"humaneval:{args.problems}").questions  # rawreact's reading of the spelling, ids too
    numbers = [int(q.id.rsplit("/", 1)[1]) for q in asked if q.id not in held]
    spans: list[list[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    problems = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    chosen.write_text(problems + "\n")
    print(f"{row}: {len(held)} problems kept in {args.keep}; this folder runs {len(numbers)}: {problems}", flush=True)
    return problems


def passed(run: Path) -> tuple[int, int]:
    """Problems passed and problems finished in a run file."""
    records = [json.loads(line) for line in run.read_text().splitlines() if line.strip()]
    return sum(bool(r.get("success")) for r in records), len(records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--prompt", help="a folder of program prompts, or chat (the shipped ChatML ones)")
    parser.add_argument("--out", required=True, help="the folder of the runs")
    parser.add_argument("--problems", default="0-163", help="HumanEval's problems: numbers and ranges (0-163)")
    parser.add_argument("--threads", type=int, help="the embedded model's llama.cpp threads (default: rawreact's)")
    parser.add_argument("--methods", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--keep", type=Path, metavar="LEDGER", help="add the outcomes to a ledger (benchmarks/kept.py)")
    parser.add_argument("--report-only", action="store_true", help="print the tables of the runs so far")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for row in args.methods:
            code = sitting(row, args, out)
            if code != 0:
                print(f"{row}: the run stopped with exit code {code}; give the same command to go on")
                return code
    rows = [row for row in ROWS if done(out / f"{row}.jsonl")]
    if len(rows) > 1:
        runs = [f"{row}={out / row}.jsonl" for row in rows]
        subprocess.run([sys.executable, "-m", "rawreact", "compare-runs", *runs, "--format", "markdown"], check=False)
    costs, published = cpu_a_question(out, "row"), PUBLISHED.get(args.model)
    print("\n| row | problems | pass@1 [95%] | CPU s a problem | published pass@1 in the interval |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        won, n = passed(out / f"{row}.jsonl")
        share = wilson(won, n)
        held = "-" if published is None else f"{'yes' if published / 100 in share else 'no'} ({published})"
        cost = f"{costs[row]:.1f}" if row in costs else "-"
        print(f"| {row} | {n} | {share} | {cost} | {held} |")
    if args.keep is not None:
        for row in rows:  # what --report-only finds in the folder, too
            kept.keep(args.keep, row, out / f"{row}.jsonl", out / "sittings.jsonl")
        print(f"\n{args.keep}, every sitting kept there:\n\n{kept.table(args.keep, 'simple')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
