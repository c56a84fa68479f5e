"""The commands that call a model: `rawreact run` and `rawreact compare`."""

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from rawreact import __version__, paper
from rawreact.cli_files import intervals_note, refuse_inputs
from rawreact.collection import Collection, Question, choose_questions, load_collection
from rawreact.errors import DataError, GrammarError
from rawreact.experiments import Variant, ablation, compare, parse_spec, parse_variant
from rawreact.grammar import MODES
from rawreact.methods import REASONING, SAMPLING, Reasoning
from rawreact.models import load_model
from rawreact.record import Step
from rawreact.report import (
    context_warning,
    summarize,
    summary_line,
)
from rawreact.runs import Result, RunFile, check_context, manifest_path, run_questions
from rawreact.terminal import Stopper, plural, printable, progress


def _questions(args: argparse.Namespace) -> tuple[Collection, list[Question]]:
    if args.question is not None:
        # Over --passages (see Variant.collection), else over the demo's passages.
        collection = Collection("--question", {}, ()) if args.passages else load_collection().pooled()
        _paper(args, collection, 1)
        return collection, [Question("question-1", args.question, args.answer)]
    collection = load_collection(args.data)
    _paper(args, collection, len(collection.questions))
    chosen = {"limit": args.limit, "shuffle": args.shuffle, "seed": args.shuffle_seed}
    return collection, choose_questions(collection, **chosen, shuffle_range=args.shuffle_range)


def _paper(args: argparse.Namespace, collection: Collection, questions: int) -> None:
    """With --reference, fill every option the user did not give with the paper's; then the defaults.

    What the switch chose, and what was the user's instead, is kept in `args.paper` for the header
    and the manifest.
    """
    args.paper = None
    if args.reference:
        options = paper.reference_options(args.reference, collection.task, args.method, questions)
        given = {name: getattr(args, name) for name in options if getattr(args, name) is not None}
        for name, value in options.items():
            if name not in given:
                setattr(args, name, value)
        args.paper = {"options": options, "given": given, "task": collection.task}
    args.loop = args.loop or "tolerant"
    args.shuffle = bool(args.shuffle)
    args.shuffle_seed = 0 if args.shuffle_seed is None else args.shuffle_seed


def _grammar_mode(args: argparse.Namespace) -> str | None:
    """The grammar mode of `run`: --grammar, else step when only --grammar-file is given, else none.

    `--grammar` alone means step, so in `run --grammar data.json` the word after it is the data
    file: the modes are four fixed words, and anything else that names a file is taken as the data.
    """
    if args.grammar not in ("off", *MODES):
        if args.data is None and (Path(args.grammar).exists() or args.grammar.endswith((".json", ".jsonl"))):
            args.data, args.grammar = args.grammar, "step"
        else:
            raise DataError(f"--grammar takes off, step, action or titles, not {args.grammar!r}")
    if args.grammar != "off":
        return args.grammar
    return "step" if args.grammar_file else None


def run(args: argparse.Namespace) -> int:
    """`rawreact run`: load everything first, so bad input fails before any model time is spent."""
    if args.resume and not args.out:
        raise DataError("--resume continues the run file given with --out; add --out RUN.jsonl")
    if args.out and Path(args.out).is_dir():
        raise DataError(f"{args.out} is a folder; give --out a file name, such as {Path(args.out) / 'run.jsonl'}")
    if args.out:  # the run file and its manifest must not be a file the run reads
        inputs = [args.data, args.passages, args.prompt, args.instruction, args.grammar_file, args.model]
        inputs += [args.backoff_prompt, args.backoff_instruction, args.grammar]
        for out in (args.out, manifest_path(args.out)):
            refuse_inputs(out, [path for path in inputs if path], "an input")
    mode = _grammar_mode(args)
    collection, questions = _questions(args)
    if args.paper is not None:
        _say_paper(args, collection, len(questions))
    variant = Variant(
        "run",
        method=args.method,
        loop=args.loop,
        repeats=args.repeats,
        budget=args.budget,
        model=args.model,
        prompt=args.prompt,
        key=args.key,
        instruction=args.instruction,
        k=args.exemplars,
        grammar=mode,
        grammar_file=args.grammar_file,
        n_first=args.n_first,
        max_steps=args.max_steps,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        n_ctx=args.n_ctx,
        samples=args.samples,
        sample_temperature=args.sample_temperature,
        backoff_prompt=args.backoff_prompt,
        backoff_key=args.backoff_key,
        backoff_instruction=args.backoff_instruction,
        passages=args.passages,
    )
    task = collection.task
    prompt, grammar, backoff = variant.load_prompt(task), variant.load_grammar(), variant.load_backoff_prompt(task)
    variant.collection(collection)  # opens --passages now, so a bad store fails before the model loads
    config = variant.config(
        collection,
        prompt,
        grammar,
        backoff,
        question=args.question,
        shuffle=args.shuffle,
        shuffle_seed=args.shuffle_seed,
        shuffle_range=args.shuffle_range,
    )
    options = {"n_ctx": args.n_ctx, "seed": args.seed, "temperature": args.temperature, "host": args.ollama_host}
    options["workers"] = args.workers
    model = load_model(args.model, **options, timeout=args.timeout)
    if grammar is not None and not model.supports_grammar:
        raise GrammarError(f"model {model.name} cannot apply a grammar; drop --grammar, or use a llama.cpp model")
    check_context(model, prompt, questions, args.max_tokens, args.method, backoff)
    details = {
        **({} if args.paper is None else {"reference": _reference_record(args)}),
        "data": collection.source,
        "layout": collection.layout,
        "limit": args.limit,
        "model_file": str(model.path) if hasattr(model, "path") else None,
        "model_name": model.name,
        "workers": args.workers,
        "timeout": args.timeout,
    }
    sink = RunFile(args.out, config, resume=args.resume, details=details) if args.out else None
    chosen = {q.id for q in questions}
    done = [] if sink is None else [r for r in sink.done.values() if r["id"] in chosen]
    print(
        f"rawreact {__version__}: {plural(len(questions), 'question')} from {collection.name}, model {model.name}, "
        f"method {args.method}{_sampling(variant)}{_loop(variant)}, prompt {prompt.source} "
        f"({plural(prompt.exemplars, 'exemplar')}), grammar {config['grammar'] or 'off'}"
        + (f"; {len(done)} already in {args.out}" if done else ""),
        flush=True,
    )
    with Stopper(args.workers) as stopper, progress(len(questions), len(done)) as bar:

        def say(text: str) -> None:
            bar.write(printable(text.rstrip("\n")), file=sys.stdout)

        def print_step(question: Question, step: Step) -> None:
            text = step.render() if step.action_text or step.observation else f"Message {step.i}: {step.thought}\n"
            say((f"\n=== {question.id}\n{question.header}: {question.question}\n" if step.i == 1 else "") + text)

        live = not args.quiet and args.workers == 1  # with workers, a transcript is printed when it is done
        results = run_questions(
            questions,
            variant.env(collection),
            model,
            prompt,
            out=sink,
            on_step=print_step if live else None,
            workers=args.workers,
            stop=lambda: stopper.signal is not None,
            **variant.solve_options(grammar, backoff, task),
        )
        records = list(done)
        scored = [r for r in done if r["em"] is not None]  # running sums for the bar, over the scored questions
        n, em, f1 = len(scored), sum(r["em"] for r in scored), sum(r["f1"] for r in scored)
        for result in results:
            if not args.quiet and not live:
                for step in result.outcome.steps:
                    print_step(result.question, step)
            if not args.quiet and result.outcome.reasoning is not None:
                say(_reasoning_text(result.question, result.outcome.reasoning))
            records.append(result.to_dict())
            say(_result_line(len(records), len(questions), result))
            if result.em is not None:
                n, em, f1 = n + 1, em + result.em, f1 + result.f1
                bar.set_postfix_str(f"EM {em / n:.3f} F1 {f1 / n:.3f}", refresh=False)
            bar.update()
    summary = summarize(records)
    print("\n" + summary_line(summary), flush=True)
    warning = context_warning(summary, n_ctx=args.n_ctx)
    if warning:
        print(f"rawreact: warning: {warning}", file=sys.stderr)
    if stopper.signal is not None and len(records) < len(questions):
        where = f"; {len(records)} of {len(questions)} questions are in {args.out}, --resume finishes" if sink else ""
        print(f"rawreact: stopped early{where}", file=sys.stderr)
        return 128 + stopper.signal
    return 0


def compare_command(args: argparse.Namespace) -> int:
    """`rawreact compare`: every variant on the same questions, then the table with intervals."""
    base = replace(Variant("base", seed=args.seed), **parse_spec(args.base, f"--base {args.base!r}"))
    variants = [parse_variant(text, base) for text in args.variant]
    collection = load_collection(args.data)  # read once: its task picks the prompt files an ablation counts
    for kind in args.ablation:
        variants += ablation(kind, base, orders=args.orders, task=collection.task)
    if not variants:
        raise DataError("name the variants to compare: --variant NAME=SPEC (twice or more), or --ablation KIND")
    with Stopper(args.workers) as stopper, progress(0, 0) as bar:

        def started(variant: Variant, done: int, total: int) -> None:
            bar.total = (bar.total or 0) + total
            bar.update(done)
            kept = f"{done} of {total} questions already in its run file" if done else f"{total} questions"
            bar.write(f"variant {variant.name}: {kept}", file=sys.stderr)

        def finished(variant: Variant, result: Result) -> None:
            bar.set_postfix_str(variant.name, refresh=False)
            bar.update()
            if not args.quiet:
                line = f"{variant.name} {result.question.id}: {_verdict(result.em)}, F1 {_score(result.f1, '{:.2f}')}"
                bar.write(printable(line), file=sys.stdout)

        comparison = compare(
            collection,
            variants,
            args.out,
            limit=args.limit,
            shuffle=args.shuffle,
            shuffle_seed=args.shuffle_seed,
            shuffle_range=args.shuffle_range,
            workers=args.workers,
            host=args.ollama_host,
            timeout=args.timeout,
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
    for style, name in (("markdown", "comparison.md"), ("csv", "comparison.csv")):
        (out / name).write_text(comparison.table(style), encoding="utf-8")
    print(comparison.table(args.format), end="")
    intervals_note(args, comparison, f"; tables in {out / 'comparison.md'} and {out / 'comparison.csv'}")
    return 0


def _say_paper(args: argparse.Namespace, collection: Collection, questions: int) -> None:
    """Print, part by part, what of this run's setup is the paper's and what is not."""
    store = f"the store {args.passages}" if args.passages else None
    own = "each question's own paragraphs (the distractor setting)" if collection.task == "qa" else "none"
    chosen = {
        "task": args.paper["task"],
        "method": args.method,
        "n_first": args.n_first,
        "max_steps": args.max_steps,
        "questions": len(collection.questions),
        "passages": store or own,
        "model": args.model,
    }
    lines = paper.describe(args.paper["options"], args.paper["given"], chosen)
    print(f"rawreact: the paper's setup from {args.reference} (--reference), {plural(questions, 'question')}:")
    print("\n".join(lines), flush=True)


def _reference_record(args: argparse.Namespace) -> dict:
    """What the manifest keeps of --reference: the checkout, its files' hashes, the parts chosen and given."""
    return {
        "directory": str(args.reference),
        "files": paper.files(args.reference, args.paper["task"]),
        "paper": {k: v for k, v in args.paper["options"].items() if k not in args.paper["given"]},
        "yours": args.paper["given"],
    }


def _loop(variant: Variant) -> str:
    """The loop of a run's header, for a method that acts."""
    if variant.method in REASONING:
        return ""
    if variant.method == "tools":
        return f", native tool calls ({plural(variant.sentences, 'sentence')} per search)"
    parts = [f"{plural(variant.sentences, 'sentence')} per search"]
    parts += [f"repeats {variant.repeats}"] if variant.repeats != "off" else []
    parts += [f"budget {variant.budget} tokens"] if variant.budget is not None else []
    return f", {variant.loop} loop ({', '.join(parts)})"


def _support(value: bool | None) -> str:
    return "" if value is None else ", answer seen" if value else ", answer not seen"


def _sampling(variant: Variant) -> str:
    """The CoT-SC settings of a run's header, if it samples."""
    if variant.method not in SAMPLING:
        return ""
    return f" (n {variant.samples}, T {variant.sample_temperature:g}, seed {variant.seed})"


def _reasoning_text(question: Question, reasoning: Reasoning) -> str:
    """A Standard or CoT answer as the model wrote it; for CoT-SC, the first sample and the vote."""
    text = f"\n=== {question.id} ({reasoning.method})\n{question.header}: {question.question}\n"
    if reasoning.samples:
        text += f"{reasoning.cue}{reasoning.samples[0].call.text}\n"
    if reasoning.method == "cot-sc":
        tally = reasoning.vote
        text += f"votes ({len(reasoning.samples)} samples): {tally.counts or 'no answers'}\n"
    return text


def _verdict(em: float | None) -> str:
    return "not scored (no gold answer)" if em is None else "correct" if em else "wrong"


def _score(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def _result_line(n: int, total: int, result: Result) -> str:
    out = result.outcome
    branch = f" (answered by {out.branch})" if out.branch != out.method else ""
    return (
        f"result [{n}/{total}] {result.question.id}: {_verdict(result.em)} (EM {_score(result.em, '{:.0f}')}, "
        f"F1 {_score(result.f1, '{:.2f}')}) "
        f"answer {out.answer!r}{branch}, gold {result.question.answer!r}; ended by {out.ended} after "
        f"{len(out.steps)} steps, {out.model_calls} calls, {out.invalid_actions} invalid, "
        f"{out.fallback_calls} fallback, {out.repeats} repeats{_support(result.supported)}, {out.seconds:.1f} s"
    )
