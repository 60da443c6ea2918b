"""Mean and coverage of one output over a set of tasks, from per-task partial sums.

Inputs are per-task arrays (shape ``[T]``): ``attempts`` (valid attempts on which the output is
expected: every valid attempt for the primary, the valid attempts of tasks that carry the key
for a secondary), ``measured`` (attempts that emitted a value), ``sums`` and ``sumsq`` of the
emitted values.

* ``mean = Σ sums / Σ measured`` — pooled over attempts; ``None`` when nothing was measured
  (never 0, never NaN). Unmeasured attempts are gaps, not zeros.
* ``coverage = Σ measured / Σ attempts`` — ``None`` when no attempt expects the output.
* ``stderr`` — task-clustered, see :func:`scoring._stderr.cluster_mean_stderr`;
* ``ci95`` — the 95% interval the values' scale calls for (Wilson for 0/1 values, t clipped
  to [0, 1] for values in [0, 1], t otherwise): :func:`scoring._interval.ci95`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from scoring._interval import Interval, Scale, ci95
from scoring._stderr import cluster_mean_stderr

__all__ = ["OutputStats", "output_stats", "within_task_stderr"]


class _OutputJson(TypedDict):
    """The JSON object of one output (:meth:`OutputStats.to_json`)."""

    mean: float | None
    measured: int
    attempts: int
    coverage: float | None
    stderr: float | None
    ci95: list[float] | None
    ci95_method: str | None


@dataclass(frozen=True, slots=True)
class OutputStats:
    """Aggregate of one output; see the module docstring."""

    mean: float | None
    measured: int
    attempts: int
    stderr: float | None
    interval: Interval | None = None

    @property
    def coverage(self) -> float | None:
        """``measured / attempts``; None when no attempt expects the output."""
        return self.measured / self.attempts if self.attempts else None

    def to_json(self) -> _OutputJson:
        """The output's JSON object (with its 95% interval)."""
        return {
            "mean": self.mean,
            "measured": self.measured,
            "attempts": self.attempts,
            "coverage": self.coverage,
            "stderr": self.stderr,
            "ci95": None if self.interval is None else self.interval.bounds(),
            "ci95_method": None if self.interval is None else self.interval.method,
        }


def output_stats(
    attempts: np.ndarray, measured: np.ndarray, sums: np.ndarray, scale: Scale = Scale.UNBOUNDED
) -> OutputStats:
    """Pooled mean, coverage, clustered standard error and 95% interval over the tasks of
    the arrays; ``scale`` that of the values (:class:`scoring._interval.Scale`)."""
    n_measured = int(measured.sum())
    n_attempts = int(attempts.sum())
    if n_measured == 0:
        return OutputStats(None, 0, n_attempts, None)
    mean = float(sums.sum()) / n_measured
    stderr = cluster_mean_stderr(sums, measured, mean)
    clusters = int(np.count_nonzero(measured))
    interval = ci95(mean, stderr, scale, clusters, n_measured)
    return OutputStats(mean, n_measured, n_attempts, stderr, interval)


def within_task_stderr(measured: np.ndarray, sums: np.ndarray, sumsq: np.ndarray) -> np.ndarray:
    """Per-task i.i.d. standard error ``sqrt(s² / M)`` (NaN where ``M < 2``); shapes ``[T]``."""
    m = measured.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = (sumsq - sums * sums / m) / (m - 1)
        result = np.sqrt(np.maximum(variance, 0.0) / m)
    return np.where(measured >= 2, result, np.nan)
