"""Run files side by side: EM and F1 with intervals (Wilson's for a share, the bootstrap otherwise), and
paired differences to the first run with a paired bootstrap interval."""

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.core.stats import RESAMPLES, Interval, paired, score_interval
from rawreact.core.tasks import TaskType, of_records
from rawreact.reports.summary import _branch_cell, _cell, _endings_cell, columns_of, drop_unused, summarize, table
from rawreact.runs.records import read_run


@dataclass(frozen=True)
class Comparison:
    """Variants' records side by side, on the questions every variant answered."""

    names: list[str]
    records: dict[str, list[dict]]
    resamples: int = RESAMPLES
    seed: int = 0
    # Bootstrap intervals by (name, metric, paired): each is computed once, however many tables ask.
    _intervals: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def task(self) -> TaskType:
        """The task type of what is compared, as the first variant's records say it."""
        return of_records(self.records[self.names[0]])

    @cached_property
    def metrics(self) -> tuple[str, ...]:
        """What is compared: EM and F1 for questions (a FEVER claim's label accuracy is its EM), success and
        reward for games, pass@1 for programs, as their records' task says."""
        return self.task.keys

    @cached_property
    def labels(self) -> dict[str, str]:
        """Each compared score's name in a table, as its task type declares it: EM, F1, success, reward, pass@1."""
        return {s.key: s.label for s in self.task.scores}

    @cached_property
    def ids(self) -> list[str]:
        """The questions all variants answered and scored, in the first variant's order: what is compared
        (a question without a gold answer has no score to compare)."""
        key = self.metrics[0]
        common = set.intersection(*({r["id"] for r in self.records[n] if r.get(key) is not None} for n in self.names))
        return [r["id"] for r in self.records[self.names[0]] if r["id"] in common]

    def scores(self, name: str, metric: str) -> list[float]:
        """One variant's per-question scores ("em" or "f1"; "success" or "reward" for games), over `ids`."""
        by_id = {r["id"]: r[metric] for r in self.records[name]}
        return [by_id[i] for i in self.ids]

    def interval(self, name: str, metric: str) -> Interval:
        """The variant's mean score and its 95% interval (`stats.interval`: Wilson's for a share such as EM)."""
        key = (name, metric, False)
        if key not in self._intervals:
            scores = self.scores(name, metric)
            self._intervals[key] = score_interval(metric, scores, resamples=self.resamples, seed=self.seed)
        return self._intervals[key]

    def difference(self, name: str, metric: str) -> Interval:
        """The variant's score minus the first variant's, per question, with a paired interval."""
        key = (name, metric, True)
        if key not in self._intervals:
            base = self.scores(self.names[0], metric)
            self._intervals[key] = paired(base, self.scores(name, metric), resamples=self.resamples, seed=self.seed)
        return self._intervals[key]

    def rows(self, style: str = "text") -> list[dict[str, str]]:
        """One row per variant; CSV rows carry bounds in their own columns and unrounded numbers."""
        ids, rows = set(self.ids), []
        if not ids:
            raise DataError("the variants have no question in common, so there is nothing to compare")
        for name in self.names:
            summary = summarize([r for r in self.records[name] if r["id"] in ids])
            row = {
                "variant": name,
                "method": summary["method"],
                "loop": summary["loop"],
                "n": str(summary["questions"]),
            }
            for metric, label in self.labels.items():
                mean = self.interval(name, metric)
                diff = self.difference(name, metric) if name != self.names[0] else None
                if style == "csv":
                    row |= {metric: f"{mean.mean:.6f}", f"{metric}_low": f"{mean.low:.6f}"}
                    row |= {f"{metric}_high": f"{mean.high:.6f}"}
                    for part in ("mean", "low", "high"):
                        row[f"d{metric}_{part}"] = "" if diff is None else f"{getattr(diff, part):.6f}"
                else:
                    row[label] = str(mean)  # "mean [low, high]"
                    shown = None if diff is None else f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]"
                    row[f"Δ{label}"] = shown or "base"
            for header, (key, form) in columns_of(of_records(self.records[name])).items():
                if key not in ("questions", "scored", *self.metrics):
                    row[header] = _cell(summary, key, form)
            row["answered by"] = _branch_cell(summary)
            row["ended"] = _endings_cell(summary)
            rows.append(row)
        return drop_unused(rows)

    def table(self, style: str = "text") -> str:
        """The comparison as an aligned text table, a Markdown table or CSV."""
        return table(self.rows(style), style)


def compare_runs(runs: dict[str, str | Path], *, resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """A Comparison of finished run files, `{name: path}`, the first being the base."""
    return Comparison(list(runs), {name: read_run(path)[1] for name, path in runs.items()}, resamples, seed)
