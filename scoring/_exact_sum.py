"""Exact float sums: CPython 3.12's compensated ``sum`` reproduced bit for bit with NumPy.

CPython 3.12's ``sum`` over floats (Neumaier's compensated summation) keeps the plain running
sum ``f_i = f_{i−1} ⊕ x_i`` and, separately, ``c ⊕= e_i`` where ``e_i`` is the exact rounding
error of that addition (computed by Fast2Sum, which is exact); the result is ``f ⊕ c`` (``f``
alone when ``c`` is 0 or not finite). The running sums do not depend on ``c``, so
:func:`float_sum` computes them with ``np.cumsum`` (a sequential left-to-right accumulation,
not NumPy's pairwise ``sum``), every ``e_i`` at once with the branch-free TwoSum formula (also
exact, hence the same numbers as Fast2Sum's) and ``c`` with a second ``np.cumsum``: the same
IEEE operations on the same operands in the same order, so the same bits. It applies when the
total is finite and non-zero (no overflow, no NaN/∞ element, no signed-zero question); anything
else goes through ``sum`` on the very Python list. Adding ``0.0`` (an absent key, a row outside
the selection) changes neither ``f`` (never −0.0) nor ``c``, so the sums run over full-length
columns with zeros instead of gathered subsets. Columns whose values are all integers with
``Σ|x| < 2**52`` take ``np.bincount`` (every partial sum is exact, whatever the order:
:func:`integral`).

:func:`exact_bin_sums` goes one step further: when CPython's compensation is provably the
exact sum of the rounding errors, ``sum`` over any subset of the values is their exact sum
rounded once, so exact integer totals per bin (e.g. per Harbor evals key) give every subset's
``sum`` at once (:class:`ExactSums`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BinSums",
    "ExactSums",
    "binary",
    "exact_bin_sums",
    "float_sum",
    "integral",
    "one_bin",
    "vector_sum",
]


def _finest_spacing(values: np.ndarray, low: float) -> float:
    """``2**q``, the ulp of the smallest non-zero ``|value|``: every value is a multiple of it
    (a float is a multiple of its own ulp, and ulps are powers of two growing with ``|x|``)."""
    if low >= 0.0:
        smallest = np.min(values, where=values > 0.0, initial=np.inf)
    else:
        smallest = np.min(np.abs(values), where=values != 0.0, initial=np.inf)
    return float(np.spacing(smallest))


def _dyadic(values: np.ndarray, bound: float) -> bool:
    """Whether every value is a multiple of ``2**−m`` for ``m >= 0`` with
    ``bound · 2**m < 2**52`` (``bound >= n · max|x|``, finite): scaling by ``2**m`` is then exact
    and gives integers. A prefix is tried first, so other data costs little."""
    if not 0.0 < bound < math.inf:  # n · max|x| overflowed: frexp(inf) has exponent 0
        return False
    _, exponent = math.frexp(bound)  # bound < 2**exponent
    m = 52 - exponent
    if m < 0:
        return False
    for part in (values[:4096], values):
        scaled = np.ldexp(part, m)
        if not np.array_equal(scaled, np.rint(scaled)):
            return False
    return True


def vector_sum(values: np.ndarray) -> float | None:
    """``sum(values.tolist())`` computed with NumPy, or None where that form does not apply.

    Two exactness shortcuts. A multiple of ``2**q`` below ``2**(q + 53)`` in magnitude is a
    float, so adding such numbers is exact while every partial sum stays below that bound:

    * dyadic values (:func:`_dyadic`: all multiples of ``2**−m`` with
      ``n · max|x| < 2**(52 − m)``, e.g. rewards in steps of 0.25, or integers): every partial
      sum in any order is exact, so CPython's running sum is the exact total, every error term
      is 0 (no compensation) and NumPy's pairwise ``sum`` gives the same exact total;
    * otherwise the running sums ``f_i`` come from ``np.cumsum`` and the error terms ``e_i``
      from TwoSum. Every value is a multiple of ``2**q``, the ulp of the smallest non-zero
      ``|x|`` (:func:`_finest_spacing`). All ``f_i`` are too (induction: ``f_{i−1} + x_i`` is;
      if it is not a float its magnitude is ``>= 2**(q + 53)``, where floats are multiples of
      ``2**(q + 1)``), hence every ``e_i = f_{i−1} + x_i − f_i``, and ``|e_i| <= 2**−53 |f_i|``
      (round to nearest). With ``F = max |f_i|``, when ``n · F < 2**(q + 106)`` every partial
      sum of the ``e_i`` in any order is a multiple of ``2**q`` below ``2**(q + 53)``:
      CPython's compensation ``c`` (a sequential float sum of the ``e_i``) is their exact sum,
      and so is ``np.sum`` — no second ``cumsum`` (3-decimal rewards in [0, 1]: ``q = −62``,
      so up to ``n · F < 2**44``, e.g. a million values).

    (The bounds are checked with a factor 2 of margin for the rounding of ``n · max``.)
    """
    if not values.size:
        return None
    low, high = float(values.min()), float(values.max())
    if not (np.isfinite(low) and np.isfinite(high)) or low == high == 0.0:
        return None  # NaN/∞ elements, or the signed-zero question of an all-zero sum
    exact = exact_bin_sums(values, low, high)
    if exact is not None and exact.totals[0]:
        return exact.rounded(exact.totals[0])
    if _dyadic(values, float(values.size) * max(-low, high)):
        total = float(values.sum())
        return total if total != 0.0 else None
    return _compensated(values, low)


def _compensated(values: np.ndarray, low: float) -> float | None:
    """CPython's running sum ``f`` (``np.cumsum``) plus its compensation ``c`` (TwoSum error
    terms, summed as :func:`vector_sum` explains); None on a zero or non-finite total."""
    n = float(values.size)
    with np.errstate(over="ignore", invalid="ignore"):
        running = np.cumsum(values)
    total = running[-1]
    if total == 0.0 or not np.isfinite(total):  # signed zeros, overflow
        return None
    before, after = running[:-1], running[1:]
    # TwoSum: error = (before − (after − b)) + (x − b) with b = after − before
    b = after - before
    error = after - b
    np.subtract(before, error, out=error)
    np.subtract(values[1:], b, out=b)
    error += b
    if not error.size:
        c = 0.0
    elif (
        2.0 * n * max(float(running.max()), -float(running.min()))
        < _finest_spacing(values, low) * 2.0**106
    ):
        c = float(error.sum())  # exact: see above
    else:
        c = float(np.cumsum(error)[-1])
    return float(total + c) if c != 0.0 and np.isfinite(c) else float(total)


def float_sum(values: np.ndarray) -> float:
    """``sum(values.tolist())`` (CPython 3.12's compensated sum), bit for bit, vectorised.

    See the module docstring; falls back to the builtin when the vectorised
    form does not apply (empty, zero or non-finite total).
    """
    values = np.asarray(values, dtype=np.float64)
    result = vector_sum(values)
    return sum(values.tolist()) if result is None else result


def binary(values: np.ndarray) -> bool:
    """Whether every value is 0.0 or 1.0 (a prefix first: most other columns fail there)."""
    head = values[:4096]
    if not np.all((head == 0.0) | (head == 1.0)):
        return False
    return bool(np.count_nonzero(values) == np.count_nonzero(values == 1.0))


def integral(values: np.ndarray, low: float, high: float) -> bool:
    """True when every value is an integer (no ``-0.0``) and every partial sum is exact."""
    if max(-low, high) * values.size >= 2.0**52:
        return False
    if low <= 0.0 and np.any(np.signbit(values) & (values == 0)):
        return False
    if low >= 0.0 and high <= 1.0:  # the usual 0/1 rewards: zeros and ones only
        return binary(values)
    head = values[:4096]
    if not np.array_equal(head, np.rint(head)):  # most other data fails here
        return False
    return bool(np.array_equal(values, np.rint(values)))


@dataclass(frozen=True, slots=True)
class ExactSums:
    """Exact sums of float64 values per bin: bin ``b`` sums to ``totals[b] · 2**exponent``."""

    exponent: int
    totals: list[int]

    def rounded(self, total: int) -> float | None:
        """``total · 2**exponent`` correctly rounded to a float (CPython's int division and
        int → float conversion round correctly); None when that would overflow."""
        if abs(total).bit_length() + self.exponent > 1023:
            return None
        if self.exponent >= 0:
            return float(total << self.exponent)
        return total / (1 << -self.exponent)


BinSums = Callable[[np.ndarray], list[Any]]
"""Exact sums per bin of an integer-valued column (int64 or float64[n]) whose partial sums all
stay below ``2**52`` in magnitude, in any order."""


def one_bin(column: np.ndarray) -> list[Any]:
    """:data:`BinSums` with a single bin: the column's total."""
    return [column.sum()]


def exact_bin_sums(
    values: np.ndarray, low: float, high: float, bin_sums: BinSums = one_bin
) -> ExactSums | None:
    """The exact sum of the finite ``values`` (float64[n], between ``low`` and ``high``) in
    each bin of ``bin_sums``, when CPython's ``sum`` over any subset of them is that exact sum
    correctly rounded; None otherwise (or when ``values`` are all zero).

    Why: every value is a multiple of ``2**q``, the ulp of the smallest non-zero ``|x|``. When
    ``n · F < 2**(q + 106)`` (``F`` the largest running sum, at most ``n · max|x|``; checked
    with a factor 2 of margin), CPython's compensation term is the exact sum of the rounding
    errors (see :func:`vector_sum`), so the result ``f ⊕ c`` is ``fl(f + c) = fl(S)``: the
    exact sum, rounded once. The exact sums come from limbs (:func:`_limbs`) small enough that
    any float64 accumulation of ``n`` of them is exact.
    """
    n, magnitude = values.size, max(-low, high)
    if not n or magnitude == 0.0:
        return None
    with np.errstate(over="ignore"):
        spacing = _finest_spacing(values, low)
    if not 0.0 < spacing < math.inf:
        return None
    q = math.frexp(spacing)[1] - 1
    top = math.frexp(magnitude)[1]  # |x| < 2**top
    if 2 * n.bit_length() + top + 1 >= q + 106 or top > 960:
        return None
    total: list[int] | None = None
    for unit, limb in _limbs(values, top, q, 52 - n.bit_length()):
        sums = [int(math.ldexp(float(value), -unit)) << (unit - q) for value in bin_sums(limb)]
        total = sums if total is None else [a + b for a, b in zip(total, sums, strict=True)]
    return ExactSums(q, total or [])


def _limbs(values: np.ndarray, top: int, q: int, bits: int) -> Iterator[tuple[int, np.ndarray]]:
    """Split ``values`` (multiples of ``2**q`` below ``2**top`` in magnitude) into float64
    limbs ``(unit, limb)`` summing to them exactly, each limb a multiple of ``2**unit`` below
    ``2**(unit + bits)`` in magnitude, so that ``n < 2**(52 − bits)`` of them add exactly in
    any order (every partial sum a multiple of ``2**unit`` below ``2**(unit + 52)``).

    The split is Dekker's: with ``C = 1.5 · 2**(s + 52)``, ``(x + C) − C`` is ``x`` rounded to a
    multiple of ``2**s`` (exact for ``|x| < 2**(s + 51)``) and the remainder ``x − hi`` is
    exact, at most ``2**(s − 1)`` in magnitude; three vector operations per limb.
    """
    rest, bound = values, top  # |rest| <= 2**bound
    while bound - q > bits:
        s = bound - bits + 1
        shifter = 1.5 * 2.0 ** (s + 52)
        high = rest + shifter
        high -= shifter
        yield s, high
        rest, bound = rest - high, s - 1
    yield q, rest
