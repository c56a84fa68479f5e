"""Outcomes kept in the repository: a benchmark that takes more CPU than one sitting has, on machines that do not keep
their files between sittings, adds each finished item's outcome to a ledger the team commits
(`benchmarks/results/*.kept.jsonl`), and its tables are read from the ledger, so every sitting's items count and
anyone can recompute a table from the repository.

A ledger line is one item's outcome under one row (a method), in a few numbers and no dataset text:

    {"row": "lats", "id": "HumanEval/12", "success": 1.0, "em": null, "f1": null, "trials": null, "model_calls": 9,
     "tokens": {...}, "seconds": 301.2, "ended": "won", "source": "3f2a…", "commit": "975783e…", "cpu_name": "…"}

(`trials`: a Reflexion item's trials, each its em, f1, success and calls.) A sitting adds a line
`{"sitting": {...}}`, what paper_table.timed keeps in OUT/sittings.jsonl, so the CPU a problem is read across the
sittings of every machine. An item kept twice under a row keeps its later outcome.

    python benchmarks/kept.py LEDGER [--base simple] [--score success] [--trials ROW]    # the ledger's tables
"""

import argparse
import gzip
import json
import os
import sqlite3
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path

from rawreact.core.stats import paired, wilson
from rawreact.runs.records import read_run


def outcome(row: str, record: dict, manifest: dict | None, cpu: str) -> dict:
    """One record's ledger line."""
    source = (manifest or {}).get("source") or {}
    trials = record.get("trials")
    return {
        "row": row,
        "id": record["id"],
        "success": record.get("success"),
        "em": record.get("em"),
        "f1": record.get("f1"),
        "trials": None
        if trials is None
        else [{k: t.get(k) for k in ("em", "f1", "success", "passed", "model_calls")} for t in trials],
        "model_calls": record.get("model_calls"),
        "tokens": record.get("tokens"),
        "seconds": record.get("seconds"),
        "ended": record.get("ended"),
        "source": source.get("sha256"),
        "commit": source.get("commit"),
        "cpu_name": cpu,
    }


def read(ledger: Path) -> tuple[dict[tuple[str, str], dict], list[dict]]:
    """The ledger's outcomes by (row, id), the later of two kept, and its sittings."""
    outcomes: dict[tuple[str, str], dict] = {}
    sittings: list[dict] = []
    try:
        lines = ledger.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return outcomes, sittings
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
        if "sitting" in entry:
            sittings.append(entry["sitting"])
        else:
            outcomes[entry["row"], entry["id"]] = entry
    return outcomes, sittings


def _kept_line(entry: object) -> bool:
    """Whether a ledger line is what a ledger holds: a sitting, or an item's outcome."""
    if not isinstance(entry, dict):
        return False
    if "sitting" in entry:
        return isinstance(entry["sitting"], dict)
    return isinstance(entry.get("row"), str) and isinstance(entry.get("id"), str)


def keep(ledger: Path, row: str, run: Path, out_sittings: Path, cpu: str) -> int:
    """Add the run file's items and the row's sittings in OUT/sittings.jsonl to the ledger, each once; how many
    items were new."""
    if not run.exists():
        return 0
    manifest, records = read_run(run)
    kept, sittings = read(ledger)
    said = {json.dumps(s, sort_keys=True) for s in sittings}
    lines, new = [], 0
    for record in records:
        line = outcome(row, record, manifest, cpu)
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
    if lines:
        ledger.parent.mkdir(parents=True, exist_ok=True)
        # One write() to a file opened for appending: two shards adding to one ledger at once cannot interleave
        # their lines (a buffered text file cuts what is longer than its buffer into several writes).
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        descriptor = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(descriptor, data)
        finally:
            os.close(descriptor)
        if written != len(data):
            raise OSError(f"{ledger}: only {written} of {len(data)} bytes were added")
    return new


def calls_file(ledger: Path, row: str, part: str) -> Path:
    """Where a row's calls are kept beside the ledger, one file a shard (`part`: "1-of-2", or "all")."""
    return ledger.with_name(f"{ledger.name.removesuffix('.jsonl')}.{row}.calls-{part}.jsonl.gz")


def keep_calls(ledger: Path, row: str, part: str, cache: Path) -> int:
    """Write every call of the sitting's cache (OUT/calls.sqlite) beside the ledger, so that an item under way when
    the machine goes (a LATS search of hours) goes on from its calls on the next: its rerun asks the same calls, and
    the cache answers them. The calls another part's file holds (restored into this cache) are left to it. Rewritten
    whole only when the cache has calls the file lacks; how many the file holds."""
    if not cache.exists():
        return 0
    target = calls_file(ledger, row, part)
    others = {key for path in ledger.parent.glob(calls_file(ledger, row, "*").name) if path != target
              for key, _ in read_calls(path)}  # fmt: skip
    with closing(sqlite3.connect(cache, timeout=60)) as db:
        rows = [pair for pair in db.execute("SELECT key, reply FROM calls ORDER BY rowid") if pair[0] not in others]
    if len(rows) == len(read_calls(target)):
        return len(rows)
    text = "".join(json.dumps(pair, ensure_ascii=False) + "\n" for pair in rows).encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
        packed.write(text)  # mtime 0: the same calls make the same bytes
    temporary.replace(target)
    return len(rows)


def read_calls(path: Path) -> list[list[str]]:
    """The (key, reply) pairs of one kept calls file; none where there is no file."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            return [json.loads(line) for line in lines]
    except FileNotFoundError:
        return []
    except (OSError, EOFError, ValueError) as error:
        raise SystemExit(f"{path}: not a kept calls file ({error}); remove it, and those searches start over") from None


def restore_calls(ledger: Path, row: str, cache: Path) -> int:
    """Add the row's kept calls (every shard's file) to the sitting's cache before it runs; how many it lacked.
    A call is found again only by a model of the same key (file, settings, llama.cpp build and CPU features, and
    rawreact's and llama-cpp-python's versions: rawreact.models.cache), so another machine's calls do not answer."""
    from rawreact.models.cache import SCHEMA

    pairs = [
        pair for path in sorted(ledger.parent.glob(calls_file(ledger, row, "*").name)) for pair in read_calls(path)
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


def table(ledger: Path, base: str, metric: str = "success") -> str:
    """The ledger's table in Markdown: a row's items, its share (Wilson's 95%) and, on the items both ran, its
    paired difference from `base` (the bootstrap's 95%); calls, tokens written and CPU seconds an item."""
    outcomes, sittings = read(ledger)
    rows: dict[str, dict[str, dict]] = {}
    for (row, item), entry in outcomes.items():
        rows.setdefault(row, {})[item] = entry
    cpu: dict[str, list[float]] = {}
    for s in sittings:
        spent = cpu.setdefault(s.get("row", s.get("method")), [0.0, 0])
        spent[0], spent[1] = spent[0] + s["cpu"], spent[1] + s["after"] - s["before"]
    lines = [
        f"| row | items | {metric} [95%] | against {base}, same items | calls | tokens written | CPU s an item |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row, items in sorted(rows.items(), key=lambda kv: (kv[0] != base, kv[0])):
        values = [score(e, metric) for e in items.values()]
        share = wilson(round(sum(values)), len(values)) if metric in ("success", "em") else None
        mean = f"{sum(values) / len(values):.3f}" if share is None else str(share)
        both = sorted(set(items) & set(rows.get(base, {})))
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
        lines.append(f"| {row} | {len(items)} | {mean} | {against} | {calls:.1f} | {written:.0f} | {cost} |")
    for what, key, width in (("CPU", "cpu_name", None), ("code", "commit", 12)):  # what the ledger mixes
        counted = Counter((entry.get(key) or "unknown")[:width] for entry in outcomes.values())
        lines.append(f"\nitems by {what}: " + "; ".join(f"{name}: {n}" for name, n in sorted(counted.items())))
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
    parser.add_argument("--base", default="simple", help="the row the others are paired against")
    parser.add_argument("--score", default="success", choices=["success", "em", "f1"])
    parser.add_argument("--trials", metavar="ROW", help="and this Reflexion row's share solved by trial")
    args = parser.parse_args()
    print(table(args.ledger, args.base, args.score))
    if args.trials:
        print("\n" + by_trial(args.ledger, args.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
