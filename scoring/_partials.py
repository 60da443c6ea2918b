"""Mergeable per-cell partial aggregates: what a shard of trials contributes to a report.

A *cell* is one (task, agent, model, dataset, job, source) combination (``job`` and
``source`` only when given: :data:`scoring._cells.Origins`). Per cell (``C`` cells, ``O`` outputs:
the primary first, then the secondary keys in sorted order) a :class:`Partials` holds

==============  ==============  ===============================================================
``attempts``    int64[C]        valid attempts (every status but ``invalid``)
``successes``   int64[C]        valid attempts whose emitted primary >= ``threshold``
``status``      int64[C, 5]     attempts per :class:`scoring._rules.Status` (invalid included)
``harbor_errors`` int64[C]      attempts with an exception recorded, any status (Harbor's
                                ``n_errors`` counts them)
``present``     int64[C, O]     valid attempts whose mapping carries the key (any kind)
``measured``    int64[C, O]     attempts that emitted a value for the output
``sums``        float64[C, O]   sum of emitted values
``sumsq``       float64[C, O]   sum of squared emitted values
==============  ==============  ===============================================================

and per output ``scales`` (int8[O], :class:`scoring._interval.Scale`: every emitted value
0 or 1, in [0, 1], or neither; merged by the minimum), which chooses the interval method
(:func:`scoring._interval.ci95`),

plus the failure rollup counters (``exceptions``, ``failures``). Every field is a sum over
attempts, so ``a + b`` (:meth:`Partials.__add__`) is the partials of the union of the two
shards' trials: counts combine exactly; float sums combine exactly when a cell's attempts are
not split between shards (or its values are dyadic), otherwise up to rounding. Cells and labels
are kept in canonical (sorted) order, so shards split by task merge into bit-identical arrays
whatever the shard order. Everything in a report except diagnostics, Harbor parity, custom metric
scripts and views is computed from a :class:`Partials` alone.

Cells are keyed and grouped by :mod:`scoring._cells`; the counts come from
:mod:`scoring._cell_counts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from casstore.table.columns import Flag, RewardTable
from scoring._cell_counts import CellCounts, cell_counts
from scoring._cells import CELL_FIELDS, CellKey, CellRows, Origins, decode, encode
from scoring._errors import ScoringError
from scoring._exact_sum import binary
from scoring._interval import Scale, scale_of
from scoring._rules import Attempts, Status

__all__ = ["CELL_FIELDS", "Partials"]

_N_STATUS = len(Status)
_SUMMED = (
    "attempts",
    "successes",
    "status",
    "present",
    "measured",
    "sums",
    "sumsq",
    "harbor_errors",
)
"""The per-cell fields of a :class:`Partials`, each a sum over the cell's attempts."""


@dataclass(eq=False)
class Partials:
    """Per-cell partial aggregates; see the module docstring."""

    reward_key: str
    secondaries: list[str]
    threshold: float
    labels: dict[str, list[str]]
    cell: np.ndarray
    attempts: np.ndarray
    successes: np.ndarray
    status: np.ndarray
    present: np.ndarray
    measured: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray
    harbor_errors: np.ndarray
    scales: np.ndarray
    exceptions: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def outputs(self) -> list[str]:
        """Output names: the primary (``reward_key``) first, then the sorted secondaries."""
        return [self.reward_key, *self.secondaries]

    def __len__(self) -> int:
        return int(self.cell.shape[0])

    @classmethod
    def from_table(
        cls, table: RewardTable, rules: Attempts, threshold: float, origins: Origins | None = None
    ) -> Partials:
        """Reduce every row of ``table`` (with its decided ``rules``) into cells (split by the
        ``origins`` of its rows too, when given).

        The integer counts come from one packed word per row (:mod:`scoring._cell_counts`): a
        lookup table over the row's rule codes gives every count bit-field at once, so a single
        reduction per word counts them all; the float sums are reduced column by column.
        """
        key = CellKey.of(table, origins)
        rows = CellRows.of(key)
        counts = cell_counts(rules, table, threshold, rows)
        status = _status(counts, rows.sizes)
        attempts = rows.sizes.astype(np.int64) - status[:, Status.INVALID]
        k = len(table.keys)
        order = sorted(range(k), key=table.keys.__getitem__)
        present, measured, sums, sumsq, scales = _outputs(
            table, rules, rows, counts, attempts, order
        )
        cell = decode(rows.keys, key.sizes)
        if k and key.task_rank is None:  # the rules' diagnostics need it: counted here anyway
            rules.expected = _expected(len(table.tasks), cell, present, order)
        return cls(
            reward_key=table.reward_key,
            secondaries=[table.keys[j] for j in order],
            threshold=float(threshold),
            labels=key.labels,  # type: ignore[arg-type]
            cell=cell,
            attempts=attempts,
            successes=counts["success"],
            status=status,
            present=present,
            measured=measured,
            sums=sums,
            sumsq=sumsq,
            harbor_errors=rows.sum((table.flags & np.uint8(Flag.EXCEPTION)) != 0).astype(np.int64),
            scales=scales,
            exceptions=_rollup(table.exceptions, table.exception),
            failures=_rollup(table.failures, table.failure),
        )

    def __add__(self, other: Partials) -> Partials:
        if not isinstance(other, Partials):
            return NotImplemented
        if other.reward_key != self.reward_key:
            raise ScoringError(
                None,
                f"cannot merge partials of reward keys {self.reward_key!r} and "
                f"{other.reward_key!r}",
            )
        if other.threshold != self.threshold:
            raise ScoringError(None, "cannot merge partials scored with different thresholds")
        secondaries = sorted(set(self.secondaries) | set(other.secondaries))
        outputs = [self.reward_key, *secondaries]
        labels, sizes, keys, inverse = _merged_cells(self, other)
        return Partials(
            reward_key=self.reward_key,
            secondaries=secondaries,
            threshold=self.threshold,
            labels=labels,
            cell=decode(keys, sizes),
            **{name: _added(self, other, name, outputs, inverse, keys.size) for name in _SUMMED},
            scales=_merged_scales(self, other, outputs),
            exceptions=_add_counters(self.exceptions, other.exceptions),
            failures=_add_counters(self.failures, other.failures),
        )


def _status(counts: CellCounts, sizes: np.ndarray) -> np.ndarray:
    """int64[C, 5] attempts per status of cells of ``sizes`` rows (scored: the rest)."""
    status = np.zeros((sizes.size, _N_STATUS), dtype=np.int64)
    for s in (Status.PARTIAL, Status.ERRORED, Status.NO_VERIFIER, Status.INVALID):
        status[:, s] = counts[s.name.lower()]
    status[:, Status.SCORED] = sizes - status.sum(axis=1)
    return status


def _outputs(
    table: RewardTable,
    rules: Attempts,
    rows: CellRows,
    counts: CellCounts,
    attempts: np.ndarray,
    order: list[int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``present``, ``measured`` (int64[C, O]), ``sums`` and ``sumsq`` (float64[C, O]) and
    ``scales`` (int8[O]) of the outputs: the primary, then the secondaries of ``table`` in
    ``order``."""
    n_cells, n_out = len(rows), 1 + len(order)
    present = np.zeros((n_cells, n_out), dtype=np.int64)
    measured = np.zeros((n_cells, n_out), dtype=np.int64)
    sums = np.zeros((n_cells, n_out))
    sumsq = np.zeros((n_cells, n_out))
    scales = np.zeros(n_out, dtype=np.int8)
    present[:, 0] = counts["present"]
    measured[:, 0] = attempts
    for out, j in enumerate([-1, *order]):
        if out:
            present[:, out] = counts.present(j)
            measured[:, out] = counts.measured(j)
            value = np.where(rules.emitted_of(j), table.values[:, j], 0.0)
        else:
            value = rules.primary
        sums[:, out] = rows.sum(value)
        # x * x == x for 0 and 1: the sums of squares of binary values are their sums
        is_binary = binary(value)
        sumsq[:, out] = sums[:, out] if is_binary else rows.sum(value * value)
        # a value not emitted is 0 here: inside every scale
        scales[out] = Scale.BINARY if is_binary else scale_of(value)
    return present, measured, sums, sumsq, scales


def _expected(n_tasks: int, cell: np.ndarray, present: np.ndarray, order: list[int]) -> np.ndarray:
    """bool[T, k] secondary ``j`` expected on a task (a cell of it carries the key), for cells
    whose task index is the table's."""
    expected = np.zeros((n_tasks, len(order)), dtype=bool)
    for out, j in enumerate(order, start=1):
        expected[cell[present[:, out] > 0, 0], j] = True
    return expected


def _merged_cells(
    a: Partials, b: Partials
) -> tuple[dict[str, list[str]], list[int], np.ndarray, np.ndarray]:
    """The union of the labels of ``a`` and ``b`` (sorted), the number of them per field, the
    keys of the merged cells (sorted) and the merged cell of each cell of ``a`` then ``b``."""
    labels = {name: sorted(set(a.labels[name]) | set(b.labels[name])) for name in CELL_FIELDS}
    sizes = [max(len(labels[name]), 1) for name in CELL_FIELDS]
    keys = [encode(_relabelled(side, labels), sizes) for side in (a, b)]
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    return labels, sizes, unique, inverse.reshape(-1)


def _relabelled(side: Partials, labels: dict[str, list[str]]) -> np.ndarray:
    """The cells of ``side`` as indices into ``labels`` (a sorted superset of its own)."""
    remapped = np.empty_like(side.cell)
    for column, name in enumerate(CELL_FIELDS):
        union = np.array(labels[name], dtype=np.str_)
        mine = np.array(side.labels[name], dtype=np.str_)
        mapping = np.searchsorted(union, mine) if mine.size else np.zeros(0, np.int64)
        remapped[:, column] = mapping[side.cell[:, column]] if side.cell.size else 0
    return remapped


def _added(
    a: Partials, b: Partials, name: str, outputs: list[str], inverse: np.ndarray, n_cells: int
) -> np.ndarray:
    """Field ``name`` of the merged cells: the cells of ``a`` and ``b`` (per-output fields
    widened to ``outputs``) added into their merged cell (``inverse``)."""
    x, y = getattr(a, name), getattr(b, name)
    if x.ndim == 2 and name != "status":
        x, y = _widen(x, a.outputs, outputs), _widen(y, b.outputs, outputs)
    stacked = np.concatenate([x, y])
    result = np.zeros((n_cells, *stacked.shape[1:]), dtype=stacked.dtype)
    np.add.at(result, inverse, stacked)
    return result


def _merged_scales(a: Partials, b: Partials, outputs: list[str]) -> np.ndarray:
    """The scale of each of ``outputs`` over both: the smaller (an output one side lacks
    takes the other's)."""
    have = [dict(zip(side.outputs, side.scales.tolist(), strict=True)) for side in (a, b)]
    return np.array(
        [min(mine.get(name, Scale.BINARY) for mine in have) for name in outputs], dtype=np.int8
    )


def _widen(array: np.ndarray, have: list[str], want: list[str]) -> np.ndarray:
    out = np.zeros((array.shape[0], len(want)), dtype=array.dtype)
    position = {name: i for i, name in enumerate(want)}
    for i, name in enumerate(have):
        out[:, position[name]] = array[:, i]
    return out


def _rollup(labels: list[str], column: np.ndarray) -> dict[str, int]:
    if len(labels) == 1:
        return {labels[0]: int(column.size)} if labels[0] and column.size else {}
    if len(labels) == 2 and not labels[0]:  # "" and one name: count the non-zero indices
        found = int(np.count_nonzero(column))
        return {labels[1]: found} if found else {}
    counts = np.bincount(column, minlength=len(labels))
    named = {labels[i]: int(counts[i]) for i in np.flatnonzero(counts) if labels[i]}
    return dict(sorted(named.items()))


def _add_counters(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return dict(sorted(out.items()))
