"""From the command line to `Settings`: the defaults, under the paper's setup (`--reference`), under
a settings file (`--config`), under the flags given. Only the flags a user typed count as given."""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from rawreact.config import paper
from rawreact.config.choices import LATS, MODES, REFLEXION
from rawreact.config.files import is_manifest, read_settings, recorded_env
from rawreact.config.settings import KEYS, OPTIONS, Settings, in_shard
from rawreact.core.errors import DataError, EnvironmentSetupError
from rawreact.core.modules import module_problem, read_module
from rawreact.core.tasks import task_type
from rawreact.core.text import plural
from rawreact.environments.custom import check_recorded
from rawreact.tasks.collection import Collection, Question, choose_questions
from rawreact.tasks.games import undescribed
from rawreact.tasks.loading import load_collection

# The parser's name (dest) of each flag whose setting has another name: exemplars -> k (config.settings.OPTIONS).
RENAMED = {option.removeprefix("--").replace("-", "_"): key for key, option in OPTIONS.items()}


@dataclass
class Chosen:
    """A run's settings, its questions, and what `--reference` chose (None without it)."""

    settings: Settings
    collection: Collection
    questions: list[Question]
    paper: dict | None = None


def given_flags(args: argparse.Namespace) -> dict:
    """The settings the user typed on the command line (flags left out are None, or absent)."""
    given = {}
    for name, value in vars(args).items():
        key = RENAMED.get(name, name)
        if key in KEYS and value is not None:
            given[key] = value
    if "grammar" in given:
        given["grammar"] = _grammar_mode(args, given)
    return given


def _grammar_mode(args: argparse.Namespace, given: dict) -> str | None:
    """The grammar mode of `run`: --grammar's mode, or None for off.

    `--grammar` alone means step, so in `run --grammar data.json` the word after it is the data
    file: the modes are fixed words, and anything else that names a file is taken as the data.
    """
    if args.grammar not in ("off", *MODES):
        if args.data is None and (Path(args.grammar).exists() or args.grammar.endswith((".json", ".jsonl"))):
            given["data"] = args.data = args.grammar
            return "step"
        raise DataError(f"--grammar takes off, step, action, titles or commands, not {args.grammar!r}")
    return None if args.grammar == "off" else args.grammar


def given_settings(args: argparse.Namespace) -> dict:
    """The settings a command was given: its `--config` file's, with the flags typed beside it over them.

    Code is imported only where the user named it (`environments.custom`): the `env` of a run's manifest (a
    file runs are shared in) only when the command line names the same module with `--env`, and only if its
    source is the one the run recorded; a TOML file's `env` is named in a line before it is imported."""
    from_file = read_settings(args.config) if args.config else {}
    typed = given_flags(args)
    if from_file.get("env") is not None:
        _check_env_of(args.config, from_file["env"], typed.get("env"))
    if from_file.get("ray") not in (None, "local") and typed.get("ray") is None and is_manifest(args.config):
        address = from_file["ray"]  # joining sends the cluster the plan and unpickles what its workers send back
        raise DataError(
            f"{args.config} ran on the Ray cluster at {address}; a cluster a run's manifest names is joined only "
            f"when the command line names it too: add --ray-address {address}, or --ray to start a Ray of this "
            "run's own, or leave both out to run here"
        )
    return from_file | typed


def _check_env_of(config: str, spec: str, typed: str | None) -> None:
    """Refuse, before any import, a manifest's `--env` the command line does not name, or whose source changed;
    say which module a TOML file's `env` imports."""
    try:
        where = read_module(spec)
    except ValueError as error:
        raise DataError(f"{config}: {error}") from None
    located = where.locate()
    file = str(located) if located else f"no file found for {where.module}"
    recorded = recorded_env(config)
    if recorded is None:  # a TOML settings file: the user wrote it, and is told what it runs
        if typed is None:
            print(f"rawreact: {config} names env {spec}: importing {where.module} from {file}", file=sys.stderr)
        return
    if typed is None:
        raise EnvironmentSetupError(
            f"{config} was run with --env {spec} ({file}); code a run's manifest names is imported only when "
            f"the command line names it too: read that file, then add --env {where.named}"
        )
    if module_problem(typed) is None and read_module(typed).named == where.named:  # (a bad one: Settings says)
        check_recorded(typed, recorded[1], config, recorded[2])


def choose(args: argparse.Namespace) -> Chosen:
    """The settings of `rawreact run`, and its questions, checked before any model loads."""
    given = given_settings(args)
    collection = _collection(given)
    if (
        task_type(collection.task).scoring == "outcome"
        and given.get("method") in REFLEXION
        and "evaluator" not in given
    ):
        given["evaluator"] = "won"  # a trial of a game is judged by the game
    options = {}
    if args.reference:
        method = given.get("method", "react")
        count = 1 if given.get("question") is not None else len(collection.questions)
        options = paper.reference_options(args.reference, collection.task, method, count)
    try:
        settings = Settings(**({k: v for k, v in options.items() if k not in given} | given))
    except DataError as error:  # settings that do not go together: say which file gave them
        raise DataError(f"{args.config}: {error}" if args.config else str(error)) from None
    questions = _chosen(settings, collection)
    info = None
    if args.reference:
        yours = {k: v for k, v in given.items() if k in options}
        info = {"options": options, "given": yours, "task": collection.task, "directory": args.reference}
    return Chosen(settings, collection, questions, info)


def _collection(given: dict) -> Collection:
    """The data's questions, or for `--question` the passages it is asked over: those of --passages (see
    runs.setup.collection_of), else the demo's."""
    if given.get("question") is not None:
        return Collection("--question", {}, ()) if given.get("passages") else load_collection().pooled()
    questions_only = given.get("env") is not None or given.get("passages") is not None  # the run brings the passages
    return load_collection(given.get("data"), questions_only=questions_only)


def _chosen(settings: Settings, collection: Collection) -> list[Question]:
    """The questions a run asks: `--question`, or the data's, limited and shuffled as the settings say."""
    if settings.question is not None:
        return [Question("question-1", settings.question, settings.answer)]
    chosen = choose_questions(
        collection,
        limit=settings.limit,
        shuffle=settings.shuffle,
        seed=settings.shuffle_seed,
        shuffle_range=settings.shuffle_range,
    )
    return in_shard(chosen, settings.shard_of)


def say_paper(chosen: Chosen) -> list[str]:
    """What of this run's setup is the paper's and what is not, part by part, as lines to print."""
    settings, info = chosen.settings, chosen.paper
    task = task_type(chosen.collection.task)
    store = f"the store {settings.passages}" if settings.passages else None
    own = "each question's own paragraphs (the distractor setting)" if task.own_passages else "none"
    parts = {
        "task": info["task"],
        "method": settings.method,
        "n_first": settings.n_first,
        "max_steps": settings.max_steps,
        "questions": len(chosen.collection.questions),
        "passages": store or own,
        "model": settings.model,
    }
    if chosen.collection.game_rows:
        parts["games"] = paper.GAMES["rows"]
    elif undescribed(chosen.collection):
        parts["games"] = paper.GAMES["undescribed"]
    lines = paper.describe(info["options"], info["given"], parts)
    whose = "LATS's" if chosen.settings.method == LATS else "the paper's"
    head = f"rawreact: {whose} setup from {info['directory']} (--reference), "
    return [head + f"{plural(len(chosen.questions), 'question')}:", *lines]


def reference_record(chosen: Chosen) -> dict:
    """What the manifest keeps of --reference: the checkout, its files' hashes, the parts chosen and given."""
    info = chosen.paper
    return {
        "directory": str(info["directory"]),
        "files": paper.files(info["directory"], info["task"], chosen.settings.method),
        "paper": {k: v for k, v in info["options"].items() if k not in info["given"]},
        "yours": info["given"],
    }
