"""`merge`: the run files of one run's shards (`--shard K/N`, on one machine or several) joined into one
run file, which `report`, `compare-runs`, `show`, `export` and `--resume` read as a run made in one go.

Every file must be a run file with its manifest, made with the same settings (the manifests' configs,
as `--resume` compares them, and the limit) but its shard, of one partition (the same N). A question in
two files is refused, unless `duplicates="first"` keeps the record of the first file given that has it.
Questions not there yet (a shard not given, or one that did not finish) are reported, not refused: the
merged file says so, and `--resume` with the unsharded command finishes them. The output is written
whole or not at all, and never over an existing file.
"""

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rawreact.config.settings import parse_shard
from rawreact.core.errors import DataError
from rawreact.core.folders import check_parents, make_parents, remove_made
from rawreact.core.tasks import of_layout
from rawreact.core.text import plural
from rawreact.runs.records import existing_manifest, manifest_path, read_run, trials_path
from rawreact.runs.results import cached_counts, placement_counts
from rawreact.runs.runfile import RunFile, changed_settings, json_bytes

DUPLICATES = ("refuse", "first")


@dataclass
class Merged:
    """What a merge wrote: the file, how many questions, and what it noticed (each a line to show)."""

    out: Path
    questions: int
    notes: list[str] = field(default_factory=list)
    unit: str = "question"  # what the run's records are, as their task type says: "game" for a run of games


def merge(files: list[str | Path], out: str | Path, *, duplicates: str = "refuse") -> Merged:
    """Join the run files `files` (shards of one run) into the new run file `out`."""
    files, out = [Path(f) for f in files], Path(out)
    if not files:
        raise DataError("name the run files to merge: rawreact merge A.jsonl B.jsonl ... --out ALL.jsonl")
    if duplicates not in DUPLICATES:
        raise DataError(f"duplicates={duplicates!r}; use one of {', '.join(DUPLICATES)}")
    for path in (out, manifest_path(out), trials_path(out)):
        if path.exists():
            raise DataError(f"{path} already exists; merge writes a new run file: choose another --out")
    check_parents(out)
    read = [_read(path, out) for path in files]
    first_path, first = files[0], read[0][0]
    shards = []
    for path, (manifest, _) in zip(files, read, strict=True):
        shard = manifest.get("config", {}).get("shard")
        shards.append(None if shard is None else parse_shard(shard))
        _same_run(first_path, first, path, manifest)
    parts = {n for _, n in filter(None, shards)}
    if len(parts) > 1 or (parts and None in shards):
        given = ", ".join(f"{p} ({_shard_text(s)})" for p, s in zip(files, shards, strict=True))
        raise DataError(f"the files are parts of different partitions: {given}; merge the K/N shards of one N")
    n = parts.pop() if parts else 0
    absent = [f"{k}/{n}" for k in range(1, n + 1) if (k, n) not in shards]  # the shards not given
    asked = {shard: manifest.get("questions") for shard, (manifest, _) in zip(shards, read, strict=True)}
    whole = (
        n > 0 and not absent and all(isinstance(count, int) for count in asked.values())
    )  # a shard given twice counts once
    unit = of_layout(first.get("layout") or "").unit
    records, kept_from, notes = _joined(files, read, duplicates, unit)
    notes += _missing(files, read, absent, unit)
    held, under_way = _under_way(files, {r["id"] for r in records})
    if under_way:
        notes.append(f"{plural(len(under_way), 'trial')} of {plural(len(held), 'question')} under way carried into "
                     f"{trials_path(out).name}; --resume the merged file continues them")  # fmt: skip
    _write(out, first, records, files, read, kept_from, sum(asked.values()) if whole else None, under_way)
    return Merged(out, len(records), notes, unit)


def _counts(read: list, records: list[dict]) -> dict:
    """What a run counts from its records, counted again over the merged ones (each shard's counts are of its
    part): the calls its cache answered and made, a fleet's episodes per server, and a Ray run's questions per
    node."""
    counts = {}
    said = next((m["cache"] for m, _ in read if isinstance(m.get("cache"), dict)), None)
    if said is not None:
        counts["cache"] = {k: v for k, v in said.items() if k not in ("hits", "made")} | cached_counts(records)
    return counts | placement_counts(records)


def _under_way(files: list[Path], finished: set[str]) -> tuple[set[str], list[bytes]]:
    """The questions no file finished that have Reflexion trials under way (`RUN.jsonl.trials`), and the whole
    lines of those trials, in the order of the files: the merged run's --resume continues them."""
    held, lines = set(), []
    for path in files:
        kept = trials_path(path)
        if not kept.is_file():
            continue
        data = kept.read_bytes()
        for number, line in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), 1):
            try:
                question = json.loads(line)["id"]
            except (ValueError, KeyError, TypeError):
                raise DataError(f"{kept} line {number} is not a trial; was the file edited? remove that line") from None
            if question not in finished:
                held.add(question)
                lines.append(line + b"\n")
    return held, lines


def _read(path: Path, out: Path) -> tuple[dict, list[dict]]:
    if path.resolve() == out.resolve():
        raise DataError(f"{path} is both an input and --out; merge writes a new run file")
    if not path.is_file():
        raise DataError(f"{path}: no such run file")
    if existing_manifest(path) is None:
        raise DataError(f"{path} has no manifest ({manifest_path(path).name}), so merge cannot check it is a shard "
                        "of the same run; restore it, or leave the file out")  # fmt: skip
    manifest, records = read_run(path)
    if not isinstance(manifest.get("config"), dict):
        raise DataError(f"{manifest_path(path)}: not a rawreact run manifest (it has no config)")
    return manifest, records


def _same_run(first_path: Path, first: dict, path: Path, manifest: dict) -> None:
    """Refuse a file made with other settings than the first's (its shard aside), naming the setting."""
    old = {k: v for k, v in first["config"].items() if k != "shard"}
    new = {k: v for k, v in manifest["config"].items() if k != "shard"}
    changed = [
        f"{key} is {old.get(key)!r} in {first_path}, {new.get(key)!r} here" for key in changed_settings(old, new)
    ]
    if first.get("limit") != manifest.get("limit"):
        changed.append(f"limit is {first.get('limit')!r} in {first_path}, {manifest.get('limit')!r} here")
    if changed:
        raise DataError(f"{path} is not a part of the same run: {'; '.join(changed)}; merge the shards of one run")


def _joined(
    files: list[Path], read: list, duplicates: str, unit: str = "question"
) -> tuple[list[dict], dict[Path, int], list[str]]:
    """Every question once, in the order of the files, and how many records each file gave."""
    seen: dict[str, Path] = {}
    records, kept_from, twice = [], dict.fromkeys(files, 0), []
    for path, (_, found) in zip(files, read, strict=True):
        for record in found:
            if record["id"] in seen:
                twice.append((record["id"], seen[record["id"]], path))
                continue
            seen[record["id"]] = path
            records.append(record)
            kept_from[path] += 1
    notes = []
    if twice:
        question, a, b = twice[0]
        if duplicates == "refuse":
            raise DataError(
                f"{unit} {question} is in both {a} and {b} ({len(twice)} record{'s' if len(twice) != 1 else ''} "
                f"of a {unit} already given); pass --duplicates first to keep each {unit}'s record from the "
                "first file given that has it"
            )
        notes.append(
            f"{len(twice)} record{'s' if len(twice) != 1 else ''} of a {unit} already given left out (the first "
            f"file's record is kept, as --duplicates first says), such as {question} of {b}, kept from {a}"
        )
    return records, kept_from, notes


def _missing(files: list[Path], read: list, absent: list[str], unit: str = "question") -> list[str]:
    """Lines on the questions not there yet: shards not given (`absent`, as K/N), and shards not finished."""
    notes = []
    if absent:
        notes.append(f"shard{'s' if len(absent) > 1 else ''} {', '.join(absent)} not given: their {unit}s "
                     "are missing; --resume the merged file with the unsharded command to run them")  # fmt: skip
    for path, (manifest, found) in zip(files, read, strict=True):
        asked = manifest.get("questions")
        if isinstance(asked, int) and len(found) < asked:
            notes.append(
                f"{path}: {len(found)} of its {asked} {unit}s finished; --resume the merged file runs the rest"
            )
    return notes


def _shard_text(shard: tuple[int, int] | None) -> str:
    return "no shard" if shard is None else f"shard {shard[0]}/{shard[1]}"


def _write(
    out: Path,
    first: dict,
    records: list[dict],
    files: list[Path],
    read: list,
    kept: dict,
    questions: int | None,
    under_way: list[bytes],
):
    """Write the run file, its manifest and its trials under way in a folder beside `out`, then move them
    into place; `questions` is how many the whole run asks (None: not known, as when a shard is missing)."""
    config = {**first["config"], "shard": None}
    keep = ("data", "layout", "limit", "model_file", "model_name", "workers", "timeout", "settings", "variant")
    details = {key: first[key] for key in keep if key in first}
    if isinstance(details.get("settings"), dict):
        details["settings"] = {**details["settings"], "shard": None}
    details["questions"] = questions
    details["merged"] = [
        {
            "file": str(path.resolve()),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "shard": manifest["config"].get("shard"),
            "model": manifest["config"].get("model"),  # where it ran: a server's URLs are not compared
            "records": len(found),
            "kept": kept[path],
            "created": manifest.get("created"),
            "versions": manifest.get("versions"),
        }
        for path, (manifest, found) in zip(files, read, strict=True)
    ]
    made = make_parents(out)
    folder = Path(tempfile.mkdtemp(prefix=".rawreact-merge-", dir=out.parent))
    written = False
    try:
        staged = RunFile(folder / out.name, config, details=details)
        try:
            for record in records:
                staged.append(record)
        finally:
            staged.close()
        manifest = {**staged.manifest, "created": first.get("created", staged.manifest["created"])}
        manifest["versions"] = first.get("versions", manifest["versions"])
        manifest.update(_counts(read, records))
        staged.manifest_path.write_bytes(json_bytes(manifest, indent=2, allow_nan=False))
        if under_way:
            trials_path(staged.path).write_bytes(b"".join(under_way))
        if out.exists() or manifest_path(out).exists():  # written meanwhile by another process
            raise DataError(f"{out} appeared while merging; nothing was written, choose another --out")
        if under_way:
            os.replace(trials_path(staged.path), trials_path(out))
        os.replace(staged.manifest_path, manifest_path(out))
        try:
            os.replace(staged.path, out)
        except OSError:
            manifest_path(out).unlink(missing_ok=True)  # no manifest without its run file
            trials_path(out).unlink(missing_ok=True)
            raise
        written = True
    except OSError as error:
        raise DataError(f"{out}: cannot write the merged run: {error.strerror}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if not written:
            remove_made(made)
