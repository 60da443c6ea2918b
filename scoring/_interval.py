"""95% intervals that respect the range of the values (README, "Intervals"): one rule for the
outputs' means, pass@k, pass^k and paired differences.

The values' *scale* (:class:`Scale`, found by :func:`scale_of`) chooses the method:

* ``BINARY`` — every value is 0 or 1: the Wilson score interval (:func:`scoring._wilson.wilson`)
  with the effective sample size of clustered attempts (Kish's design effect, as in Korn &
  Graubard 1998 for survey proportions)::

      n_eff = p̂(1 − p̂) / (se² · (G − 1)/G)     clamped to [G, N]

  where ``se`` is the task-clustered standard error (:mod:`scoring._stderr`, whose CR1 factor
  ``G/(G − 1)`` is taken out), ``G`` the tasks and ``N`` the attempts measured. One attempt
  per task gives ``n_eff = N`` exactly (the textbook Wilson interval); ``p̂`` of 0 or 1 (no
  spread to estimate a design effect from) takes ``n_eff = G``, the fewest independent units.
  Method ``"wilson"``.
* ``UNIT`` — every value in [0, 1], not all 0 or 1: the t interval
  ``estimate ± t₀.₉₇₅(G − 1) · se``, clipped to [0, 1]; method ``"t"``, or ``"t_clipped"`` when
  the clip moved a bound (the interval then understates the uncertainty on that side: few
  tasks, a mean near a bound).
* ``UNBOUNDED`` — any other value: the t interval, unclipped (``"t"``).

Paired differences of [0, 1] values lie in [−1, 1] and are clipped there
(:func:`difference_ci95`). The t quantile with ``G − 1`` degrees of freedom follows the
cluster-robust practice of Cameron & Miller (2015, §VI), and Miller (2024, "Adding Error Bars
to Evals", arXiv 2411.00640) for few questions; it replaces the normal 1.96 used before
issue 14, whose interval for a 2-task mean printed ``[-0.110, 1.360]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from scoring._student_t import t_quantile
from scoring._wilson import wilson

__all__ = ["Interval", "Scale", "ci95", "difference_ci95", "scale_of", "t_interval"]


class Scale(IntEnum):
    """The range of a set of values; the smaller code wins when two sets merge."""

    UNBOUNDED = 0
    UNIT = 1  # every value in [0, 1]
    BINARY = 2  # every value 0 or 1


def scale_of(values: np.ndarray) -> Scale:
    """The :class:`Scale` of ``values`` (float64[n]; empty: ``BINARY``, neutral for merges)."""
    if not values.size:
        return Scale.BINARY
    if not bool(np.all((values >= 0.0) & (values <= 1.0))):
        return Scale.UNBOUNDED
    ones = np.count_nonzero(values == 1.0)
    return Scale.BINARY if ones == np.count_nonzero(values) else Scale.UNIT


@dataclass(frozen=True, slots=True)
class Interval:
    """A 95% interval and the method that gave it (``wilson``, ``t``, ``t_clipped``)."""

    low: float
    high: float
    method: str

    def bounds(self) -> list[float]:
        """``[low, high]``, the JSON form."""
        return [self.low, self.high]


def t_interval(
    estimate: float, stderr: float, df: int, bounds: tuple[float, float] | None
) -> Interval:
    """``estimate ± t₀.₉₇₅(df) · stderr``, clipped to ``bounds`` when given (``t_clipped``
    when the clip moved a bound)."""
    half = t_quantile(df) * stderr
    low, high = estimate - half, estimate + half
    if bounds is None or (low >= bounds[0] and high <= bounds[1]):
        return Interval(low, high, "t")
    return Interval(max(low, bounds[0]), min(high, bounds[1]), "t_clipped")


def ci95(
    estimate: float | None, stderr: float | None, scale: Scale, clusters: int, measured: int
) -> Interval | None:
    """The 95% interval of a mean of ``measured`` values over ``clusters`` tasks (see the
    module docstring); ``None`` when ``estimate`` or ``stderr`` is ``None`` (not estimable:
    nothing measured, fewer than two tasks)."""
    if estimate is None or stderr is None or clusters < 2:
        return None
    if scale is Scale.BINARY:
        low, high = wilson(estimate, _effective_n(estimate, stderr, clusters, measured))
        return Interval(low, high, "wilson")
    return t_interval(estimate, stderr, clusters - 1, (0.0, 1.0) if scale else None)


def _effective_n(p: float, stderr: float, clusters: int, measured: int) -> float:
    """Kish's effective sample size of a clustered proportion, clamped to [G, N]."""
    if clusters == measured:
        return float(measured)
    spread = p * (1.0 - p)
    if spread <= 0.0 or stderr <= 0.0:
        return float(clusters)
    n_eff = spread / (stderr * stderr * (clusters - 1) / clusters)
    return min(max(n_eff, float(clusters)), float(measured))


def difference_ci95(
    difference: float, stderr: float | None, tasks: int, scale: Scale
) -> Interval | None:
    """The 95% t interval of a mean paired difference over ``tasks`` tasks (``tasks − 1``
    degrees of freedom), clipped to [−1, 1] when both sides' values are in [0, 1]."""
    if stderr is None or tasks < 2:
        return None
    return t_interval(difference, stderr, tasks - 1, (-1.0, 1.0) if scale else None)
