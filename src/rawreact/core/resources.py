"""Where the shipped data files (`prompts/`, `envs/`) live, installed or in a checkout."""

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
