"""The commands that read and write files without a model: `report` (a table, or a web page with
--html), `compare-runs`, `show` and `export` read run files, `merge` joins them; `index` builds a
passage store."""

import argparse
import json
import shutil
import sys
from pathlib import Path

from rawreact import __version__
from rawreact.cli.terminal import stopped_code, terminated_as_interrupt
from rawreact.config.settings import SEED_MAX
from rawreact.core.errors import DataError
from rawreact.core.stats import intervals_said
from rawreact.core.tasks import of_records
from rawreact.core.text import plural, printable, whole_number
from rawreact.reports.breakdown import breakdown, breakdown_note
from rawreact.reports.comparison import Comparison, compare_runs
from rawreact.reports.export import export
from rawreact.reports.html import write_page
from rawreact.reports.inspect_log import write_inspect_logs
from rawreact.reports.searches import SEARCHES_NOTE, search_rows
from rawreact.reports.show import listing, show
from rawreact.reports.summary import drop_unused, fitted, row_of, summarize, table, times_note
from rawreact.reports.trials import TRIALS_NOTE, trial_rows
from rawreact.runs.plan import refuse_inputs
from rawreact.runs.records import legacy_manifest_path, manifest_path, read_run
from rawreact.runs.runfile import refuse_existing
from rawreact.tasks.fever import label_table


def run_inputs(runs: list[str | Path]) -> list[Path]:
    """The files a command that reads run files reads: each run file and its manifest (either name)."""
    return [path for run in map(Path, runs) for path in (run, manifest_path(run), legacy_manifest_path(run))]


def shown(rows: list[dict[str, str]], args: argparse.Namespace) -> str:
    """A table as a command prints it: Markdown and CSV with every column; text fitted to the terminal's
    width (as several tables, or the `--columns` chosen), and whole when the output is not a terminal."""
    if args.format != "text":
        return table(rows, args.format)
    return fitted(rows, _width(), args.columns)


def _width() -> int | None:
    """The terminal's width in columns, or None when the output goes to a pipe or file (whole lines there)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def intervals_note(args: argparse.Namespace, comparison, where: str = "") -> None:
    """Say on stderr how many questions (games, problems) a comparison covers and how its intervals were drawn."""
    n, task = len(comparison.ids), comparison.task
    print(
        f"\n{plural(n, task.unit)}; {intervals_said(n, task)} ({args.resamples} resamples, seed {args.stats_seed}); "
        f"Δ is paired against {comparison.names[0]}{where}; {times_note(task.unit)}",
        file=sys.stderr,
    )


def compare_runs_command(args: argparse.Namespace) -> int:
    """`rawreact compare-runs`: finished run files side by side, with intervals, on their shared questions."""
    comparison = compare_runs(_named(args.runs), resamples=args.resamples, seed=args.stats_seed)
    print(shown(comparison.rows(args.format), args), end="")
    intervals_note(args, comparison)
    return 0


def _named(items: list[str], suffix: bool = False) -> dict[str, str]:
    """Run files by name: NAME=RUN.jsonl, or the file's name (without .jsonl unless `suffix`)."""
    runs: dict[str, str] = {}
    for item in items:
        name, equals, path = item.partition("=")
        if not equals or not name or Path(item).exists():
            name, path = Path(item).name if suffix else Path(item).name.removesuffix(".jsonl"), item
        if name in runs:
            raise DataError(f"two runs are named {name!r}; name them, as in NAME=RUN.jsonl")
        runs[name] = path
    return runs


def report(args: argparse.Namespace) -> int:
    """`rawreact report`: one row per run file; with --html, the whole report as one web page."""
    runs = _named(args.runs, suffix=True)
    for out in filter(None, (args.html, args.inspect)):
        refuse_inputs(out, run_inputs(list(runs.values())), "a run file or manifest")
    loaded = {name: read_run(path) for name, path in runs.items()}  # a missing or bad run file is named first
    if args.html:
        refuse_existing(args.html, args.force, "--html path")
    if args.format == "json":  # everything the tables say, as numbers, in one object (as lm-eval's results file)
        print(json.dumps(report_json(loaded, runs, args), ensure_ascii=False, indent=1, allow_nan=False))
        _write_extras(args, runs, loaded)
        return 0
    rows = [row_of(name, *read) for name, read in loaded.items()]
    _write_extras(args, runs, loaded)
    print(printable(shown(drop_unused(rows), args)), end="")
    unit = of_records([r for _, records in loaded.values() for r in records]).unit
    print(f"rawreact: {times_note(unit)}", file=sys.stderr)
    for name, (manifest, records) in loaded.items():
        done = progress(runs[name], manifest, records)
        if not done["finished"]:
            print(f"rawreact: {name} {stopped_said(done, unit)}", file=sys.stderr)
    labels = label_table({name: records for name, (_, records) in loaded.items()})
    if labels:  # FEVER runs: label accuracy per gold label, and what was answered
        print("\n" + printable(table(labels, args.format)), end="")
    judged = {name: records for name, (_, records) in loaded.items() if of_records(records).scoring == "outcome"}
    kinds = [row for row in breakdown(judged) if row["by"] == "type"] if judged else []
    if kinds:  # episodes the environment judged, of several kinds (ScienceWorld's tasks, TextWorld's recipes)
        print("\n" + printable(table([{"run": r["run"], "kind": r["group"]} | {k: v for k, v in r.items() if k not in (
            "run", "by", "group")} for r in kinds], args.format)), end="")  # fmt: skip
        task = of_records([r for found in judged.values() for r in found])
        print(f"rawreact: {breakdown_note(kinds, task)}", file=sys.stderr)
    searches = search_rows({name: records for name, (_, records) in loaded.items()})
    if searches:  # LATS runs: what the searches found, and each kind of call's cost
        print("\n" + printable(table(searches, args.format)), end="")
        print(f"rawreact: {SEARCHES_NOTE}", file=sys.stderr)
    trials = trial_rows({name: records for name, (_, records) in loaded.items()})
    if trials:  # Reflexion runs: the score after each trial, and each trial's cost
        print("\n" + printable(table(trials, args.format)), end="")
        print(f"rawreact: {TRIALS_NOTE}", file=sys.stderr)
    return 0


def _write_extras(args: argparse.Namespace, runs: dict[str, str], loaded: dict) -> None:
    """The report's web page (--html) and inspect-ai logs (--inspect), where asked for."""
    if args.html:
        written = write_page(runs, args.html, resamples=args.resamples, seed=args.stats_seed)
        print(f"rawreact: wrote the report of {plural(len(runs), 'run')} to {written}", file=sys.stderr)
    if args.inspect:
        logs = write_inspect_logs(loaded, args.inspect)
        print(f"rawreact: wrote {plural(len(logs), 'inspect log')} to {args.inspect}; open them with "
              f"`inspect view --log-dir {args.inspect}`", file=sys.stderr)  # fmt: skip


def report_json(loaded: dict, runs: dict[str, str], args: argparse.Namespace) -> dict:
    """`report --format json`: each run's summary (every number the table rounds, unrounded), its scores with
    95% intervals, and, on the questions it shares with the first run, the paired difference to it; then the
    tables a report adds for some runs (FEVER's labels, judged episodes by kind, LATS's searches, Reflexion's
    trials) as lists of rows."""
    records = {name: recs for name, (_, recs) in loaded.items()}
    base = next(iter(loaded))
    out: dict = {"rawreact": __version__, "resamples": args.resamples, "stats_seed": args.stats_seed,
                 "intervals": "95%: Wilson's for a share (EM, success), the bootstrap for F1 and reward; "
                 "a paired bootstrap for the difference to the first run", "base": base, "runs": []}  # fmt: skip
    for name, (manifest, recs) in loaded.items():
        config = (manifest or {}).get("config", {})
        alone = Comparison([name], {name: recs}, args.resamples, args.stats_seed)
        summary = summarize(recs)
        if summary.get("unit", "game") != "game" and "games" in summary:  # a program run counts problems
            summary[f"{summary['unit']}s"] = summary.pop("games")
        run = {"name": name, "file": str(runs[name]), "method": config.get("method"), "model": config.get("model"),
               "model_sha256": config.get("model_sha256"), "progress": progress(runs[name], manifest, recs),
               "summary": summary, "cpu": cpu_of(manifest, len(recs)), "scores": {}}  # fmt: skip
        if alone.ids:
            run["scores"] = {m: _interval(alone.interval(name, m)) for m in alone.metrics}
        if name != base:
            paired = Comparison([base, name], {base: records[base], name: recs}, args.resamples, args.stats_seed)
            if paired.ids:
                run["paired"] = {"questions": len(paired.ids)} | {
                    m: {
                        "base": _interval(paired.interval(base, m)),
                        "difference": _interval(paired.difference(name, m)),
                    }
                    for m in paired.metrics
                }
        out["runs"].append(run)
    judged = {n: r for n, r in records.items() if of_records(r).scoring == "outcome"}
    out["labels"] = label_table(records) or []
    out["kinds"] = [row for row in breakdown(judged) if row["by"] == "type"] if judged else []
    out["searches"] = search_rows(records) or []
    out["trials"] = trial_rows(records) or []
    return out


def cpu_of(manifest: dict | None, records: int) -> dict | None:
    """A run's CPU seconds as its manifest adds them up over its sittings (`RunFile.close`), a record's share, and
    how many of its sittings they count (one killed outright counts none); None for a run made before they were
    recorded. On Ray the figure is the driver's: its actors' CPU is on their nodes."""
    found = (manifest or {}).get("cpu_seconds")
    if not isinstance(found, dict) or not isinstance(found.get("seconds"), int | float):
        return None
    sittings = 1 + len((manifest or {}).get("resumes") or [])
    per = found["seconds"] / records if records else None
    return {"seconds": found["seconds"], "per_record": per, "sittings": found.get("sittings"), "of": sittings}


def progress(path: str | Path, manifest: dict | None, records: list[dict]) -> dict:
    """How far a run file got: its whole records against the questions its manifest planned, whether its last line
    was cut short (a run stopped while writing it), and so whether it finished."""
    planned = (manifest or {}).get("questions")
    planned = planned if isinstance(planned, int) and not isinstance(planned, bool) else None
    try:
        with open(path, "rb") as file:
            file.seek(0, 2)
            size = file.tell()
            file.seek(max(0, size - 1))
            cut = size > 0 and file.read(1) != b"\n"
    except OSError:
        cut = False
    finished = not cut and (planned is None or len(records) >= planned)
    return {"finished": finished, "records": len(records), "planned": planned, "cut_line": cut}


def stopped_said(done: dict, unit: str) -> str:
    """A stopped run, in words: how many of how many, and how to go on."""
    of = "" if done["planned"] is None else f" of {done['planned']}"
    cut = ", and its last line was cut short (left out)" if done["cut_line"] else ""
    return (
        f"stopped after {done['records']}{of} {unit}s{cut}: the figures are of those only; `rawreact run` with "
        "--resume and the same --out finishes it"
    )


def _interval(found) -> dict[str, float]:
    return {"mean": found.mean, "low": found.low, "high": found.high}


def export_command(args: argparse.Namespace) -> int:
    """`rawreact export`: the steps of the selected episodes of run files, as fine-tuning examples."""
    for out in (args.out, manifest_path(args.out)):  # the examples, and the manifest written beside them
        refuse_inputs(out, run_inputs(args.runs), "a run file or manifest")
    options = {"layout": args.layout, "min_f1": args.min_f1, "with_prompt": args.prompt, "force": args.force}
    options["with_memory"] = args.memory
    done = export(args.runs, args.out, **options)
    chosen = "EM 1" if args.min_f1 is None else f"F1 at least {args.min_f1:g}"
    if done.games:  # a game is selected when won
        chosen = "won" if args.min_f1 is None else f"won, reward at least {args.min_f1:g}"
    if not done.examples:  # nothing was written: an empty file would look like a finished export
        hint = "; try --min-f1 0.5" if args.min_f1 is None and done.not_selected else ""
        raise DataError(
            f"no example to export from {plural(done.records, 'question')}: {done.not_selected} not selected "
            f"({chosen}), {done.no_trajectory} with no steps for the {args.layout} layout, {done.no_target} with no "
            f"step to learn from; nothing was written to {args.out}{hint}"
        )
    print(
        f"rawreact: wrote {plural(done.examples, 'example')} ({args.layout}) from {done.questions} of "
        f"{plural(done.records, 'question')} ({chosen}) to {args.out}; {done.not_selected} not selected, "
        f"{done.no_trajectory} with no steps for this layout (answers without actions; tools episodes, which "
        f"export as chat only), {done.no_target} selected with no step to learn from (every action invalid or "
        "repeated)",
        file=sys.stderr,
    )
    return 0


def show_command(args: argparse.Namespace) -> int:
    """`rawreact show`: the questions of a run file, or one question's transcript."""
    _, records = read_run(args.run)
    if args.id is None and not args.first_wrong:
        print(printable(listing(records, _width())), end="")
        return 0
    if args.first_wrong:
        found = [r for r in records if r["em"] == 0]
        if not records:
            raise DataError(f"{args.run} holds no finished question yet")
        if not found:
            scored = sum(r["em"] is not None for r in records)
            unscored = f" ({len(records) - scored} have no gold answer)" if scored < len(records) else ""
            raise DataError(f"{args.run}: every one of its {scored} scored questions was answered correctly{unscored}")
    else:
        found = [r for r in records if r["id"] == args.id]
    if not found:
        ids = ", ".join(r["id"] for r in records[:5]) + (", ..." if len(records) > 5 else "")
        raise DataError(f"{args.run} has no question with id {args.id!r}; its ids: {ids or 'none'}")
    print(printable(show(found[0], with_prompt=args.prompt)), end="")
    return 0


def index_command(args: argparse.Namespace) -> int:
    """`rawreact index`: stream the sources into a passage store, written whole or not at all."""
    from tqdm import tqdm

    from rawreact.environments.build import build_store
    from rawreact.tasks.corpus import read_sources

    out = Path(args.out)
    if out.is_dir():
        raise DataError(f"{out} is a folder; give --out a file name, such as {out / 'wiki.sqlite'}")
    refuse_inputs(out, args.sources, "a source")
    if out.exists() and not args.force:
        raise DataError(f"{out} exists; give another --out, or add --force to replace it once the new store is built")
    with tqdm(unit=" pages", unit_scale=True, dynamic_ncols=True, disable=None, file=sys.stderr) as bar:
        try:
            with terminated_as_interrupt():  # SIGTERM cleans up as Ctrl-C does: no partial build is left
                info = build_store(read_sources(args.sources), out, on_pages=bar.update, replace=args.force)
        except KeyboardInterrupt:
            bar.close()
            print(f"\nrawreact: interrupted; {out} was not written", file=sys.stderr)
            return stopped_code()
    repeats, skipped = info["duplicates"], sum(source["skipped"] for source in info["sources"])
    unreadable = sum(source.get("unreadable", 0) for source in info["sources"])
    dropped = [f"{plural(repeats, 'repeated title')} kept once"] if repeats else []
    dropped += [f"{plural(skipped, 'page')} without title or text skipped"] if skipped else []
    dropped += [f"{plural(unreadable, 'page')} with text no UTF-8 can hold skipped"] if unreadable else []
    print(
        f"{out}: {plural(info['pages'], 'page')} from {plural(len(info['sources']), 'source')} "
        f"in {info['build_seconds']} s, "
        f"{out.stat().st_size / 1e6:.1f} MB"
        + (f" ({'; '.join(dropped)})" if dropped else "")
        + f"; content sha256 {info['content_sha256'][:16]}"
    )
    return 0


def merge_command(args: argparse.Namespace) -> int:
    """`rawreact merge`: the shards' run files as one run file, written whole or not at all."""
    from rawreact.runs.merge import merge

    merged = merge(args.runs, args.out, duplicates=args.duplicates)
    print(f"{merged.out}: {plural(merged.questions, merged.unit)} from {plural(len(args.runs), 'run file')}")
    for note in merged.notes:
        print(f"rawreact: {printable(note)}", file=sys.stderr)
    return 0


def games_command(args: argparse.Namespace) -> int:
    """`rawreact games`: make games by recipe and seed into a folder, one line per game as it is ready."""
    from rawreact.tasks.games import make_games

    recipes = args.recipe or ["coin:1", "treasure:1", "cooking:1"]
    seeds = parse_seeds(args.seeds)
    if not args.folder.strip():
        raise DataError("rawreact games '': give the folder to make the games in, such as games")
    folder = Path(args.folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder} is a file; give a folder to make the games in")

    def said(game: dict) -> None:
        print(
            printable(f"{game['id']}: {game.get('recipe', '?')}, seed {game.get('seed', '?')}, won in "
                      f"{plural(game.get('walkthrough_steps', 0), 'step')}"),
            flush=True,
        )  # fmt: skip

    with terminated_as_interrupt():  # SIGTERM ends the tw-make processes under way too (tasks.games)
        made = make_games(folder, recipes, seeds, on_game=said)
    print(f"{plural(len(made), 'game')} in {folder}; run them with: rawreact run {folder} --method react")
    return 0


def parse_seeds(text: str) -> list[int]:
    """`1-5` or `1,3,7` (or both, `1-3,9`) as a list of seeds; a bad one is a DataError."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, dash, high = part.partition("-")
        a, b = whole_number(low), whole_number(high) if dash else whole_number(low)
        if a is None or b is None or b < a or b - a > 10_000:
            raise DataError(f"--seeds {text!r}: give seeds as A-B or A,B,C with whole numbers, such as 1-5")
        if b > SEED_MAX:  # tw-make seeds numpy's generator, which takes 32 bits
            raise DataError(f"--seeds {text!r}: a seed is at most {SEED_MAX} (tw-make's generator takes 32 bits)")
        seeds += [s for s in range(a, b + 1) if s not in seeds]
    if not seeds:
        raise DataError(f"--seeds {text!r}: give at least one seed, such as 1 or 1-5")
    return seeds


def plugins_command(args: argparse.Namespace) -> int:
    """`rawreact plugins`: the environments installed packages declare, read from their metadata (none is imported)."""
    from rawreact.core.modules import PLUGINS, plugins

    found = plugins()
    if not found:
        print(f"no plugins: no installed package declares an entry point in the group {PLUGINS}")
        return 0
    rows = [{"name": n, "factory": v, "package": p, "version": ver} for n, v, p, ver in found]
    print(printable(table(rows)), end="")
    print("rawreact: run one with --env NAME; a run records its package and version", file=sys.stderr)
    return 0


def data_command(args: argparse.Namespace) -> int:
    """`rawreact data [NAME...]`: the benchmarks by name; with names, download each into the cache and check it."""
    from rawreact.tasks import named

    if not args.names:
        print(named.listing())
        return 0
    unknown = [name for name in args.names if named.lookup(name) is None]
    if unknown:
        raise DataError(f"{', '.join(unknown)}: not a benchmark rawreact knows by name; `rawreact data` lists them")
    for name in args.names:
        print(f"{name}: {named.path_of(name)}")
    return 0
