"""Intervals for scores over questions: a variant's mean, and the paired difference of two variants on
the same questions.

A share (every value 0 or 1: EM, a FEVER label's accuracy, a game's success) gets Wilson's score
interval (`wilson`), which stays honest on a handful of questions: 0 right of 3 is [0.000, 0.561], where
the bootstrap would say [0.000, 0.000]. Any other mean (F1, a game's reward) gets the percentile
bootstrap, and so does every paired difference (`interval` chooses).

Both resample questions with replacement (`numpy.random.default_rng(seed).integers(0, n, (B, n))`)
and take the 2.5th and 97.5th percentiles of the resampled means (the percentile bootstrap). The
paired difference resamples the per-question differences, so the question's difficulty, which both
variants share, cancels out: that is what makes a difference of a few points measurable on a few
hundred questions.
"""

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from rawreact.core.tasks import QA, TASK_TYPES, TaskType

RESAMPLES = 10_000
FEW = 30  # fewer questions than this and an interval is too wide to tell most variants apart
_CELLS = 4_000_000  # resampled indices drawn at once, to bound memory on a full dev set


@dataclass(frozen=True)
class Interval:
    """A mean over questions and its bootstrap interval."""

    mean: float
    low: float
    high: float

    def __contains__(self, value: float) -> bool:
        return self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap(values, *, resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95) -> Interval:
    """The mean of `values` (one per question) and its percentile bootstrap interval."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) == 0:
        raise ValueError("bootstrap needs a non-empty list of per-question values")
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"bootstrap needs resamples >= 1 and 0 < level < 1, not {resamples} and {level}")
    n, rng = len(values), np.random.default_rng(seed)
    means, rows = np.empty(resamples), max(1, _CELLS // n)
    for start in range(0, resamples, rows):  # the same draws as one (resamples, n) call, in pieces
        count = min(rows, resamples - start)
        means[start : start + count] = values[rng.integers(0, n, size=(count, n))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(float(values.mean()), float(low), float(high))


def wilson(successes: int, n: int, level: float = 0.95) -> Interval:
    """The share `successes / n` and Wilson's score interval for it at `level`."""
    if n < 1 or not 0 <= successes <= n or not 0 < level < 1:
        raise ValueError(f"wilson needs 0 <= successes <= n, n >= 1 and 0 < level < 1, not {successes}, {n}, {level}")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    share, spread = successes / n, z * z / n
    centre = (share + spread / 2) / (1 + spread)
    half = z * math.sqrt(share * (1 - share) / n + spread / (4 * n)) / (1 + spread)
    return Interval(share, max(0.0, centre - half), min(1.0, centre + half))


# The scores that are shares of 0/1 outcomes (each question 0 or 1), as the task types declare them (EM, a game's
# success): they get Wilson's interval.
SHARES = tuple(dict.fromkeys(s.key for t in TASK_TYPES.values() for s in t.scores if s.share))


def pass_at_k(n: int, passed: int, k: int) -> float:
    """The chance that at least one of k samples passes, estimated without bias from `n` samples of which `passed`
    passed (Chen et al. 2021): 1 - C(n - passed, k) / C(n, k)."""
    if not 0 <= passed <= n or not 1 <= k <= n:
        raise ValueError(f"pass@{k} from {passed} of {n} samples: need 0 <= passed <= n and 1 <= k <= n")
    return 1.0 - math.comb(n - passed, k) / math.comb(n, k)


def interval(
    values, *, share: bool = False, resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95
) -> Interval:
    """A mean over questions and its interval: Wilson's for a `share` (each value 0 or 1, as EM), the bootstrap
    otherwise (F1, a game's reward)."""
    values = [float(v) for v in values]
    if share:
        if not values or any(v not in (0.0, 1.0) for v in values):
            raise ValueError("a share's values are each 0 or 1")
        return wilson(int(sum(values)), len(values), level)
    return bootstrap(values, resamples=resamples, seed=seed, level=level)


def score_interval(metric: str, values, **options) -> Interval:
    """The interval of a metric's per-question scores: Wilson's where `metric` is a share (SHARES), else the
    bootstrap; `options` go to `interval`."""
    return interval(values, share=metric in SHARES, **options)


def paired(base, other, **options) -> Interval:
    """The mean of `other - base` over the same questions (in the same order), and its interval."""
    base, other = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    if base.shape != other.shape:
        raise ValueError(f"paired scores need the same questions: {base.shape} and {other.shape} values")
    return bootstrap(other - base, **options)


def how_drawn(task: TaskType = QA) -> str:
    """How the intervals of `task`'s scores are drawn: "Wilson's for a share (EM), the bootstrap for F1"."""
    shares = ", ".join(s.label for s in task.scores if s.share)
    others = ", ".join(s.label for s in task.scores if not s.share)
    return f"Wilson's for a share ({shares})" + (f", the bootstrap for {others}" if others else "")


def intervals_said(n: int, task: TaskType = QA) -> str:
    """How a table's intervals were drawn for the scores of `task` (EM and F1; a game's success and reward; a
    program's pass@1), and a warning when its `n` questions (or games, or problems) are too few to mean much."""
    said = f"95% intervals: {how_drawn(task)}, a paired bootstrap for Δ"
    if n < FEW:
        said += (
            f"; only {n} {task.unit}{'s' if n != 1 else ''}: the intervals are wide, and a difference whose interval "
            "holds 0 says nothing"
        )
    return said
