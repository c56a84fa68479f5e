"""The user's own environment, loaded by name: `--env package.module:factory`.

User code runs only when the user names it: an import path on the command line, or in a TOML
settings file (looked up beside the file, and named in a line before it is imported); never because
a run's manifest, a file runs are passed around in, names it (`cli.settings` refuses that before any
import), and never when its source differs from the digest that the run being resumed or rerun
recorded (`check_recorded`). `FACTORY(env)` is given the environment the run would use for a
question and returns the one to run: `env.with_verbs(calculate)` adds a verb, and a factory may
return an environment of its own that answers the same interface (`base.Environment`).
"""

import contextlib
import hashlib
import importlib
import inspect
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.errors import EnvironmentSetupError
from rawreact.core.modules import file_sha256, read_module


@dataclass(frozen=True)
class Factory:
    """An imported `--env` factory: the import path, the function, and a digest of its module's source."""

    spec: str
    make: Callable[[object], object]
    sha256: str | None
    plugin: tuple[str, str, str] | None = None  # an installed plugin's (name, package, version)

    def __call__(self, env: object, row: dict | None = None) -> object:
        """The environment to run, from the run's own `env` and, for a factory that takes a second argument,
        the question's `row` (its file's fields, with its id, question and answer); one that lacks the
        interface is an error."""
        try:
            made = self.make(env, row) if _takes_two(self.make) else self.make(env)
        except SystemExit as error:  # sys.exit() in the factory: the run must not end without a word
            raise EnvironmentSetupError(
                f"--env {self.spec} called sys.exit({error.code!r}); a factory returns an environment"
            ) from None
        except Exception as error:  # noqa: BLE001 - the user's code: say whose it is, without a traceback
            raise EnvironmentSetupError(f"--env {self.spec} raised {type(error).__name__}: {error}") from error
        missing = [name for name in ("verbs", "step", "reset", "fresh") if not hasattr(made, name)]
        if missing:
            raise EnvironmentSetupError(
                f"--env {self.spec} returned {type(made).__name__}, which has no {', '.join(missing)}; return an "
                "environment, such as env.with_verbs(your_function)"
            )
        return made


def _takes_two(make: Callable) -> bool:
    """Whether a factory takes the question's row beside the environment: `def make(env, row)`."""
    try:
        parameters = list(inspect.signature(make).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in positional)


def import_factory(spec: str) -> Factory:
    """The factory `spec` names (`package.module:factory`, with a folder before it or as a `.py` file if
    need be; see `core.modules`), imported with its folder (else the current one) first on the path."""
    try:
        where = read_module(spec)
    except ValueError as error:
        raise EnvironmentSetupError(str(error)) from None
    located = where.locate()
    if located is None:
        place = "the current folder" if where.folder is None else f"the folder {where.folder}"
        raise EnvironmentSetupError(
            f"--env {spec}: no module {where.module} in {place} nor among the installed ones; give the folder "
            f"that holds {where.module.replace('.', '/')}.py, as in --env path/to/{where.named}, or install its package"
        )
    added = None if where.plugin is not None else str(where.root)  # a plugin is imported from where it is installed
    if added is not None:
        sys.path.insert(0, added)  # a module beside the user (or in the folder named), as `python -m` would find it
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # what it prints is its own; said again below, as its own
            module = importlib.import_module(where.module)
    except SystemExit as error:  # argparse or sys.exit() at its top level: the process must not end here
        printed = said.getvalue().strip().splitlines()
        quoted = f", after printing {printed[-1][:160]!r}" if printed else ""
        raise EnvironmentSetupError(
            f"--env {spec}: importing {where.module} ({located}) called sys.exit({error.code!r}){quoted}; a module "
            "given to --env must not end the process when imported: put its script under "
            '`if __name__ == "__main__":`'
        ) from None
    except Exception as error:  # noqa: BLE001 - the user's module failed while it loaded
        raise EnvironmentSetupError(
            f"--env {spec}: importing {where.module} ({located}) raised {type(error).__name__}: {error}"
        ) from None
    finally:
        if added is not None and sys.path and sys.path[0] == added:
            sys.path.pop(0)
    sys.stderr.write(said.getvalue())  # what it printed while it loaded, now that it loaded
    make = getattr(module, where.function, None)
    if not callable(make):
        found = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")][:8]
        raise EnvironmentSetupError(
            f"--env {spec}: {where.module} has no function {where.function}; its functions are "
            f"{', '.join(found) or 'none'}"
        )
    return Factory(spec, make, _source_sha256(module), where.plugin)


def check_recorded(spec: str, recorded: str | None, where: str) -> None:
    """Refuse, before it is imported, an `--env` module whose source differs from the digest `where` (a run's
    manifest) recorded: a rerun or a resume runs the code that made the run, or nothing."""
    try:
        located = read_module(spec).locate()
    except ValueError as error:
        raise EnvironmentSetupError(str(error)) from None
    if recorded is None or located is None:
        return  # nothing recorded to compare, or nothing to import (import_factory says so)
    if file_sha256(located) != recorded:
        raise EnvironmentSetupError(
            f"--env {spec}: {located} is not the code {where} recorded (its SHA-256 differs), so it is not "
            "imported; restore that file, or run the changed code as a new run (another --out, without "
            "--config or --resume of the old one)"
        )


def _source_sha256(module: object) -> str | None:
    """A digest of the module's source file, so a run records which code made its environment."""
    try:
        path = inspect.getsourcefile(module)
        return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except (OSError, TypeError):
        return None
