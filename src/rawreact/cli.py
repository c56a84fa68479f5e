"""The `rawreact` command: wires the library together, prints, and never shows a traceback."""

import argparse
import os
import sys
from pathlib import Path

from rawreact import __version__
from rawreact.collection import Collection, Question, load_collection
from rawreact.errors import DataError, RawreactError
from rawreact.loop import MAX_TOKENS, Step
from rawreact.models import DEFAULT_MODEL, EMBEDDED_MODELS, load_model
from rawreact.prompts import load_prompt
from rawreact.runs import Result, run_questions


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rawreact", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rawreact {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run ReAct episodes and print their trajectories")
    run.add_argument(
        "collection", nargs="?", help="a passage collection with questions (envs/ layout); default: the demo"
    )
    run.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"{', '.join(EMBEDDED_MODELS)}, a .gguf path, or scripted:FILE.json (default: %(default)s)",
    )
    run.add_argument("--prompt", help="an exemplar file, or a reference-style JSON prompt file with --key")
    run.add_argument("--key", help="which prompt of a reference-style JSON file, such as webthink_simple6")
    run.add_argument("--instruction", help="an instruction file to put before the exemplars")
    run.add_argument("-k", "--exemplars", type=int, help="use the first K exemplars (default: all)")
    run.add_argument("--question", help="ask this question instead of the collection's questions")
    run.add_argument("--answer", default="", help="the gold answer of --question, for scoring")
    run.add_argument("--passages", help="the passages for --question: a collection file (envs/ layout)")
    run.add_argument("--limit", type=_positive, help="run only the first N questions")
    run.add_argument("--max-steps", type=_positive, default=7, help="step limit per question (default: %(default)s)")
    run.add_argument(
        "--max-tokens", type=_positive, default=MAX_TOKENS, help="token limit per model call (default: %(default)s)"
    )
    run.add_argument("--n-first", type=_positive, default=2, help="sentences a search shows (default: %(default)s)")
    run.add_argument(
        "--n-ctx", type=_positive, default=8192, help="context window of a llama.cpp model (default: %(default)s)"
    )
    run.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    run.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (default: %(default)s, greedy)"
    )
    run.add_argument("--out", help="append one JSON line per question to this file")
    run.add_argument("-q", "--quiet", action="store_true", help="print only the result lines")
    return parser


def _questions(args: argparse.Namespace) -> tuple[Collection, list[Question]]:
    if args.question is not None:
        collection = load_collection(args.passages) if args.passages else load_collection()
        questions = [Question("question-1", args.question, args.answer)]
    else:
        if args.passages:
            raise DataError("--passages goes with --question; a collection file is given as the first argument")
        collection = load_collection(args.collection)
        questions = list(collection.questions)
        if not questions:
            raise DataError(f"{args.collection} has no questions; add some, or ask one with --question")
    return collection, questions[: args.limit]


def _print_step(question: Question, step: Step) -> None:
    if step.i == 1:
        print(f"\n=== {question.id}\nQuestion: {question.question}")
    print(step.render(), end="", flush=True)


def _result_line(n: int, total: int, result: Result) -> str:
    traj = result.trajectory
    verdict = "correct" if result.em else "wrong"
    return (
        f"result [{n}/{total}] {result.question.id}: {verdict} (EM {result.em:.0f}, F1 {result.f1:.2f}) "
        f"answer {traj.answer!r}, gold {result.question.answer!r}; ended by {traj.ended} after "
        f"{len(traj.steps)} steps, {traj.model_calls} calls, {traj.invalid_actions} invalid, {traj.seconds:.1f} s"
    )


def run(args: argparse.Namespace) -> int:
    """`rawreact run`: load everything first, so bad input fails before any model time is spent."""
    collection, questions = _questions(args)
    prompt = load_prompt(args.prompt, k=args.exemplars, instruction=args.instruction, key=args.key)
    options = {"n_ctx": args.n_ctx, "seed": args.seed, "temperature": args.temperature}
    model = load_model(args.model, **({} if args.model.startswith("scripted:") else options))
    results = run_questions(
        questions,
        lambda q: collection.env(args.n_first),
        model,
        prompt,
        out=args.out,
        on_step=None if args.quiet else _print_step,
        max_steps=args.max_steps,
        max_tokens=args.max_tokens,
    )
    print(
        f"rawreact {__version__}: {len(questions)} questions from {collection.name}, model {model.name}, "
        f"prompt {prompt.source} ({prompt.exemplars} exemplars)",
        flush=True,
    )
    done: list[Result] = []
    for result in results:
        done.append(result)
        print(_result_line(len(done), len(questions), result), flush=True)
    _summary(done)
    return 0


def _summary(results: list[Result]) -> None:
    n = len(results)
    if n == 0:
        return
    em = sum(r.em for r in results) / n
    f1 = sum(r.f1 for r in results) / n
    seconds = sum(r.trajectory.seconds for r in results) / n
    finished = sum(r.trajectory.ended == "finish" for r in results)
    print(f"\n{n} questions: EM {em:.3f}, F1 {f1:.3f}, finished {finished}/{n}, {seconds:.1f} s per question")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rawreact` console script."""
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except RawreactError as error:
        print(f"rawreact: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        out = f"; finished questions are in {args.out}" if args.out and Path(args.out).exists() else ""
        print(f"\nrawreact: interrupted{out}", file=sys.stderr)
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
