"""The user's own environment, loaded by name: `--env package.module:factory`.

User code runs only when the user names it: an import path on the command line, or in a TOML
settings file (looked up beside the file, and named in a line before it is imported); never because
a run's manifest, a file runs are passed around in, names it (`runs.plan` refuses that before any
import), and never when its source differs from the digest that the run being resumed or rerun
recorded (`check_recorded`). `FACTORY(env)` is given the environment the run would use for a
question and returns the one to run: `env.with_verbs(calculate)` adds a verb, and a factory may
return an environment of its own that answers the same interface (`base.Environment`).
"""

import contextlib
import importlib
import inspect
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.errors import EnvironmentSetupError
from rawreact.core.modules import ModuleSpec, installed_files, read_module
from rawreact.core.sources import Snapshot, serve, snapshot


@dataclass(frozen=True)
class Factory:
    """An imported `--env` factory: the import path, the function, and a digest of its module's source."""

    spec: str
    make: Callable[[object], object]
    sha256: str | None
    plugin: tuple[str, str, str] | None = None  # an installed plugin's (name, package, version)
    files: dict[str, str] | None = None  # each Python file it runs from, by name under its folder: its SHA-256
    folder: Path | None = None  # the folder of its module's file, where the prompt files it declares are

    def declared_prompt(self) -> tuple[Path | None, Path | None]:
        """The exemplars and instruction files the factory declares for ReAct, as `make.exemplars = "FILE"` and
        `make.instruction = "FILE"` (paths relative to its module's folder), each None when it declares none. A
        file is what the plugin ships: one outside its module's folder (`../../etc/...`, `/dev/zero`, a link out)
        is refused before it is opened, so no byte of it reaches a refusal or a prompt."""
        found = []
        folder = (self.folder or Path.cwd()).resolve()
        for name in ("exemplars", "instruction"):
            value = getattr(self.make, name, None)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise EnvironmentSetupError(
                    f"--env {self.spec}: its {name} is {value!r}; declare a file beside the module, as in "
                    f'make.{name} = "prompts/{name}.txt"'
                )
            path = None if value is None else folder / value
            if path is not None and not path.resolve().is_relative_to(folder):
                raise EnvironmentSetupError(
                    f"--env {self.spec}: its {name} {value!r} is outside its module's folder {folder}; a plugin's "
                    f'prompt files ship beside its module, as in make.{name} = "prompts/{name}.txt"'
                )
            found.append(path)
        return found[0], found[1]

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
    need be; see `core.modules`), imported with its folder (else the current one) first on the path, from the
    bytes of its files' snapshot (`core.sources`: the very bytes a rerun's check compared, if one did)."""
    where, located = _located(spec)
    taken = _TAKEN.pop((spec, str(Path.cwd())), None) or _snapshot(spec, where, located)
    serve(taken, where.search if where.plugin is not None else None)
    added = None if where.plugin is not None else str(where.root)  # a plugin is imported from where it is installed
    if added is not None:
        sys.path.insert(0, added)  # a module beside the user (or in the folder named), as `python -m` would find it
    kept = list(sys.path)
    if where.plugin is not None:  # nor does anything it imports come from the current folder (`python -m`'s first)
        sys.path[:] = where.search
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
        sys.path[:] = kept
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
    return Factory(spec, make, taken.module_sha256, where.plugin, taken.digests, located.parent)


# Snapshots a rerun's check took, by (spec, folder): the import runs exactly the bytes that were compared.
_TAKEN: dict[tuple[str, str], Snapshot] = {}


def _located(spec: str) -> tuple[ModuleSpec, Path]:
    try:
        where = read_module(spec)
    except ValueError as error:
        raise EnvironmentSetupError(str(error)) from None
    located = where.locate()
    if located is None:
        if where.plugin is not None:
            name, package, version = where.plugin
            raise EnvironmentSetupError(
                f"--env {spec}: plugin {name} of {package} {version} names the module {where.module}, which is not "
                f"installed; reinstall {package} (pip install --force-reinstall {package})"
            )
        place = "the current folder" if where.folder is None else f"the folder {where.folder}"
        raise EnvironmentSetupError(
            f"--env {spec}: no module {where.module} in {place} nor among the installed ones; give the folder "
            f"that holds {where.module.replace('.', '/')}.py, as in --env path/to/{where.named}, or install its package"
        )
    return where, located


def _snapshot(spec: str, where: ModuleSpec, located: Path) -> Snapshot:
    installed = None
    if where.plugin is not None:
        try:
            installed = installed_files(where, located)
        except ValueError as error:
            raise EnvironmentSetupError(f"--env {spec}: {error}") from None
    return snapshot(located, where.module, installed)


def check_recorded(spec: str, recorded: str | None, where: str, files: dict | None = None) -> None:
    """Refuse, before it is imported, an `--env` module whose files differ from those `where` (a run's manifest)
    recorded: its own file's SHA-256 (`recorded`) and, where the manifest has them, each of its folder's Python
    files (`files`); a rerun or a resume runs the code that made the run, or nothing."""
    try:
        read_module(spec)
    except ValueError as error:
        raise EnvironmentSetupError(str(error)) from None
    if recorded is None:
        return  # nothing recorded to compare
    try:
        where_module, located = _located(spec)
    except EnvironmentSetupError:
        return  # nothing to import: import_factory says so
    taken = _snapshot(spec, where_module, located)
    changed = [taken.name(taken.module)] if taken.module_sha256 != recorded else []
    if isinstance(files, dict):
        changed = sorted({*changed, *taken.changed(files)})
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise EnvironmentSetupError(
            f"--env {spec}: {shown} in {taken.root} is not the code {where} recorded (its SHA-256 differs; rawreact "
            "checks every Python file of the module's folder and of the packages below it), so it is not imported; "
            "restore it, or run the changed code as a new run (another --out, without --config or --resume of the "
            "old one)"
        )
    _TAKEN[(spec, str(Path.cwd()))] = taken
