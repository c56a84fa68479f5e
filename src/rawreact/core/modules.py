"""Where a user's code is: an `--env` spec read into its folder, module and function, and the module's
source file found without importing (so without running) anything.

A spec is `module:function` (`myverbs:with_calculate`, `mypkg.envs:make`), found first in the current
folder and then where Python finds installed modules; or with a folder before the module
(`tools/myverbs:with_calculate`, `./myverbs:f`), found first in that folder; or a file
(`tools/myverbs.py:f`). A settings file's spec is read with the file's own folder before it. A bare
name (`glossary`) is a plugin: an installed package's entry point in the group `rawreact.environments`,
found from the installed packages' metadata (nothing is imported to find it), and looked up among the
installed modules only, never in the current folder.
"""

import importlib.machinery
import importlib.metadata
import json
import re
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModuleSpec:
    """An `--env` spec read: the folder it is looked up in first (None: the current folder), the module's
    dotted name, and the function's name."""

    folder: str | None
    module: str
    function: str
    plugin: tuple[str, str, str] | None = None  # an installed plugin's (name, package, version)

    @property
    def root(self) -> Path:
        """The folder the module is looked up in before the installed ones (none for a plugin: installed only)."""
        return Path(self.folder or ".").absolute()

    @property
    def search(self) -> list[str]:
        """Where its module is looked for, in order: its folder, then the installed modules."""
        if self.plugin is None:
            return [str(self.root), *sys.path]
        here = Path.cwd().resolve()  # `python -m` puts it first: a plugin is never a file the user stands beside
        return [entry for entry in sys.path if entry and Path(entry).resolve() != here]

    @property
    def named(self) -> str:
        """What a command line names: a plugin's name, else `module:function` without its folder."""
        return self.plugin[0] if self.plugin is not None else f"{self.module}:{self.function}"

    def locate(self) -> Path | None:
        """The module's source file (a package's `__init__.py`), found as an import would find it, without
        importing anything: no code of the module or its packages runs. None when nothing is found."""
        search = self.search
        parts = self.module.split(".")
        found = None
        for depth in range(len(parts)):
            name = ".".join(parts[: depth + 1])
            try:
                found = importlib.machinery.PathFinder.find_spec(name, search)
            except (ImportError, ValueError):
                return None
            if found is None:
                return None
            search = list(found.submodule_search_locations or [])
        origin = getattr(found, "origin", None)
        return Path(origin) if origin and Path(origin).is_file() else None


def module_problem(spec: str) -> str | None:
    """What stops `spec` from naming a module and a function, in words, or None."""
    try:
        read_module(spec)
    except ValueError as error:
        return str(error)
    return None


def read_module(spec: str) -> ModuleSpec:
    """`[FOLDER/]module:function` or `[FOLDER/]file.py:function` -> ModuleSpec; a spec that names no module
    and function is a ValueError saying what to give."""
    where, colon, function = spec.rpartition(":")
    where, function = where.strip(), function.strip()
    example = "package.module:factory, as in myverbs:with_calculate"
    if not colon and _PLUGIN.fullmatch(spec.strip()):
        return plugin(spec.strip())
    if not colon or not where or not function:
        raise ValueError(f"env={spec!r} (--env) must be an import path, {example}")
    folder = None
    if "/" in where or "\\" in where or where.endswith(".py"):
        path = Path(where)
        folder = str(path.parent)
        where = path.stem if path.suffix == ".py" else path.name
    if not all(part.isidentifier() for part in where.split(".")):
        raise ValueError(
            f"env={spec!r} (--env): {where!r} is not a module's name (letters, digits and _, dotted); {example}"
        )
    if not function.isidentifier():
        raise ValueError(f"env={spec!r} (--env): {function!r} is not a function's name; {example}")
    return ModuleSpec(folder, where, function)


PLUGINS = "rawreact.environments"  # the entry-point group an installed package declares environments under
_PLUGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def plugins() -> list[tuple[str, str, str, str]]:
    """The installed plugins, as (name, `module:function`, package, version), by name; none is imported."""
    found = {}
    for point in importlib.metadata.entry_points(group=PLUGINS):
        dist = getattr(point, "dist", None)
        package = dist.metadata["Name"] if dist is not None else "?"
        found.setdefault(point.name, (point.name, point.value, package, dist.version if dist is not None else "?"))
    return [found[name] for name in sorted(found)]


def plugin(name: str) -> ModuleSpec:
    """The installed plugin of that name, read from its package's metadata; a ValueError when none is."""
    for found, value, package, version in plugins():
        if found == name:
            module, _, function = value.partition(":")
            if not module or not function:
                raise ValueError(f"plugin {name} of {package} {version}: its entry point {value!r} names no function")
            return ModuleSpec(None, module.strip(), function.strip(), (name, package, version))
    installed = ", ".join(p[0] for p in plugins()) or "none"
    raise ValueError(
        f"env={name!r} (--env): no installed plugin is named {name} (installed: {installed}; `rawreact plugins` "
        "lists them); otherwise it must be an import path, package.module:factory, as in myverbs:with_calculate"
    )


def installed_files(spec: ModuleSpec, located: Path) -> list[Path] | None:
    """The files a plugin's distribution installed, with the module found at `located` among them (None for an
    editable install, whose files are its project's folder); a ValueError when the module lies outside them."""
    name, package, version = spec.plugin
    for dist in importlib.metadata.distributions(name=package):
        if dist.version != version:
            continue
        editable = _editable_folder(dist)
        if editable is not None:
            if located.resolve().is_relative_to(editable):
                return None
            continue
        files = [Path(dist.locate_file(file)).resolve() for file in dist.files or ()]
        if located.resolve() in files:
            return files
    raise ValueError(
        f"plugin {name}: its module {spec.module} was found at {located}, which is not among the files "
        f"{package} {version} installed; remove that file, or reinstall {package}"
    )


def _editable_folder(dist) -> Path | None:
    try:
        said = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    url = said.get("url", "") if isinstance(said, dict) else ""
    if not (isinstance(said.get("dir_info"), dict) and said["dir_info"].get("editable") and url.startswith("file://")):
        return None
    return Path(urllib.parse.unquote(url.removeprefix("file://"))).resolve()
