"""The pass@k difference of two runs over the same tasks, with a paired bootstrap interval.

Per k, over the tasks with at least k attempts in both runs (``m_k`` of them), the
difference of the runs' pass@k (the unbiased estimator, :mod:`scoring._pass_at_k`) and a 95%
percentile interval from a paired bootstrap over tasks (Efron & Tibshirani 1993, ch. 13;
Miller 2024, arXiv 2411.00640, §4: resample the questions, keep each question's pair): each
replicate draws ``T`` tasks with replacement, the same draw for A and B and for every k.

Vectorised: a task's pass@k values depend only on its ``(n_A, c_A, n_B, c_B)`` (attempts and
successes in each run), so the ``T`` tasks reduce to ``P`` distinct profiles holding
``w_p`` tasks each, and drawing ``T`` tasks with replacement is drawing the profile counts
from ``Multinomial(T, w / T)``: one ``Generator.multinomial`` call of shape
``[replicates, P]`` and one matrix product per k, never ``replicates × T`` indices. The
generator is ``numpy.random.default_rng(seed)`` with a fixed seed (default
:data:`SEED`), so the interval is the same on every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scoring._pass_at_k import per_task_products

__all__ = ["REPLICATES", "SEED", "PassAtKDifference", "pass_at_k_difference"]

REPLICATES = 2000
SEED = 2411_00640
_CELLS = 4_000_000  # replicates × profiles drawn at once (bounds memory)


@dataclass(frozen=True, slots=True)
class PassAtKDifference:
    """One k: pass@k of A and B over the ``eligible_tasks`` tasks with >= k attempts in
    both, their difference and its bootstrap interval (``None`` where no task is eligible;
    the interval also with one)."""

    k: int
    eligible_tasks: int
    a: float | None
    b: float | None
    difference: float | None
    ci95: list[float] | None

    def to_json(self) -> dict[str, object]:
        """The k's JSON object (``ci95_method``: ``bootstrap_percentile``)."""
        return {
            "eligible_tasks": self.eligible_tasks,
            "a": self.a,
            "b": self.b,
            "difference": self.difference,
            "ci95": self.ci95,
            "ci95_method": None if self.ci95 is None else "bootstrap_percentile",
        }


def _profiles(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the non-negative int columns (``[P, 4]``) and how many tasks hold
    each: one int64 code per task (mixed radix) when the columns' ranges allow, so that one
    1-D ``np.unique`` does it (a row-wise unique sorts ~10x slower)."""
    stacked = np.stack([np.asarray(c, dtype=np.int64) for c in columns], axis=1)
    sizes = [int(column.max(initial=0)) + 1 for column in stacked.T]
    if float(np.prod(np.array(sizes, dtype=np.float64))) >= 2.0**62:
        profiles, counts = np.unique(stacked, axis=0, return_counts=True)
        return profiles, counts
    code = np.zeros(stacked.shape[0], dtype=np.int64)
    for j, size in enumerate(sizes):
        code = code * size + stacked[:, j]
    distinct, counts = np.unique(code, return_counts=True)
    profiles = np.empty((distinct.size, len(sizes)), dtype=np.int64)
    for j in range(len(sizes) - 1, -1, -1):
        distinct, profiles[:, j] = np.divmod(distinct, sizes[j])
    return profiles, counts


def _values(n: np.ndarray, c: np.ndarray, ks: list[int]) -> dict[int, np.ndarray]:
    """``{k: pass@k per profile}`` (NaN where ``n < k``), in the profiles' order."""
    order = np.argsort(-n, kind="stable")
    failures = per_task_products(n, np.clip(n - c, 0, None), ks)
    out = {}
    for k in ks:
        values = np.full(n.size, np.nan)
        values[order[: failures[k].size]] = 1.0 - failures[k]
        out[k] = values
    return out


def pass_at_k_difference(
    n_a: np.ndarray,
    c_a: np.ndarray,
    n_b: np.ndarray,
    c_b: np.ndarray,
    ks: list[int],
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> list[PassAtKDifference]:
    """pass@k of A minus pass@k of B for each k (ints >= 1) over tasks with attempts ``n``
    and successes ``c`` in each run (int arrays [T], paired by index), with the bootstrap
    interval of the module docstring."""
    if not np.size(n_a):
        return [PassAtKDifference(k, 0, None, None, None, None) for k in ks]
    profiles, weights = _profiles([n_a, c_a, n_b, c_b])
    side_a = _values(profiles[:, 0], profiles[:, 1], ks)
    side_b = _values(profiles[:, 2], profiles[:, 3], ks)
    draws = _draws(weights, replicates, seed)
    out = []
    for k in ks:
        eligible = ~(np.isnan(side_a[k]) | np.isnan(side_b[k]))
        m = int(weights[eligible].sum())
        if not m:
            out.append(PassAtKDifference(k, 0, None, None, None, None))
            continue
        held = weights[eligible]
        a = math.fsum((held * side_a[k][eligible]).tolist()) / m
        b = math.fsum((held * side_b[k][eligible]).tolist()) / m
        gaps = side_a[k][eligible] - side_b[k][eligible]
        chosen = draws[:, eligible]
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (chosen @ gaps) / chosen.sum(axis=1)
        interval = None
        if m >= 2:
            low, high = np.nanpercentile(boot, [2.5, 97.5]).tolist()
            interval = [float(low), float(high)]
        out.append(PassAtKDifference(k, m, a, b, a - b, interval))
    return out


def _draws(weights: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """float64[replicates, P]: how many of ``T = Σ weights`` tasks drawn with replacement
    fall on each profile, per replicate (``Multinomial(T, weights / T)``)."""
    rng = np.random.default_rng(seed)
    total = int(weights.sum())
    probabilities = weights / total
    step = max(1, _CELLS // max(weights.size, 1))
    parts = [
        rng.multinomial(total, probabilities, size=min(step, replicates - start))
        for start in range(0, replicates, step)
    ]
    return np.concatenate(parts).astype(np.float64)
