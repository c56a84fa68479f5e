"""The user's own environment, loaded by name: `--env package.module:factory`.

User code runs only when the user names it (an import path on the command line or in a settings
file), never because a run happened to read a file. `FACTORY(env)` is given the environment the
run would use for a question and returns the one to run: `env.with_verbs(calculate)` adds a verb,
and a factory may return an environment of its own that answers the same interface
(`base.Environment`).
"""

import hashlib
import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.errors import EnvironmentSetupError


@dataclass(frozen=True)
class Factory:
    """An imported `--env` factory: the import path, the function, and a digest of its module's source."""

    spec: str
    make: Callable[[object], object]
    sha256: str | None

    def __call__(self, env: object) -> object:
        """The environment to run, from the run's own `env`; one that lacks the interface is an error."""
        try:
            made = self.make(env)
        except Exception as error:  # noqa: BLE001 - the user's code: say whose it is, without a traceback
            raise EnvironmentSetupError(f"--env {self.spec} raised {type(error).__name__}: {error}") from error
        missing = [name for name in ("verbs", "step", "reset", "fresh") if not hasattr(made, name)]
        if missing:
            raise EnvironmentSetupError(
                f"--env {self.spec} returned {type(made).__name__}, which has no {', '.join(missing)}; return an "
                "environment, such as env.with_verbs(your_function)"
            )
        return made


def import_factory(spec: str) -> Factory:
    """The factory `spec` (`package.module:factory`) names, imported with the current folder on the path."""
    module_name, _, name = spec.partition(":")
    module_name, name = module_name.strip(), name.strip()
    if not module_name or not name:
        raise EnvironmentSetupError(f"--env {spec!r}: give an import path, package.module:factory")
    added = str(Path.cwd())
    sys.path.insert(0, added)  # a module beside the user, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise EnvironmentSetupError(
            f"--env {spec}: cannot import {module_name} ({error}); run from the folder that holds {module_name}.py, "
            "or install its package"
        ) from None
    except Exception as error:  # noqa: BLE001 - the user's module failed while it loaded
        raise EnvironmentSetupError(
            f"--env {spec}: importing {module_name} raised {type(error).__name__}: {error}"
        ) from None
    finally:
        if sys.path and sys.path[0] == added:
            sys.path.pop(0)
    make = getattr(module, name, None)
    if not callable(make):
        found = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")][:8]
        raise EnvironmentSetupError(
            f"--env {spec}: {module_name} has no function {name}; its functions are {', '.join(found) or 'none'}"
        )
    return Factory(spec, make, _source_sha256(module))


def _source_sha256(module: object) -> str | None:
    """A digest of the module's source file, so a run records which code made its environment."""
    try:
        path = inspect.getsourcefile(module)
        return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except (OSError, TypeError):
        return None
