"""The documentation's reference pages, generated from the code, so they cannot drift from it: every command
and option (from the parser) and every setting (from `Settings`). `python scripts/docs_reference.py` writes
them into docs/reference/; tests/test_docs.py fails when a page there is not what the code generates.
"""

import argparse
import functools
import inspect
import re

from rawreact.cli.given import RENAMED
from rawreact.cli.parser import parser
from rawreact.config.settings import _DEFAULTS, KEYS, PATHS, VARIANT_KEYS, kind_text, option

WIDTH = 100  # the usage lines' width: fixed, so a page does not depend on the terminal it was made in
PAGES = ("commands.md", "settings.md")


def _cell(text: str) -> str:
    """Text for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _usage(command: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(command.prog, width=WIDTH)
    formatter.add_usage(command.usage, command._actions, command._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {"default": action.default, "prog": "rawreact", "choices": action.choices}
    return text


def commands_page() -> str:
    """Every command of `rawreact`, with its usage and a table of its options, group by group."""
    commands = parser()._subparsers._group_actions[0]
    said = {choice.dest: choice.help for choice in commands._choices_actions}
    lines = [
        "# Commands and options",
        "",
        "Generated from rawreact's command-line parser (`rawreact.cli.reference`); a test fails when this page",
        "differs from what the code generates. `rawreact COMMAND --help` prints the same.",
        "",
    ]
    for name, command in commands.choices.items():
        lines += [f"## `rawreact {name}`", "", f"{said.get(name, '')[:1].upper()}{said.get(name, '')[1:]}.", ""]
        lines += ["```", _usage(command), "```", ""]
        for group in command._action_groups:
            actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS and a.dest != "help"]
            if not actions:
                continue
            lines += [
                f"### {group.title[:1].upper()}{group.title[1:]}",
                "",
                "| option | what it does |",
                "| --- | --- |",
            ]
            for action in actions:
                names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
                lines.append(f"| {names} | {_cell(_help(action))} |")
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def settings_page() -> str:
    """Every setting of `Settings`: its option, what it takes, its default, and what `rawreact run --help` says."""
    run = parser()._subparsers._group_actions[0].choices["run"]
    helps = {RENAMED.get(a.dest, a.dest): _help(a) for a in run._actions}
    flags = {RENAMED.get(a.dest, a.dest) for a in run._actions if a.option_strings}
    lines = [
        "# Settings",
        "",
        "Generated from `rawreact.Settings` (`rawreact.cli.reference`); a test fails when this page differs from",
        "what the code generates. A settings file (`--config FILE.toml`), a run's manifest, `--base` and",
        "`--variant` take the same keys. *Variant* settings decide each episode (a comparison's variants differ",
        "in them); the others choose the questions and how they are sent, and a comparison's variants share them.",
        "A setting that names a file is read beside a settings file and recorded absolute in a manifest.",
        "",
        "| key | option | takes | default | kind | what it does |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key in KEYS:
        kind = "variant" if key in VARIANT_KEYS else "shared"
        kind += ", a file" if key in PATHS else ""
        default = _DEFAULTS[key]
        shown = "none" if default is None else f"`{default}`"
        flag = f"`{option(key)}`" if key in flags else "none: a settings file, `--base` or `--variant`"
        lines.append(f"| `{key}` | {flag} | {_cell(kind_text(key))} | {shown} | {kind} | {_cell(helps.get(key, ''))} |")
    return "\n".join(lines) + "\n"


# The public names by what a user does with them: the Python API page's sections, in order.
PYTHON_GROUPS = {
    "Run an episode": ("react", "solve", "reason", "Trajectory", "Step", "Outcome", "Action", "parse_action",
                       "parse_step", "format_action", "parse_answer", "vote"),
    "Load data, models and prompts": ("load_collection", "Collection", "open_passages", "read_sources", "read_label",
                                      "load_model", "Model", "Completion", "ScriptedModel", "CachedModel",
                                      "load_prompt", "Prompt", "load_grammar", "Grammar", "Settings", "read_settings",
                                      "METHODS"),
    "Runs and reports": ("make_plan", "RunPlan", "run_questions", "Result", "RunFile", "read_run", "compare",
                         "Variant", "compare_runs", "Comparison"),
    "Environments and verbs": ("PassageEnv", "PassageStore", "build_store", "Environment", "Verb", "Verbs", "verb_of",
                               "VERBS", "PASSAGE_VERBS"),
    "Errors": ("RawreactError", "DataError", "PromptError", "GrammarError", "ModelError", "ContextLengthExceeded",
               "EnvironmentSetupError"),
}  # fmt: skip


def python_page() -> str:
    """Every public name of `rawreact` (`from rawreact import ...`), grouped by what a user does with it
    (`PYTHON_GROUPS`): its signature, its docstring, and a class's public methods and properties with theirs."""
    import rawreact

    grouped = [name for names in PYTHON_GROUPS.values() for name in names]
    missing = sorted(set(rawreact.__all__) - set(grouped))
    if missing:  # a name made public must be placed where a user would look for it
        raise ValueError(f"public names in no group of PYTHON_GROUPS: {', '.join(missing)}")
    lines = [
        "# Python API",
        "",
        "Generated from the public names of `rawreact` and their docstrings (`rawreact.cli.reference`); a test fails",
        "when this page differs from what the code generates. Every name here is imported as",
        "`from rawreact import NAME`; [From Python](../python.md) shows them at work. The names are grouped by",
        "what you do with them: " + ", ".join(f"[{group.lower()}](#{_anchor(group)})" for group in PYTHON_GROUPS) + ".",
        "",
    ]
    for group, names in PYTHON_GROUPS.items():
        lines += [f"## {group}", ""]
        for name in names:
            lines += _python_entry(name, getattr(rawreact, name))
    return "\n".join(lines).rstrip("\n") + "\n"


def _anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def _short(text: str) -> str:
    """A signature's text with its types by their names (`PassageEnv`, not `rawreact.environments.env.PassageEnv`)
    and no default's address."""
    return re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Z]\w*)", r"\1", re.sub(r" at 0x[0-9a-f]+", "", text))


def _signature(name: str, found: object) -> str:
    """`name(parameters) -> result`, one parameter a line when it is long, types by their names."""
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):
        return f"{name}(...)"
    whole = _short(f"{name}{signature}")
    if len(whole) <= 88:
        return whole
    parameters, star = [], False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and not star:
            parameters.append("*")
            star = True
        star = star or parameter.kind is parameter.VAR_POSITIONAL
        parameters.append(_short(str(parameter)))
    result = "" if signature.return_annotation is inspect.Signature.empty else f" -> {_short(_annotation(signature))}"
    return f"{name}(\n" + "".join(f"    {p},\n" for p in parameters) + f"){result}"


def _annotation(signature: inspect.Signature) -> str:
    shown = str(signature).rsplit(" -> ", 1)
    return shown[1] if len(shown) == 2 else ""


def _python_entry(name: str, found: object) -> list[str]:
    """One public name: a short heading, its signature (a class's, as it is called), its docstring, and a class's
    public methods and properties, each with its own."""
    if inspect.isclass(found) or callable(found):
        kind = "class" if inspect.isclass(found) else "function"
        body = ["```py", _signature(name, found), "```", "", f"*{kind}*", "", inspect.getdoc(found) or "", ""]
    else:
        kind = type(found).__name__
        body = [f"*{kind}*", "", f"A {kind}: {_cell(repr(found))[:200]}", ""]
    lines = [f"### `{name}`", "", *body]
    if inspect.isclass(found) and not issubclass(found, BaseException):
        for member, value in _members(found):
            doc = inspect.getdoc(value) or ""
            if isinstance(value, property | functools.cached_property):
                lines += [f"#### `{name}.{member}`", "", "*property*", "", doc, ""]
            else:
                shown = (
                    _signature(member, value)
                    .replace("(\n    self,\n", "(\n")
                    .replace("(self, ", "(")
                    .replace("(self)", "()")
                )
                lines += [f"#### `{name}.{member}`", "", "```py", shown, "```", "", doc, ""]
    return lines


def _members(cls: type) -> list[tuple[str, object]]:
    """A class's own public methods and properties (not those every object or dataclass has), in source order."""
    found = []
    for klass in reversed([k for k in cls.__mro__ if k.__module__.startswith("rawreact")]):
        for member, value in vars(klass).items():
            if member.startswith("_") or member in dict(found):
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property | functools.cached_property):
                found.append((member, value))
    return found


def pages() -> dict[str, str]:
    """The reference pages, by their name under docs/reference/."""
    return {"commands.md": commands_page(), "settings.md": settings_page(), "python.md": python_page()}
