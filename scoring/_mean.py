"""Mean and coverage of one output over a set of tasks, from per-task partial sums.

Inputs are per-task arrays (shape ``[T]``): ``attempts`` (valid attempts on which the output is
expected: every valid attempt for the primary, the valid attempts of tasks that carry the key
for a secondary), ``measured`` (attempts that emitted a value), ``sums`` and ``sumsq`` of the
emitted values.

* ``mean = Σ sums / Σ measured`` — pooled over attempts; ``None`` when nothing was measured
  (never 0, never NaN). Unmeasured attempts are gaps, not zeros.
* ``coverage = Σ measured / Σ attempts`` — ``None`` when no attempt expects the output.
* ``stderr`` — task-clustered, see :func:`scoring._stderr.cluster_mean_stderr`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from scoring._stderr import ci95, cluster_mean_stderr

__all__ = ["OutputStats", "output_stats", "within_task_stderr"]


class _OutputJson(TypedDict):
    """The JSON object of one output (:meth:`OutputStats.to_json`)."""

    mean: float | None
    measured: int
    attempts: int
    coverage: float | None
    stderr: float | None
    ci95: list[float] | None


@dataclass(frozen=True, slots=True)
class OutputStats:
    """Aggregate of one output; see the module docstring."""

    mean: float | None
    measured: int
    attempts: int
    stderr: float | None

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
            "ci95": ci95(self.mean, self.stderr),
        }


def output_stats(attempts: np.ndarray, measured: np.ndarray, sums: np.ndarray) -> OutputStats:
    """Pooled mean, coverage and clustered standard error over the tasks of the arrays."""
    n_measured = int(measured.sum())
    n_attempts = int(attempts.sum())
    if n_measured == 0:
        return OutputStats(None, 0, n_attempts, None)
    mean = float(sums.sum()) / n_measured
    return OutputStats(mean, n_measured, n_attempts, cluster_mean_stderr(sums, measured, mean))


def within_task_stderr(measured: np.ndarray, sums: np.ndarray, sumsq: np.ndarray) -> np.ndarray:
    """Per-task i.i.d. standard error ``sqrt(s² / M)`` (NaN where ``M < 2``); shapes ``[T]``."""
    m = measured.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = (sumsq - sums * sums / m) / (m - 1)
        result = np.sqrt(np.maximum(variance, 0.0) / m)
    return np.where(measured >= 2, result, np.nan)
