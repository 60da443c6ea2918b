"""The rewards Harbor holds for a job's trials, over the rows of a RewardTable.

What Harbor 0.20 loads (``harbor/job.py``, ``harbor/models/job/result.py``):

* trials are grouped by *evals key* ``agent__model__dataset`` (``agent__dataset`` without a
  model; dataset = the trial's ``source`` or ``"adhoc"``), keeping trial order;
* each trial contributes ``verifier_result.rewards`` (a dict as its pydantic model coerced it)
  or ``None`` without a verifier result; a trial whose reward mapping Harbor's
  ``VerifierResult`` refuses (``Flag.INVALID``) is not loaded at all, so it is left out here
  too (drift elsewhere in a ``result.json`` — files older Harbor versions wrote, which Harbor
  0.20's ``TrialResult`` refuses — is accepted: such trials count with the rewards Harbor's
  model gives them).

Layout: :class:`HarborRewards` keeps full-length columns of the table (``n`` rows) and a mask
of the rows Harbor loads; subsets (:meth:`HarborRewards.select`) only narrow the mask. What
the metrics need per evals key (sizes, the keys carried, exact sums: :mod:`scoring._exact_sum`)
is derived on first use and cached.

Integers. Harbor's model keeps a JSON integer reward as an ``int`` (``Kind.INTEGER`` in the
table; the value column holds it as a float, exact up to ``2**53``):
:meth:`HarborRewards.as_harbor` gives the values back as Harbor holds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from casstore.table.columns import Flag, Kind, RewardTable
from scoring._exact_sum import ExactSums, exact_bin_sums, integral

__all__ = ["HarborRewards"]


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
    _present: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _values: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _exact: dict[int, ExactSums | None] = field(default_factory=dict, init=False, repr=False)
    _integer: dict[int, np.ndarray | None] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def from_table(cls, table: RewardTable) -> HarborRewards:
        """The rewards Harbor holds for the rows of ``table`` (every row but the invalid)."""
        valid = (table.flags & Flag.INVALID) == 0
        none = (table.flags & Flag.NO_VERIFIER) != 0
        codes, keys = table.harbor_evals()
        held: NDArray[np.float64] | list[float] = (
            np.bincount(codes, weights=valid, minlength=len(keys)) if len(table) else []
        )
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
        """bool[n] held rows whose reward mapping carries ``output``."""
        if output not in self._present:
            self._present[output] = (self.kinds[output] != Kind.MISSING) & self.scored
        return self._present[output]

    def values_of(self, output: int) -> np.ndarray:
        """float64[n] the coerced values of ``output`` (0.0 where not present)."""
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
        # narrow: half the memory traffic
        dtype: type[np.integer[Any]] = np.uint16 if size <= 1 << 16 else np.int64
        code: NDArray[np.integer[Any]] = self.bins.astype(dtype) << dtype(n_out + 1)
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
        if integral(values, low, high):  # every partial sum exact: one pass
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
        return replace(self, valid=valid, group=group, evals_keys=keys)

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
