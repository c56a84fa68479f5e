"""`rawreact compare`: variants of a run on the same questions, then the table with intervals."""

import argparse
import sys
from pathlib import Path

from rawreact.cli.files import intervals_note, shown
from rawreact.cli.given import command_of
from rawreact.cli.lines import score_cell
from rawreact.cli.terminal import Stopper, progress
from rawreact.config.choices import REFLEXION
from rawreact.config.settings import SHARED, VARIANT_KEYS, Settings, parse_spec
from rawreact.core.errors import DataError
from rawreact.core.text import inline, plural, printable
from rawreact.experiments.compare import compare
from rawreact.experiments.variants import Variant, ablation, parse_variant
from rawreact.reports.summary import game_score, table
from rawreact.reports.trials import TRIALS_NOTE, trial_rows
from rawreact.runs.plan import given_settings, refuse_cache_inputs
from rawreact.runs.results import Result, cached_counts
from rawreact.tasks.loading import load_collection


def compare_command(args: argparse.Namespace) -> int:
    """`rawreact compare`: every variant on the same questions, then the table with intervals."""
    given = given_settings(command_of(args))
    shared = Settings(**{key: value for key, value in given.items() if key in SHARED})
    refuse_cache_inputs(given, args.config)
    if shared.ray is not None:  # a settings file's (compare has no --ray): refused rather than ignored
        where = f"{args.config}: " if args.config else ""
        raise DataError(
            f"{where}ray={shared.ray!r}: compare runs its variants in this process, and Ray runs are `rawreact run "
            "--ray`'s; drop ray (and actors, actor_cpus) from the settings, or run each variant with `rawreact run`"
        )
    own = {key: value for key, value in given.items() if key in VARIANT_KEYS}
    own |= parse_spec(args.base, f"--base {args.base!r}", VARIANT_KEYS)
    if "reflexion" in args.ablation and own.get("method") not in REFLEXION:  # the ablation's trials are ReAct's
        own["method"] = "react-reflexion" if own.get("method") in (None, "react") else own["method"]
    base = Variant("base", **own)
    variants = [parse_variant(text, base) for text in args.variant]
    collection = load_collection(
        shared.data, questions_only=own.get("env") is not None or own.get("passages") is not None
    )  # read once: its task picks the prompt files an ablation counts
    for kind in args.ablation:
        variants += ablation(kind, base, orders=args.orders, task=collection.task)
    if not variants:
        raise DataError("name the variants to compare: --variant NAME=SPEC (twice or more), or --ablation KIND")
    with Stopper(shared.workers) as stopper, progress(0, 0) as bar:
        complete: list[str] = []  # the variants whose run files held every question: nothing to compute

        def started(variant: Variant, done: int, total: int) -> None:
            bar.total = (bar.total or 0) + total
            bar.resumed(done)
            kept = f"{done} of {total} questions already in its run file" if done else f"{total} questions"
            bar.write(f"variant {variant.name}: {kept}", file=sys.stderr)
            if done == total:
                complete.append(variant.name)

        def finished(variant: Variant, result: Result) -> None:
            bar.set_postfix_str(variant.name, refresh=False)
            bar.update()
            if not args.quiet:
                if result.task.scoring == "outcome":  # judged by the environment: won or not, and its reward
                    scores = game_score(result.success, result.reward)
                else:
                    scores = f"{result.task.outcome(result.scores)}, F1 {score_cell(result.f1, '{:.2f}')}"
                line = f"{variant.name} {inline(result.question.id)}: {scores}"
                bar.write(printable(line), file=sys.stdout)

        comparison = compare(
            collection,
            variants,
            args.out,
            limit=shared.limit,
            shuffle=shared.shuffle,
            shuffle_seed=shared.shuffle_seed,
            shuffle_range=shared.shuffle_range,
            shard=shared.shard,
            per_endpoint=shared.per_endpoint,
            workers=shared.workers,
            host=shared.host,
            timeout=shared.timeout,
            cache=shared.cache,
            cache_sampled=shared.cache_sampled,
            resamples=args.resamples,
            stats_seed=args.stats_seed,
            on_variant=started,
            on_result=finished,
            stop=lambda: stopper.signal is not None,
        )
    if stopper.signal is not None:
        print(
            f"rawreact: stopped early; run the same command again to finish the comparison in {args.out}",
            file=sys.stderr,
        )
        return 128 + stopper.signal
    out = Path(args.out)
    if shared.cache:  # what the cache did, variant by variant, as `run` says it (the manifests count it too)
        for line in cache_lines(comparison.records, complete, shared.cache, out):
            print(f"rawreact: {line}", file=sys.stderr)
    for style, name in (("markdown", "comparison.md"), ("csv", "comparison.csv")):
        (out / name).write_text(comparison.table(style), encoding="utf-8")
    print(shown(comparison.rows(args.format), args), end="")
    intervals_note(args, comparison, f"; tables in {out / 'comparison.md'} and {out / 'comparison.csv'}")
    trials = trial_rows(comparison.records)
    if trials:  # Reflexion variants: the score after each trial, and each trial's cost
        (out / "trials.md").write_text(table(trials, "markdown"), encoding="utf-8")
        print("\n" + printable(table(trials, args.format)), end="")
        print(f"rawreact: {TRIALS_NOTE}; the table is also in {out / 'trials.md'}", file=sys.stderr)
    return 0


def cache_lines(records: dict[str, list[dict]], complete: list[str], cache: str, out: Path) -> list[str]:
    """One line a variant on the call cache: how many of its calls came from it, or, for a variant whose run file
    already held every question, that nothing was computed, so the cache was not read."""
    lines = []
    for name, found in records.items():
        if name in complete:
            lines.append(
                f"variant {name}: every question was already in {out / (name + '.jsonl')}, so nothing was computed "
                f"and the cache {cache} was not read; compare into another folder to run it again from the cache"
            )
            continue
        counts = cached_counts(found)
        total = counts["hits"] + counts["made"]
        lines.append(f"variant {name}: {counts['hits']} of {plural(total, 'model call')} came from the cache {cache}")
    return lines
