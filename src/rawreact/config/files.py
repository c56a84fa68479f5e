"""Settings files: a TOML file of settings (`rawreact run --config run.toml`), or a finished run's
manifest (`--config RUN.jsonl.manifest.json`, or the run file itself), which records the settings
it ran with.

A TOML file holds settings by their names (the `Settings` fields; `max-steps` and `max_steps` alike,
`exemplars` for `k`), at the top level. Paths in a file are relative to the file's folder. Each
key and value is checked here, so a mistake is one line naming the file, the key and what is
allowed, before anything is loaded.
"""

import difflib
import json
import sys
from pathlib import Path

from rawreact.config.settings import KEYS, PATHS, Settings, kind_text, value_problem
from rawreact.core.errors import DataError
from rawreact.core.folders import is_named_data, split_named
from rawreact.core.modules import read_module

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli is the same parser, before it joined the standard library
    import tomli as tomllib

ALIASES = {"exemplars": "k", "ollama_host": "host"}


def read_settings(path: str | Path) -> dict:
    """The settings a TOML file or a run manifest gives, by key, each checked alone (not yet together)."""
    path = Path(path)
    if path.suffix == ".jsonl":  # a run file stands for its manifest
        if not Path(f"{path}.manifest.json").is_file():
            raise DataError(
                f"{path}: no manifest beside this run file ({path.name}.manifest.json) to read settings from"
            )
        path = Path(f"{path}.manifest.json")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such settings file; give a TOML file or a run's manifest") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read it: {error.strerror}") from None
    if path.suffix == ".json":
        values = _manifest_settings(path, data)
    else:
        try:
            values = tomllib.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise DataError(f"{path}: not UTF-8 text, so not a TOML settings file") from None
        except tomllib.TOMLDecodeError as error:
            raise DataError(f"{path}: not valid TOML: {error}") from None
    return _checked(path, values)


def _manifest_settings(path: Path, data: bytes) -> dict:
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise DataError(f"{path}: not JSON, so not a run manifest (a TOML settings file ends in .toml)") from None
    if not isinstance(manifest, dict):
        raise DataError(f"{path}: a manifest is a JSON object; was it edited? restore it from a backup")
    settings = manifest.get("settings")
    if settings is None:
        raise DataError(
            f"{path}: this manifest records no settings (a run made before rawreact recorded them, or the "
            "manifest was edited); rerun with the flags its 'config' lists"
        )
    if not isinstance(settings, dict):
        raise DataError(f"{path}: its 'settings' must be a JSON object; was it edited? restore it from a backup")
    return _left_out_then(settings, manifest.get("config"))


# Counts a program method reads as "left out" when None, which before rawreact 8641198 had the question methods'
# defaults instead: the settings value a program run's manifest then recorded for "left out", and the config key
# that holds what the run really took.
_COUNTS_BEFORE = {"max_tokens": (100, "max_tokens"), "trials": (7, "iterations"), "iterations": (30, "iterations"),
                  "lats_temperature": (1.0, "program_temperature")}  # fmt: skip


def _left_out_then(settings: dict, config: object) -> dict:
    """A manifest's settings as a rerun should read them: in a program run's manifest made before its counts could
    be left out, a count at the question methods' default whose run took another value was left out (so a rerun
    takes the method's own again, as the run did)."""
    if not isinstance(config, dict) or "program_prompts" not in config:
        return settings
    read = dict(settings)
    for key, (before, taken) in _COUNTS_BEFORE.items():
        if read.get(key) == before and taken in config and config[taken] != before:
            read[key] = None
    return read


def _checked(path: Path, values: dict) -> dict:
    checked, beside = {}, _beside(path)
    for raw, value in values.items():
        key = ALIASES.get(raw.replace("-", "_"), raw.replace("-", "_"))
        if key not in KEYS:
            kind = "a table" if isinstance(value, dict) else "a key"
            near = difflib.get_close_matches(key, [*KEYS, *ALIASES], n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise DataError(f"{path}: unknown setting {raw!r} ({kind}); {hint}the settings are {', '.join(KEYS)}")
        if key in checked:
            raise DataError(f"{path}: {raw!r} sets {key} a second time")
        if key == "grammar" and value == "off":
            value = None
        if isinstance(value, (dict, list)):
            what = "table" if isinstance(value, dict) else "list"
            raise DataError(f"{path}: {raw} must be {kind_text(key)}, not a {what}")
        problem = value_problem(key, value)
        if problem:
            raise DataError(f"{path}: {problem}")
        if key in PATHS and isinstance(value, str):
            value = _file_of(value, beside)
        if key == "model":
            value = _model_file(value, beside)
        if key == "env" and path.suffix != ".json":  # a TOML file's module is looked up beside it, as its files
            value = _env_beside(value, path.parent)
        checked[key] = value
    return checked


def _env_beside(spec: str, folder: Path) -> str:
    """A TOML file's `env` spec with the file's folder before it (`conf/helpers:make`), so that its module is
    looked up beside the file first; one that names a folder of its own has it read from the file's folder. An
    installed plugin's name stays as it is: it is looked up among the installed modules only."""
    where = read_module(spec)
    if where.plugin is not None:
        return spec
    inside = folder / (where.folder or ".")
    return where.named if inside == Path(".") else f"{inside.as_posix()}/{where.named}"


def is_manifest(path: str | Path) -> bool:
    """Whether a settings file is a run's manifest (or the run file it stands beside), not a TOML file a user
    wrote: what a manifest names (code, a cluster) is used only when the command line names it too."""
    return Path(path).suffix in (".json", ".jsonl")


def recorded_env(path: str | Path) -> tuple[str, str | None, dict | None] | None:
    """The `--env` a run's manifest (or the run file it stands beside) records, with its source's SHA-256 and its
    folder's Python files' (`env_files`, in newer manifests), or None when it records none: code a manifest
    names runs only when the command line names it too."""
    path = Path(path)
    manifest = Path(f"{path}.manifest.json") if path.suffix == ".jsonl" else path
    if manifest.suffix != ".json":
        return None
    try:
        data = json.loads(manifest.read_bytes())
        config, settings = data.get("config") or {}, data.get("settings") or {}
    except (OSError, ValueError, AttributeError):
        return None  # read_settings says what is wrong with the file
    env = settings.get("env") if isinstance(settings, dict) else None
    if not isinstance(env, str):
        return None
    digest = config.get("env_sha256") if isinstance(config, dict) else None
    files = config.get("env_files") if isinstance(config, dict) else None
    return env, digest if isinstance(digest, str) else None, files if isinstance(files, dict) else None


def _beside(settings_file: Path):
    """Where a path in a settings file points, seen from the current folder: relative to the file's folder."""
    return lambda name: settings_file.parent / Path(name).expanduser()  # an absolute path stays as it is


def _absolute(name: str) -> Path:
    return Path(name).expanduser().absolute()


def _file_of(value: str, where) -> str:
    """A path setting with its file passed through `where`; `NOTEBOOK.ipynb#NAME` and `FILE.py#NAME` keep
    their `#NAME` (split as the prompt reader splits them); empty (no instruction) stays."""
    if not value or is_named_data(value):  # a simulator's episodes (ScienceWorld's) are named, not read from a file
        return value
    file, name = split_named(value)
    return str(where(file)) + ("" if name is None else f"#{name}")


def manifest_settings(settings: Settings) -> dict:
    """The settings a manifest records: every one, with paths made absolute, so a rerun from another
    folder reads the same files (their hashes, in the manifest's config, tell if they changed)."""
    recorded = settings.to_dict()
    for key in PATHS:
        if recorded[key] is not None:
            recorded[key] = _file_of(recorded[key], _absolute)
    recorded["model"] = _model_file(recorded["model"], _absolute)
    return recorded


def _model_file(model: str, where) -> str:
    """A model spec with its file (a .gguf path, or a scripted model's file) passed through `where`."""
    if model.startswith("scripted:"):
        return "scripted:" + str(where(model.removeprefix("scripted:")))
    if model.endswith(".gguf") and not model.startswith("hf:"):  # hf:ORG/REPO:FILE.gguf names no local file
        return str(where(model))
    return model
