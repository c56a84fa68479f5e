"""The `rawreact` command: wires the library together and prints; errors are one line each."""

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from rawreact import __version__
from rawreact.collection import Collection, Question, choose_questions, load_collection
from rawreact.errors import DataError, GrammarError, RawreactError
from rawreact.experiments import ABLATIONS, Variant, ablation, compare, parse_spec, parse_variant
from rawreact.export import LAYOUTS, export
from rawreact.grammar import MODES
from rawreact.guardrails import REPEATS
from rawreact.htmlreport import write_page
from rawreact.loop import LOOPS, MAX_TOKENS
from rawreact.methods import METHODS, REASONING, SAMPLING, Reasoning
from rawreact.models import DEFAULT_MODEL, EMBEDDED_MODELS, is_concurrent, load_model
from rawreact.record import Step
from rawreact.report import (
    compare_runs,
    context_warning,
    drop_unused,
    listing,
    run_row,
    show,
    summarize,
    summary_line,
    table,
)
from rawreact.runs import Result, RunFile, check_context, read_run, refuse_workers, run_questions
from rawreact.terminal import Stopper, printable, progress

DESCRIPTION = (
    "Run ReAct agents on completion models (an embedded llama.cpp model, Ollama, or an OpenAI-compatible "
    "server), score them on HotpotQA-style questions, and compare prompts, models and settings."
)
EPILOG = "Start with `rawreact run` (the demo on the embedded model); `rawreact COMMAND --help` tells more."


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 1")
    return value


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds above 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rawreact", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"rawreact {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run", help="run ReAct episodes, score them, and write a run file")
    run.add_argument(
        "data",
        nargs="?",
        help="questions: HotpotQA JSON (official or Hugging Face), JSONL, or a collection (envs/ layout); "
        "default: the demo",
    )
    run.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"{', '.join(EMBEDDED_MODELS)}, a .gguf path, ollama:NAME, openai:[MODEL@]URL (or vllm:, llamacpp:), "
        "or scripted:FILE.json (default: %(default)s)",
    )
    run.add_argument("--ollama-host", help="where Ollama listens (default: OLLAMA_HOST, else 127.0.0.1:11434)")
    run.add_argument(
        "--timeout",
        type=_seconds,
        default=300.0,
        help="seconds to wait for a server's answer to one call before retrying it (default: %(default)s)",
    )
    run.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="questions in flight at once, for a server model (ollama:, openai:); default: %(default)s",
    )
    run.add_argument(
        "--method",
        choices=list(METHODS),
        default="react",
        help="react (the default), act (no thoughts), standard, cot, cot-sc (self-consistency), react-cot-sc "
        "(CoT-SC when ReAct gives no answer), cot-sc-react (ReAct when CoT-SC's vote is split), tools (native tool "
        "calls of a chat model)",
    )
    run.add_argument(
        "--loop",
        choices=list(LOOPS),
        default="tolerant",
        help="tolerant (rawreact's loop, the default) or reference (the reference notebook's loop and environment, "
        "byte for byte; 5 sentences per search unless --n-first; see docs/reference.md)",
    )
    run.add_argument(
        "--repeats",
        choices=list(REPEATS),
        default="off",
        help="a step that repeats an earlier action and sees the same: off (only counted, the default), note (a note "
        "after its observation tells the model), stop (the episode ends as 'repeat')",
    )
    run.add_argument(
        "--budget",
        type=_positive,
        metavar="TOKENS",
        help="tokens per episode (evaluated prompt tokens plus generated ones): a step starts only if the tokens "
        "spent plus --max-tokens fit, or the episode ends as 'budget' (default: no budget)",
    )
    run.add_argument("--samples", type=_positive, default=21, help="CoT-SC samples per question (default: 21)")
    run.add_argument(
        "--sample-temperature", type=float, default=0.7, help="temperature of CoT-SC's samples (default: 0.7)"
    )
    run.add_argument("--prompt", help="an exemplar file, or a reference-style JSON prompt file with --key")
    run.add_argument("--key", help="which prompt of a reference-style JSON file, such as webthink_simple6")
    run.add_argument("--instruction", help="an instruction file to put before the exemplars (empty: none)")
    run.add_argument("--backoff-prompt", help="the prompt of a back-off's second part (default: the shipped one)")
    run.add_argument("--backoff-key", help="which prompt of a reference-style --backoff-prompt JSON file")
    run.add_argument("--backoff-instruction", help="the instruction of a back-off's second part")
    run.add_argument("-k", "--exemplars", type=int, help="use the first K exemplars (default: all)")
    run.add_argument(
        "--grammar",
        nargs="?",
        const="step",
        default="off",
        metavar="MODE",
        help="constrain each step with a GBNF grammar: step (one call; --grammar alone), action (a free thought, "
        "then a constrained action), titles (step, with searches limited to passage titles), or off (the default)",
    )
    run.add_argument("--grammar-file", help="your own grammar template, in the layout of prompts/grammars/step.gbnf")
    run.add_argument("--question", help="ask this question instead of the data's questions")
    run.add_argument("--answer", default="", help="the gold answer of --question, for scoring")
    run.add_argument(
        "--passages", help="the passages for --question: a collection (envs/ layout), or a HotpotQA file (pooled)"
    )
    run.add_argument("--limit", type=_positive, help="run only the first N questions")
    run.add_argument("--shuffle", action="store_true", help="shuffle the questions before --limit")
    run.add_argument("--shuffle-seed", type=int, default=0, help="seed of --shuffle (default: %(default)s)")
    run.add_argument("--seed", type=int, default=0, help="seed of sampling (default: %(default)s)")
    run.add_argument("--out", help="write one JSON line per question to this run file, and a manifest beside it")
    run.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished questions")
    run.add_argument("--max-steps", type=_positive, default=7, help="step limit per question (default: %(default)s)")
    run.add_argument(
        "--max-tokens", type=_positive, default=MAX_TOKENS, help="token limit per model call (default: %(default)s)"
    )
    run.add_argument(
        "--n-first", type=_positive, help="sentences a search shows (default: 2, or 5 with --loop reference)"
    )
    run.add_argument(
        "--n-ctx", type=_positive, default=8192, help="context window of a llama.cpp model (default: %(default)s)"
    )
    run.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (default: %(default)s, greedy)"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="print only the result lines")
    _compare_parser(commands)
    report = commands.add_parser("report", help="the summaries of run files, side by side")
    report.add_argument("runs", nargs="+", metavar="[NAME=]RUN.jsonl", help="run files, the first being the base")
    report.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="table format")
    report.add_argument(
        "--html", metavar="FILE", help="also write the whole report (charts, questions, transcripts) as one web page"
    )
    report.add_argument("--resamples", type=_positive, default=10_000, help="bootstrap resamples (default: 10000)")
    report.add_argument("--stats-seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    runs = commands.add_parser(
        "compare-runs", help="compare finished run files on the questions they share, with bootstrap intervals"
    )
    runs.add_argument("runs", nargs="+", metavar="[NAME=]RUN.jsonl", help="run files, the first being the base")
    runs.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="table format")
    runs.add_argument("--resamples", type=_positive, default=10_000, help="bootstrap resamples (default: 10000)")
    runs.add_argument("--stats-seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    export_ = commands.add_parser("export", help="the steps of a run's good episodes as fine-tuning examples")
    export_.add_argument("runs", nargs="+", metavar="RUN.jsonl", help="run files")
    export_.add_argument("--out", required=True, help="the JSON-lines file to write, one example a line")
    export_.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="completion",
        help="completion: a prompt/completion pair per step; chat: the episode as messages (default: completion)",
    )
    export_.add_argument(
        "--min-f1",
        type=_share,
        metavar="F1",
        help="export the episodes with F1 at least this (default: those with EM 1)",
    )
    export_.add_argument("--prompt", action="store_true", help="keep the few-shot prompt (default: question onwards)")
    show_ = commands.add_parser("show", help="a run's questions, or one question's transcript")
    show_.add_argument("run", help="a run file (RUN.jsonl)")
    which = show_.add_mutually_exclusive_group()
    which.add_argument("--id", help="the question's id (without --id or --first-wrong: list the questions)")
    which.add_argument("--first-wrong", action="store_true", help="the first question answered wrongly")
    show_.add_argument("--prompt", action="store_true", help="include the few-shot prompt before the question")
    return parser


def _compare_parser(commands) -> None:
    compare = commands.add_parser(
        "compare", help="run variants of a prompt on the same questions and compare them, with bootstrap intervals"
    )
    compare.add_argument("data", nargs="?", help="questions, as for `rawreact run` (default: the demo)")
    compare.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="a variant: NAME=key=value,... with keys method, loop, model, prompt, key, instruction, k, order, "
        "grammar, grammar_file, n_first, repeats, budget, max_steps, max_tokens, temperature, seed, n_ctx, samples, "
        "sample_temperature, backoff_prompt, backoff_key, backoff_instruction (the first variant is the base)",
    )
    compare.add_argument(
        "--ablation", action="append", default=[], choices=ABLATIONS, help="add a built-in set of variants"
    )
    compare.add_argument("--base", default="", metavar="SPEC", help="settings every variant starts from")
    compare.add_argument("--orders", type=_positive, default=3, help="shuffled orders of --ablation orders")
    compare.add_argument("--out", required=True, help="folder for the variants' run files and the tables")
    compare.add_argument("--limit", type=_positive, help="compare on the first N questions")
    compare.add_argument("--shuffle", action="store_true", help="shuffle the questions before --limit")
    compare.add_argument("--shuffle-seed", type=int, default=0, help="seed of --shuffle (default: 0)")
    compare.add_argument("--seed", type=int, default=0, help="seed of sampling, unless a variant sets it (default: 0)")
    compare.add_argument("--workers", type=_positive, default=1, help="questions in flight at once (server models)")
    compare.add_argument("--ollama-host", help="where Ollama listens (default: OLLAMA_HOST)")
    compare.add_argument("--timeout", type=_seconds, default=300.0, help="seconds a server may take per call")
    compare.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="table on stdout")
    compare.add_argument("--resamples", type=_positive, default=10_000, help="bootstrap resamples (default: 10000)")
    compare.add_argument("--stats-seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    compare.add_argument("-q", "--quiet", action="store_true", help="no line per question")


def _questions(args: argparse.Namespace) -> tuple[Collection, list[Question]]:
    if args.question is not None:
        collection = (load_collection(args.passages) if args.passages else load_collection()).pooled()
        return collection, [Question("question-1", args.question, args.answer)]
    if args.passages:
        raise DataError("--passages goes with --question; a question file is given as the first argument")
    collection = load_collection(args.data)
    return collection, choose_questions(collection, limit=args.limit, shuffle=args.shuffle, seed=args.shuffle_seed)


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def run(args: argparse.Namespace) -> int:
    """`rawreact run`: load everything first, so bad input fails before any model time is spent."""
    if args.resume and not args.out:
        raise DataError("--resume continues the run file given with --out; add --out RUN.jsonl")
    if args.out and Path(args.out).is_dir():
        raise DataError(f"{args.out} is a folder; give --out a file name, such as {Path(args.out) / 'run.jsonl'}")
    if args.workers > 1 and not is_concurrent(args.model):
        raise refuse_workers(args.model)
    mode = _grammar_mode(args)
    collection, questions = _questions(args)
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
    )
    prompt, grammar, backoff = variant.load_prompt(), variant.load_grammar(), variant.load_backoff_prompt()
    config = variant.config(
        collection,
        prompt,
        grammar,
        backoff,
        question=args.question,
        shuffle=args.shuffle,
        shuffle_seed=args.shuffle_seed,
    )
    options = {"n_ctx": args.n_ctx, "seed": args.seed, "temperature": args.temperature, "host": args.ollama_host}
    model = load_model(args.model, **options, timeout=args.timeout)
    if grammar is not None and not model.supports_grammar:
        raise GrammarError(f"model {model.name} cannot apply a grammar; drop --grammar, or use a llama.cpp model")
    check_context(model, prompt, questions, args.max_tokens, args.method, backoff)
    details = {
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
        f"rawreact {__version__}: {_plural(len(questions), 'question')} from {collection.name}, model {model.name}, "
        f"method {args.method}{_sampling(variant)}{_loop(variant)}, prompt {prompt.source} "
        f"({_plural(prompt.exemplars, 'exemplar')}), grammar {config['grammar'] or 'off'}"
        + (f"; {len(done)} already in {args.out}" if done else ""),
        flush=True,
    )
    with Stopper(args.workers) as stopper, progress(len(questions), len(done)) as bar:

        def say(text: str) -> None:
            bar.write(printable(text.rstrip("\n")), file=sys.stdout)

        def print_step(question: Question, step: Step) -> None:
            text = step.render() if step.action_text or step.observation else f"Message {step.i}: {step.thought}\n"
            say((f"\n=== {question.id}\nQuestion: {question.question}\n" if step.i == 1 else "") + text)

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
            **variant.solve_options(grammar, backoff),
        )
        records = list(done)
        em, f1 = sum(r["em"] for r in done), sum(r["f1"] for r in done)  # running sums for the bar
        for result in results:
            if not args.quiet and not live:
                for step in result.outcome.steps:
                    print_step(result.question, step)
            if not args.quiet and result.outcome.reasoning is not None:
                say(_reasoning_text(result.question, result.outcome.reasoning))
            records.append(result.to_dict())
            em, f1 = em + result.em, f1 + result.f1
            say(_result_line(len(records), len(questions), result))
            bar.set_postfix_str(f"EM {em / len(records):.3f} F1 {f1 / len(records):.3f}", refresh=False)
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
    for kind in args.ablation:
        variants += ablation(kind, base, orders=args.orders)
    if not variants:
        raise DataError("name the variants to compare: --variant NAME=SPEC (twice or more), or --ablation KIND")
    if args.workers > 1:
        for variant in variants:
            if not is_concurrent(variant.model):
                raise refuse_workers(variant.model)
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
                verdict = "correct" if result.em else "wrong"
                bar.write(f"{variant.name} {result.question.id}: {verdict}, F1 {result.f1:.2f}", file=sys.stdout)

        comparison = compare(
            args.data,
            variants,
            args.out,
            limit=args.limit,
            shuffle=args.shuffle,
            shuffle_seed=args.shuffle_seed,
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
    _intervals_note(args, comparison, f"; tables in {out / 'comparison.md'} and {out / 'comparison.csv'}")
    return 0


def _intervals_note(args: argparse.Namespace, comparison, where: str = "") -> None:
    print(
        f"\n{_plural(len(comparison.ids), 'question')}; 95% bootstrap intervals ({args.resamples} resamples, "
        f"seed {args.stats_seed}); Δ is paired against {comparison.names[0]}{where}",
        file=sys.stderr,
    )


def compare_runs_command(args: argparse.Namespace) -> int:
    """`rawreact compare-runs`: finished run files side by side, with intervals, on their shared questions."""
    comparison = compare_runs(_named(args.runs), resamples=args.resamples, seed=args.stats_seed)
    print(comparison.table(args.format), end="")
    _intervals_note(args, comparison)
    return 0


def _loop(variant: Variant) -> str:
    """The loop of a run's header, for a method that acts."""
    if variant.method in REASONING:
        return ""
    if variant.method == "tools":
        return f", native tool calls ({_plural(variant.sentences, 'sentence')} per search)"
    parts = [f"{_plural(variant.sentences, 'sentence')} per search"]
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
    text = f"\n=== {question.id} ({reasoning.method})\nQuestion: {question.question}\n"
    if reasoning.samples:
        text += f"{reasoning.cue}{reasoning.samples[0].call.text}\n"
    if reasoning.method == "cot-sc":
        tally = reasoning.vote
        text += f"votes ({len(reasoning.samples)} samples): {tally.counts or 'no answers'}\n"
    return text


def _result_line(n: int, total: int, result: Result) -> str:
    out = result.outcome
    verdict = "correct" if result.em else "wrong"
    branch = f" (answered by {out.branch})" if out.branch != out.method else ""
    return (
        f"result [{n}/{total}] {result.question.id}: {verdict} (EM {result.em:.0f}, F1 {result.f1:.2f}) "
        f"answer {out.answer!r}{branch}, gold {result.question.answer!r}; ended by {out.ended} after "
        f"{len(out.steps)} steps, {out.model_calls} calls, {out.invalid_actions} invalid, "
        f"{out.fallback_calls} fallback, {out.repeats} repeats{_support(out.supported)}, {out.seconds:.1f} s"
    )


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
    rows = [run_row(path) | {"run": name} for name, path in runs.items()]
    if args.html:
        written = write_page(runs, args.html, resamples=args.resamples, seed=args.stats_seed)
        print(f"rawreact: wrote the report of {_plural(len(runs), 'run')} to {written}", file=sys.stderr)
    print(printable(table(drop_unused(rows), args.format)), end="")
    return 0


def export_command(args: argparse.Namespace) -> int:
    """`rawreact export`: the steps of the selected episodes of run files, as fine-tuning examples."""
    done = export(args.runs, args.out, layout=args.layout, min_f1=args.min_f1, with_prompt=args.prompt)
    chosen = "EM 1" if args.min_f1 is None else f"F1 at least {args.min_f1:g}"
    print(
        f"rawreact: wrote {_plural(done.examples, 'example')} ({args.layout}) from {done.questions} of "
        f"{_plural(done.records, 'question')} ({chosen}) to {args.out}; {done.not_selected} not selected, "
        f"{done.no_trajectory} with no steps for this layout (answers without actions; tools episodes, which "
        "export as chat only)",
        file=sys.stderr,
    )
    if not done.examples:
        hint = "; try --min-f1 0.5" if args.min_f1 is None else ""
        print(f"rawreact: warning: no episode was selected, so {args.out} is empty{hint}", file=sys.stderr)
    return 0


def show_command(args: argparse.Namespace) -> int:
    """`rawreact show`: the questions of a run file, or one question's transcript."""
    _, records = read_run(args.run)
    if args.id is None and not args.first_wrong:
        print(printable(listing(records)), end="")
        return 0
    if args.first_wrong:
        found = [r for r in records if not r["em"]]
        if not found:
            raise DataError(f"{args.run}: every one of its {len(records)} questions was answered correctly")
    else:
        found = [r for r in records if r["id"] == args.id]
    if not found:
        ids = ", ".join(r["id"] for r in records[:5]) + (", ..." if len(records) > 5 else "")
        raise DataError(f"{args.run} has no question with id {args.id!r}; its ids: {ids or 'none'}")
    print(printable(show(found[0], with_prompt=args.prompt)), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rawreact` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `rawreact`: say what it can do, as git and pip do
        parser.print_help()
        return 0
    commands = {
        "run": run,
        "compare": compare_command,
        "compare-runs": compare_runs_command,
        "report": report,
        "show": show_command,
        "export": export_command,
    }
    try:
        return commands[args.command](args)
    except RawreactError as error:
        print(f"rawreact: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        out = getattr(args, "out", None)
        kept = f"; finished questions are in {out}, --resume finishes" if out and Path(out).exists() else ""
        print(f"\nrawreact: interrupted{kept}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as error:  # a bug of ours: say so in one line, show the traceback on request
        if os.environ.get("RAWREACT_DEBUG"):
            raise
        print(
            f"rawreact: internal error: {type(error).__name__}: {error}; rerun with RAWREACT_DEBUG=1 "
            "for the traceback, and please report it",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
