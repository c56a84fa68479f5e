"""Prompt experiments: variants of a run on the same questions, side by side, with bootstrap intervals.

A `Variant` fixes everything that decides a run's numbers: model, prompt (exemplar file,
instruction, k, exemplar order), grammar, passage length, step and token limits, temperature.
`compare` runs each variant on the same questions in the same order into an ordinary run file
`OUT/NAME.jsonl` (so an interrupted comparison resumes, and a finished variant is not run again),
then `Comparison` (reports/comparison.py) puts them side by side: EM and F1 with 95% bootstrap intervals,
and the paired difference to the first variant with a paired bootstrap interval.
"""

from collections.abc import Callable, Iterable
from pathlib import Path

from rawreact.config.files import manifest_settings
from rawreact.config.settings import Settings, in_shard, parse_shard
from rawreact.core.errors import DataError, GrammarError, ModelError
from rawreact.core.stats import RESAMPLES
from rawreact.experiments.variants import Variant
from rawreact.models import build, load_model
from rawreact.models.cache import CachedModel, CallCache
from rawreact.models.cores import bound_spinning
from rawreact.models.specs import is_embedded
from rawreact.reports.comparison import Comparison
from rawreact.runs.plan import make_plan
from rawreact.runs.results import Result, cached_counts
from rawreact.runs.run import check_context, run_questions
from rawreact.runs.runfile import RunFile
from rawreact.runs.setup import model_options
from rawreact.tasks.collection import Collection, Question, choose_questions
from rawreact.tasks.loading import load_collection


def compare(
    data: str | Path | Collection | None,
    variants: Iterable[Variant],
    out: str | Path,
    *,
    limit: int | None = None,
    shuffle: bool = False,
    shuffle_seed: int = 0,
    shuffle_range: int | None = None,
    shard: str | None = None,
    workers: int = 1,
    per_endpoint: int | None = None,
    host: str | None = None,
    timeout: float | None = None,
    cache: str | Path | None = None,
    cache_sampled: bool = False,
    resamples: int = RESAMPLES,
    stats_seed: int = 0,
    on_variant: Callable[[Variant, int, int], None] | None = None,
    on_result: Callable[[Variant, Result], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Comparison:
    """Run every variant on the same questions into `out/NAME.jsonl`, then compare them.

    The questions are the data's (shuffled with `shuffle_seed` as `rawreact run --shuffle` does), the first
    `limit` of them, and of those the `shard` ("K/N") part, as `in_shard` takes it. A variant whose run
    file exists is resumed: finished questions are kept, and a run made with other settings is refused.
    Everything is loaded and checked before the first model call; models load only for variants with
    questions left, once per model and sampling setting.
    `on_variant(variant, done, total)` is called as each variant starts, `on_result` after each
    question, and `stop()` as in `run_questions`. `cache` (a file) answers the calls a variant shares with an
    earlier run or another variant from there (`models.cache`); `cache_sampled` as `CachedModel`'s `sampled`.
    """
    collection = data if isinstance(data, Collection) else load_collection(data)
    variants = list(variants)
    if not variants:
        raise DataError("a comparison needs at least one variant")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise DataError(f"variant names must differ, and {', '.join(n for n in names if names.count(n) > 1)} repeat")
    chosen = choose_questions(collection, limit=limit, shuffle=shuffle, seed=shuffle_seed, shuffle_range=shuffle_range)
    questions = in_shard(chosen, None if shard is None else parse_shard(shard))
    out = Path(out)
    shuffled = {"shuffle": shuffle, "shuffle_seed": shuffle_seed, "shuffle_range": shuffle_range, "shard": shard}
    # Every variant loaded and checked before anything is written, as `rawreact run` loads its settings.
    checked = [(variant, make_plan(variant, collection, questions, run=shuffled).parts) for variant in variants]
    # What each variant's manifest records of the questions and how they were sent, beside its own settings.
    shared = {"data": collection.source or None, "limit": limit, "workers": workers, "host": host, **shuffled}
    shared["per_endpoint"] = per_endpoint
    shared |= {} if timeout is None else {"timeout": timeout}
    shared |= {"cache": None if cache is None else str(cache), "cache_sampled": cache_sampled}
    folder_made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"{out}: cannot make the comparison folder: {error.strerror}") from None
    calls = None  # the cache's file, opened once the models are loaded
    plans, made = [], []  # made: the run files this call starts, removed if the setup fails
    try:
        for variant, parts in checked:
            path = out / f"{variant.name}.jsonl"
            new = not path.exists()
            details = {"data": collection.source, "layout": collection.layout, "limit": limit, "variant": variant.name}
            details["questions"] = len(questions)
            details["settings"] = manifest_settings(Settings(**variant.to_dict() | shared))
            details["openmp"] = bound_spinning() if is_embedded(variant.model) else None  # as `run` records it
            # as the model will load (its engine gives each stream a cache of its own)
            details["llama_cpp"] = build.loads() | {"kv_cache": "per stream"} if is_embedded(variant.model) else None
            sink = RunFile(path, parts.config, resume=True, details=details)
            made += [path, sink.manifest_path] if new else []
            plans.append((variant, parts, sink, sum(q.id in sink.done for q in questions)))
        calls = None if cache is None else CallCache(cache)  # a bad cache file fails before any model loads
        models = _models(plans, questions, shared)
    except BaseException:
        for *_, sink, _ in plans:
            sink.close()
        for path in made:  # nothing was written to them yet: a failed setup leaves the folder as it was
            path.unlink(missing_ok=True)
        if folder_made and not any(out.iterdir()):
            out.rmdir()
        raise
    try:
        for variant, parts, sink, done in plans:
            if on_variant is not None:
                on_variant(variant, done, len(questions))
            if done == len(questions) or (stop is not None and stop()):
                continue
            model = models[_model_key(variant)]
            model = model if calls is None else CachedModel(model, calls, sampled=cache_sampled)  # its own counts
            results = run_questions(
                questions,
                variant.envs(collection),
                model,
                parts.prompt,
                out=sink,
                workers=workers,
                stop=stop,
                **parts.options,
            )
            for result in results:
                if on_result is not None:
                    on_result(variant, result)
            if calls is not None:
                sink.set_counts("cache", model.said() | cached_counts(sink.done.values()))
    finally:
        for *_, sink, _ in plans:
            sink.close()
        if calls is not None:
            calls.close()
    # Each run file's `done` holds every record it has, read at resume or appended since.
    records = {v.name: [sink.done[q.id] for q in questions if q.id in sink.done] for v, *_, sink, _ in plans}
    return Comparison(names, records, resamples, stats_seed)


def _model_key(variant: Variant) -> tuple:
    return variant.model, variant.n_ctx, variant.temperature, variant.seed, variant.drafts


def _models(plans: list, questions: list[Question], shared: dict) -> dict[tuple, object]:
    """Load each model that a variant with questions left needs, once, and check it can do the job."""
    models: dict[tuple, object] = {}
    for variant, parts, _, done in plans:
        if done == len(questions):
            continue
        key = _model_key(variant)
        if key not in models:  # the options `rawreact run` loads its model with, from the variant's settings
            models[key] = load_model(variant.model, **model_options(Settings(**variant.to_dict() | shared)))
        if parts.grammar is not None and not models[key].supports_grammar:
            raise GrammarError(f"variant {variant.name}: model {models[key].name} cannot apply a grammar")
        try:
            check_context(models[key], parts.prompt, questions, variant.step_tokens, variant.method, parts.backoff)
        except ModelError as error:
            raise ModelError(f"variant {variant.name}: {error}") from None
    return models
