"""Student's t distribution for whole degrees of freedom: two-sided p-values and quantiles.

* :func:`t_two_sided` — ``P(|T_ν| >= |t|) = I_{ν/(ν+t²)}(ν/2, 1/2)`` (Abramowitz & Stegun
  26.7.1 with 26.5.27), through :func:`scoring._betainc.betainc`;
* :func:`t_quantile` — the ``q`` quantile (``q > 1/2``) by Newton's method on the CDF from the
  normal quantile: the CDF is concave for ``t > 0`` and ``t_ν(q) > z(q)``, so the iterates
  rise monotonically to the root (no overshoot, no bracketing needed).

Both match ``scipy.stats.t`` (``sf``, ``ppf``) within 1e-12 for the sizes tested
(``tests/test_compare_stats.py``); SciPy is not imported at run time (see
:mod:`scoring._betainc`).
"""

from __future__ import annotations

import math
from functools import lru_cache

from scoring._betainc import betainc

__all__ = ["Z975", "t_quantile", "t_two_sided"]

Z975 = 1.959963984540054
"""The standard normal 0.975 quantile (``scipy.stats.norm.ppf(0.975)``)."""


def t_two_sided(t: float, df: int) -> float:
    """``P(|T| >= |t|)`` for Student's t with ``df >= 1`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    square = t * t
    return betainc(df / 2.0, 0.5, df / (df + square), square / (df + square))


def _density(t: float, df: int) -> float:
    log = (
        math.lgamma((df + 1) / 2.0)
        - math.lgamma(df / 2.0)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2.0 * math.log1p(t * t / df)
    )
    return math.exp(log)


@lru_cache(maxsize=256)
def t_quantile(df: int, q: float = 0.975) -> float:
    """The ``q`` quantile of Student's t with ``df >= 1`` degrees of freedom (``q`` in
    (1/2, 1); 0.975 gives the half-width factor of a 95% interval)."""
    t = Z975 if q == 0.975 else _normal_start(q)
    for _ in range(200):
        step = (1.0 - t_two_sided(t, df) / 2.0 - q) / _density(t, df)
        t -= step
        if abs(step) <= 4e-16 * t:
            break
    return t


def _normal_start(q: float) -> float:
    """A start below the t quantile: the normal quantile (``statistics.NormalDist``)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)
