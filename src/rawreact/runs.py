"""Runs over many questions: one JSON line per question, written as it finishes, and a manifest.

A run file `RUN.jsonl` holds one line per finished question; `RUN.manifest.json` beside it says
how the run was made (model, prompt, grammar, parameters, data file and their hashes). A run that
was interrupted, even by SIGKILL, resumes where it stopped: finished questions are kept, a
half-written last line is dropped and its question asked again.
"""

import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rawreact.collection import Question
from rawreact.env import PassageEnv
from rawreact.errors import DataError, ModelError
from rawreact.loop import Step, Trajectory, react
from rawreact.metrics import exact_match, f1_score
from rawreact.models.base import Model
from rawreact.prompts import Prompt


@dataclass(frozen=True)
class Result:
    """One question's outcome: the gold answer, the trajectory and its scores."""

    question: Question
    trajectory: Trajectory

    @property
    def em(self) -> float:
        """Exact match of the prediction against the gold answer."""
        return exact_match(self.trajectory.answer, self.question.answer)

    @property
    def f1(self) -> float:
        """Token F1 of the prediction against the gold answer."""
        return f1_score(self.trajectory.answer, self.question.answer)

    def to_dict(self) -> dict:
        """One JSON line of a run file."""
        traj = self.trajectory
        return {
            "id": self.question.id,
            "question": self.question.question,
            "answer": self.question.answer,
            "prediction": traj.answer,
            "em": self.em,
            "f1": self.f1,
            "ended": traj.ended,
            "steps": len(traj.steps),
            "model_calls": traj.model_calls,
            "invalid_actions": traj.invalid_actions,
            "searches": traj.searches,
            "search_hits": traj.search_hits,
            "tokens": traj.tokens(),
            "seconds": traj.seconds,
            "trajectory": traj.to_dict(),
        }


def manifest_path(out: str | Path) -> Path:
    """Where the manifest of the run file `out` lives: RUN.jsonl -> RUN.manifest.json."""
    out = Path(out)
    return out.with_name(out.stem + ".manifest.json")


def read_run(path: str | Path) -> tuple[dict | None, list[dict]]:
    """The manifest (None if there is none) and the complete records of a run file.

    A last line without its line break was cut by a crash; it is left out.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read the run file: {error.strerror}") from None
    return read_manifest(path), _records(path, data[: data.rfind(b"\n") + 1])


def read_manifest(out: str | Path) -> dict | None:
    """The manifest of the run file `out`, or None when it has none."""
    path = manifest_path(out)
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{path}: cannot read the manifest: {error}") from None
    if not isinstance(manifest, dict):
        raise DataError(f"{path}: a manifest is a JSON object; was it edited?")
    return manifest


def _records(path: Path, data: bytes) -> list[dict]:
    records, seen = [], set()
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict) or "id" not in record:
            raise DataError(f"{path} line {number} is not a result line; was the file edited? remove that line")
        if record["id"] in seen:
            raise DataError(f"{path} line {number} repeats the question {record['id']!r}; remove one of the two")
        seen.add(record["id"])
        records.append(record)
    return records


class RunFile:
    """An open run file that results are appended to, each flushed as soon as it is written.

    `RunFile(out, config)` starts a run (refusing to touch an existing one); with `resume=True`
    it continues the run in `out`, whose manifest must have the same `config`. `details` go into
    the manifest without being compared (a data path, a limit). `done` holds the records already
    there.
    """

    def __init__(
        self, out: str | Path, config: dict | None = None, *, resume: bool = False, details: dict | None = None
    ) -> None:
        self.path, self.manifest_path = Path(out), manifest_path(out)
        self.config, self.details = config or {}, details or {}
        existing = self.path.exists() and self.path.stat().st_size > 0
        if existing and not resume:
            raise DataError(
                f"{self.path} already holds results; pass --resume to finish that run, or choose another --out"
            )
        self.done: dict[str, dict] = {}
        if existing:
            self._recover()
        try:
            self._sink = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        except OSError as error:
            raise DataError(f"{self.path}: cannot write results: {error.strerror}; does the folder exist?") from None
        if not existing:
            self._write_manifest()

    def _write_manifest(self) -> None:
        from rawreact import __version__

        created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        manifest = {"rawreact": __version__, "created": created, "versions": _versions(), "config": self.config}
        manifest.update(self.details)
        temporary = self.manifest_path.with_name(self.manifest_path.name + ".tmp")
        try:
            temporary.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(temporary, self.manifest_path)
        except OSError as error:
            raise DataError(f"{self.manifest_path}: cannot write the manifest: {error.strerror}") from None

    def _recover(self) -> None:
        """Read the finished questions, drop a half-written last line, and check the run is the same."""
        data = self.path.read_bytes()
        whole = data.rfind(b"\n") + 1
        records = _records(self.path, data[:whole])
        if whole < len(data):  # a crash cut the last line: drop it, so its question runs again
            os.truncate(self.path, whole)
        if not self.manifest_path.exists():
            raise DataError(
                f"{self.path} has no manifest {self.manifest_path.name}, so --resume cannot check it is the same "
                "run; restore the manifest, or start a new run with another --out"
            )
        old = read_manifest(self.path).get("config", {})
        changed = [f"{key} was {old.get(key)!r}, now {self.config.get(key)!r}" for key in _changed(old, self.config)]
        if changed:
            raise DataError(
                f"--resume would mix two different runs in {self.path}: {'; '.join(changed)}. "
                "Use the same settings, or choose another --out"
            )
        self.done = {record["id"]: record for record in records}

    def append(self, record: dict) -> None:
        """Write one result line and flush it to the operating system."""
        self._sink.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._sink.flush()
        self.done[record["id"]] = record

    def close(self) -> None:
        """Close the file; everything appended is already written."""
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


def _changed(old: dict, new: dict) -> list[str]:
    return sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))


def run_questions(
    questions: Iterable[Question],
    env: Callable[[Question], PassageEnv],
    model: Model,
    prompt: Prompt,
    *,
    out: str | Path | RunFile | None = None,
    on_step: Callable[[Question, Step], None] | None = None,
    workers: int = 1,
    stop: Callable[[], bool] | None = None,
    **react_options,
) -> Iterator[Result]:
    """Run `react` on each question, yielding each result as soon as it is done.

    `env` gives the environment of a question. With `out` (a path, or an open RunFile), each
    result is appended to the run file and flushed before it is yielded, so an interrupted run
    loses nothing finished; questions the run file already holds are skipped. `workers` > 1 keeps
    that many questions in flight at once, on a model that allows it (`model.concurrent`, a
    server); results then come in the order they finish. `stop()` is asked before each question
    starts: once it says True no question starts, and the ones under way finish and are written.
    """
    if workers > 1 and not getattr(model, "concurrent", False):
        raise ModelError(
            f"model {model.name} answers one question at a time (an in-process llama.cpp model already uses "
            "every core); drop --workers, or serve the model (python -m llama_cpp.server --model FILE) and run "
            "it as openai:http://127.0.0.1:8000/v1"
        )
    sink = RunFile(out) if isinstance(out, (str, Path)) else out  # opened now: a bad path fails early
    pending = (q for q in questions if sink is None or q.id not in sink.done)

    def answer(question: Question) -> Result:
        step_hook = None if on_step is None else (lambda step: on_step(question, step))
        return Result(
            question, react(question.question, env(question), model, prompt, on_step=step_hook, **react_options)
        )

    results = _sequential(pending, answer, stop) if workers <= 1 else _parallel(pending, answer, stop, workers)
    return _written(results, sink)


def _written(results: Iterator[Result], sink: RunFile | None) -> Iterator[Result]:
    """Append each result to the run file before yielding it; close the file at the end."""
    try:
        for result in results:
            if sink is not None:
                sink.append(result.to_dict())
            yield result
    finally:
        results.close()
        if sink is not None:
            sink.close()


def _sequential(questions: Iterator[Question], answer, stop) -> Iterator[Result]:
    for question in questions:
        if stop is not None and stop():
            return
        yield answer(question)


def _parallel(questions: Iterator[Question], answer, stop, workers: int) -> Iterator[Result]:
    """`workers` threads take questions in turn; results come back in the order they finish.

    The threads are daemons, so a second Ctrl-C ends the process at once instead of waiting for
    the questions under way. An error in one question stops new ones from starting; the ones
    under way still finish and are yielded (so written) before the error is raised.
    """
    take, finished, halt = threading.Lock(), queue.SimpleQueue(), threading.Event()

    def work() -> None:
        try:
            while not halt.is_set() and not (stop is not None and stop()):
                with take:
                    question = next(questions, None)
                if question is None:
                    break
                finished.put(answer(question))
        except BaseException as error:  # handed to the consumer, which raises it
            halt.set()
            finished.put(error)
        finally:
            finished.put(None)

    for _ in range(workers):
        threading.Thread(target=work, daemon=True, name="rawreact-worker").start()
    live, failure = workers, None
    try:
        while live:
            try:
                item = finished.get(timeout=0.2)  # a timeout keeps the wait interruptible by signals
            except queue.Empty:
                continue
            if item is None:
                live -= 1
            elif isinstance(item, BaseException):
                failure = failure or item
            else:
                yield item
        if failure is not None:
            raise failure
    finally:
        halt.set()
