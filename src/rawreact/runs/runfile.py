"""Run files: one JSON line per finished question, a manifest beside it, and what reads them back.

`RUN.jsonl` holds one line per finished question; `RUN.jsonl.manifest.json` says how the run was
made (model, prompt, grammar, parameters, data file, and their hashes), holds the few-shot prompt
once for every line, and records each resume. A run interrupted even by SIGKILL resumes where it
stopped: finished questions are kept, a half-written last line is dropped and its question asked
again. While a run writes its file, the file is locked against a second writer.

One room: writing a run file, taking it up again on a resume (and refusing one of another run) and keeping its
manifest (each sitting's code, CPU and CPU seconds) read and write the same two files under the one lock.
"""

import json
import os
import resource
import time
from pathlib import Path

from rawreact.config.settings import KEYS, option
from rawreact.core.errors import DataError
from rawreact.core.folders import make_parents, remove_made
from rawreact.core.resources import installed_versions, source_fingerprint, source_named
from rawreact.models.cores import cpu_facts
from rawreact.models.specs import SERVERS, model_origin, without_place
from rawreact.runs.records import (
    PARTS,
    existing_manifest,
    manifest_path,
    parse_records,
    read_manifest,
    text_sha256,
    trials_path,
)


def write_whole(path: str | Path, text: str, hint: str) -> Path:
    """Write a text file whole or not at all: a temporary file beside it, renamed into place.

    An error names the file and says `hint`, what to do; a file already at `path` is then left as it was.
    """
    path = Path(path)
    make_parents(path)
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


def refuse_existing(path: str | Path, force: bool, option: str) -> None:
    """Refuse to replace an existing output file without `force` (the command's --force)."""
    if Path(path).exists() and not force:
        raise DataError(f"{path} exists; choose another {option}, or add --force to replace it")


def json_bytes(value: object, **options) -> bytes:
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
        made = make_parents(self.path)
        fresh = not self.path.exists()
        try:
            self._sink = open(self.path, "ab")  # noqa: SIM115 (closed by close())
        except OSError as error:
            remove_made(made)
            raise DataError(f"{self.path}: cannot write results: {error.strerror}") from None
        try:
            self._lock()
        except BaseException:
            # Another process holds the file: it is that process's, even when it is empty and this one saw no file
            # a moment ago (two runs started together), so nothing here is removed.
            self._sink.close()
            raise
        try:
            self._open(resume)
            self._cpu_started = _cpu_now()
        except BaseException:
            self._sink.close()
            # A run that never started leaves no file behind (a Ctrl-C before its manifest was written left an empty
            # run file without one), nor a folder it made.
            if made:
                self.path.unlink(missing_ok=True)
                self.manifest_path.unlink(missing_ok=True)
                remove_made(made)
            elif fresh and self.path.is_file() and self.path.stat().st_size == 0:
                self.path.unlink()
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
        refuse_start(self.path, resume)
        self.done: dict[str, dict] = {}
        self.manifest: dict = {}
        self.other_source: str | None = None  # a resume's note when the code differs from the last sitting's
        if existing:
            self._recover()
        else:
            from rawreact import __version__

            created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            self.manifest = {
                "rawreact": __version__,
                "created": created,
                "versions": installed_versions("llama-cpp-python", "numpy"),
                "source": source_fingerprint(),  # the code itself: 0.2.0 names many commits
                # The CPU by family, model and vector extensions: one model name covers CPUs 3x apart.
                "cpu": cpu_facts(),
                "model_origin": model_origin(self.config.get("model")),
                "command": COMMAND,  # the command line that made the run (None from Python)
            }
            self.manifest |= {"run_file": self.path.name, "config": self.config, **self.details, "prompts": {}}
            if resume:  # --resume of a run that was never started starts it, with an empty list of resumes
                self.manifest["resumes"] = []
            self._write_manifest()

    def _write_manifest(self) -> None:
        temporary = self.manifest_path.with_name(self.manifest_path.name + ".tmp")
        try:
            temporary.write_bytes(json_bytes(self.manifest, indent=2, allow_nan=False))
            os.replace(temporary, self.manifest_path)
        except ValueError as error:
            raise DataError(f"{self.manifest_path}: cannot record a setting in JSON ({error})") from None
        except OSError as error:
            raise DataError(f"{self.manifest_path}: cannot write the manifest: {error.strerror}") from None
        finally:
            temporary.unlink(missing_ok=True)

    def _recover(self) -> None:
        """Read the finished questions, drop a half-written last line, and check the run is the same."""
        found = existing_manifest(self.path)
        self.manifest = refuse_resume(self.path, self.config)
        data = self.path.read_bytes()
        whole = data.rfind(b"\n") + 1
        records = parse_records(self.path, data[:whole], self.manifest.get("prompts", {}))
        if whole < len(data):  # a crash cut the last line: drop it, so its question runs again
            os.truncate(self.path, whole)
        self.done = {record["id"]: record for record in records}
        source = source_fingerprint()
        # What this sitting runs on, as the start records it: the lines it adds were made by this code, CPU and build.
        resumed = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "done": len(records), "command": COMMAND,
                   "source": source, "cpu": cpu_facts(), "versions": installed_versions("llama-cpp-python", "numpy"),
                   **self.details}  # fmt: skip
        sources = [self.manifest.get("source")] + [r.get("source") for r in self.manifest.get("resumes", [])]
        last = next((s for s in reversed(sources) if isinstance(s, dict) and "sha256" in s), None)
        if records and last is not None and last["sha256"] != source["sha256"]:
            self.other_source = (
                f"{self.path}'s {len(records)} finished records were written by other rawreact code "
                f"({source_named(last)}) than this sitting runs ({source_named(source)}); its manifest lists both"
            )
        self.manifest = {**self.manifest, "config": self.config, **self.details}
        self.manifest.setdefault("prompts", {})
        self.manifest["resumes"] = [*self.manifest.get("resumes", []), resumed]
        if found != self.manifest_path:  # a rawreact 0.1 manifest: carried over to the new name
            self.manifest["run_file"] = self.path.name
        self._write_manifest()

    def append(self, record: dict) -> None:
        """Write one result line and flush it to the operating system."""
        line = dict(record)
        for part in PARTS:
            found = record.get(part)
            if isinstance(found, dict) and isinstance(found.get("prompt"), str):
                digest = text_sha256(found["prompt"])
                if digest not in self.manifest["prompts"]:  # the manifest holds it before any line refers to it
                    self.manifest["prompts"][digest] = found["prompt"]
                    self._write_manifest()
                line[part] = {k: v for k, v in found.items() if k != "prompt"} | {"prompt_sha256": digest}
        self._sink.write(json_bytes(line))
        self._sink.flush()
        self.done[record["id"]] = record

    def set_counts(self, key: str, counts: dict[str, dict[str, int]]) -> None:
        """Record counts worked out from the whole run file (such as a fleet's episodes per server) under
        `key`, and write the manifest."""
        self.manifest[key] = counts
        self._write_manifest()

    def close(self) -> None:
        """Close the file (releasing its lock); everything appended is already written. The manifest adds this
        sitting's CPU seconds (this process's and its children's, the programs it ran among them, while the file
        was open) to `cpu_seconds`, with how many sittings it counts: a sitting killed outright adds none."""
        try:
            if not self._sink.closed:
                spent = _cpu_now() - self._cpu_started
                before = self.manifest.get("cpu_seconds") or {}
                self.manifest["cpu_seconds"] = {"seconds": round(before.get("seconds", 0.0) + spent, 3),
                                                "sittings": before.get("sittings", 0) + 1}  # fmt: skip
                self._write_manifest()
        except (DataError, AttributeError, TypeError):
            pass  # the records are written; a manifest that cannot take the figure keeps what it had
        finally:
            self._sink.close()


def _cpu_now() -> float:
    """The CPU seconds of this process and of its children that ended, so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# The command line of the `rawreact` command under way (`cli.app.main` sets it), which a manifest records; None when
# the run is made from Python.
COMMAND: list[str] | None = None


# Settings that name a file, and the key of the file's content hash: a run that names the same
# content by another path is the same run.
_BY_CONTENT = {
    "model": "model_sha256",
    "prompt": "prompt_sha256",
    "grammar": "grammar_sha256",
    "passages": "passages_sha256",
    "reflect_prompt": "reflect_prompt_sha256",
}
_ADDED = (
    "model_sha256",
    "grammar_sha256",
    "shuffle_seed",
    "shuffle_range",
    "env_files",
)  # settings older runs did not record
# Settings added after rawreact 0.1, and the value every run made before them had: ReAct with no
# samples (the methods), the tolerant loop, no guardrails, no drafts.
_BEFORE = dict.fromkeys(
    ("samples", "sample_temperature", "backoff_prompt", "backoff_prompt_sha256", "passages", "passages_sha256")
    + ("shard",)
) | {
    "method": "react",
    "loop": "tolerant",
    "repeats": "off",
    "budget": None,
    "drafts": 0,
    "verb_timeout": 60.0,  # an --env run's bound on its verbs: before it, a verb took as long as it took
}
# A setting whose value in runs made before it was recorded depends on another: the call stop, on the loop
# (runs made before it stopped every step's call at the observation alone).
_BEFORE_BY = {"call_stop": ("loop", lambda loop: "observation" if loop in ("tolerant", "reference") else None)}


# Settings compared only when both runs recorded them: the identity a server gave (`model_served`), which
# a run loaded after its run file was opened (a comparison's variant) does not have.
_WHEN_BOTH = ("model_served",)


# What a manifest records beside the settings, in words, for a refusal to say what changed.
_WORDS = {
    "call_stop": (
        "where a step's call stops",
        "at the observation line alone (rawreact 0.1.0; from 0.2.0 also once the action line is complete)",
    ),
}


def refuse_start(path: Path, resume: bool) -> None:
    """Refuse to start a run in a file that holds one already (or beside a Reflexion run's trials under way)
    without `resume`: `RunFile` says so as it opens, and a run plan before anything loads (`runs.plan`)."""
    if not resume and path.is_file() and path.stat().st_size > 0:
        raise DataError(f"{path} already holds results; pass --resume to finish that run, or choose another --out")
    kept = trials_path(path)
    if not resume and kept.is_file() and kept.stat().st_size > 0:  # a Reflexion run killed in its first question
        raise DataError(
            f"{path} holds no finished question yet, but {kept.name} beside it keeps the trials of one "
            "under way; pass --resume to continue them, or choose another --out (or remove both files to "
            "start over)"
        )


def refuse_resume(path: Path, config: dict) -> dict:
    """The manifest of the run in `path` (which holds results), refused when it is missing, edited, or made with
    another `config` than the one a resume would add to it. A plan checks before the model loads, without the
    served model's part of the config, which it does not know yet (`_WHEN_BOTH`); `RunFile` again with it."""
    manifest_file = manifest_path(path)
    if existing_manifest(path) is None:
        raise DataError(
            f"{path} has no manifest {manifest_file.name}, so --resume cannot check it is the same "
            "run; restore the manifest, or start a new run with another --out"
        )
    manifest = read_manifest(path)
    old = manifest.get("config", {})
    keys = changed_settings(old, config)
    edited = [key for key in keys if _retyped(old.get(key), config.get(key))]
    if edited:  # a value of a type rawreact never writes there: the manifest was changed by hand
        said = "; ".join(f"{key} is {old[key]!r}, where rawreact writes {config[key]!r}" for key in edited)
        raise DataError(f"{manifest_file}: {said}: was the manifest edited? restore it, or choose another --out")
    changed = [_said(key, old, config) for key in keys]
    if changed:
        from rawreact import __version__

        made_by = manifest.get("rawreact")
        if isinstance(made_by, str) and made_by != __version__:
            todo = (
                f"The run was made by rawreact {made_by}, and this is {__version__}: finish it with the version "
                f"that made it (pip install 'rawreact=={made_by}'), or start a new run with another --out"
            )
        else:
            todo = "Use the same settings, or choose another --out"
        raise DataError(f"--resume would mix two different runs in {path}: {'; '.join(changed)}. {todo}")
    return manifest


# The options behind the manifest's values that are not settings of their own name (a program method's).
_FLAGS = {
    "iterations": "--trials, or --iterations for lats", "program_samples": "--samples",
    "program_tests": "--number-of-tests", "program_children": "--lats-samples",
    "program_temperature": "--sample-temperature, or --lats-temperature for lats",
}  # fmt: skip


def _said(key: str, old: dict, new: dict) -> str:
    """A change of one recorded value, in words, with the option that sets it: `max_steps was 7, now 5
    (--max-steps)`."""
    if key not in _WORDS:
        flag = _FLAGS.get(key) or (option(key) if key in KEYS else None)
        return f"{key} was {old.get(key)!r}, now {new.get(key)!r}" + (f" ({flag})" if flag else "")
    words, before = _WORDS[key]
    was = before if old.get(key) is None else repr(old.get(key))
    return f"{words} was {was}, now {new.get(key)!r}"


def changed_settings(old: dict, new: dict) -> list[str]:
    """The keys of a manifest's config that differ between two runs: a file named by another path with the
    same content, a setting older runs did not record at its value then, and a served model named by where
    it ran (a server's URLs: shards on two servers, a fleet reordered) are not a difference."""
    changed = []
    for key in sorted(old.keys() | new.keys()):
        if key in _ADDED and key not in old:
            continue
        if key in _WHEN_BOTH and (old.get(key) is None or new.get(key) is None):
            continue
        if key == "model" and _same_model(old.get(key), new.get(key)):
            continue
        if key in _BEFORE and key not in old and new.get(key) == _BEFORE[key]:
            continue
        if key in _BEFORE_BY and key not in old:
            other, then = _BEFORE_BY[key]
            if new.get(key) == then(old.get(other, "tolerant")):  # None (no steps) is compared as any value
                continue
        if key in _BY_CONTENT.values() and new.get(key) is None and new.get("model") == old.get("model"):
            continue  # the file is gone: it cannot be checked, and nothing can run on it either
        digest = _BY_CONTENT.get(key)
        if digest and old.get(digest) is not None and old.get(digest) == new.get(digest):
            continue
        if old.get(key) != new.get(key):
            changed.append(key)
    return changed


def _same_model(old: object, new: object) -> bool:
    """Whether two model specs name one model, wherever it was served. A server's spec that names no model
    (the one it serves) matches one that names it: what the server said it serves (`model_served`) decides."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return False
    old, new = without_place(old), without_place(new)
    if old == new:
        return True
    (kind, _, name), (other, _, named) = old.partition(":"), new.partition(":")
    return kind == other and kind in SERVERS and not (name and named)


def _retyped(old: object, new: object) -> bool:
    """Whether a recorded value has another type than the one the same setting has now (`'7'` for 7): no
    run writes that, so the manifest was edited. None (not set) and a number's int or float are not."""
    if old is None or new is None:
        return False
    numbers = (int, float)
    if (
        isinstance(old, numbers)
        and isinstance(new, numbers)
        and not isinstance(old, bool)
        and not isinstance(new, bool)
    ):
        return False
    return type(old) is not type(new)
