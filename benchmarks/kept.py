"""Outcomes kept in the repository: a benchmark that takes more CPU than one sitting has, on machines that do not keep
their files between sittings, adds each finished item's outcome to a ledger the team commits
(`benchmarks/results/*.kept.jsonl`), and its tables are read from the ledger, so every sitting's items count and
anyone can recompute a table from the repository.

A ledger line is one item's outcome under one row (a method), in a few numbers and no dataset text:

    {"row": "lats", "id": "HumanEval/12", "success": 1.0, "em": null, "f1": null, "trials": null, "model_calls": 9,
     "tokens": {...}, "seconds": 301.2, "ended": "won", "answer_sha256": "…", "programs_sha256": ["…", …],
     "source": "3f2a…", "commit": "975783e…", "cpu_name": "…", "llama_cpp": "0.3.16", "model_sha256": "…"}

An item names what made it, from the run's manifest: the sitting (the run's start or the resume) in which its line
was written gives the code (`source`, `commit`), the CPU (`cpu_name`) and llama-cpp-python's version (`llama_cpp`;
greedy tokens depend on the build), and the run's settings give the model file's SHA-256 (`model_sha256`). The
answer's SHA-256 (`answer_sha256`; a program run's answer is its program) and, for a program run, each
implementation's SHA-256 in the order written (`programs_sha256`) let a rerun be checked token for token without
the ledger holding dataset or model text. `trials`: a Reflexion item's trials, each its em, f1, success, answer's
SHA-256, and its own calls and tokens, with the reflection written after it apart (`reflection`).

A sitting adds a line `{"sitting": {...}}`, what paper_table.timed keeps in OUT/sittings.jsonl, so the CPU a
problem is read across the sittings of every machine. An item kept twice under a row keeps its later outcome.

A row's calls can be kept beside the ledger (`keep_calls`): each call's line holds its key (the SHA-256 of the
call and of the model that answered: rawreact.models.cache), its reply and the SHA-256 of the two together, and
each time a calls file is written the ledger records the file's SHA-256 in a line `{"calls": {...}}`. A sitting
restores a calls file only when every call matches its digest and the file is one the ledger recorded: a reply
edited by hand is refused, naming the file and the call, and so is a file whose digests were made again, naming
the file. (Digests, not signatures: who can edit both files can edit the record too, but not without a change to
the ledger that its history shows.)

    python benchmarks/kept.py LEDGER [--base ROW] [--score success|em|f1] [--trials ROW]    # the ledger's tables
"""

import argparse
import fcntl
import gzip
import hashlib
import json
import os
import sqlite3
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path

from rawreact.core.stats import paired, wilson
from rawreact.models.cores import cpu_name as cpu_named
from rawreact.runs.records import read_run


def outcome(row: str, record: dict, manifest: dict | None, index: int = 0) -> dict:
    """One record's ledger line; `index`: its place in the run file, which names the sitting that wrote it."""
    made = made_by(manifest, index)
    trials = record.get("trials")
    return {
        "row": row,
        "id": record["id"],
        "success": record.get("success"),
        "em": record.get("em"),
        "f1": record.get("f1"),
        "trials": None if trials is None else [_trial(t) for t in trials],
        "model_calls": record.get("model_calls"),
        "tokens": record.get("tokens"),
        "seconds": record.get("seconds"),
        "ended": record.get("ended"),
        "answer_sha256": _sha256(record.get("prediction")),
        "programs_sha256": _programs(record),
        **made,
    }


def made_by(manifest: dict | None, index: int) -> dict:
    """What made the run file's `index`-th line: the code, CPU and llama-cpp-python of the sitting that wrote it
    (the last resume that found fewer lines done, or the run's start), and the model file of the run (a resume
    of another model file is refused). None where a manifest of older code did not record it."""
    manifest = manifest or {}
    sitting = manifest
    for resume in manifest.get("resumes") or []:
        if isinstance(resume, dict) and isinstance(resume.get("done"), int) and resume["done"] <= index:
            sitting = resume
    source = sitting.get("source") if isinstance(sitting.get("source"), dict) else {}
    versions = sitting.get("versions") if isinstance(sitting.get("versions"), dict) else {}
    try:
        cpu = cpu_named(sitting["cpu"])
    except (KeyError, TypeError, AttributeError):  # a resume recorded by older code names no CPU
        cpu = None
    return {
        "source": source.get("sha256"),
        "commit": source.get("commit"),
        "cpu_name": cpu,
        "llama_cpp": versions.get("llama-cpp-python"),
        "model_sha256": (manifest.get("config") or {}).get("model_sha256"),
    }


def _trial(trial: dict) -> dict:
    """A trial's ledger entry: its scores, its answer's SHA-256, and its own calls and tokens, the reflection's
    apart (a record's trial counts them together)."""
    call = (trial.get("reflection") or {}).get("call")
    reflection = None
    calls, tokens = trial.get("model_calls"), trial.get("tokens")
    if isinstance(call, dict):
        spent = {"prompt": call.get("prompt_tokens", 0), "evaluated": call.get("evaluated_tokens", 0),
                 "completion": call.get("completion_tokens", 0)}  # fmt: skip
        reflection = {"model_calls": 1, "tokens": spent}
        if isinstance(calls, int) and isinstance(tokens, dict):
            calls = calls - 1
            tokens = {k: None if v is None or spent.get(k) is None else v - spent[k] for k, v in tokens.items()}
    return {
        **{k: trial.get(k) for k in ("em", "f1", "success", "passed")},
        "answer_sha256": _sha256(trial.get("answer")),
        "model_calls": calls,
        "tokens": tokens,
        "reflection": reflection,
    }


def _programs(record: dict) -> list[str | None] | None:
    """A program run's implementations, each as its SHA-256, in the order written (None for a question's record)."""
    if not isinstance(record.get("program"), dict):
        return None
    steps = (record.get("trajectory") or {}).get("steps") or []
    return [_sha256(step.get("action_text")) for step in steps if isinstance(step, dict)]


def _sha256(text: object) -> str | None:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() if isinstance(text, str) else None


def entries(ledger: Path) -> list[dict]:
    """The ledger's lines, each checked to be what a ledger holds: an item's outcome, a sitting, or a calls file's
    record; none where there is no ledger."""
    try:
        lines = ledger.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise SystemExit(f"{ledger}:{number}: not a JSON line ({error}); mend or remove that line") from None
        if not _kept_line(entry):
            raise SystemExit(
                f"{ledger}:{number}: JSON, but neither an item's outcome (an object with text `row` and `id`) nor a "
                f"sitting ({line[:60]}); mend or remove that line"
            )
        found.append(entry)
    return found


def read(ledger: Path) -> tuple[dict[tuple[str, str], dict], list[dict]]:
    """The ledger's outcomes by (row, id), the later of two kept, and its sittings."""
    outcomes: dict[tuple[str, str], dict] = {}
    sittings: list[dict] = []
    for entry in entries(ledger):
        if "sitting" in entry:
            sittings.append(entry["sitting"])
        elif "calls" not in entry:
            outcomes[entry["row"], entry["id"]] = entry
    return outcomes, sittings


def _kept_line(entry: object) -> bool:
    """Whether a ledger line is what a ledger holds: a sitting, a calls file's record, or an item's outcome."""
    if not isinstance(entry, dict):
        return False
    if "sitting" in entry:
        return isinstance(entry["sitting"], dict)
    if "calls" in entry:
        said = entry["calls"]
        return isinstance(said, dict) and all(isinstance(said.get(k), str) for k in ("file", "sha256"))
    return isinstance(entry.get("row"), str) and isinstance(entry.get("id"), str)


def hold(ledger: Path, row: str, part: str) -> int:
    """Refuse a second process adding the same part (`--shard K/N`, or "all") of a row to one ledger: the two would
    ask the same items and add their lines back and forth. The lock (a file beside the ledger, `flock`ed) is held
    until this process ends; what it returns is kept open for that."""
    lock = ledger.with_name(f".{ledger.name}.{row}.{part}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        shard = "every item" if part == "all" else f"--shard {part.replace('-of-', '/')}"
        raise SystemExit(
            f"{ledger}: another process is adding {shard} of {row} to this ledger ({lock} is locked); wait for it "
            "to end, or give this one another --shard"
        ) from None
    return descriptor


def keep(ledger: Path, row: str, run: Path, out_sittings: Path) -> int:
    """Add the run file's items and the row's sittings in OUT/sittings.jsonl to the ledger, each once; how many
    items were new."""
    if not run.exists():
        return 0
    manifest, records = read_run(run)
    kept, sittings = read(ledger)
    said = {json.dumps(s, sort_keys=True) for s in sittings}
    lines, new = [], 0
    for index, record in enumerate(records):
        line = outcome(row, record, manifest, index)
        if kept.get((row, line["id"])) != line:
            new += (row, line["id"]) not in kept
            lines.append(json.dumps(line, ensure_ascii=False))
    try:
        for text in out_sittings.read_text().splitlines():
            sitting = json.loads(text)
            if sitting.get("row", sitting.get("method")) == row and json.dumps(sitting, sort_keys=True) not in said:
                lines.append(json.dumps({"sitting": sitting}))
    except FileNotFoundError:
        pass
    add(ledger, lines)
    return new


def add(ledger: Path, lines: list[str]) -> None:
    """Append lines to the ledger in one write() to a file opened for appending: two shards adding to one ledger at
    once cannot interleave their lines (a buffered text file cuts what is longer than its buffer into several)."""
    if not lines:
        return
    ledger.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    descriptor = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(descriptor, data)
    finally:
        os.close(descriptor)
    if written != len(data):
        raise OSError(f"{ledger}: only {written} of {len(data)} bytes were added")


def calls_file(ledger: Path, row: str, part: str) -> Path:
    """Where a row's calls are kept beside the ledger, one file a shard (`part`: "1-of-2", or "all")."""
    return ledger.with_name(f"{ledger.name.removesuffix('.jsonl')}.{row}.calls-{part}.jsonl.gz")


def keep_calls(ledger: Path, row: str, part: str, cache: Path) -> int:
    """Write every call of the sitting's cache (OUT/calls.sqlite) beside the ledger, so that an item under way when
    the machine goes (a LATS search of hours) goes on from its calls on the next: its rerun asks the same calls, and
    the cache answers them. The calls another part's file holds (restored into this cache) are left to it. Rewritten
    whole only when the cache has calls the file lacks, and then recorded in the ledger by its SHA-256; how many
    calls the file holds."""
    if not cache.exists():
        return 0
    target = calls_file(ledger, row, part)
    others = {key for path in ledger.parent.glob(calls_file(ledger, row, "*").name) if path != target
              for key, _ in read_calls(path, ledger)}  # fmt: skip
    with closing(sqlite3.connect(cache, timeout=60)) as db:
        rows = [pair for pair in db.execute("SELECT key, reply FROM calls ORDER BY rowid") if pair[0] not in others]
    if len(rows) == len(read_calls(target, ledger)):
        return len(rows)
    text = "".join(json.dumps([key, reply, call_digest(key, reply)], ensure_ascii=False) + "\n"
                   for key, reply in rows).encode("utf-8")  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
        packed.write(text)  # mtime 0: the same calls make the same bytes
    said = {"row": row, "file": target.name, "sha256": hashlib.sha256(text).hexdigest(), "count": len(rows)}
    add(ledger, [json.dumps({"calls": said})])  # recorded before the file is in place: never a file unrecorded
    temporary.replace(target)
    return len(rows)


def call_digest(key: str, reply: str) -> str:
    """The SHA-256 that binds a kept call's reply to its key (what asked it, of which model)."""
    return hashlib.sha256(f"{key}\n{reply}".encode("utf-8", "surrogatepass")).hexdigest()


def read_calls(path: Path, ledger: Path) -> list[list[str]]:
    """The (key, reply) pairs of one kept calls file, each call checked against its digest and the file against the
    ledger's record of it; none where there is no file. A file that does not check is refused, naming it (and the
    call, where one call's reply or key was changed)."""
    try:
        with gzip.open(path, "rb") as packed:
            text = packed.read()
        lines = [json.loads(line) for line in text.decode("utf-8").splitlines()]
    except FileNotFoundError:
        return []
    except (OSError, EOFError, ValueError) as error:
        raise SystemExit(f"{path}: not a kept calls file ({error}); remove it, and those searches start over") from None
    pairs = []
    for number, line in enumerate(lines, 1):
        if not (isinstance(line, list) and len(line) == 3 and all(isinstance(part, str) for part in line)):
            raise SystemExit(
                f"{path}: call {number} is not a kept call ([key, reply, digest]; a file kept before calls carried "
                "digests holds [key, reply]); restore the file from the repository's history, or remove it, and "
                "those searches start over"
            )
        key, reply, digest = line
        if call_digest(key, reply) != digest:
            raise SystemExit(
                f"{path}: call {number} (key {key[:16]}) does not match its digest: its reply or key was changed "
                "after it was kept, and a replay of it would change outcomes; restore the file from the "
                "repository's history (git checkout -- FILE), or remove it, and those searches start over"
            )
        pairs.append([key, reply])
    digest = hashlib.sha256(text).hexdigest()
    recorded = {e["calls"]["sha256"] for e in entries(ledger) if "calls" in e and e["calls"]["file"] == path.name}
    if digest not in recorded:
        raise SystemExit(
            f"{path}: its {len(pairs)} calls (SHA-256 {digest[:16]}) are not a file {ledger} recorded "
            f"({len(recorded)} recorded for it): the file was made again or changed outside kept.py; restore it from "
            "the repository's history, or remove it, and those searches start over"
        )
    return pairs


def restore_calls(ledger: Path, row: str, cache: Path) -> int:
    """Add the row's kept calls (every shard's file, each checked: `read_calls`) to the sitting's cache before it
    runs; how many it lacked. A call is found again only by a model of the same key (file, settings, llama.cpp build
    and CPU features, and rawreact's and llama-cpp-python's versions: rawreact.models.cache), so another machine's
    calls do not answer."""
    from rawreact.models.cache import SCHEMA

    pairs = [
        pair
        for path in sorted(ledger.parent.glob(calls_file(ledger, row, "*").name))
        for pair in read_calls(path, ledger)
    ]
    if not pairs:
        return 0
    cache.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(cache, timeout=60)) as db, db:  # closed, after its transaction is committed
        db.execute(SCHEMA)
        before = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        db.executemany("INSERT OR IGNORE INTO calls VALUES (?, ?)", pairs)
        return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] - before


def kept_ids(ledger: Path, row: str) -> set[str]:
    """The items the ledger holds under a row."""
    return {item for (name, item) in read(ledger)[0] if name == row}


def score(entry: dict, metric: str) -> float:
    value = entry.get(metric)
    return 0.0 if value is None else float(value)


def table(ledger: Path, base: str | None = None, metric: str | None = None) -> str:
    """The ledger's table in Markdown: a row's items, its share (Wilson's 95%) and, on the items both ran, its
    paired difference from `base` (the bootstrap's 95%); calls, tokens written and CPU seconds an item.

    `metric`: success, em or f1; by default success where the ledger's items have it (programs, games), else em.
    An item without the metric (a question scored by its answer has no success) is left out of its share, never
    counted as 0; a row none of whose items has it says so. `base`: a row of the ledger (by default `simple` where
    it holds one, else its first row); one it does not hold is refused, naming its rows."""
    outcomes, sittings = read(ledger)
    rows: dict[str, dict[str, dict]] = {}
    for (row, item), entry in outcomes.items():
        rows.setdefault(row, {})[item] = entry
    if not rows:
        raise SystemExit(f"{ledger}: no item kept yet; a sitting with --keep {ledger} adds them")
    if metric is None:
        metric = "success" if any(e.get("success") is not None for e in outcomes.values()) else "em"
    if base is None:
        base = "simple" if "simple" in rows else sorted(rows)[0]
    elif base not in rows:
        raise SystemExit(
            f"{ledger}: no row {base!r} to pair against; its rows: {', '.join(sorted(rows))}; give --base ROW"
        )
    scored = {row: {i: e for i, e in items.items() if e.get(metric) is not None} for row, items in rows.items()}
    cpu: dict[str, list[float]] = {}
    for s in sittings:
        spent = cpu.setdefault(s.get("row", s.get("method")), [0.0, 0])
        spent[0], spent[1] = spent[0] + s["cpu"], spent[1] + s["after"] - s["before"]
    lines = [
        f"| row | items | {metric} [95%] | against {base}, same items | calls | tokens written | CPU s an item |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    unscored = []
    for row, items in sorted(rows.items(), key=lambda kv: (kv[0] != base, kv[0])):
        values = [score(e, metric) for e in scored[row].values()]
        if not values:
            unscored.append(row)
            mean = "-"
        else:
            share = wilson(round(sum(values)), len(values)) if metric in ("success", "em") else None
            mean = f"{sum(values) / len(values):.3f}" if share is None else str(share)
        both = sorted(set(scored[row]) & set(scored.get(base, {})))
        against = "base"
        if row != base and both:
            diff = paired([score(rows[base][i], metric) for i in both], [score(items[i], metric) for i in both])
            against = f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] on {len(both)}"
        elif row != base:
            against = "-"
        calls = sum(e.get("model_calls") or 0 for e in items.values()) / len(items)
        written = sum((e.get("tokens") or {}).get("completion", 0) for e in items.values()) / len(items)
        spent, done = cpu.get(row, (0.0, 0))
        cost = f"{spent / done:.1f}" if done else "-"
        held = str(len(items)) if len(values) == len(items) else f"{len(values)} of {len(items)}"  # those scored
        lines.append(f"| {row} | {held} | {mean} | {against} | {calls:.1f} | {written:.0f} | {cost} |")
    if unscored:
        lines.append(
            f"\nno {metric} in the items of {', '.join(unscored)} (a question scored by its answer has none, a "
            "program no em): give --score with a score they have"
        )
    for what, key, width in (("CPU", "cpu_name", None), ("code", "commit", 12)):  # what the ledger mixes
        counted = Counter((entry.get(key) or "unknown")[:width] for entry in outcomes.values())
        lines.append(f"\nitems by {what}: " + "; ".join(f"{name}: {n}" for name, n in sorted(counted.items())))
    lines.append(
        "\n(CPU s an item: every sitting's CPU over the items the row's sittings finished, an item under way included)"
    )
    return "\n".join(lines)


def trial_curve(ledger: Path, row: str) -> tuple[int, list[dict]]:
    """A Reflexion row's items kept and, for each trial, how many items reached it and passed in it and how many
    were solved after it (each item with its last trial's answer so far): Reflexion's figure, in counts."""
    items = [e for (name, _), e in read(ledger)[0].items() if name == row and e.get("trials")]
    curve = []
    for trial in range(1, max((len(e["trials"]) for e in items), default=0) + 1):
        reached = [e["trials"][trial - 1] for e in items if len(e["trials"]) >= trial]
        after = sum(score(e["trials"][min(trial, len(e["trials"])) - 1], "em") for e in items)
        curve.append(
            {"trial": trial, "reached": len(reached), "passed": sum(bool(t.get("passed")) for t in reached),
             "solved": round(after)}
        )  # fmt: skip
    return len(items), curve


def by_trial(ledger: Path, row: str) -> str:
    """A Reflexion row's share solved by trial, as Reflexion's figure draws it, over the items kept: each trial's
    items that reached it and passed in it, and the EM after it (each item with its last trial's answer so far)."""
    n, curve = trial_curve(ledger, row)
    if not curve:
        return ""
    lines = ["| trial | reached it | passed in it | EM after it [95%] |", "| --- | --- | --- | --- |"]
    for t in curve:
        lines.append(f"| {t['trial']} | {t['reached']} | {t['passed']} | {wilson(t['solved'], n)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledger", type=Path)
    parser.add_argument("--base", help="the row the others are paired against (default: simple, or the first row)")
    parser.add_argument(
        "--score", choices=["success", "em", "f1"], help="default: success where items have it, else em"
    )
    parser.add_argument("--trials", metavar="ROW", help="and this Reflexion row's share solved by trial")
    args = parser.parse_args()
    print(table(args.ledger, args.base, args.score))
    if args.trials:
        print("\n" + by_trial(args.ledger, args.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
