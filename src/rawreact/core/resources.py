"""Where the shipped data files (`prompts/`, `envs/`) live, installed or in a checkout; and the versions of what is
installed."""

import functools
import hashlib
import subprocess
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


@functools.cache
def source_fingerprint() -> dict:
    """What code a run runs, beyond a version number that stays the same between releases: the SHA-256 of the
    rawreact package's files (their paths and bytes, compiled files left out) and, where the package is a git
    checkout's, its commit and whether tracked files differ from it. What a run's manifest and each resume record.
    """
    digest, count = hashlib.sha256(), 0
    for path in sorted(_PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            name, data = path.relative_to(_PACKAGE).as_posix().encode(), path.read_bytes()
            digest.update(b"%d:%s%d:" % (len(name), name, len(data)) + data)
            count += 1
    return {"sha256": digest.hexdigest(), "files": count} | _git_commit()


def _git_commit() -> dict:
    """The commit of the checkout the package is tracked in, and whether it differs ({} when it is not)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(_PACKAGE), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):  # no git, or it hung
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    if not git("ls-files", "--error-unmatch", "__init__.py"):  # installed, not a checkout's (even under one)
        return {}
    commit, changes = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return {} if commit is None else {"commit": commit, "changed": bool(changes)}


def source_named(source: object) -> str:
    """A manifest's source fingerprint in a few words: its commit where known, else its hash's first 12 digits;
    "-" for a run made before manifests recorded one."""
    if not isinstance(source, dict) or not isinstance(source.get("sha256"), str):
        return "-"
    if isinstance(source.get("commit"), str):
        return f"commit {source['commit'][:12]}{' with changes' if source.get('changed') else ''}"
    return f"files {source['sha256'][:12]}"
