"""The trials of a Reflexion run's questions under way, kept beside the run file until each question ends.

A Reflexion question is one line of the run file once all its trials are done. Until then each trial
is appended to `RUN.jsonl.trials` as soon as it ends, and again when its reflection is written, so a
run killed between trials resumes at the next trial: finished trials are not repeated and no
reflection is lost. Only whole lines count; a line cut by a crash is dropped.
"""

import json
import threading
from pathlib import Path

from rawreact.agents.reflexion import Trial
from rawreact.core.errors import DataError
from rawreact.runs.records import trials_path
from rawreact.runs.runfile import json_bytes


class TrialLog:
    """The trials under way of a run file: `done(id)` those kept of a question, `add(id, trial)` one more.

    A new run (not resumed) starts with none, removing what an earlier run with this name left.
    """

    def __init__(self, out: str | Path, prompt: str, *, resumed: bool) -> None:
        self.path, self.prompt = trials_path(out), prompt
        self._held: dict[str, dict[int, dict]] = {}
        self._lock = threading.Lock()
        if not resumed:
            self.path.unlink(missing_ok=True)
        elif self.path.exists():
            self._read()
        try:
            self._sink = open(self.path, "ab")  # noqa: SIM115 (closed by close())
        except OSError as error:
            raise DataError(f"{self.path}: cannot keep the trials under way: {error.strerror}") from None

    def _read(self) -> None:
        data = self.path.read_bytes()
        whole = data.rfind(b"\n") + 1
        for number, line in enumerate(data[:whole].split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line.decode("utf-8"))
                self._held.setdefault(entry["id"], {})[int(entry["trial"])] = entry
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise DataError(
                    f"{self.path} line {number} is not a trial; was the file edited? remove that line"
                ) from None
        if whole < len(data):  # a crash cut the last line: drop it, so that trial runs again
            with open(self.path, "r+b") as file:
                file.truncate(whole)

    def done(self, question_id: str) -> list[Trial]:
        """The trials kept of a question, in order (a trial kept twice: its last line, with its reflection)."""
        held = self._held.get(question_id, {})
        return [Trial.from_dict(held[n], self.prompt) for n in sorted(held)]

    def add(self, question_id: str, trial: Trial) -> None:
        """Keep a trial of a question, written and flushed before the run goes on."""
        entry = {"id": question_id} | trial.to_dict()
        with self._lock:
            self._sink.write(json_bytes(entry))
            self._sink.flush()
            self._held.setdefault(question_id, {})[trial.n] = entry

    def close(self, finished: set[str] | frozenset = frozenset()) -> None:
        """Close the file; remove it when every question it holds is `finished` (in the run file)."""
        self._sink.close()
        if set(self._held) <= set(finished):
            self.path.unlink(missing_ok=True)
