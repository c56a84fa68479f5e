"""Prompt experiments: variants of a run on the same questions, side by side, with bootstrap intervals.

A `Variant` fixes everything that decides a run's numbers: model, prompt (exemplar file,
instruction, k, exemplar order), grammar, passage length, step and token limits, temperature.
`compare` runs each variant on the same questions in the same order into an ordinary run file
`OUT/NAME.jsonl` (so an interrupted comparison resumes, and a finished variant is not run again),
then `Comparison` (in report.py) puts them side by side: EM and F1 with 95% bootstrap intervals,
and the paired difference to the first variant with a paired bootstrap interval.
"""

import functools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path

from rawreact.collection import Collection, Passages, Question, choose_questions, load_collection, open_passages
from rawreact.errors import DataError, GrammarError, ModelError
from rawreact.grammar import MODES, Grammar, load_grammar
from rawreact.guardrails import REPEATS
from rawreact.loop import LOOPS
from rawreact.methods import BACKOFFS, METHODS, PAPER, REASONING, SAMPLING, first_method, guard_problem, loop_problem
from rawreact.models import DEFAULT_MODEL, load_model, model_sha256, sequences_problem
from rawreact.prompts import Prompt, load_prompt, read_exemplars, shipped
from rawreact.report import Comparison
from rawreact.runs import Result, RunFile, check_context, run_questions
from rawreact.stats import RESAMPLES

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
ABLATIONS = ("exemplars", "orders", "instructions", "grammar", "methods", "loops", "repeats")


@dataclass(frozen=True)
class Variant:
    """One way to run the questions. `grammar` is None (off) or a mode; `seed` seeds sampling.

    `method` is one of METHODS; `prompt`, `key`, `instruction`, `k` and `order` set its prompt
    (for a back-off, its first part's), and `backoff_prompt`, `backoff_key` and
    `backoff_instruction` the prompt of a back-off's second part. `samples` and
    `sample_temperature` are CoT-SC's n and T. `loop` is "tolerant" (rawreact's) or "reference"
    (the notebook's, byte for byte); `n_first`, unless set, is the loop's default (2 and 5).
    `repeats` ("off", "note", "stop") and `budget` (tokens per episode, or None) are the
    guardrails of `guardrails.Guard`. `passages` (a store from `rawreact index`, or a collection
    file) replaces each question's own paragraphs: HotpotQA's open ("fullwiki") setting.
    """

    name: str
    method: str = "react"
    loop: str = "tolerant"
    model: str = DEFAULT_MODEL
    prompt: str | None = None
    key: str | None = None
    instruction: str | None = None
    k: int | None = None
    order: int | None = None
    grammar: str | None = None
    grammar_file: str | None = None
    n_first: int | None = None
    repeats: str = "off"
    budget: int | None = None
    max_steps: int | None = None  # None: the paper's, 7 (5 for FEVER's ReAct -> CoT-SC); see `steps`
    max_tokens: int = 100
    temperature: float = 0.0
    seed: int = 0
    n_ctx: int = 8192
    samples: int = 21
    sample_temperature: float = 0.7
    backoff_prompt: str | None = None
    backoff_key: str | None = None
    backoff_instruction: str | None = None
    passages: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise DataError(f"variant name {self.name!r}: use letters, digits and . _ + - (it names the run file)")
        if self.method not in METHODS:
            raise DataError(f"{self._where}method={self.method!r}; the methods are {', '.join(METHODS)}")
        if self.grammar is not None and self.grammar not in MODES:
            raise DataError(f"variant {self.name}: grammar={self.grammar}; use off, {', '.join(MODES)}")
        if (self.grammar or self.grammar_file) and self.method in REASONING:
            raise DataError(
                f"{self._where}a grammar constrains action lines, and method {self.method} writes none; "
                "drop the grammar"
            )
        problem = loop_problem(self.loop, self.method, bool(self.grammar or self.grammar_file), self.repeats)
        problem = problem or guard_problem(self.method, self.repeats, self.budget)
        if problem:
            raise DataError(f"{self._where}{problem}")
        problem = check_settings(
            {f.name: getattr(self, f.name) for f in fields(self) if f.name in _LEAST or "temperature" in f.name}
        )
        problem = problem or sequences_problem(self.model, self.samples if self.method in SAMPLING else 1, "samples")
        if problem:
            raise DataError(f"variant {self.name}: {problem}" if self.name != "run" else problem)

    def steps(self, task: str = "qa") -> int:
        """The step limit: `max_steps`, or the paper's, 7, and 5 for the ReAct part of FEVER's ReAct -> CoT-SC."""
        if self.max_steps is not None:
            return self.max_steps
        return 5 if task == "fever" and self.method == "react-cot-sc" else 7

    @property
    def sentences(self) -> int:
        """How many sentences a search shows: `n_first`, or the loop's default."""
        return LOOPS[self.loop] if self.n_first is None else self.n_first

    def env(self, collection: Collection) -> Callable[[Question], object]:
        """The environment of each question under this variant's passages, loop and passage length."""
        collection = self.collection(collection)
        return lambda question: collection.env(question, n_first=self.sentences, loop=self.loop)

    def collection(self, collection: Collection) -> Collection:
        """The questions over this variant's passages: their own, or those of `passages`."""
        if self.passages is None:
            if collection.task == "fever" and self.method not in REASONING:
                raise DataError(
                    f"{self._where}FEVER claims are checked against Wikipedia: build a store of FEVER's wiki-pages "
                    "(rawreact index wiki-pages/ --out fever.sqlite) and give it with --passages fever.sqlite"
                )
            return collection
        passages = _passages(self.passages)
        if self.grammar == "titles" and passages.kind == "store":
            raise GrammarError(
                f"{self._where}--grammar titles writes every passage title into the grammar, and the store "
                f"{self.passages} has {passages.count:,} pages; use --grammar step"
            )
        return collection.over(passages)

    @property
    def _where(self) -> str:
        return "" if self.name == "run" else f"variant {self.name}: "

    def load_prompt(self, task: str = "qa") -> Prompt:
        """The prompt this variant sends (a back-off's first part's) for the task ("qa" or "fever")."""
        return load_prompt(
            self.prompt,
            k=self.k,
            instruction=self.instruction,
            key=self.key,
            order=self.order,
            method=first_method(self.method),
            task=task,
        )

    def load_backoff_prompt(self, task: str = "qa") -> Prompt | None:
        """The prompt of a back-off's second part, or None for a method that is not a back-off."""
        if self.method not in BACKOFFS:
            if self.backoff_prompt or self.backoff_key or self.backoff_instruction:
                raise DataError(f"{self._where}the backoff prompt settings apply to {' and '.join(BACKOFFS)} only")
            return None
        second = BACKOFFS[self.method][1]
        return load_prompt(
            self.backoff_prompt, key=self.backoff_key, instruction=self.backoff_instruction, method=second, task=task
        )

    def solve_options(self, grammar: Grammar | None, backoff: Prompt | None, task: str = "qa") -> dict:
        """The keyword arguments of `solve` (through `run_questions`) for this variant, on the task's questions."""
        return {
            "method": self.method,
            "loop": self.loop,
            "repeats": self.repeats,
            "budget": self.budget,
            "backoff_prompt": backoff,
            "samples": self.samples,
            "sample_temperature": self.sample_temperature,
            "seed": self.seed,
            "max_steps": self.steps(task),
            "max_tokens": self.max_tokens,
            "grammar": grammar,
        }

    def load_grammar(self) -> Grammar | None:
        """The grammar this variant applies, or None."""
        if self.grammar is None and self.grammar_file is None:
            return None
        return load_grammar(self.grammar or "step", self.grammar_file)

    def config(
        self, collection: Collection, prompt: Prompt, grammar: Grammar | None, backoff: Prompt | None = None, **run
    ) -> dict:
        """The manifest config of this variant's run file: what `--resume` checks is unchanged.

        Files are recorded by content (SHA-256) as well as by name, so an edited grammar, script or
        model file is told apart, and the same content under another path is the same run.
        """
        shuffle = run.get("shuffle", False)
        sampled = self.method in SAMPLING
        return {
            "question": run.get("question"),
            "method": self.method,
            "loop": self.loop,
            "data_sha256": collection.sha256,
            "model": self.model,
            "model_sha256": model_sha256(self.model),
            "prompt": prompt.source,
            "prompt_sha256": prompt.sha256,
            "exemplars": prompt.exemplars,
            "grammar": grammar.name if grammar else None,
            "grammar_sha256": grammar.sha256 if grammar else None,
            "shuffle": shuffle,
            "shuffle_seed": run.get("shuffle_seed", 0) if shuffle else None,
            "shuffle_range": run.get("shuffle_range") if shuffle else None,
            "seed": self.seed,
            "max_steps": self.steps(collection.task),
            "max_tokens": self.max_tokens,
            "n_first": self.sentences,
            "repeats": self.repeats,
            "budget": self.budget,
            "n_ctx": self.n_ctx,
            "temperature": self.temperature,
            "samples": self.samples if sampled else None,
            "sample_temperature": self.sample_temperature if sampled else None,
            "backoff_prompt": backoff.source if backoff else None,
            "backoff_prompt_sha256": backoff.sha256 if backoff else None,
            "passages": self.passages,
            "passages_sha256": _passages(self.passages).sha256 if self.passages else None,
        }


_FIELDS = {f.name: f for f in fields(Variant) if f.name != "name"}
# The least value each count may take: one validation for `rawreact run`, `compare` specs and Python.
_LEAST = {"n_first": 1, "max_steps": 1, "max_tokens": 1, "n_ctx": 1, "k": 0, "samples": 1, "budget": 1, "seed": 0}
# The largest seed every backend takes: llama.cpp, vLLM and Ollama read it as an unsigned 32-bit number.
SEED_MAX = 2**32 - 1
_OPTIONS = {
    "n_first": "--n-first",
    "max_steps": "--max-steps",
    "max_tokens": "--max-tokens",
    "n_ctx": "--n-ctx",
    "samples": "--samples",
    "budget": "--budget",
}


def _passages(path: str) -> Passages:
    """A store or collection opened once per process, so variants and questions share it; a file
    rebuilt or replaced since it was opened (another size or time) is opened again, so its new
    digest is what a resume compares."""
    try:
        stat = Path(path).stat()
        version = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    except OSError:
        version = None  # open_passages names the missing file
    return _opened(path, version)


@functools.cache
def _opened(path: str, version: tuple | None) -> Passages:
    return open_passages(path)


def check_settings(values: dict) -> str | None:
    """What is wrong with a run's counts and temperature, said for both `run` and `compare`, or None."""
    for key, least in _LEAST.items():
        value = values.get(key)
        if value is not None and value < least:
            return f"{key}={value} ({_OPTIONS.get(key, key)}) must be at least {least}"
    if values.get("seed", 0) > SEED_MAX:
        return f"seed={values['seed']} (--seed) must be at most {SEED_MAX}"
    for key in ("temperature", "sample_temperature"):
        value = values.get(key, 0.0)
        if not math.isfinite(value) or value < 0:
            return f"{key}={value} must be a finite number of at least 0 (0 is greedy)"
    return None


def parse_variant(text: str, base: Variant | None = None) -> Variant:
    """`NAME=key=value,key=value` (as `--variant` takes it) -> a Variant built on `base`."""
    name, equals, spec = text.partition("=")
    if not equals:
        raise DataError(f"--variant {text!r}: write NAME=SPEC, as in k3=k=3,grammar=step (SPEC may be empty)")
    return replace(base or Variant(name), name=name, **parse_spec(spec, f"--variant {text!r}"))


def parse_spec(spec: str, where: str) -> dict:
    """`key=value,key=value` -> field values of a Variant, each converted to the field's type."""
    values = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, equals, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not equals or key not in _FIELDS:
            raise DataError(f"{where}: {item!r} is not key=value with a known key; the keys are {', '.join(_FIELDS)}")
        values[key] = _convert(key, value.strip(), where)
    return values


def _convert(key: str, value: str, where: str):
    declared = _FIELDS[key].type  # int, float, str | None, int | None
    kind = next((t for t in (int, float) if declared is t or t in getattr(declared, "__args__", ())), str)
    if key == "grammar" and value in ("off", "none", ""):
        return None
    try:
        return kind(value)
    except ValueError:
        raise DataError(f"{where}: {key}={value!r} is not {'a whole number' if kind is int else 'a number'}") from None


# What the methods that only reason cannot take: a grammar and the guardrails watch actions.
_ONLY_ACTING = {"grammar": None, "grammar_file": None, "repeats": "off", "budget": None}


def ablation(kind: str, base: Variant, *, orders: int = 3, task: str = "qa") -> list[Variant]:
    """The built-in ablations, on top of `base`: exemplars (k = 0..N), orders (the file's order and
    `orders` shuffles), instructions (every prompts/instruction*.txt), grammar (off, step, titles),
    methods (the paper's seven, PAPER, each with its shipped prompts), loops (the tolerant loop and
    the reference's; each shows its own default number of sentences unless `base` sets n_first),
    repeats (the repeat policies off, note and stop). `task` ("qa" or "fever") picks the shipped
    exemplars and instructions that the exemplars and instructions ablations count.
    """
    if kind == "exemplars":
        count = len(read_exemplars(base.prompt, first_method(base.method), task))
        return [replace(base, name=f"k{k}", k=k) for k in range(count + 1)]
    if kind == "orders":
        return [replace(base, name="file-order", order=None)] + [
            replace(base, name=f"order{s}", order=s) for s in range(1, orders + 1)
        ]
    if kind == "instructions":
        # The default first, so it is the base of the differences.
        default = shipped("react", task, "instruction.txt")
        found = sorted(default.parent.glob("instruction*.txt"), key=lambda path: (path != default, path.name))
        return [replace(base, name=path.stem, instruction=str(path)) for path in found]
    if kind == "grammar":
        return [replace(base, name=f"grammar-{mode or 'off'}", grammar=mode) for mode in (None, "step", "titles")]
    if kind == "methods":  # each method with its shipped prompts; a grammar stays on the methods that act
        unset_prompt = dict.fromkeys(("prompt", "key", "instruction", "k", "order"))
        variants = []
        for m in PAPER:
            # The reference loop stays on the methods it can run, and a grammar on those that act.
            loop = base.loop if loop_problem(base.loop, m, False) is None else "tolerant"
            unset = _ONLY_ACTING if m in REASONING else {}
            variants.append(replace(base, name=m, method=m, loop=loop, **unset_prompt, **unset))
        return variants
    if kind == "loops":
        return [replace(base, name=loop, loop=loop) for loop in LOOPS]
    if kind == "repeats":  # the reference loop cannot add a note, so it compares off and stop
        policies = [p for p in REPEATS if base.loop == "tolerant" or p != "note"]
        return [replace(base, name=f"repeats-{policy}", repeats=policy) for policy in policies]
    raise DataError(f"unknown ablation {kind!r}; the ablations are {', '.join(ABLATIONS)}")


def compare(
    data: str | Path | Collection | None,
    variants: Iterable[Variant],
    out: str | Path,
    *,
    limit: int | None = None,
    shuffle: bool = False,
    shuffle_seed: int = 0,
    shuffle_range: int | None = None,
    workers: int = 1,
    host: str | None = None,
    timeout: float | None = None,
    resamples: int = RESAMPLES,
    stats_seed: int = 0,
    on_variant: Callable[[Variant, int, int], None] | None = None,
    on_result: Callable[[Variant, Result], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Comparison:
    """Run every variant on the same questions into `out/NAME.jsonl`, then compare them.

    The questions are the data's (shuffled with `shuffle_seed` as `rawreact run --shuffle` does), the first
    `limit` of them. A variant whose run file exists is resumed: finished questions are kept, and a
    run made with other settings is refused. Everything is loaded and checked before the first model
    call; models load only for variants with questions left, once per model and sampling setting.
    `on_variant(variant, done, total)` is called as each variant starts, `on_result` after each
    question, and `stop()` as in `run_questions`.
    """
    collection = data if isinstance(data, Collection) else load_collection(data)
    variants = list(variants)
    if not variants:
        raise DataError("a comparison needs at least one variant")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise DataError(f"variant names must differ, and {', '.join(n for n in names if names.count(n) > 1)} repeat")
    questions = choose_questions(
        collection, limit=limit, shuffle=shuffle, seed=shuffle_seed, shuffle_range=shuffle_range
    )
    out = Path(out)
    checked = []  # every variant loaded and checked before anything is written
    for variant in variants:
        task = collection.task
        prompt, grammar = variant.load_prompt(task), variant.load_grammar()
        backoff = variant.load_backoff_prompt(task)
        variant.collection(collection)  # opens its passages now: a bad store fails before any model loads
        shuffled = {"shuffle": shuffle, "shuffle_seed": shuffle_seed, "shuffle_range": shuffle_range}
        config = variant.config(collection, prompt, grammar, backoff, **shuffled)
        checked.append((variant, (prompt, grammar, backoff), config))
    folder_made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"{out}: cannot make the comparison folder: {error.strerror}") from None
    plans, made = [], []  # made: the run files this call starts, removed if the setup fails
    try:
        for variant, loaded, config in checked:
            path = out / f"{variant.name}.jsonl"
            new = not path.exists()
            details = {"data": collection.source, "layout": collection.layout, "limit": limit, "variant": variant.name}
            sink = RunFile(path, config, resume=True, details=details)
            made += [path, sink.manifest_path] if new else []
            plans.append((variant, loaded, sink, sum(q.id in sink.done for q in questions)))
        models = _models(plans, questions, host, timeout, workers)
    except BaseException:
        for *_, sink, _ in plans:
            sink.close()
        for path in made:  # nothing was written to them yet: a failed setup leaves the folder as it was
            path.unlink(missing_ok=True)
        if folder_made and not any(out.iterdir()):
            out.rmdir()
        raise
    try:
        for variant, (prompt, grammar, backoff), sink, done in plans:
            if on_variant is not None:
                on_variant(variant, done, len(questions))
            if done == len(questions) or (stop is not None and stop()):
                continue
            results = run_questions(
                questions,
                variant.env(collection),
                models[_model_key(variant)],
                prompt,
                out=sink,
                workers=workers,
                stop=stop,
                **variant.solve_options(grammar, backoff, collection.task),
            )
            for result in results:
                if on_result is not None:
                    on_result(variant, result)
    finally:
        for *_, sink, _ in plans:
            sink.close()
    # Each run file's `done` holds every record it has, read at resume or appended since.
    records = {v.name: [sink.done[q.id] for q in questions if q.id in sink.done] for v, *_, sink, _ in plans}
    return Comparison(names, records, resamples, stats_seed)


def _model_key(variant: Variant) -> tuple:
    return variant.model, variant.n_ctx, variant.temperature, variant.seed


def _models(
    plans: list, questions: list[Question], host: str | None, timeout: float | None, workers: int
) -> dict[tuple, object]:
    """Load each model that a variant with questions left needs, once, and check it can do the job."""
    models: dict[tuple, object] = {}
    for variant, (prompt, grammar, backoff), _, done in plans:
        if done == len(questions):
            continue
        key = _model_key(variant)
        if key not in models:
            options = {"n_ctx": variant.n_ctx, "temperature": variant.temperature, "seed": variant.seed, "host": host}
            options["workers"] = workers
            models[key] = load_model(variant.model, **options, timeout=timeout)
        if grammar is not None and not models[key].supports_grammar:
            raise GrammarError(f"variant {variant.name}: model {models[key].name} cannot apply a grammar")
        try:
            check_context(models[key], prompt, questions, variant.max_tokens, variant.method, backoff)
        except ModelError as error:
            raise ModelError(f"variant {variant.name}: {error}") from None
    return models


__all__ = [
    "ABLATIONS",
    "Variant",
    "ablation",
    "compare",
    "parse_variant",
]
