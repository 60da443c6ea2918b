"""Harbor parity: Harbor 0.20's dataset metrics and pass@k, bit for bit, from a RewardTable.

What Harbor does (``harbor/job.py``, ``harbor/metrics/*.py``, ``harbor/utils/pass_at_k.py``):

* trials are grouped by *evals key* ``agent__model__dataset`` (``agent__dataset`` without a
  model; dataset = the trial's ``source`` or ``"adhoc"``), keeping trial order;
* each trial contributes ``verifier_result.rewards`` (a dict as its pydantic model coerced it)
  or ``None`` without a verifier result; a trial whose reward mapping Harbor's
  ``VerifierResult`` refuses (``Flag.INVALID``) is not loaded at all, so it is left out here
  too (drift elsewhere in a ``result.json`` — files older Harbor versions wrote, which Harbor
  0.20's ``TrialResult`` refuses — is accepted: such trials count with the rewards Harbor's
  model gives them);
* Mean/Sum/Min/Max (``aggregate_reward_dicts``): with at most one key over all rewards, the
  list ``[0 if r is None else next(iter(r.values()), 0)]`` aggregated under the metric's name;
  with several keys, for each key in sorted order ``[0 if r is None else r.get(key, 0)]``.
  Mean is ``sum(values) / len(values)``, Sum ``sum``, Min ``min``, Max ``max`` — Python-level
  reductions (CPython 3.12's compensated float ``sum``), reproduced here bit for bit (see
  "Exact sums" below); missing values are the int ``0`` exactly as Harbor inserts them;
* pass@k (``_compute_pass_at_k_for_trials``): per evals key, ``{}`` if any trial with rewards
  has a number of keys other than one or a value outside {0, 1}; a trial without rewards counts
  as 0; k ∈ {2, 4, 8, …} ∪ {5, 10, …} up to the *smallest* attempt count of the group's tasks;
  per task ``1.0`` when ``n − c < k`` else ``1 − Π_{i<k} (n − c − i)/(n − i)`` multiplied
  left to right in float64 (identical in NumPy: each quotient of two exactly representable
  integers and each product is one correctly rounded IEEE operation, so it is computed once per
  distinct ``(n, c)`` pair and gathered); the task values summed with ``sum`` in order of first
  appearance and divided by the number of tasks.

Exact sums. CPython 3.12's ``sum`` over floats (Neumaier's compensated summation) keeps the
plain running sum ``f_i = f_{i−1} ⊕ x_i`` and, separately, ``c ⊕= e_i`` where ``e_i`` is the
exact rounding error of that addition (computed by Fast2Sum, which is exact); the result is
``f ⊕ c`` (``f`` alone when ``c`` is 0 or not finite). The running sums do not depend on ``c``,
so :func:`float_sum` computes them with ``np.cumsum`` (a sequential left-to-right accumulation,
not NumPy's pairwise ``sum``), every ``e_i`` at once with the branch-free TwoSum formula (also
exact, hence the same numbers as Fast2Sum's) and ``c`` with a second ``np.cumsum``: the same
IEEE operations on the same operands in the same order, so the same bits. It applies when the
total is finite and non-zero (no overflow, no NaN/∞ element, no signed-zero question); anything
else goes through ``sum`` on the very Python list. Adding ``0.0`` (an absent key, a row outside
the selection) changes neither ``f`` (never −0.0) nor ``c``, so the sums run over full-length
columns with zeros instead of gathered subsets. Columns whose values are all integers with
``Σ|x| < 2**52`` take ``np.bincount`` (every partial sum is exact, whatever the order).

Layout: :class:`HarborRewards` keeps full-length columns of the table (``n`` rows) and a mask
of the rows Harbor loads; subsets (:meth:`HarborRewards.select`) only narrow the mask.

Integers. Harbor's model keeps a JSON integer reward as an ``int`` (``Kind.INTEGER`` in the
table; the value column holds it as a float, exact up to ``2**53``). Per evals key and
output: when every present value is an int, Sum/Min/Max return ints and Mean divides the
exact int total (int / int, correctly rounded), as Harbor's ``sum`` of ints does; when ints
and floats mix, the very list Harbor builds (ints restored, table order) goes through
``sum``/``min``/``max`` — CPython adds an int to a float running sum without compensation,
so that result depends on the order, and Harbor's own order is the order its trials
finished (a job's ``result.json`` may differ in the last bit from any re-computation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from casstore.table.columns import Flag, Kind, RewardTable
from scoring._pass_at_k import pair_index

__all__ = [
    "BUILTIN_METRICS",
    "HarborRewards",
    "float_sum",
    "harbor_metric",
    "harbor_pass_at_k",
]


def _mean(values: list[Any]) -> float:
    return sum(values) / len(values)


BUILTIN_METRICS = {"mean": _mean, "sum": sum, "min": min, "max": max}


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


def _vector_sum(values: np.ndarray) -> float | None:
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
    n = float(values.size)
    if _dyadic(values, n * max(-low, high)):
        total = float(values.sum())
        return total if total != 0.0 else None
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

    See "Exact sums" in the module docstring; falls back to the builtin when the vectorised
    form does not apply (empty, zero or non-finite total).
    """
    values = np.asarray(values, dtype=np.float64)
    result = _vector_sum(values)
    return sum(values.tolist()) if result is None else result


def _integral(values: np.ndarray, low: float, high: float) -> bool:
    """True when every value is an integer (no ``-0.0``) and every partial sum is exact."""
    if max(-low, high) * values.size >= 2.0**52:
        return False
    if low <= 0.0 and np.any(np.signbit(values) & (values == 0)):
        return False
    if low >= 0.0 and high <= 1.0:  # the usual 0/1 rewards: zeros and ones only
        return np.count_nonzero(values) == np.count_nonzero(values == 1.0)
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
    errors (see :func:`_vector_sum`), so the result ``f ⊕ c`` is ``fl(f + c) = fl(S)``: the
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


@dataclass(eq=False)
class HarborRewards:
    """The rewards Harbor would hold, over the ``n`` rows of a table (table order).

    ``valid`` bool[n] the rows Harbor holds (loadable and selected); ``names`` the ``O``
    reward names (primary first); ``none`` bool[n] rewards are ``None`` (no verifier result);
    ``group`` int64[n] index into ``evals_keys``; ``task`` int[n] task index of the table;
    ``kinds``/``raw`` the ``O`` kind and value columns of the table. Derived per output (and
    cached): :meth:`present_of` bool[n] (held row whose mapping carries the key) and
    :meth:`values_of` float64[n] (coerced value, 0.0 where not present).
    """

    valid: np.ndarray
    names: list[str]
    none: np.ndarray
    group: np.ndarray
    evals_keys: list[str]
    task: np.ndarray
    kinds: list[np.ndarray]
    raw: list[np.ndarray]
    task_sorted: bool = False
    _present: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _values: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _exact: dict[int, ExactSums | None] = field(default_factory=dict, repr=False)
    _integer: dict[int, np.ndarray | None] = field(default_factory=dict, repr=False)

    @classmethod
    def from_table(cls, table: RewardTable) -> HarborRewards:
        valid = (table.flags & Flag.INVALID) == 0
        none = (table.flags & Flag.NO_VERIFIER) != 0
        codes, keys = table.harbor_evals()
        held = np.bincount(codes, weights=valid, minlength=len(keys)) if len(table) else []
        names = sorted({keys[code] for code in np.flatnonzero(held).tolist()})
        if len(names) <= 1:
            group = np.zeros(len(table), dtype=np.int64)
        else:
            position = {name: i for i, name in enumerate(names)}
            remap = np.array([position.get(key, 0) for key in keys], dtype=np.int64)
            group = remap[codes]
        task = table.task
        return cls(
            valid=valid,
            names=[table.reward_key, *table.keys],
            none=none,
            group=group,
            evals_keys=names,
            task=task,
            kinds=[table.primary_kind, *(table.kinds[:, j] for j in range(len(table.keys)))],
            raw=[table.primary, *(table.values[:, j] for j in range(len(table.keys)))],
            task_sorted=bool(task.size < 2 or np.all(task[1:] >= task[:-1])),
        )

    def __len__(self) -> int:
        return int(np.count_nonzero(self.valid))

    @cached_property
    def scored(self) -> np.ndarray:
        """bool[n] held rows with a rewards mapping."""
        return self.valid & ~self.none

    def present_of(self, output: int) -> np.ndarray:
        if output not in self._present:
            self._present[output] = (self.kinds[output] != Kind.MISSING) & self.scored
        return self._present[output]

    def values_of(self, output: int) -> np.ndarray:
        if output not in self._values:
            self._values[output] = np.where(self.present_of(output), self.raw[output], 0.0)
        return self._values[output]

    def integer_of(self, output: int) -> np.ndarray | None:
        """bool[n] present rows whose value Harbor holds as an ``int``; None when there is
        none."""
        if output not in self._integer:
            kinds = self.kinds[output]
            integer = None
            if kinds.size and int(kinds.max()) >= Kind.INTEGER:
                integer = (kinds == Kind.INTEGER) & self.present_of(output)
                integer = integer if integer.any() else None
            self._integer[output] = integer
        return self._integer[output]

    def integer_share(self, output: int) -> tuple[np.ndarray, np.ndarray] | None:
        """int64[G] present values held as ints and int64[G] present values, per evals key;
        None when no value is an int."""
        integer = self.integer_of(output)
        if integer is None:
            return None
        keys = len(self.evals_keys)
        ints = np.bincount(self.bins, weights=integer, minlength=keys + 1)[:keys]
        present = np.bincount(self.bins, weights=self.present_of(output), minlength=keys + 1)
        return ints.astype(np.int64), present[:keys].astype(np.int64)

    def as_harbor(self, output: int, rows: np.ndarray) -> list[Any]:
        """The values of ``output`` at ``rows`` (bool[n]) as Harbor holds them: ``0`` (int)
        where absent, ints where written as JSON integers, else floats."""
        values = self.values_of(output)[rows].tolist()
        for index in np.flatnonzero(~self.present_of(output)[rows]).tolist():
            values[index] = 0
        integer = self.integer_of(output)
        if integer is not None:
            for index in np.flatnonzero(integer[rows]).tolist():
                values[index] = int(values[index])
        return values

    @cached_property
    def bins(self) -> np.ndarray:
        """int[n] evals key of every row; ``len(evals_keys)`` for rows Harbor does not hold."""
        keys = len(self.evals_keys)
        return np.where(self.valid, 0 if keys == 1 else self.group, keys)

    @cached_property
    def indicator(self) -> np.ndarray | None:
        """float64[G, n]: 1.0 where the row is held under evals key ``g`` (for up to 16 keys;
        a matrix-vector product then sums a column per key, 3x faster than ``bincount``)."""
        keys = len(self.evals_keys)
        if not 1 < keys <= 16:
            return None
        return np.stack([(self.bins == g).view(np.uint8) for g in range(keys)]).astype(np.float64)

    def bin_sums(self, column: np.ndarray) -> list[Any]:
        """:data:`BinSums` per evals key. Rows not held must hold 0 (as :meth:`values_of`)."""
        keys = len(self.evals_keys)
        if keys == 1:
            return [column.sum()]
        if self.indicator is not None:  # exact: integers below 2**52 add exactly in any order
            # einsum, not ``@``: BLAS would start threads that spin beside the engine's
            return np.einsum(
                "gn,n->g", self.indicator, column.astype(np.float64, copy=False)
            ).tolist()
        return np.bincount(self.bins, weights=column, minlength=keys + 1)[:keys].tolist()

    @cached_property
    def patterns(self) -> np.ndarray | None:
        """int64[G + 1, 2**(O + 1)]: rows per evals key (row ``G``: rows not held) and presence
        pattern (bit ``o``: the mapping carries output ``o``; bit ``O``: the row has a mapping),
        from one ``bincount``; None beyond 12 outputs (then per-output counts are used)."""
        n_out = len(self.names)
        if n_out > 12:
            return None
        width = 1 << (n_out + 1)
        size = (len(self.evals_keys) + 1) * width
        dtype = np.uint16 if size <= 1 << 16 else np.int64  # narrow: half the memory traffic
        code = self.bins.astype(dtype) << dtype(n_out + 1)
        code |= self.scored.view(np.uint8).astype(dtype) << dtype(n_out)
        for o in range(n_out):
            code |= self.present_of(o).view(np.uint8).astype(dtype) << dtype(o)
        return np.bincount(code, minlength=size).reshape(-1, width)

    @cached_property
    def sizes(self) -> np.ndarray:
        """int[G] rows held per evals key."""
        keys = len(self.evals_keys)
        if self.patterns is not None:
            return self.patterns[:keys].sum(axis=1)
        return np.bincount(self.bins, minlength=keys + 1)[:keys]

    @cached_property
    def carried(self) -> np.ndarray:
        """bool[O, G] whether some held reward mapping of the evals key carries the output."""
        keys, n_out = len(self.evals_keys), len(self.names)
        if self.patterns is not None:
            pattern = np.arange(self.patterns.shape[1])
            return np.stack(
                [
                    self.patterns[:keys, (pattern >> o) & 1 == 1].sum(axis=1) > 0
                    for o in range(n_out)
                ]
            )
        return np.stack(
            [
                np.bincount(self.bins, weights=self.present_of(o), minlength=keys + 1)[:keys] > 0
                for o in range(n_out)
            ]
        )

    @cached_property
    def not_one_key(self) -> np.ndarray:
        """bool[G] evals keys with a reward mapping that has no key or several (Harbor's pass@k
        is then empty)."""
        keys, n_out = len(self.evals_keys), len(self.names)
        if self.patterns is not None:
            pattern = np.arange(self.patterns.shape[1])
            mapped = (pattern >> n_out) & 1 == 1
            several = np.array([bin(p & ((1 << n_out) - 1)).count("1") != 1 for p in pattern])
            return self.patterns[:keys, mapped & several].sum(axis=1) > 0
        count = np.zeros(self.bins.size, dtype=np.int16)
        for o in range(n_out):
            count += self.present_of(o)
        return np.bincount(self.bins[self.scored & (count != 1)], minlength=keys + 1)[:keys] > 0

    def exact_sums(self, output: int) -> ExactSums | None:
        """Exact sums of one output's values per evals key, when CPython's ``sum`` gives them
        correctly rounded (:func:`exact_bin_sums`);
        None otherwise (non-finite or all-zero values, too wide a range)."""
        if output not in self._exact:
            self._exact[output] = self._exact_sums(output)
        return self._exact[output]

    def _exact_sums(self, output: int) -> ExactSums | None:
        values = self.values_of(output)
        if not values.size:
            return None
        low, high = float(values.min()), float(values.max())
        if not (math.isfinite(low) and math.isfinite(high)):
            return None
        if _integral(values, low, high):  # every partial sum exact: one pass
            return ExactSums(0, [int(total) for total in self.bin_sums(values)])
        return exact_bin_sums(values, low, high, self.bin_sums)

    def select(self, mask: np.ndarray) -> HarborRewards:
        """The rewards of the table rows where ``mask`` (bool[n]) holds; the selection must
        lie within one evals key."""
        valid = self.valid & mask
        keys, group = self.evals_keys, self.group
        if len(keys) > 1:
            (kept,) = np.unique(group[valid]).tolist() or [0]
            keys, group = [keys[kept]], np.zeros(group.size, np.int64)
        return HarborRewards(
            valid=valid,
            names=self.names,
            none=self.none,
            group=group,
            evals_keys=keys,
            task=self.task,
            kinds=self.kinds,
            raw=self.raw,
            task_sorted=self.task_sorted,
        )

    def dicts(self) -> list[dict[str, float | int] | None]:
        """The reward dicts themselves (for ``metric.py`` scripts): key order primary first,
        ints where Harbor holds ints."""
        rows = self.valid
        values = list(zip(*(self.as_harbor(o, rows) for o in range(len(self.names))), strict=True))
        present = np.stack([self.present_of(o)[rows] for o in range(len(self.names))], 1).tolist()
        out: list[dict[str, float | int] | None] = []
        for row, (none, flags) in enumerate(zip(self.none[rows].tolist(), present, strict=True)):
            if none:
                out.append(None)
            else:
                out.append({name: values[row][o] for o, name in enumerate(self.names) if flags[o]})
        return out


def harbor_metrics_by_group(
    name: str, rewards: HarborRewards, merged: bool = False
) -> list[dict[str, Any]]:
    """Harbor's metric ``name`` for every evals key of ``rewards`` (``evals_keys`` order);
    ``merged``: one result over all of them taken as one dataset.

    Mean and Sum are exact sums rounded once (:meth:`HarborRewards.exact_sums`) or, where that
    form does not apply, vectorised compensated sums (see the module docstring); Min/Max (whose
    result type matters) go through the Python builtin on the very list Harbor builds.
    """
    aggregate = BUILTIN_METRICS[name]
    keys = len(rewards.evals_keys)
    if not keys:
        return []
    sizes, carried = rewards.sizes, rewards.carried
    if merged:
        sizes, carried = sizes.sum(keepdims=True), carried.any(axis=1, keepdims=True)

    def member(g: int) -> np.ndarray:
        return rewards.valid if merged or keys == 1 else rewards.bins == g

    def exact_list(g: int, o: int) -> list[Any]:
        return rewards.as_harbor(o, member(g))

    def total(g: int, o: int) -> float | int:
        share = rewards.integer_share(o)
        if share is not None:
            ints, present = (part.sum() if merged else part[g] for part in share)
            if ints and ints < present:  # ints and floats mixed: order-dependent, as Harbor
                return sum(exact_list(g, o))
            if ints:
                value = _int_total(rewards.exact_sums(o), merged, g)
                return sum(exact_list(g, o)) if value is None else value
        exact = rewards.exact_sums(o)
        if exact is not None:
            value = exact.rounded(sum(exact.totals) if merged else exact.totals[g])
            if value is not None:
                return value
        result = _vector_sum(rewards.values_of(o)[member(g)])
        return sum(exact_list(g, o)) if result is None else result

    out = []
    for g in range(sizes.size):
        used = np.flatnonzero(carried[:, g]).tolist()
        result: dict[str, Any] = {}
        columns = (
            [(name, used[0] if used else None)]
            if len(used) <= 1
            else sorted((rewards.names[o], o) for o in used)
        )
        for label, o in columns:
            if o is None:
                result[label] = aggregate([0] * int(sizes[g]))
            elif name in ("mean", "sum"):
                value = total(g, o)
                result[label] = value / int(sizes[g]) if name == "mean" else value
            else:
                result[label] = aggregate(exact_list(g, o))
        out.append(result)
    return out


def _int_total(exact: ExactSums | None, merged: bool, g: int) -> int | None:
    """The exact total of an evals key whose values are all ints, from ``exact`` (None
    when there is none; an exact total of integers is an integer times ``2**exponent``)."""
    if exact is None:
        return None
    total = sum(exact.totals) if merged else exact.totals[g]
    if exact.exponent >= 0:
        return total << exact.exponent
    return total >> -exact.exponent


def harbor_metric(name: str, rewards: HarborRewards) -> dict[str, Any]:
    """Harbor's built-in metric ``name`` (mean, sum, min, max) over all of ``rewards``."""
    return harbor_metrics_by_group(name, rewards, merged=True)[0]


def _eligible_ks(max_k: int) -> list[int]:
    ks = set(range(5, max_k + 1, 5))
    k = 2
    while k <= max_k:
        ks.add(k)
        k *= 2
    return sorted(ks)


def _pass_values(n: np.ndarray, c: np.ndarray) -> dict[int, float]:
    """Harbor's pass@k over tasks with ``n`` trials and ``c`` successes (first-seen order)."""
    if not n.size:
        return {}
    ks = _eligible_ks(int(n.min()))
    if not ks:
        return {}
    un, uc, inverse = pair_index(n, c)
    result = {}
    for k in ks:
        product = np.ones(un.size)
        for i in range(k):
            product = product * ((un - uc - i) / (un - i))
        per_pair = np.where(un - uc < k, 1.0, 1.0 - product)
        result[k] = float_sum(per_pair[inverse]) / n.size
    return result


def _bad_groups(rewards: HarborRewards) -> tuple[np.ndarray, np.ndarray | None]:
    """Evals keys whose pass@k Harbor empties (a mapping without exactly one key, or a value
    outside {0, 1}), and every row's single value (0.0 if none; None when every key is bad)."""
    bad = rewards.not_one_key
    if bad.all():
        return bad, None
    single = rewards.values_of(0)
    for o in range(1, len(rewards.names)):
        single = single + rewards.values_of(o)
    odd = rewards.scored & (single != 0.0) & (single != 1.0)
    keys = len(rewards.evals_keys)
    return bad | (np.bincount(rewards.bins[odd], minlength=keys + 1)[:keys] > 0), single


def harbor_pass_at_k(rewards: HarborRewards) -> dict[str, dict[int, float]]:
    """Harbor's ``compute_pass_at_k_by_evals``: evals key → ``{k: value}``, non-empty only."""
    groups = len(rewards.evals_keys)
    if not groups or not rewards.valid.any():
        return {}
    bad, single = _bad_groups(rewards)
    if single is None or bad.all():
        return {}
    held = rewards.bins
    out = {}
    if rewards.task_sorted:
        # tasks appear in increasing order within every group: first-seen order = task order
        tasks = int(rewards.task.max()) + 1
        code = held * tasks + rewards.task
        size = (groups + 1) * tasks
        n = np.bincount(code, minlength=size)[: groups * tasks].reshape(groups, tasks)
        c = np.bincount(code, weights=single, minlength=size)[: groups * tasks]
        c = c.astype(np.int64).reshape(groups, tasks)
        for g, key in enumerate(rewards.evals_keys):
            if bad[g]:
                continue
            used = n[g] > 0
            if values := _pass_values(n[g][used], c[g][used]):
                out[key] = values
        return out
    for g, key in enumerate(rewards.evals_keys):
        if bad[g]:
            continue
        member = held == g
        task = rewards.task[member]
        if not task.size:
            continue
        _, first_seen, inverse = np.unique(task, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(first_seen, kind="stable")  # tasks by first appearance
        n = np.bincount(inverse)[order]
        c = np.bincount(inverse, weights=single[member]).astype(np.int64)[order]
        if values := _pass_values(n, c):
            out[key] = values
    return out
