"""Cells: the (task, agent, model, dataset, job, source) combinations of a reward table's rows.

A cell is keyed by one int64 per row, the mixed-radix number of its labels' ranks (labels in
sorted order, the ones no row uses dropped; a field with a single label adds nothing to the
key): :class:`CellKey`. :class:`CellRows` groups the rows by key, as contiguous segments when
the rows are already in key order (tables sorted by task), else by an inverse index, and sums
per-row weights per cell. :func:`encode` and :func:`decode` move between a cell's label
indices (int32[C, 6]) and its key. ``job`` and ``source`` are not columns of the table: they
come beside it (:data:`Origins`), and only when a report groups by them; otherwise each is one
empty label, which adds nothing to the key (the cells are then those of the other fields).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from casstore.table.columns import RewardTable
from casstore.table.npz import Strings, as_str_array

__all__ = ["CELL_FIELDS", "CellKey", "CellRows", "Origins", "decode", "encode"]

CELL_FIELDS: tuple[str, ...] = ("task", "agent", "model", "dataset", "job", "source")

type Origins = Mapping[str, tuple[np.ndarray, Sequence[str]]]
"""Labels of the table's rows that the table does not hold, by field (``job``, ``source``):
``(codes int32[n], labels)``, ``codes`` indexing ``labels``."""


@dataclass(frozen=True, slots=True)
class CellKey:
    """Every row's cell key (``key`` int64[n]) with the labels it is made of.

    ``labels`` the sorted labels each field uses; ``sizes`` the number of them (at least 1);
    ``task_rank`` the rank of every task index of the table among the tasks used (-1 unused),
    None when it is the index itself (every task used, already sorted).
    """

    labels: dict[str, Sequence[str]]
    sizes: list[int]
    task_rank: np.ndarray | None
    key: np.ndarray

    @classmethod
    def of(cls, table: RewardTable, origins: Origins | None = None) -> CellKey:
        """The cell keys of the rows of ``table``, split by the ``origins`` given too."""
        columns = [table.task, table.agent, table.model, table.dataset]
        label_lists: list[Sequence[str]] = [table.tasks, table.agents, table.models, table.datasets]
        for name in CELL_FIELDS[4:]:
            codes, names = (origins or {}).get(name) or (np.zeros(len(table), np.int32), [""])
            columns.append(codes)
            label_lists.append(names)
        labels: dict[str, Sequence[str]] = {}
        key: np.ndarray | None = None
        sizes = []
        task_rank = None
        for name, column, names in zip(CELL_FIELDS, columns, label_lists, strict=True):
            used, rank = _sorted_used(names, column)
            labels[name] = used
            if name == "task":
                task_rank = rank
            sizes.append(max(len(used), 1))
            if sizes[-1] > 1:  # a single label adds nothing to the key
                part = column if rank is None else rank[column]
                key = part.astype(np.int64) if key is None else key * sizes[-1] + part
        if key is None:
            key = np.zeros(len(table), dtype=np.int64)
        return cls(labels, sizes, task_rank, key)

    @property
    def total(self) -> int:
        """The number of possible keys (the product of ``sizes``)."""
        return math.prod(self.sizes)


@dataclass(frozen=True, slots=True)
class CellRows:
    """The rows of each cell (``C`` cells, in key order).

    ``keys`` int64[C] the cell keys; ``sizes`` int[C] rows per cell; either ``starts`` int[C]
    (rows in key order: cell ``c`` is rows ``starts[c]`` up to the next start) or ``inverse``
    int[n] (every row's cell).
    """

    keys: np.ndarray
    sizes: np.ndarray
    starts: np.ndarray | None
    inverse: np.ndarray | None

    @classmethod
    def of(cls, key: CellKey) -> CellRows:
        """The cells of every row's ``key``: segments when the rows are in key order (O(n));
        else unique keys and an inverse index (O(n) by ``bincount`` when few keys are
        possible)."""
        keys, n = key.key, key.key.size
        if n and bool(np.all(keys[1:] >= keys[:-1])):
            starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            return cls(keys[starts], np.diff(np.r_[starts, n]), starts, None)
        unique, inverse = _unique(keys, key.total)
        return cls(unique, np.bincount(inverse, minlength=unique.size), None, inverse)

    def __len__(self) -> int:
        return int(self.keys.size)

    def sum(self, weights: np.ndarray) -> np.ndarray:
        """Per cell, the sum of the rows' ``weights`` ([n] → [C]; float64 by ``bincount``)."""
        if self.starts is not None:
            return np.add.reduceat(weights, self.starts)
        return np.bincount(self.inverse, weights=weights, minlength=len(self))  # type: ignore[arg-type]


def encode(cell: np.ndarray, sizes: list[int]) -> np.ndarray:
    """int64[C] keys of cells given by their label indices (int[C, F], ``sizes`` labels per
    field)."""
    key = np.zeros(cell.shape[0], dtype=np.int64)
    for column, size in enumerate(sizes):
        key = key * size + cell[:, column]
    return key


def decode(keys: np.ndarray, sizes: list[int]) -> np.ndarray:
    """int32[C, F] label indices of the cell ``keys`` (inverse of :func:`encode`)."""
    columns = []
    rest = keys
    for size in reversed(sizes[1:]):
        rest, remainder = np.divmod(rest, size)
        columns.append(remainder)
    columns.append(rest)
    return np.stack(columns[::-1], axis=1).astype(np.int32)


def _strictly_increasing(labels: Sequence[str]) -> bool:
    """``all(a < b for consecutive labels)``; on a stored column, NumPy compares the arrays (its
    code-point order of NUL-padded strings: strictly increasing there implies it here)."""
    if isinstance(labels, Strings):
        array = labels.array()
        return bool(np.all(array[1:] > array[:-1]))
    return all(map(operator.lt, labels, itertools.islice(labels, 1, None)))


def _all_used(column: np.ndarray, size: int) -> bool:
    """Whether ``column`` (indices into ``size`` labels) uses every label, when that can be told
    without counting (one or two labels, or a sorted column without gaps); else False."""
    if not column.size or not size:
        return False
    low, high = int(column.min()), int(column.max())
    if (low, high) != (0, size - 1):
        return False
    if size <= 2:
        return True
    steps = np.diff(column)
    return bool(steps.min() >= 0 and steps.max() <= 1)


def _sorted_used(
    labels: Sequence[str], column: np.ndarray
) -> tuple[Sequence[str], np.ndarray | None]:
    """The labels ``column`` uses, sorted, and the rank of every label index (-1 unused);
    rank None: every label is used and already sorted (the rank is the index itself)."""
    if _all_used(column, len(labels)) and _strictly_increasing(labels):
        return (labels if isinstance(labels, Strings) else list(labels)), None
    occupied = np.bincount(column, minlength=len(labels)) > 0
    if occupied.all() and _strictly_increasing(labels):
        return (labels if isinstance(labels, Strings) else list(labels)), None
    used = np.flatnonzero(occupied)
    names = as_str_array(labels)[used] if used.size else np.zeros(0, np.str_)
    order = np.argsort(names, kind="stable")
    rank = np.full(max(len(labels), 1), -1, dtype=np.int64)
    rank[used[order]] = np.arange(used.size)
    return names[order].tolist(), rank


def _unique(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique sorted cell keys and the inverse index of every row (O(n) when ``size`` is small)."""
    if size <= 4 * key.size + 4096:
        counts = np.bincount(key, minlength=size)
        occupied = counts > 0
        position = np.cumsum(occupied) - 1
        return np.flatnonzero(occupied), position[key]
    unique, inverse = np.unique(key, return_inverse=True)
    return unique, inverse.reshape(-1)
