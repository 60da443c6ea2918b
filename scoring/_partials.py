"""Mergeable per-cell partial aggregates: what a shard of trials contributes to a report.

A *cell* is one (task, agent, model, dataset) combination. Per cell (``C`` cells, ``O`` outputs:
the primary first, then the secondary keys in sorted order) a :class:`Partials` holds

==============  ==============  ===============================================================
``attempts``    int64[C]        valid attempts (every status but ``invalid``)
``successes``   int64[C]        valid attempts whose emitted primary >= ``threshold``
``status``      int64[C, 5]     attempts per :class:`scoring._rules.Status` (invalid included)
``present``     int64[C, O]     valid attempts whose mapping carries the key (any kind)
``measured``    int64[C, O]     attempts that emitted a value for the output
``sums``        float64[C, O]   sum of emitted values
``sumsq``       float64[C, O]   sum of squared emitted values
==============  ==============  ===============================================================

plus the failure rollup counters (``exceptions``, ``failures``). Every field is a sum over
attempts, so ``a + b`` (:meth:`Partials.__add__`) is the partials of the union of the two
shards' trials: counts combine exactly; float sums combine exactly when a cell's attempts are
not split between shards (or its values are dyadic), otherwise up to rounding. Cells and labels
are kept in canonical (sorted) order, so shards split by task merge into bit-identical arrays
whatever the shard order. Everything in a report except diagnostics, Harbor parity, custom metric
scripts and views is computed from a :class:`Partials` alone.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scoring._errors import ScoringError
from scoring._rules import Attempts, Status
from scoring.table import Kind, RewardTable, Strings, as_str_array

__all__ = ["CELL_FIELDS", "Partials"]

CELL_FIELDS: tuple[str, ...] = ("task", "agent", "model", "dataset")
_N_STATUS = len(Status)


def _strictly_increasing(labels: Sequence[str]) -> bool:
    """``all(a < b for consecutive labels)``; on a stored column, NumPy compares the arrays (its
    code-point order of NUL-padded strings: strictly increasing there implies it here)."""
    if isinstance(labels, Strings):
        array = labels.array()
        return bool(np.all(array[1:] > array[:-1]))
    return all(map(operator.lt, labels, itertools.islice(labels, 1, None)))


def _sorted_used(
    labels: Sequence[str], column: np.ndarray
) -> tuple[Sequence[str], np.ndarray | None]:
    """The labels ``column`` uses, sorted, and the rank of every label index (-1 unused);
    rank None: every label is used and already sorted (the rank is the index itself)."""
    occupied = np.bincount(column, minlength=len(labels)) > 0
    if occupied.all() and _strictly_increasing(labels):
        return (labels if isinstance(labels, Strings) else list(labels)), None
    used = np.flatnonzero(occupied)
    names = as_str_array(labels)[used] if used.size else np.zeros(0, np.str_)
    order = np.argsort(names, kind="stable")
    rank = np.full(max(len(labels), 1), -1, dtype=np.int64)
    rank[used[order]] = np.arange(used.size)
    return names[order].tolist(), rank


def _cells(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique sorted cell keys and the inverse index of every row (O(n) when ``size`` is small)."""
    if size <= 4 * key.size + 4096:
        counts = np.bincount(key, minlength=size)
        occupied = counts > 0
        position = np.cumsum(occupied) - 1
        return np.flatnonzero(occupied), position[key]
    unique, inverse = np.unique(key, return_inverse=True)
    return unique, inverse.reshape(-1)


def _decode(keys: np.ndarray, sizes: list[int]) -> np.ndarray:
    columns = []
    rest = keys
    for size in reversed(sizes[1:]):
        rest, remainder = np.divmod(rest, size)
        columns.append(remainder)
    columns.append(rest)
    return np.stack(columns[::-1], axis=1).astype(np.int32)


def _encode(cell: np.ndarray, sizes: list[int]) -> np.ndarray:
    key = np.zeros(cell.shape[0], dtype=np.int64)
    for column, size in enumerate(sizes):
        key = key * size + cell[:, column]
    return key


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
    exceptions: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def outputs(self) -> list[str]:
        """Output names: the primary (``reward_key``) first, then the sorted secondaries."""
        return [self.reward_key, *self.secondaries]

    def __len__(self) -> int:
        return int(self.cell.shape[0])

    @classmethod
    def from_table(cls, table: RewardTable, rules: Attempts, threshold: float) -> Partials:
        """Reduce every row of ``table`` (with its decided ``rules``) into cells."""
        columns = [table.task, table.agent, table.model, table.dataset]
        label_lists = [table.tasks, table.agents, table.models, table.datasets]
        labels: dict[str, list[str]] = {}
        key = np.zeros(len(table), dtype=np.int64)
        sizes = []
        for name, column, names in zip(CELL_FIELDS, columns, label_lists, strict=True):
            used, rank = _sorted_used(names, column)
            labels[name] = used  # type: ignore[assignment]
            sizes.append(max(len(used), 1))
            if sizes[-1] > 1:  # a single label adds nothing to the key
                key = key * sizes[-1] + (column if rank is None else rank[column])
        total = 1
        for size in sizes:
            total *= size
        unique, inverse = _cells(key, total)
        n_cells = int(unique.size)
        # rows already grouped by cell (tables sorted by task): contiguous segment sums
        grouped = bool(inverse.size) and bool(np.all(inverse[1:] >= inverse[:-1]))
        starts = np.flatnonzero(np.r_[True, inverse[1:] != inverse[:-1]]) if grouped else None

        def count(weights: np.ndarray) -> np.ndarray:
            if starts is not None:
                if weights.dtype == np.bool_:
                    return np.add.reduceat(weights.view(np.uint8), starts, dtype=np.int64)
                return np.add.reduceat(weights, starts)
            return np.bincount(inverse, weights=weights, minlength=n_cells)

        valid = rules.valid
        primary = rules.primary
        status = np.bincount(
            inverse * _N_STATUS + rules.status, minlength=n_cells * _N_STATUS
        ).reshape(n_cells, _N_STATUS)
        order = sorted(range(len(table.keys)), key=table.keys.__getitem__)
        n_out = 1 + len(order)
        present = np.zeros((n_cells, n_out), dtype=np.int64)
        measured = np.zeros((n_cells, n_out), dtype=np.int64)
        sums = np.zeros((n_cells, n_out))
        sumsq = np.zeros((n_cells, n_out))
        present[:, 0] = count(valid & (table.primary_kind != Kind.MISSING))
        attempts = count(valid).astype(np.int64)
        measured[:, 0] = attempts
        sums[:, 0] = count(primary)
        sumsq[:, 0] = count(primary * primary)
        for out, j in enumerate(order, start=1):
            emitted = rules.emitted[:, j]
            value = np.where(emitted, table.values[:, j], 0.0)
            present[:, out] = count(rules.present[:, j])
            measured[:, out] = count(emitted)
            sums[:, out] = count(value)
            sumsq[:, out] = count(value * value)
        successes = count(valid & (primary >= threshold)).astype(np.int64)
        return cls(
            reward_key=table.reward_key,
            secondaries=[table.keys[j] for j in order],
            threshold=float(threshold),
            labels=labels,
            cell=_decode(unique, sizes),
            attempts=attempts,
            successes=successes,
            status=status.astype(np.int64),
            present=present,
            measured=measured,
            sums=sums,
            sumsq=sumsq,
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
        labels = {
            name: sorted(set(self.labels[name]) | set(other.labels[name])) for name in CELL_FIELDS
        }
        sizes = [max(len(labels[name]), 1) for name in CELL_FIELDS]
        keys = []
        for side in (self, other):
            remapped = np.empty_like(side.cell)
            for column, name in enumerate(CELL_FIELDS):
                union = np.array(labels[name], dtype=np.str_)
                mine = np.array(side.labels[name], dtype=np.str_)
                mapping = np.searchsorted(union, mine) if mine.size else np.zeros(0, np.int64)
                remapped[:, column] = mapping[side.cell[:, column]] if side.cell.size else 0
            keys.append(_encode(remapped, sizes))
        unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
        inverse = inverse.reshape(-1)
        n_cells = int(unique.size)

        def add(name: str) -> np.ndarray:
            a, b = getattr(self, name), getattr(other, name)
            if a.ndim == 2 and name != "status":
                a, b = _widen(a, self.outputs, outputs), _widen(b, other.outputs, outputs)
            stacked = np.concatenate([a, b])
            result = np.zeros((n_cells, *stacked.shape[1:]), dtype=stacked.dtype)
            np.add.at(result, inverse, stacked)
            return result

        return Partials(
            reward_key=self.reward_key,
            secondaries=secondaries,
            threshold=self.threshold,
            labels=labels,
            cell=_decode(unique, sizes),
            attempts=add("attempts"),
            successes=add("successes"),
            status=add("status"),
            present=add("present"),
            measured=add("measured"),
            sums=add("sums"),
            sumsq=add("sumsq"),
            exceptions=_add_counters(self.exceptions, other.exceptions),
            failures=_add_counters(self.failures, other.failures),
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
    found = {labels[i]: int(counts[i]) for i in np.flatnonzero(counts) if labels[i]}
    return dict(sorted(found.items()))


def _add_counters(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return dict(sorted(out.items()))
