"""The Python files an `--env` module runs from: read once, hashed, and executed from those very bytes.

Python would import a module from its `__pycache__/*.pyc` when the header matches the source's mtime and
size (as `cp -a`, tar and zip keep them), or unchecked, so a digest of `MODULE.py` alone says nothing of
what ran; and a module it imports can change between runs. Here the files are read into a `Snapshot`,
which is what a run's manifest records (`env_files`, each file's SHA-256), what a rerun or resume compares,
and what an import hook serves: a module whose file is in the snapshot is compiled from the snapshot's
bytes, and no `.pyc` is read or written for it.

What is checked: for a module found in a folder (the current one, or one the spec names), every `.py` file
in that folder and in the packages below it (every folder an import can name, a namespace package without an
`__init__.py` too); for an installed module, its
top-level package's `.py` files (a plugin: the files its distribution installed). Installed packages it
imports (numpy, rawreact) and compiled extensions are not.
"""

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.errors import EnvironmentSetupError

MAX_FILES = 2000  # Python files a snapshot may hold: a folder with more is not one module's home
MAX_BYTES = 64 << 20
SKIPPED = {"__pycache__", "node_modules", "site-packages"}


@dataclass(frozen=True)
class Snapshot:
    """The Python files a module runs from: their folder and their bytes, by absolute path."""

    root: Path
    files: dict[Path, bytes]
    module: Path  # the module's own file, among `files`

    @property
    def digests(self) -> dict[str, str]:
        """Each file's SHA-256, by its path under the root (what a manifest records)."""
        return {self.name(path): hashlib.sha256(data).hexdigest() for path, data in sorted(self.files.items())}

    @property
    def module_sha256(self) -> str:
        """The SHA-256 of the module's own file (what manifests recorded before `env_files`)."""
        return hashlib.sha256(self.files[self.module]).hexdigest()

    def name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)

    def changed(self, recorded: dict[str, str]) -> list[str]:
        """The files that differ from a recorded `digests`: changed, added or gone, by name."""
        now = self.digests
        return sorted(name for name in now.keys() | recorded.keys() if now.get(name) != recorded.get(name))


def snapshot(located: Path, module: str, installed: list[Path] | None = None) -> Snapshot:
    """Read the files `module` (found at `located`) runs from; `installed`: a plugin's distribution's files."""
    located = located.resolve()
    depth = len(module.split("."))
    if located.name == "__init__.py":
        top = located.parents[depth - 1]  # the top-level package's folder
    else:
        top = located.parents[depth - 2] if depth > 1 else None
    root = top.parent if top is not None else located.parent
    if installed is not None:
        paths = [path.resolve() for path in installed if path.suffix == ".py" and path.is_file()]
    elif _is_site(root):  # an installed module: its own package, not the whole of site-packages
        paths = sorted(top.rglob("*.py")) if top is not None else [located]
    else:
        paths = [*sorted(root.glob("*.py")), *_packages(root)]
    paths = [path for path in paths if not SKIPPED & set(path.parts)]
    if located not in paths:
        paths.append(located)
    if len(paths) > MAX_FILES:
        raise EnvironmentSetupError(
            f"--env {module}: its folder {root} holds {len(paths)} Python files, and rawreact checks every one of "
            f"them (at most {MAX_FILES}); put the module and what it imports in a folder of their own"
        )
    files, total = {}, 0
    for path in paths:
        try:
            files[path] = path.read_bytes()
        except OSError as error:
            raise EnvironmentSetupError(f"--env {module}: cannot read {path}: {error.strerror or error}") from None
        total += len(files[path])
        if total > MAX_BYTES:
            raise EnvironmentSetupError(
                f"--env {module}: the Python files of {root} come to over {MAX_BYTES >> 20} MB; put the module "
                "and what it imports in a folder of their own"
            )
    return Snapshot(root, files, located)


def _is_site(folder: Path) -> bool:
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    return folder.name in ("site-packages", "dist-packages") or str(folder) in sites


def _packages(root: Path) -> list[Path]:
    """The `.py` files of the packages below `root`: every folder an import could name (its name an identifier),
    with an `__init__.py` or without one (a namespace package: `import tools.helper` finds `tools/helper.py`)."""
    found = []
    for folder, names, files in os.walk(root):
        here = Path(folder)
        names[:] = sorted(n for n in names if n.isidentifier() and n not in SKIPPED)
        if here != root:
            found.extend(here / name for name in sorted(files) if name.endswith(".py"))
    return found


class SnapshotFinder(importlib.abc.MetaPathFinder):
    """Serves the modules whose files are in a snapshot from its bytes; refuses compiled code in its folder."""

    def __init__(self, taken: Snapshot, search: list[str] | None = None) -> None:
        self.taken, self.search = taken, search

    def find_spec(self, name, path=None, target=None):
        # a top-level name is looked up where the module was found (a plugin: never in the current folder)
        found = importlib.machinery.PathFinder.find_spec(name, path if path is not None else self.search)
        if found is None or not found.origin or not found.has_location:
            return None
        origin = Path(found.origin).resolve()
        data = self.taken.files.get(origin)
        if data is None:
            if origin.suffix == ".pyc" and origin.is_relative_to(self.taken.root):
                raise ImportError(f"{origin}: compiled code beside an --env module is not run; remove it")
            return None
        made = importlib.machinery.ModuleSpec(name, _BytesLoader(data, str(origin)), origin=str(origin))
        if found.submodule_search_locations is not None:
            made.submodule_search_locations = list(found.submodule_search_locations)
        made.has_location = True
        return made


class _BytesLoader(importlib.abc.Loader):
    """Executes a module from bytes read before: compiled here, with no `.pyc` read or written."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.path = data, path

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        module.__file__ = self.path
        exec(compile(self.data, self.path, "exec", dont_inherit=True), module.__dict__)  # noqa: S102

    def get_source(self, name: str) -> str:
        return importlib.util.decode_source(self.data)


def serve(taken: Snapshot, search: list[str] | None = None) -> None:
    """Import the snapshot's modules from its bytes from now on (an earlier snapshot of its folder is replaced),
    top-level names looked up in `search` (None: sys.path)."""
    sys.meta_path[:] = [
        finder
        for finder in sys.meta_path
        if not (isinstance(finder, SnapshotFinder) and finder.taken.root == taken.root)
    ]
    sys.meta_path.insert(0, SnapshotFinder(taken, search))
