"""The documentation's reference pages, generated from the code, so they cannot drift from it: every command
and option (from the parser) and every setting (from `Settings`). `python scripts/docs_reference.py` writes
them into docs/reference/; tests/test_docs.py fails when a page there is not what the code generates.
"""

import argparse
import inspect
import re

from rawreact.cli.parser import parser
from rawreact.cli.settings import RENAMED
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


def python_page() -> str:
    """Every public name of `rawreact` (`from rawreact import ...`), by the module that defines it: its signature
    and its docstring, as `help()` would show them."""
    import rawreact

    lines = [
        "# Python API",
        "",
        "Generated from the public names of `rawreact` and their docstrings (`rawreact.cli.reference`); a test fails",
        "when this page differs from what the code generates. Every name here is imported as",
        "`from rawreact import NAME`; [From Python](../python.md) shows them at work.",
        "",
    ]
    by_module: dict[str, list[str]] = {}
    for name in sorted(rawreact.__all__, key=str.lower):
        module = f"rawreact.{rawreact._WHERE[name]}"  # where it is defined, as the package's table says
        by_module.setdefault(module, []).append(name)
    for module in sorted(by_module):
        lines += [f"## `{module}`", ""]
        for name in by_module[module]:
            lines += _python_entry(name, getattr(rawreact, name))
    return "\n".join(lines).rstrip("\n") + "\n"


def _python_entry(name: str, found: object) -> list[str]:
    """One public name: its signature (a class's, as it is called), and its docstring."""
    if inspect.isclass(found) or callable(found):
        try:
            signature = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(found)))  # a default's address
        except (TypeError, ValueError):
            signature = "(...)"
        kind = "class" if inspect.isclass(found) else "function"
        head = f"### `{name}{signature}`"
    else:
        kind, head = type(found).__name__, f"### `{name}`"
    doc = inspect.getdoc(found) if kind in ("class", "function") else None
    said = doc or f"A {kind}: {_cell(repr(found))[:200]}"
    return [head, "", f"*{kind}*", "", said, ""]


def pages() -> dict[str, str]:
    """The reference pages, by their name under docs/reference/."""
    return {"commands.md": commands_page(), "settings.md": settings_page(), "python.md": python_page()}
