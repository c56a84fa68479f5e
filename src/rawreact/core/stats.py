"""Bootstrap intervals for scores over questions: a variant's mean, and the paired difference of two
variants on the same questions.

Both resample questions with replacement (`numpy.random.default_rng(seed).integers(0, n, (B, n))`)
and take the 2.5th and 97.5th percentiles of the resampled means (the percentile bootstrap). The
paired difference resamples the per-question differences, so the question's difficulty, which both
variants share, cancels out: that is what makes a difference of a few points measurable on a few
hundred questions.
"""

from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
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


def paired(base, other, **options) -> Interval:
    """The mean of `other - base` over the same questions (in the same order), and its interval."""
    base, other = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    if base.shape != other.shape:
        raise ValueError(f"paired scores need the same questions: {base.shape} and {other.shape} values")
    return bootstrap(other - base, **options)
