"""Where the shipped data files (`prompts/`, `envs/`) live, installed or in a checkout; and the versions of what is
installed."""

import sys
from importlib import metadata
from pathlib import Path

from rawreact.core.errors import DataError

_PACKAGE = Path(__file__).parent.parent  # rawreact/, above core/


def resource(folder: str, name: str) -> Path:
    """The path of a shipped data file, such as resource("prompts", "instruction.txt").

    A wheel carries the folders inside the package; an editable install or a checkout has them
    at the top of the repository, two levels above this file.
    """
    for root in (_PACKAGE, _PACKAGE.parent.parent):
        path = root / folder / name
        if path.exists():
            return path
    raise DataError(f"rawreact's data file {folder}/{name} is missing; reinstall rawreact")


def installed_versions(*packages: str) -> dict[str, str | None]:
    """Python's version and each installed package's (None for one that is not installed): what a run's manifest
    records, and what a call cache keys its replies by."""
    found: dict[str, str | None] = {"python": sys.version.split()[0]}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found
