"""What a command line gave, made into one value once (`runs.plan.Command`): below `cli/`, nothing reads the
parser's namespace."""

import argparse
from pathlib import Path

from rawreact.config.choices import MODES
from rawreact.config.settings import KEYS, OPTIONS
from rawreact.core.errors import DataError
from rawreact.runs.plan import Command, RunPlan, plan_of

# The parser's name (dest) of each flag whose setting has another name: exemplars -> k (config.settings.OPTIONS).
RENAMED = {option.removeprefix("--").replace("-", "_"): key for key, option in OPTIONS.items()}


def command_of(args: argparse.Namespace) -> Command:
    """The settings the command line typed, its settings file, `--reference`, and its run file, as one value."""
    return Command(given_flags(args), config=getattr(args, "config", None), reference=getattr(args, "reference", None),
                   out=getattr(args, "out", None), resume=bool(getattr(args, "resume", False)))  # fmt: skip


def plan_command(args: argparse.Namespace, say=None) -> RunPlan:
    """The plan of `rawreact run`'s command line (`runs.plan.plan_of`)."""
    return plan_of(command_of(args), say)


def given_flags(args: argparse.Namespace) -> dict:
    """The settings the user typed on the command line (flags left out are None, or absent)."""
    given = {}
    for name, value in vars(args).items():
        key = RENAMED.get(name, name)
        if key in KEYS and value is not None:
            given[key] = value
    if "grammar" in given:
        given["grammar"] = _grammar_mode(args.grammar, given)
    return given


def _grammar_mode(grammar: str, given: dict) -> str | None:
    """The grammar mode of `run`: --grammar's mode, or None for off.

    `--grammar` alone means step, so in `run --grammar data.json` the word after it is the data
    file: the modes are fixed words, and anything else that names a file is taken as the data.
    """
    if grammar not in ("off", *MODES):
        if given.get("data") is None and (Path(grammar).exists() or grammar.endswith((".json", ".jsonl"))):
            given["data"] = grammar
            return "step"
        raise DataError(f"--grammar takes off, step, action, titles or commands, not {grammar!r}")
    return None if grammar == "off" else grammar
