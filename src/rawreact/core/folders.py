"""Output folders made as `mkdir -p` makes them, and removed again when what was to go in them failed."""

import os
from pathlib import Path

from rawreact.core.errors import DataError

# Files whose one string a setting names after a `#`: a notebook's code cell, or a Python file's top level.
NAMED = (".ipynb", ".py")


# Data named by its source, not read from a file: a simulator's episodes (`scienceworld:test_mini`), an installed
# package's problems (`humaneval:0-9`).
SIMULATORS = ("scienceworld", "humaneval")


def is_named_data(value: str | Path) -> bool:
    """Whether a `--data` value names a simulator's episodes or a package's problems (`scienceworld:...`,
    `humaneval:...`) rather than a file."""
    return any(str(value) == name or str(value).startswith(f"{name}:") for name in SIMULATORS)


def split_named(value: str) -> tuple[str, str | None]:
    """`FILE.ipynb#NAME` or `FILE.py#NAME` as (FILE, NAME), split at the last `#` (a folder may hold one);
    any other path as (path, None)."""
    file, hash_, name = value.rpartition("#")
    if hash_ and file.endswith(NAMED):
        return file, name
    return value, None


def check_parents(path: str | Path) -> None:
    """Refuse a path with a file where one of its folders should be, before anything is made or loaded."""
    for folder in reversed(Path(path).parents):
        if folder.exists() and not folder.is_dir():
            raise DataError(f"{path}: {folder} is a file, not a folder; choose another path")


def make_parents(path: str | Path) -> list[Path]:
    """Make the folders above `path` that are missing, as `mkdir -p` does; returns those made, top first,
    so a caller that then fails can remove them (`remove_made`). A file in the way is one clear error."""
    check_parents(path)
    made = []
    for folder in reversed(Path(path).parents):
        if folder.is_dir():
            continue
        try:
            folder.mkdir()
        except FileExistsError:  # made at the same moment by another process
            continue
        except OSError as error:
            raise DataError(f"{path}: cannot make the folder {folder}: {error.strerror}") from None
        made.append(folder)
    return made


def remove_made(folders: list[Path]) -> None:
    """Remove the folders `make_parents` made, deepest first, where they are still empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


def cache_home() -> Path:
    """rawreact's cache folder, where models are joined, data downloaded and llama-server built:
    $XDG_CACHE_HOME/rawreact (by default ~/.cache/rawreact)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rawreact"
