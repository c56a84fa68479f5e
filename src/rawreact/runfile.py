"""Run files: one JSON line per finished question, a manifest beside it, and what reads them back.

`RUN.jsonl` holds one line per finished question; `RUN.jsonl.manifest.json` says how the run was
made (model, prompt, grammar, parameters, data file, and their hashes), holds the few-shot prompt
once for every line, and records each resume. A run interrupted even by SIGKILL resumes where it
stopped: finished questions are kept, a half-written last line is dropped and its question asked
again. While a run writes its file, the file is locked against a second writer.
"""

import hashlib
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path

from rawreact.errors import DataError
from rawreact.methods import Reasoning
from rawreact.record import Trajectory


def write_whole(path: str | Path, text: str, hint: str) -> Path:
    """Write a text file whole or not at all: a temporary file beside it, renamed into place.

    An error names the file and says `hint`, what to do; a file already at `path` is then left as it was.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # A lone surrogate (which a model can write and a run file keeps as a JSON escape) has no UTF-8:
        # it is written as its escape, `\udc80`, which in JSON is the same string and on a page is visible.
        temporary.write_bytes(text.encode("utf-8", "backslashreplace"))
        os.replace(temporary, path)
    except OSError as error:
        raise DataError(f"cannot write {path}: {error.strerror}; {hint}") from None
    finally:
        temporary.unlink(missing_ok=True)  # gone once renamed; removed on any error, Ctrl-C included
    return path


def manifest_path(out: str | Path) -> Path:
    """Where the manifest of the run file `out` lives: RUN.jsonl -> RUN.jsonl.manifest.json.

    The whole file name is kept, so `res.jsonl` and `res.json` never share a manifest.
    """
    out = Path(out)
    return out.with_name(out.name + ".manifest.json")


def legacy_manifest_path(out: str | Path) -> Path:
    """The name rawreact 0.1 gave the manifest of a run file: RUN.jsonl -> RUN.manifest.json."""
    out = Path(out)
    return out.with_name(out.stem + ".manifest.json")


def _legacy_manifest(out: Path) -> Path | None:
    """Where rawreact 0.1 put the manifest of a `.jsonl` run file (RUN.manifest.json), if it is there."""
    legacy = legacy_manifest_path(out)
    return legacy if out.suffix == ".jsonl" and legacy.is_file() else None


def refuse_existing(path: str | Path, force: bool, option: str) -> None:
    """Refuse to replace an existing output file without `force` (the command's --force)."""
    if Path(path).exists() and not force:
        raise DataError(f"{path} exists; choose another {option}, or add --force to replace it")


def _existing_manifest(out: Path) -> Path | None:
    path = manifest_path(out)
    return path if path.exists() else _legacy_manifest(out)


def read_run(path: str | Path) -> tuple[dict | None, list[dict]]:
    """The manifest (None if there is none) and the complete records of a run file.

    A last line without its line break was cut by a crash; it is left out. Each record's
    trajectory gets back the few-shot prompt that the manifest stores once for the whole run.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a folder; give a run file (RUN.jsonl)")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read the run file: {error.strerror}") from None
    manifest = read_manifest(path)
    prompts = (manifest or {}).get("prompts", {})
    return manifest, _records(path, data[: data.rfind(b"\n") + 1], prompts)


def read_manifest(out: str | Path) -> dict | None:
    """The manifest of the run file `out`, or None when it has none."""
    path = _existing_manifest(Path(out))
    if path is None:
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{path}: cannot read the manifest: {error}") from None
    if not isinstance(manifest, dict):
        raise DataError(f"{path}: a manifest is a JSON object; was it edited?")
    for key, kind in (("config", dict), ("prompts", dict)):
        if not isinstance(manifest.get(key, {}), kind):
            raise DataError(f"{path}: its {key!r} must be a JSON object; was it edited? restore it from a backup")
    if not all(isinstance(text, str) for text in manifest.get("prompts", {}).values()):
        raise DataError(f"{path}: its 'prompts' must map hashes to prompt texts; was it edited?")
    return manifest


# What every reader of run files (report, the page, show, compare, export, resume) relies on: each
# field with the types it may have, checked once, where lines are read. `None` in a tuple allows
# null; a key in _OPTIONAL may be missing (lines written before it was recorded), not mistyped.
_NUMBER = (int, float)
_FIELDS: dict[str, tuple] = {
    "id": (str,),
    "question": (str,),
    "answer": (str,),
    "prediction": (str,),
    "em": (*_NUMBER, None),  # null: the question has no gold answer, so no score
    "f1": (*_NUMBER, None),
    "ended": (str,),
    "steps": (int,),
    "model_calls": (int,),
    "invalid_actions": (int,),
    "seconds": _NUMBER,
    "tokens": (dict,),
}
_OPTIONAL: dict[str, tuple] = {
    "method": (str,),
    "branch": (str,),
    "loop": (str, None),
    "fallback_calls": (int,),
    "repeats": (int,),
    "searches": (int,),
    "search_hits": (int,),
    "supported": (bool, None),
    "vote_share": (*_NUMBER, None),
    "task": (str,),
    "label": (str, None),
    "lenient_em": _NUMBER,
}
_CALL = {"text": (str,), "finish_reason": (str,)}
_CALL_OPTIONAL = {
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "evaluated_tokens": (int, None),
    "seconds": _NUMBER,
}
_STEP = {
    "i": (int,),
    "thought": (str, None),
    "action": (list, None),
    "action_text": (str,),
    "observation": (str,),
    "error": (str, None),
    "seconds": _NUMBER,
    "calls": (list,),
}
_STEP_OPTIONAL = {"fallback": (bool,), "repeat_of": (int, None), "note": (str,)}
_TRAJECTORY = {"question": (str,), "prompt": (str,), "answer": (str,), "ended": (str,), "steps": (list,)}
_TRAJECTORY_OPTIONAL = {"loop": (str,), "messages": (list, None), "header": (str,)}
_REASONING = {
    "method": (str,),
    "question": (str,),
    "prompt": (str,),
    "temperature": (*_NUMBER, None),
    "seed": (int, None),
    "ended": (str,),
    "samples": (list,),
}
_REASONING_OPTIONAL = {"seconds": _NUMBER, "header": (str,)}
_KIND_NAMES = {str: "a string", int: "a whole number", float: "a number", dict: "an object", list: "a list"}
_KIND_NAMES |= {bool: "true or false", None: "null"}


def _wrong(data: dict, required: dict, optional: dict, where: str = "") -> str | None:
    """What is wrong with the fields of `data` (missing, or of a type not allowed), or None."""
    for key in required:
        if key not in data:
            return f"has no {where}{key!r}"
    for key, kinds in (required | optional).items():
        if key in data and not _is(data[key], kinds):
            number = int in kinds and float in kinds  # a whole number or not: "a number"
            names = " or ".join(
                "a number" if number and k in _NUMBER else _KIND_NAMES[k] for k in kinds if not (number and k is float)
            )
            return f"has {where}{key!r} = {json.dumps(data[key])[:40]}, which is not {names}"
    return None


def _is(value: object, kinds: tuple) -> bool:
    if value is None:
        return None in kinds
    if isinstance(value, bool):  # JSON's true is no count
        return bool in kinds
    return any(kind is not None and isinstance(value, kind) for kind in kinds)


def _calls_problem(calls: list, where: str) -> str | None:
    for k, call in enumerate(calls, 1):
        if not isinstance(call, dict):
            return f"has {where}call {k} that is not an object"
        problem = _wrong(call, _CALL, _CALL_OPTIONAL, f"{where}call {k} ")
        if problem:
            return problem
        if any((call.get(key) or 0) < 0 for key in ("prompt_tokens", "completion_tokens", "evaluated_tokens")):
            return f"has {where}call {k} with a negative token count"
    return None


def _part_problem(part: str, data: object) -> str | None:
    """What is wrong with a record's trajectory or reasoning part, or None."""
    if not isinstance(data, dict):
        return f"has a {part} that is not an object"
    if part == "reasoning":
        problem = _wrong(data, _REASONING, _REASONING_OPTIONAL)
        for k, sample in enumerate(data.get("samples", []) if problem is None else [], 1):
            if not isinstance(sample, dict) or not _is(sample.get("answer"), (str, None)) or "call" not in sample:
                return f"has sample {k} without an answer (a string or null) and a call"
            problem = problem or _calls_problem([sample["call"]], f"sample {k} ")
        return problem
    problem = _wrong(data, _TRAJECTORY, _TRAJECTORY_OPTIONAL)
    for step in data.get("steps", []) if problem is None else []:
        if not isinstance(step, dict):
            return "has a step that is not an object"
        where = f"step {step.get('i', '?')} "
        problem = _wrong(step, _STEP, _STEP_OPTIONAL, where) or _calls_problem(step["calls"], where)
        action = step["action"] if problem is None else None
        if action is not None and not (len(action) == 2 and all(isinstance(a, str) for a in action)):
            problem = f"has {where}action {json.dumps(action)[:40]}, which is not [verb, argument]"
        if problem:
            return problem
    return problem


def _problem(record: object) -> str | None:
    """What is wrong with a parsed result line, or None."""
    if not isinstance(record, dict):
        return "is not a result line"
    problem = _wrong(record, _FIELDS, _OPTIONAL)
    if problem:
        return problem
    if not all(v is None or (_is(v, (int,)) and v >= 0) for v in record["tokens"].values()):
        return "has 'tokens' that are not whole numbers of at least 0"
    if "trajectory" not in record:
        return "has no 'trajectory'"
    if record.get("trajectory") is None and record.get("reasoning") is None:
        return "has neither a trajectory nor a reasoning part"
    for part, read in _PARTS.items():
        if record.get(part) is None:
            continue
        problem = _part_problem(part, record[part])
        if problem:
            return f"has a {part} that cannot be read ({problem.removeprefix('has ')})"
        try:
            read(record[part])
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            return f"has a {part} that cannot be read ({type(error).__name__}: {error})"
    return None


# The parts of a record that carry a prompt, which the manifest stores once, and their readers.
_PARTS = {"trajectory": Trajectory.from_dict, "reasoning": Reasoning.from_dict}


def _records(path: Path, data: bytes, prompts: dict[str, str]) -> list[dict]:
    records, seen = [], set()
    # Lines end at b"\n" only: str.splitlines() would also break at U+2028, U+0085 and the like,
    # which JSON written with ensure_ascii=False carries raw inside strings.
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise DataError(
                f"{path} line {number} is not a result line; was the file edited? remove that line"
            ) from None
        for part in _PARTS:
            found = record.get(part) if isinstance(record, dict) else None
            if isinstance(found, dict) and "prompt" not in found and "prompt_sha256" in found:
                text = prompts.get(found.pop("prompt_sha256"))
                if text is None:
                    raise DataError(
                        f"{path} line {number}: its prompt is not in the manifest {manifest_path(path).name}; "
                        "restore the manifest that came with the run file"
                    )
                found["prompt"] = text
        problem = _problem(record)
        if problem is not None:
            raise DataError(f"{path} line {number} {problem}; was the file edited? fix or remove that line")
        if record["id"] in seen:
            raise DataError(f"{path} line {number} repeats the question {record['id']!r}; remove one of the two")
        seen.add(record["id"])
        records.append(record)
    return records


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _json_bytes(value: object, **options) -> bytes:
    """`value` as UTF-8 JSON ending in a line break; a string no UTF-8 can hold (a lone surrogate)
    makes the whole text ASCII, with JSON escapes, so it is written and reads back as it was."""
    try:
        return (json.dumps(value, ensure_ascii=False, **options) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(value, **options) + "\n").encode("ascii")


class RunFile:
    """An open run file that results are appended to, each flushed as soon as it is written.

    `RunFile(out, config)` starts a run (refusing to touch an existing one); with `resume=True`
    it continues the run in `out`, whose manifest must have the same `config`. `details` go into
    the manifest without being compared (a data path, a limit); each resume is recorded there.
    `done` holds the records already there. While it is open, the file is locked, so a second
    process cannot write the same run. The few-shot prompt of each record's trajectory is stored
    once, in the manifest, and `read_run` puts it back.
    """

    def __init__(
        self, out: str | Path, config: dict | None = None, *, resume: bool = False, details: dict | None = None
    ) -> None:
        self.path = Path(out)
        self.manifest_path = manifest_path(out)
        self.config, self.details = config or {}, details or {}
        if self.path.is_dir():
            raise DataError(f"{self.path} is a folder; give --out a file name, such as {self.path / 'run.jsonl'}")
        try:
            self._sink = open(self.path, "ab")  # noqa: SIM115 (closed by close())
        except OSError as error:
            raise DataError(f"{self.path}: cannot write results: {error.strerror}; does the folder exist?") from None
        try:
            self._lock()
            self._open(resume)
        except BaseException:
            self._sink.close()
            raise

    def _lock(self) -> None:
        """Hold an exclusive lock on the run file for as long as it is open."""
        try:
            import fcntl
        except ImportError:  # not on this platform: no lock, as before
            return
        try:
            fcntl.flock(self._sink.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DataError(
                f"{self.path} is being written by another rawreact process; wait for it to finish, "
                "or choose another --out"
            ) from None

    def _open(self, resume: bool) -> None:
        existing = self.path.stat().st_size > 0
        if existing and not resume:
            raise DataError(
                f"{self.path} already holds results; pass --resume to finish that run, or choose another --out"
            )
        self.done: dict[str, dict] = {}
        self.manifest: dict = {}
        if existing:
            self._recover()
        else:
            from rawreact import __version__

            created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            self.manifest = {"rawreact": __version__, "created": created, "versions": _versions()}
            self.manifest |= {"run_file": self.path.name, "config": self.config, **self.details, "prompts": {}}
            if resume:  # --resume of a run that was never started starts it, with an empty list of resumes
                self.manifest["resumes"] = []
            self._write_manifest()

    def _write_manifest(self) -> None:
        temporary = self.manifest_path.with_name(self.manifest_path.name + ".tmp")
        try:
            temporary.write_bytes(_json_bytes(self.manifest, indent=2, allow_nan=False))
            os.replace(temporary, self.manifest_path)
        except ValueError as error:
            raise DataError(f"{self.manifest_path}: cannot record a setting in JSON ({error})") from None
        except OSError as error:
            raise DataError(f"{self.manifest_path}: cannot write the manifest: {error.strerror}") from None
        finally:
            temporary.unlink(missing_ok=True)

    def _recover(self) -> None:
        """Read the finished questions, drop a half-written last line, and check the run is the same."""
        found = _existing_manifest(self.path)
        if found is None:
            raise DataError(
                f"{self.path} has no manifest {self.manifest_path.name}, so --resume cannot check it is the same "
                "run; restore the manifest, or start a new run with another --out"
            )
        self.manifest = read_manifest(self.path)
        data = self.path.read_bytes()
        whole = data.rfind(b"\n") + 1
        records = _records(self.path, data[:whole], self.manifest.get("prompts", {}))
        old = self.manifest.get("config", {})
        changed = [f"{key} was {old.get(key)!r}, now {self.config.get(key)!r}" for key in _changed(old, self.config)]
        if changed:
            raise DataError(
                f"--resume would mix two different runs in {self.path}: {'; '.join(changed)}. "
                "Use the same settings, or choose another --out"
            )
        if whole < len(data):  # a crash cut the last line: drop it, so its question runs again
            os.truncate(self.path, whole)
        self.done = {record["id"]: record for record in records}
        resumed = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "done": len(records), **self.details}
        self.manifest = {**self.manifest, "config": self.config, **self.details}
        self.manifest.setdefault("prompts", {})
        self.manifest["resumes"] = [*self.manifest.get("resumes", []), resumed]
        if found != self.manifest_path:  # a rawreact 0.1 manifest: carried over to the new name
            self.manifest["run_file"] = self.path.name
        self._write_manifest()

    def append(self, record: dict) -> None:
        """Write one result line and flush it to the operating system."""
        line = dict(record)
        for part in _PARTS:
            found = record.get(part)
            if isinstance(found, dict) and isinstance(found.get("prompt"), str):
                digest = _sha256(found["prompt"])
                if digest not in self.manifest["prompts"]:  # the manifest holds it before any line refers to it
                    self.manifest["prompts"][digest] = found["prompt"]
                    self._write_manifest()
                line[part] = {k: v for k, v in found.items() if k != "prompt"} | {"prompt_sha256": digest}
        self._sink.write(_json_bytes(line))
        self._sink.flush()
        self.done[record["id"]] = record

    def close(self) -> None:
        """Close the file (releasing its lock); everything appended is already written."""
        self._sink.close()


def _versions() -> dict[str, str | None]:
    """The versions of what decides a run's numbers, besides rawreact's own."""
    found: dict[str, str | None] = {"python": sys.version.split()[0]}
    for package in ("llama-cpp-python", "numpy"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


# Settings that name a file, and the key of the file's content hash: a run that names the same
# content by another path is the same run.
_BY_CONTENT = {
    "model": "model_sha256",
    "prompt": "prompt_sha256",
    "grammar": "grammar_sha256",
    "passages": "passages_sha256",
}
_ADDED = ("model_sha256", "grammar_sha256", "shuffle_seed", "shuffle_range")  # settings older runs did not record
# Settings added after rawreact 0.1, and the value every run made before them had: ReAct with no
# samples (the methods), the tolerant loop, no guardrails.
_BEFORE = dict.fromkeys(
    ("samples", "sample_temperature", "backoff_prompt", "backoff_prompt_sha256", "passages", "passages_sha256")
) | {
    "method": "react",
    "loop": "tolerant",
    "repeats": "off",
    "budget": None,
}


def _changed(old: dict, new: dict) -> list[str]:
    changed = []
    for key in sorted(old.keys() | new.keys()):
        if key in _ADDED and key not in old:
            continue
        if key in _BEFORE and key not in old and new.get(key) == _BEFORE[key]:
            continue
        if key in _BY_CONTENT.values() and new.get(key) is None and new.get("model") == old.get("model"):
            continue  # the file is gone: it cannot be checked, and nothing can run on it either
        digest = _BY_CONTENT.get(key)
        if digest and old.get(digest) is not None and old.get(digest) == new.get(digest):
            continue
        if old.get(key) != new.get(key):
            changed.append(key)
    return changed
