"""The `rawreact` command's line: its commands and their options (`run`'s, in their groups, are `run_options.py`'s;
`compare` takes the flags of `run` that set a variant's setting)."""

import argparse
import copy

from rawreact import __version__
from rawreact.cli.given import RENAMED
from rawreact.cli.nearest import NearestParser
from rawreact.cli.run_options import positive, run_parser, seconds, share
from rawreact.config.settings import VARIANT_KEYS
from rawreact.experiments.variants import ABLATIONS
from rawreact.reports.export import LAYOUTS

DESCRIPTION = (
    "Run ReAct agents on completion models (an embedded llama.cpp model, Ollama, or an OpenAI-compatible "
    "server), score them on HotpotQA-style questions, text games and ScienceWorld, and model-written programs on "
    "HumanEval (rawreact run humaneval --method simple|reflexion|lats), and compare prompts, models and settings."
)


EPILOG = "Start with `rawreact run` (the demo on the embedded model); `rawreact COMMAND --help` tells more."


COLUMNS_HELP = (
    "the text table's columns after the name, comma-separated, or all (one table, however wide); by default "
    "every column, in as many tables as fit the terminal's width (Markdown and CSV always have every column)"
)


def parser() -> argparse.ArgumentParser:
    """The whole command line: `rawreact COMMAND ...`."""
    parser = NearestParser(prog="rawreact", description=DESCRIPTION, epilog=EPILOG)
    parser._given = []
    parser.add_argument("--version", action="version", version=f"rawreact {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = run_parser(commands)
    _compare_parser(commands, run)
    report = commands.add_parser("report", help="the summaries of run files, side by side")
    report.add_argument("runs", nargs="+", metavar="[NAME=]RUN.jsonl", help="run files, the first being the base")
    report.add_argument("--format", choices=("text", "markdown", "csv", "json"), default="text",
                        help="table format; json: every run's summary, scores with intervals and paired differences, "
                        "and the extra tables, as one JSON object")  # fmt: skip
    report.add_argument("--columns", metavar="LIST", help=COLUMNS_HELP)
    report.add_argument(
        "--html", metavar="FILE", help="also write the whole report (charts, questions, transcripts) as one web page"
    )
    report.add_argument("--force", action="store_true", help="replace the --html file if it exists")
    report.add_argument(
        "--inspect",
        metavar="FOLDER",
        help="also write each run as an inspect-ai log into FOLDER, for `inspect view --log-dir FOLDER`",
    )
    report.add_argument("--resamples", type=positive, default=10_000, help="bootstrap resamples (default: 10000)")
    report.add_argument("--stats-seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    runs = commands.add_parser(
        "compare-runs", help="compare finished run files on the questions they share, with bootstrap intervals"
    )
    runs.add_argument("runs", nargs="+", metavar="[NAME=]RUN.jsonl", help="run files, the first being the base")
    runs.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="table format")
    runs.add_argument("--columns", metavar="LIST", help=COLUMNS_HELP)
    runs.add_argument("--resamples", type=positive, default=10_000, help="bootstrap resamples (default: 10000)")
    runs.add_argument("--stats-seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    export_ = commands.add_parser("export", help="the steps of a run's good episodes as fine-tuning examples")
    export_.add_argument("runs", nargs="+", metavar="RUN.jsonl", help="run files")
    export_.add_argument("--out", required=True, help="the JSON-lines file to write, one example a line")
    export_.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="completion",
        help="completion: a prompt/completion pair per step; chat: the episode as messages, untrained turns weight 0 "
        "(OpenAI); trl: TRL's conversational prompt-completion, one example per trained turn; fireact: FireAct's "
        "Alpaca JSON array (default: completion)",
    )
    export_.add_argument(
        "--min-f1",
        type=share,
        metavar="F1",
        help="export the episodes with F1 at least this (default: those with EM 1)",
    )
    export_.add_argument("--prompt", action="store_true", help="keep the few-shot prompt (default: question onwards)")
    export_.add_argument(
        "--memory",
        action="store_true",
        help="keep a Reflexion final trial's memory of the failed trials before the question (default: left out)",
    )
    export_.add_argument("--force", action="store_true", help="replace --out and its manifest if they exist")
    index = commands.add_parser(
        "index", help="build a passage store (SQLite, full-text titles) from a corpus, for --passages"
    )
    index.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="HotpotQA's fullwiki .tar.bz2 (or its folder or files), FEVER's wiki-pages folder or files, "
        "JSON-lines of {title, text} or {title, sentences} (plain, .bz2 or .gz), or a question file",
    )
    index.add_argument("--out", required=True, help="the store file to write, such as wiki.sqlite")
    index.add_argument("--force", action="store_true", help="replace --out if it exists (once the new one is built)")
    games = commands.add_parser(
        "games", help="make text games by recipe with TextWorld (offline, seeded), into a folder to give `rawreact run`"
    )
    games.add_argument("folder", help="the folder to make them in; its games.json lists what was made")
    games.add_argument(
        "--recipe",
        action="append",
        metavar="KIND:LEVEL",
        help="coin:L (coin collector), treasure:L (treasure hunter) or cooking:L; repeat it for several "
        "(default: coin:1, treasure:1, cooking:1)",
    )
    games.add_argument(
        "--seeds", default="1", metavar="A-B|A,B,...", help="the seeds of each recipe, as 1-5 or 1,3,7 (default: 1)"
    )
    data = commands.add_parser(
        "data", help="the benchmarks rawreact knows by name (rawreact run NAME), or download and check some"
    )
    data.add_argument(
        "names", nargs="*", metavar="NAME", help="download these into the data cache (once) and check their SHA-256"
    )
    commands.add_parser(
        "plugins",
        help="the environments installed packages offer (entry points of rawreact.environments), for --env NAME",
    )
    show_ = commands.add_parser("show", help="a run's questions, or one question's transcript")
    show_.add_argument("run", help="a run file (RUN.jsonl)")
    which = show_.add_mutually_exclusive_group()
    which.add_argument("--id", help="the question's id (without --id or --first-wrong: list the questions)")
    which.add_argument("--first-wrong", action="store_true", help="the first question answered wrongly")
    show_.add_argument("--prompt", action="store_true", help="include the few-shot prompt before the question")
    merge = commands.add_parser("merge", help="join the run files of one run's shards (--shard K/N) into one")
    merge.add_argument("runs", nargs="+", metavar="RUN.jsonl", help="the shards' run files")
    merge.add_argument("--out", required=True, help="the run file to write (never over an existing one)")
    merge.add_argument(
        "--duplicates",
        choices=("refuse", "first"),
        default="refuse",
        help="a question in two files: refuse the merge, or keep the record of the first file given (default: refuse)",
    )
    return parser


def _compare_parser(commands, run: argparse.ArgumentParser) -> None:
    compare = commands.add_parser(
        "compare", help="run variants of a prompt on the same questions and compare them, with their intervals"
    )
    compare.add_argument("data", nargs="?", help="questions, as for `rawreact run` (default: the demo)")
    compare.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help=f"a variant: NAME=key=value,... with keys {', '.join(VARIANT_KEYS)} (the first variant is the base)",
    )
    compare.add_argument(
        "--ablation", action="append", default=[], choices=ABLATIONS, help="add a built-in set of variants"
    )
    compare.add_argument("--base", default="", metavar="SPEC", help="settings every variant starts from")
    compare.add_argument(
        "--config",
        metavar="FILE",
        help="a TOML settings file (or a run's manifest): the base of every variant, and the questions; flags and "
        "--base override it",
    )
    compare.add_argument("--orders", type=positive, default=3, help="shuffled orders of --ablation orders")
    compare.add_argument("--out", required=True, help="folder for the variants' run files and the tables")
    compare.add_argument("--limit", type=positive, help="compare on the first N questions")
    compare.add_argument("--shuffle", action="store_true", default=None, help="shuffle the questions before --limit")
    compare.add_argument("--shuffle-seed", type=int, help="seed of --shuffle (default: 0)")
    compare.add_argument("--shuffle-range", type=positive, metavar="N", help="shuffle the first N questions' indices")
    compare.add_argument("--shard", metavar="K/N", help="compare on the K-th of N parts of the chosen questions")
    compare.add_argument("--seed", type=int, help="seed of sampling, unless a variant sets it (default: 0)")
    compare.add_argument("--workers", type=positive, help="questions in flight at once")
    compare.add_argument(
        "--per-endpoint", type=positive, metavar="N", help="with several servers in a model spec: episodes on each"
    )
    compare.add_argument("--ollama-host", help="where Ollama listens (default: OLLAMA_HOST)")
    compare.add_argument("--cache", metavar="FILE", help="an SQLite file of model calls the variants share")
    compare.add_argument(
        "--cache-sampled", action="store_true", default=None, help="with --cache: sampled calls may come from it too"
    )
    compare.add_argument("--timeout", type=seconds, help="seconds a server may take per call")
    compare.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="table on stdout")
    compare.add_argument("--columns", metavar="LIST", help=COLUMNS_HELP)
    compare.add_argument("--resamples", type=positive, default=10_000, help="bootstrap resamples (default: 10000)")
    compare.add_argument("--stats-seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    compare.add_argument("-q", "--quiet", action="store_true", help="no line per question")
    _run_settings(run, compare)


def _run_settings(run: argparse.ArgumentParser, compare: argparse.ArgumentParser) -> None:
    """`rawreact run`'s flags that set a variant's setting (`--model`, `--max-steps`, ...), taken by `compare` as
    the base of every variant, as `--base` takes them: the same flags, defined once, in `run`."""
    group = compare.add_argument_group("the base of every variant, as for `rawreact run` (--base overrides them)")
    taken = {option for action in compare._actions for option in action.option_strings}
    for action in run._actions:
        key = RENAMED.get(action.dest, action.dest)
        if key in VARIANT_KEYS and action.option_strings and not taken & set(action.option_strings):
            group._add_action(copy.copy(action))
