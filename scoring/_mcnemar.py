"""McNemar's exact test of two runs' 0/1 outcomes on the same tasks (McNemar 1947; the exact
form: under the null hypothesis each discordant task favours A or B with probability 1/2).

Of the tasks where the runs disagree, ``b`` succeed in A only and ``c`` in B only::

    p = min(1, 2 · P(X <= min(b, c))),   X ~ Binomial(b + c, 1/2)

with ``P(X <= k) = I_{1/2}(n − k, k + 1)`` (:func:`scoring._betainc.betainc`); ``p = 1`` when
no task is discordant. The same as ``statsmodels.stats.contingency_tables.mcnemar(table,
exact=True)`` (its ``statistic`` is ``min(b, c)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring._betainc import betainc

__all__ = ["McNemar", "mcnemar_exact"]


@dataclass(frozen=True, slots=True)
class McNemar:
    """The discordant counts and the exact two-sided p-value."""

    a_only: int
    b_only: int
    p_value: float

    def to_json(self) -> dict[str, object]:
        """``{"a_only", "b_only", "statistic", "p_value"}`` (statistic: ``min(b, c)``)."""
        return {
            "a_only": self.a_only,
            "b_only": self.b_only,
            "statistic": min(self.a_only, self.b_only),
            "p_value": self.p_value,
        }


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> McNemar:
    """McNemar's exact test of the 0/1 outcomes ``a`` and ``b`` (bool[T], paired by index)."""
    a_only = int(np.count_nonzero(a & ~b))
    b_only = int(np.count_nonzero(b & ~a))
    n, k = a_only + b_only, min(a_only, b_only)
    if n == 0 or 2 * k == n:
        return McNemar(a_only, b_only, 1.0)
    return McNemar(a_only, b_only, min(1.0, 2.0 * betainc(n - k, k + 1.0, 0.5)))
