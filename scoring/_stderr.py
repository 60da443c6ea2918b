"""Standard errors and 95% intervals.

Two estimators, both over task clusters (attempts of one task are correlated, tasks are the
independent units):

* :func:`cluster_mean_stderr` — the mean of an output pooled over attempts,
  ``mean = Σ_t S_t / Σ_t M_t`` (``S_t`` sum and ``M_t`` count of measured values of task
  ``t``). Cluster-robust (CR1-style) sandwich variance of a ratio estimator with ``G`` task
  clusters that have a measurement::

      r_t = S_t − M_t · mean                    (per-cluster residual sum)
      Var = G / (G − 1) · Σ_t r_t² / (Σ_t M_t)²

  ``None`` when ``G < 2`` (not estimable). With one attempt per task it reduces to the usual
  ``s / sqrt(n)`` up to the ``(n − 1)/n`` factor of the sample variance.
* :func:`clt_stderr` — pass@k and pass^k are means of per-task values ``v_t`` over the ``m``
  eligible tasks: the CLT standard error ``sd(v, ddof=1) / sqrt(m)`` (``None`` when ``m < 2``).

The 95% intervals built on them are :mod:`scoring._interval`'s (Wilson, or t clipped to the
values' range). Source: Cameron & Miller (2015), "A Practitioner's Guide to Cluster-Robust
Inference".
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["clt_stderr", "cluster_mean_stderr"]


def cluster_mean_stderr(sums: np.ndarray, counts: np.ndarray, mean: float) -> float | None:
    """Cluster-robust standard error of ``Σ sums / Σ counts``; shapes ``[T]`` each."""
    clusters = int(np.count_nonzero(counts))
    if clusters < 2:
        return None
    total = float(counts.sum())
    residual = sums - counts * mean  # exactly 0 for clusters without a measurement
    squares = float(np.square(residual).sum())  # not np.dot: no BLAS threads for 1-D
    variance = clusters / (clusters - 1) * squares / (total * total)
    return math.sqrt(variance)


def clt_stderr(
    values: np.ndarray, counts: np.ndarray | None = None, mean: float | None = None
) -> float | None:
    """``sd(v, ddof=1) / sqrt(m)`` of the ``m`` per-task values ``v``; ``None`` when ``m < 2``.

    ``counts`` (int[P], optional): ``values`` (float64[P]) are distinct values, value ``p``
    held by ``counts[p]`` tasks (``m = Σ counts``); ``mean`` their mean when already known.
    The squares are summed exactly (``math.fsum``)."""
    weights = np.ones(values.shape[0]) if counts is None else counts.astype(np.float64)
    m = int(weights.sum())
    if m < 2:
        return None
    if mean is None:
        mean = math.fsum((weights * values).tolist()) / m
    squares = math.fsum((weights * np.square(values - mean)).tolist())
    return math.sqrt(squares / (m - 1)) / math.sqrt(m)
