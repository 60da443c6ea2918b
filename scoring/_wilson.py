"""The Wilson score interval of a proportion (Wilson 1927, "Probable inference, the law of
succession, and statistical inference", JASA 22): the values ``p`` solving
``|p̂ − p| = z·sqrt(p(1 − p)/n)``::

    centre = (p̂ + z²/2n) / (1 + z²/n)
    half   = z / (1 + z²/n) · sqrt(p̂(1 − p̂)/n + z²/4n²)

It never leaves [0, 1] and is not degenerate at ``p̂ = 0`` or 1 (where a normal interval has
width 0). ``n`` may be an effective sample size (clustered attempts: see
:func:`scoring._interval.ci95`). Equal to ``statsmodels.stats.proportion.proportion_confint(…,
method="wilson")`` within 1e-15 (``tests/test_intervals.py``).
"""

from __future__ import annotations

import math

from scoring._student_t import Z975

__all__ = ["wilson"]


def wilson(p: float, n: float, z: float = Z975) -> tuple[float, float]:
    """``(low, high)`` Wilson interval of the proportion ``p`` over ``n > 0`` trials."""
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    return max(centre - half, 0.0), min(centre + half, 1.0)
