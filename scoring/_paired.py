"""The paired difference of two runs over the same tasks (Miller 2024, "Adding Error Bars to
Evals", arXiv 2411.00640, §4 "Comparing models": paired differences, and §3's clustering).

Per task ``t`` (``T`` tasks in both runs) the mean of its attempts in A, ``a_t``, and in B,
``b_t``; the difference ``d_t = a_t − b_t``. Then::

    difference = mean(d)                    (each task weighs the same)
    stderr     = sd(d, ddof=1) / sqrt(T)
    t          = difference / stderr,   two-sided p from Student's t with T − 1 df
    ci95       = difference ± t₀.₉₇₅(T − 1) · stderr   (clipped to [−1, 1] for [0, 1] rewards)

Pairing removes the between-task variance both runs share: ``Var(a − b) = Var(a) + Var(b) −
2 Cov(a, b)``, hence the reported ``correlation`` (Pearson's, of ``a_t`` and ``b_t``). With
several attempts per task this standard error is the cluster-robust (CR1, clustered by task)
one of the attempt-level estimator that weighs each attempt ``1 / attempts of its task and
run``: the per-task means absorb the correlation of a task's attempts (Miller §3.1). With one
attempt per task it is ``scipy.stats.ttest_rel``'s; with more, that of a weighted
least-squares fit with task-clustered errors (``tests/test_compare_stats.py`` checks both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scoring._interval import Interval, Scale, difference_ci95
from scoring._student_t import t_two_sided

__all__ = ["PairedDifference", "paired_difference"]


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """The paired comparison of per-task means (see the module docstring); ``None`` where
    not estimable (fewer than two tasks; ``t``/``p_value`` when every difference is equal)."""

    tasks: int
    mean_a: float | None
    mean_b: float | None
    difference: float | None
    stderr: float | None
    interval: Interval | None
    t: float | None
    df: int | None
    p_value: float | None
    correlation: float | None
    won: int
    lost: int
    tied: int

    def to_json(self) -> dict[str, object]:
        """The JSON object (``ci95`` and ``ci95_method`` from :attr:`interval`)."""
        return {
            "tasks": self.tasks,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "difference": self.difference,
            "stderr": self.stderr,
            "ci95": None if self.interval is None else self.interval.bounds(),
            "ci95_method": None if self.interval is None else self.interval.method,
            "t": self.t,
            "df": self.df,
            "p_value": self.p_value,
            "correlation": self.correlation,
            "won": self.won,
            "lost": self.lost,
            "tied": self.tied,
        }


def paired_difference(a: np.ndarray, b: np.ndarray, scale: Scale) -> PairedDifference:
    """The paired comparison of per-task means ``a`` and ``b`` (float64[T], the same task at
    each index); ``scale``: of both runs' values (differences clipped to [−1, 1] unless
    ``UNBOUNDED``)."""
    n = int(a.size)
    d = a - b
    won, lost = int(np.count_nonzero(d > 0)), int(np.count_nonzero(d < 0))
    if n == 0:
        return PairedDifference(0, None, None, None, None, None, None, None, None, None, 0, 0, 0)
    difference = float(np.mean(d))
    stderr = math.sqrt(float(np.var(d, ddof=1)) / n) if n >= 2 else None
    t = p = None
    if stderr:
        t = difference / stderr
        p = t_two_sided(t, n - 1)
    return PairedDifference(
        tasks=n,
        mean_a=float(np.mean(a)),
        mean_b=float(np.mean(b)),
        difference=difference,
        stderr=stderr,
        interval=difference_ci95(difference, stderr, n, scale),
        t=t,
        df=n - 1 if n >= 2 else None,
        p_value=p,
        correlation=_correlation(a, b),
        won=won,
        lost=lost,
        tied=n - won - lost,
    )


def _correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson's correlation of ``a`` and ``b``; ``None`` when either is constant."""
    if a.size < 2:
        return None
    x, y = a - a.mean(), b - b.mean()
    # sums, not np.dot: no BLAS threads for 1-D arrays (as scoring._stderr)
    sxx, syy = float(np.square(x).sum()), float(np.square(y).sum())
    if sxx == 0.0 or syy == 0.0:
        return None
    return max(-1.0, min(1.0, float((x * y).sum()) / math.sqrt(sxx * syy)))
