"""The ReAct paper's HotpotQA table on one model: its seven methods as the paper sets them up, then Reflexion by
trial, LATS and ScienceWorld, each a resumable run in one folder, with the CPU time every sitting took.

    RAWREACT_HOTPOTQA=FILE python benchmarks/paper_table.py --reference ~/ReAct --model qwen2.5-coder-1.5b \\
        --out runs/qwen [--limit 100] [--threads N] [--shard K/N] [--keep LEDGER] [--methods react act ...]
        [--lats-reference ~/LATS] [--scienceworld scienceworld:test_mini_mini] [--game-steps 30] [--report-only]

Each method is one `rawreact run DATA --method M --out OUT/M.jsonl --resume`, so an interrupted sitting goes on
where it stopped when the same command is given again. The seven rows take the paper's setup from `--reference`
(a checkout of the ReAct repository: its prompts, instruction, loop and 5 sentences a search; see docs/paper.md).
All methods share one call cache (`OUT/calls.sqlite`, sampled calls too), so a back-off's parts are the runs of
its parts: `react-cot-sc` answers with the `react` run's calls and, where it backs off, the `cot-sc` run's
samples (the same prompt, seed and sample order); its CPU is its parts'. `reflexion` is `react-reflexion` with 5
trials and the exact-match evaluator (Reflexion's HotpotQA setting; rawreact's shipped prompts, since the ReAct
repository has no Reflexion prompt), `lats` is LATS at its repository's settings from `--lats-reference`, and
`sw-react`, `sw-react-commands`, `sw-act` and `sw-act-commands` play ScienceWorld's test_mini episodes (ReAct and
Act, free and under the commands grammar; `--scienceworld` picks other episodes, `--game-steps` their step limit,
the game loop's 49 where left out).

Every sitting appends what it took to `OUT/sittings.jsonl` (method, date, questions done before and after, CPU
seconds of the run's process and its children, wall seconds; a sitting killed outright keeps its last
half-minute's reading, `"code": null`), and the report at the end gives, beside
`rawreact compare-runs`' table (EM and F1 with 95% intervals, each method paired against ReAct), the CPU seconds a
question each method took over all its sittings, and Reflexion's and LATS's reports (Reflexion's with the share
of questions solved after each trial).

`--keep LEDGER` (benchmarks/kept.py; the team's is benchmarks/results/hotpotqa-qwen.kept.jsonl) adds each sitting's
questions and CPU to a ledger and asks only the questions it does not hold yet: the first `--limit` questions of
the data less those, written once to OUT/METHOD.questions.json, so a resume in the same folder asks the same.
Two processes can share the work on one ledger, each with its own OUT and `--shard 1/2` or `--shard 2/2` (every
second question of the first `--limit`, counted before the kept ones are left out, so that the parts do not
depend on when each process started). The report then adds the ledger's table (EM,
each method paired against react-tolerant) and Reflexion's share by trial over every question kept. A LATS search
can outlast a machine, so the `lats` row's calls are kept too (`--keep-calls`: every row's), beside the ledger
(kept.keep_calls): the next sitting adds them to its cache, and the question under way goes on from its calls.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import kept

from rawreact.models.cores import cpu_name
from rawreact.tasks.loading import load_collection

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")
TABLE = ["react", "standard", "cot", "act", "cot-sc", "react-cot-sc", "cot-sc-react"]  # cheap first, back-offs last
EXTRA = {
    "reflexion": ["--method", "react-reflexion", "--trials", "5", "--evaluator", "em"],
    "lats": ["--method", "lats"],
    # The paper's ReAct (its prompt and instruction) in rawreact's tolerant loop: where the reference loop's exact
    # parse and uncontinued 100-token cut lose a small model's actions, this row shows what the method itself does.
    "react-tolerant": ["--method", "react", "--loop", "tolerant"],
    # ScienceWorld on SwiftSage's test_mini (the first 3 test variations of each of the 30 tasks), rawreact's game
    # loop: ReAct and Act, free and under the step's valid commands as a grammar (docs/scienceworld.md).
    "sw-react": ["--method", "react"],
    "sw-react-commands": ["--method", "react", "--grammar", "commands"],
    "sw-act": ["--method", "act"],
    "sw-act-commands": ["--method", "act", "--grammar", "commands"],
}
SCIENCEWORLD = "scienceworld:test_mini"
KEEP_CALLS = {"lats"}  # with --keep, rows whose calls are kept too (an item of hours); --keep-calls: every row
KEEP_CALLS_EVERY = 300.0  # seconds between two keepings of the calls in a sitting (each adds a line to the ledger)
# The paper's PaLM-540B EM (Yao et al. 2023, Table 1, HotpotQA), beside which the rows are read.
PAPER_EM = {"standard": 28.7, "cot": 29.4, "cot-sc": 33.4, "act": 25.7, "react": 27.4, "cot-sc-react": 34.2,
            "react-cot-sc": 35.1}  # fmt: skip


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def done(path: Path) -> int:
    """Finished questions in a run file (its complete lines)."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def sitting(method: str, args, out: Path) -> int:
    """Run (or resume) one method, recording what the sitting took; the run's exit code."""
    run = out / f"{method}.jsonl"
    if method in EXTRA:
        reference = args.lats_reference if method == "lats" else args.reference if method == "react-tolerant" else None
        options = EXTRA[method] + (["--reference", reference] if reference else [])
    else:
        options = ["--method", method, "--reference", args.reference]
    game = method.startswith("sw-")
    data, limit = args.scienceworld if game else args.data, args.limit
    if game and args.game_steps is not None:
        options += ["--max-steps", str(args.game_steps)]
    if args.keep is not None and not game:
        data, limit = not_kept(method, args, out)
        if not limit:
            print(f"{method}: {args.keep} holds every question asked for", flush=True)
            return 0
    command = [sys.executable, "-m", "rawreact", "run", data, *options, "--model", args.model, "--out", str(run),
               "--resume", "-q", "--cache", str(out / "calls.sqlite"), "--cache-sampled",
               "--limit", str(limit)]  # fmt: skip
    if args.threads is not None:
        command += ["--threads", str(args.threads)]
    keeping = args.keep is not None and not game
    # A LATS search can outlast a machine: its calls are kept beside the ledger, and a sitting on the next machine
    # answers its rerun's calls from them (kept.restore_calls), so the search goes on where it was.
    calls = keeping and (method in KEEP_CALLS or args.keep_calls)
    part = "all" if args.shard is None else args.shard.replace("/", "-of-")
    if keeping:
        kept.hold(args.keep, method, part)  # a second process on the same part is refused until this one ends
    if calls:
        restored = kept.restore_calls(args.keep, method, out / "calls.sqlite")
        print(f"{method}: {restored} kept calls added to {out / 'calls.sqlite'}", flush=True)

    added = [0]  # the questions this sitting added, over every reading
    calls_kept = [time.monotonic()]  # when the calls were last kept: every 5 minutes and at the end

    def keep(last: bool = False) -> None:
        if calls and (last or time.monotonic() - calls_kept[0] >= KEEP_CALLS_EVERY):
            kept.keep_calls(args.keep, method, part, out / "calls.sqlite")
            calls_kept[0] = time.monotonic()
        added[0] += kept.keep(args.keep, method, run, out / "sittings.jsonl")

    code = timed(command, run, out, {"method": method}, args.threads, "questions", on_reading=keep if keeping else None)
    if keeping:
        keep(last=True)
        print(f"{method}: this sitting added {added[0]} questions to {args.keep}", flush=True)
    return code


def shard(spelled: str | None) -> tuple[int, int]:
    """`--shard K/N` as (K - 1, N); (0, 1) for all."""
    if spelled is None:
        return 0, 1
    try:
        part, parts = (int(n) for n in spelled.split("/"))
    except ValueError:
        part = parts = 0
    if not 1 <= part <= parts:
        raise SystemExit(f"--shard {spelled}: give K/N with 1 <= K <= N, such as 1/2")
    return part - 1, parts


def not_kept(method: str, args, out: Path) -> tuple[str, int]:
    """A data file of the first --limit questions the ledger does not hold under the method, and how many; chosen
    once a folder (OUT/METHOD.questions.json), so that the run's resumes ask the same questions."""
    chosen = out / f"{method}.questions.json"
    if not chosen.exists():
        held = kept.kept_ids(args.keep, method)
        ids = [q.id for q in load_collection(args.data).questions][: args.limit]
        rows = json.loads(Path(args.data).read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise SystemExit(f"{args.data}: --keep picks questions from a HotpotQA file (a JSON list of rows)")
        part, parts = shard(args.shard)
        rows = rows[: args.limit]
        left = [
            row for n, (row, item) in enumerate(zip(rows, ids, strict=True)) if item not in held and n % parts == part
        ]
        chosen.write_text(json.dumps(left, ensure_ascii=False))
        part_of = "" if args.shard is None else f", of its part {args.shard}"
        print(f"{method}: {len(held)} questions kept in {args.keep}; this folder asks {len(left)}{part_of}")
    return str(chosen), len(json.loads(chosen.read_text(encoding="utf-8")))


def timed(
    command: list[str], run: Path, out: Path, named: dict, threads: int, unit: str, every: float = 30.0, on_reading=None
) -> int:
    """Run one sitting's command, appending what it took to OUT/sittings.jsonl (`named`: the method or row, its
    key); the run's exit code. benchmarks/humaneval.py keeps its sittings the same way. `on_reading`, where given, is
    called at every reading (a ledger keeps the items finished so far).

    Every `every` seconds the sitting so far (the run's CPU from /proc, questions done) is written to
    OUT/NAME.sitting.json, so a sitting killed outright (SIGKILL, a machine stopped) is not lost: the next sitting
    of the same name appends it first, marked `"code": null` with the last reading's figures."""
    name = next(iter(named.values()))
    still_open = out / f"{name}.sitting.json"
    if still_open.exists():
        append_sitting(out, json.loads(still_open.read_text()))
        still_open.unlink()
        print(f"{name}: the last sitting was killed; its last reading is in {out / 'sittings.jsonl'}", flush=True)
    before, cpu, wall = done(run), children_cpu(), time.perf_counter()
    print(f"{name}: {before} {unit} done before this sitting", flush=True)
    said = named | {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "before": before, "after": before, "cpu": 0.0,
                    "wall": 0.0, "code": None, "cpu_name": cpu_name(), "threads": threads,
                    "command": command[1:]}  # fmt: skip
    child = subprocess.Popen(command)
    while True:
        try:
            code = child.wait(timeout=every)
            break
        except subprocess.TimeoutExpired:
            spent = process_cpu(child.pid)
            if spent is not None:
                reading = said | {"after": done(run), "cpu": spent, "wall": time.perf_counter() - wall}
                still_open.with_suffix(".part").write_text(json.dumps(reading))
                still_open.with_suffix(".part").replace(still_open)
                if on_reading is not None:
                    on_reading()
        except KeyboardInterrupt:  # the run had the same Ctrl-C: it stops after what it is doing
            code = child.wait()
            break
    said |= {"after": done(run), "cpu": children_cpu() - cpu, "wall": time.perf_counter() - wall, "code": code}
    append_sitting(out, said)
    still_open.unlink(missing_ok=True)
    return code


def append_sitting(out: Path, said: dict) -> None:
    with open(out / "sittings.jsonl", "a") as log:
        log.write(json.dumps(said) + "\n")


def process_cpu(pid: int) -> float | None:
    """CPU seconds of a running process and of the children it has waited for (Linux's /proc/PID/stat: utime,
    stime, cutime, cstime); None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cpu_a_question(out: Path, key: str = "method") -> dict[str, float]:
    """CPU seconds a question (a problem) of each method (each `key`), over every sitting that finished some."""
    spent: dict[str, list[float]] = {}
    try:
        lines = (out / "sittings.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return {}
    for line in lines:
        row = json.loads(line)
        cpu, questions = spent.setdefault(row[key], [0.0, 0])
        spent[row[key]] = [cpu + row["cpu"], questions + row["after"] - row["before"]]
    return {method: cpu / questions for method, (cpu, questions) in spent.items() if questions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SAMPLE, required=SAMPLE is None, help="default: RAWREACT_HOTPOTQA")
    parser.add_argument("--reference", required=True, help="a checkout of the ReAct repository (ysymyth/ReAct)")
    parser.add_argument("--lats-reference", help="a checkout of LATS's repository, for the lats method")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--out", required=True, help="the folder of the runs")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--threads", type=int, help="the embedded model's llama.cpp threads (default: rawreact's)")
    parser.add_argument("--methods", nargs="+", default=TABLE, choices=TABLE + list(EXTRA))
    parser.add_argument(
        "--scienceworld", default=SCIENCEWORLD, help=f"the sw- methods' episodes (default: {SCIENCEWORLD})"
    )
    parser.add_argument("--game-steps", type=int, help="the sw- methods' step limit (default: the game loop's, 49)")
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="with --keep: ask the K-th of N parts of the questions (every N-th), one process a part",
    )
    parser.add_argument("--keep", type=Path, metavar="LEDGER", help="add the outcomes to a ledger (benchmarks/kept.py)")
    parser.add_argument(
        "--keep-calls",
        action="store_true",
        help="with --keep: keep every method's calls beside the ledger, so that a question under way when the machine "
        "goes continues from them on the next (lats's are kept without it)",
    )
    parser.add_argument("--report-only", action="store_true", help="print the tables of the runs so far")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    if args.keep_calls and not args.keep:
        parser.error("--keep-calls keeps calls beside a ledger: give --keep LEDGER too")
    if args.shard and not args.keep:
        parser.error("--shard parts the questions a ledger lacks: give --keep LEDGER too")
    shard(args.shard)  # a bad K/N said before any sitting
    if "lats" in args.methods and not args.lats_reference:
        parser.error("the lats method runs at its repository's settings: give --lats-reference DIR")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for method in args.methods:
            code = sitting(method, args, out)
            if code != 0:
                print(f"{method}: the run stopped with exit code {code}; give the same command to go on")
                return code
    table = [m for m in TABLE if done(out / f"{m}.jsonl")]
    if table:
        runs = [f"{m}={out / m}.jsonl" for m in table]
        subprocess.run([sys.executable, "-m", "rawreact", "compare-runs", *runs, "--format", "markdown"], check=False)
    costs = cpu_a_question(out)
    print("\n| method | questions (episodes) | CPU s each | the paper's EM (PaLM-540B) |\n| --- | --- | --- | --- |")
    for method in table + [m for m in EXTRA if done(out / f"{m}.jsonl")]:
        cost = f"{costs[method]:.1f}" if method in costs else "-"
        print(f"| {method} | {done(out / f'{method}.jsonl')} | {cost} | {PAPER_EM.get(method, '-')} |")
    for method in EXTRA:  # Reflexion's report has its share solved by trial
        if done(out / f"{method}.jsonl"):
            print(f"\n{method}:", flush=True)
            subprocess.run([sys.executable, "-m", "rawreact", "report", str(out / f"{method}.jsonl")], check=False)
    if args.keep is not None:
        for method in TABLE + list(EXTRA):  # what --report-only finds in the folder, too
            if not method.startswith("sw-"):
                kept.keep(args.keep, method, out / f"{method}.jsonl", out / "sittings.jsonl")
        rows = {row for row, _ in kept.read(args.keep)[0]}
        base = "react-tolerant" if "react-tolerant" in rows else None  # the ledger's first row where it lacks it
        print(f"\n{args.keep}, every sitting kept there:\n\n{kept.table(args.keep, base, 'em')}")
        print(kept.by_trial(args.keep, "reflexion"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
