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

import functools
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from casstore.table.columns import RewardTable
from casstore.table.npz import Strings, as_str_array
from scoring._errors import ScoringError
from scoring._exact_sum import binary
from scoring._rules import EMITTED_CODE, PRIMARY_TABLES, Attempts, Status

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


def _cells(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique sorted cell keys and the inverse index of every row (O(n) when ``size`` is small)."""
    if size <= 4 * key.size + 4096:
        counts = np.bincount(key, minlength=size)
        occupied = counts > 0
        position = np.cumsum(occupied) - 1
        return np.flatnonzero(occupied), position[key]
    unique, inverse = np.unique(key, return_inverse=True)
    return unique, inverse.reshape(-1)


# Counted per cell from the rule codes, in this order, then per secondary key j (table order):
# present_j, measured_j. Scored attempts are the rest of the cell; attempts = cell − invalid.
_FIELDS = ("partial", "errored", "no_verifier", "invalid", "success", "present")
_PRIMARY_BITS = 7  # the primary code (6 bits) and primary >= threshold
_FIRST_CHUNK = 3  # secondaries in the first chunk's code (7 + 3·3 = 16 bits)
_CHUNK = 4  # secondaries per further chunk: 2 flag bits (no verifier, invalid) + 4·3 bits


@functools.lru_cache(maxsize=64)
def _count_tables(
    k: int, width: int, word_bits: int, zero_succeeds: bool
) -> tuple[tuple[tuple[int, ...], tuple[np.ndarray, ...]], ...]:
    """Lookup tables from per-row codes to packed count words.

    Rows are coded per chunk of secondaries: the first chunk's code is the primary code
    (:mod:`scoring._rules`) | ``primary >= threshold`` << 6 | the secondary codes of keys
    0..2 (3 bits each from bit 7); each further chunk's code is ``(flags >> 1) & 3`` | the
    codes of the next (up to) 4 keys from bit 2. Field ``f`` (``_FIELDS`` then present_j,
    measured_j) is ``width`` bits wide at bit ``(f % per) * width`` of word ``f // per``
    (``per = word_bits // width`` fields per word); every count of a cell is below
    ``2 ** width``, so the fields of a sum of words never carry into each other. Returns, per
    chunk, its keys and one uint64 table per word.
    """
    per = word_bits // width
    n_fields = len(_FIELDS) + 2 * k
    n_words = -(-n_fields // per)
    chunks = [tuple(range(min(k, _FIRST_CHUNK)))]
    for begin in range(_FIRST_CHUNK, k, _CHUNK):
        chunks.append(tuple(range(begin, min(k, begin + _CHUNK))))
    out = []
    for number, keys in enumerate(chunks):
        base = _PRIMARY_BITS if number == 0 else 2
        code = np.arange(1 << (base + 3 * len(keys)), dtype=np.uint64)
        fields: dict[int, np.ndarray] = {}
        if number == 0:
            primary = (code & 63).astype(np.intp)
            status = PRIMARY_TABLES["status"][primary]
            valid = status != Status.INVALID
            flags = primary >> 1
            for f, name in enumerate(_FIELDS[:4]):
                fields[f] = status == Status[name.upper()]
            ge = (code >> 6) & 1 == 1
            usable = PRIMARY_TABLES["usable"][primary]
            fields[4] = valid & np.where(usable, ge, zero_succeeds)
            fields[5] = PRIMARY_TABLES["present"][primary]
        else:
            flags = (code & 3).astype(np.intp)
        scoreable = (flags & 3) == 0
        valid = (flags & 2) == 0
        for i, j in enumerate(keys):
            secondary = (code >> np.uint64(base + 3 * i)) & 7
            fields[len(_FIELDS) + 2 * j] = valid & ((secondary & 3) != 0)
            fields[len(_FIELDS) + 2 * j + 1] = scoreable & (secondary == EMITTED_CODE)
        words = [np.zeros(code.size, dtype=np.uint64) for _ in range(n_words)]
        for f, bits in fields.items():
            words[f // per] |= bits.astype(np.uint64) << np.uint64((f % per) * width)
        out.append((keys, tuple(words)))
    return tuple(out)


def _packed_counts(
    rules: Attempts,
    table: RewardTable,
    threshold: float,
    cell_sizes: np.ndarray,
    starts: np.ndarray | None,
    inverse: np.ndarray | None,
    n_cells: int,
) -> list[np.ndarray]:
    """Every count field per cell (int64[C] each): one lookup and one reduction per word.

    Grouped rows (``starts``) are summed as uint64 segments; otherwise by ``bincount`` with
    float64 weights, exact because every word and every cell's sum stays below 2**53."""
    k = len(table.keys)
    n_fields = len(_FIELDS) + 2 * k
    if not n_cells:
        return [np.zeros(0, np.int64) for _ in range(n_fields)]
    width = max(int(cell_sizes.max()).bit_length(), 1)
    word_bits = 64 if starts is not None else 53
    per = word_bits // width
    zero_succeeds = bool(threshold <= 0.0)
    words: list[np.ndarray | None] = [None] * -(-n_fields // per)
    for number, (keys, tables) in enumerate(_count_tables(k, width, word_bits, zero_succeeds)):
        if number == 0:
            code = rules.code.astype(np.uint16 if keys else np.uint8)
            code |= (table.primary >= threshold).view(np.uint8) << np.uint8(6)
            base = _PRIMARY_BITS
        else:
            code = (rules.code >> np.uint8(1)) & np.uint8(3)
            code = code.astype(np.uint16)
            base = 2
        for i, j in enumerate(keys):
            code |= rules.secondary[:, j].astype(np.uint16) << np.uint16(base + 3 * i)
        for w, lookup in enumerate(tables):
            if lookup.any():
                part = lookup[code]
                words[w] = part if words[w] is None else words[w] + part  # type: ignore[operator]
    mask = np.uint64((1 << width) - 1)
    reduced = []
    for word in words:
        if word is None:
            reduced.append(np.zeros(n_cells, np.uint64))
        elif starts is not None:
            reduced.append(np.add.reduceat(word, starts))
        else:
            sums = np.bincount(inverse, weights=word, minlength=n_cells)  # type: ignore[arg-type]
            reduced.append(sums.astype(np.uint64))
    return [
        ((reduced[f // per] >> np.uint64((f % per) * width)) & mask).astype(np.int64)
        for f in range(n_fields)
    ]


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
        """Reduce every row of ``table`` (with its decided ``rules``) into cells.

        The integer counts come from one packed word per row (:func:`_count_tables`): a lookup
        table over the row's rule codes gives every count bit-field at once, so a single
        reduction per word counts them all; the float sums are reduced column by column.
        """
        columns = [table.task, table.agent, table.model, table.dataset]
        label_lists = [table.tasks, table.agents, table.models, table.datasets]
        labels: dict[str, list[str]] = {}
        n = len(table)
        key: np.ndarray | None = None
        sizes = []
        task_rank = None
        for name, column, names in zip(CELL_FIELDS, columns, label_lists, strict=True):
            used, rank = _sorted_used(names, column)
            labels[name] = used  # type: ignore[assignment]
            if name == "task":
                task_rank = rank
            sizes.append(max(len(used), 1))
            if sizes[-1] > 1:  # a single label adds nothing to the key
                part = column if rank is None else rank[column]
                key = part.astype(np.int64) if key is None else key * sizes[-1] + part
        if key is None:
            key = np.zeros(n, dtype=np.int64)
        total = 1
        for size in sizes:
            total *= size
        # rows already grouped by cell (tables sorted by task): contiguous segment sums
        if n and bool(np.all(key[1:] >= key[:-1])):
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            unique, inverse = key[starts], None
            cell_sizes = np.diff(np.r_[starts, n])
        else:
            unique, inverse = _cells(key, total)
            starts = None
            cell_sizes = np.bincount(inverse, minlength=unique.size)
        n_cells = int(unique.size)

        def count(weights: np.ndarray) -> np.ndarray:
            if starts is not None:
                return np.add.reduceat(weights, starts)
            return np.bincount(inverse, weights=weights, minlength=n_cells)

        k = len(table.keys)
        counts = _packed_counts(rules, table, threshold, cell_sizes, starts, inverse, n_cells)
        status = np.zeros((n_cells, _N_STATUS), dtype=np.int64)
        for s in (Status.PARTIAL, Status.ERRORED, Status.NO_VERIFIER, Status.INVALID):
            status[:, s] = counts[_FIELDS.index(s.name.lower())]
        status[:, Status.SCORED] = cell_sizes - status.sum(axis=1)
        order = sorted(range(k), key=table.keys.__getitem__)
        n_out = 1 + len(order)
        present = np.zeros((n_cells, n_out), dtype=np.int64)
        measured = np.zeros((n_cells, n_out), dtype=np.int64)
        sums = np.zeros((n_cells, n_out))
        sumsq = np.zeros((n_cells, n_out))
        attempts = cell_sizes.astype(np.int64) - status[:, Status.INVALID]
        present[:, 0] = counts[_FIELDS.index("present")]
        measured[:, 0] = attempts
        for out, j in enumerate([-1, *order]):
            if out:
                present[:, out] = counts[len(_FIELDS) + 2 * j]
                measured[:, out] = counts[len(_FIELDS) + 2 * j + 1]
                value = np.where(rules.emitted_of(j), table.values[:, j], 0.0)
            else:
                value = rules.primary
            sums[:, out] = count(value)
            # x * x == x for 0 and 1: the sums of squares of binary values are their sums
            sumsq[:, out] = sums[:, out] if binary(value) else count(value * value)
        successes = counts[_FIELDS.index("success")]
        cell = _decode(unique, sizes)
        if k and task_rank is None:  # the rules' diagnostics need it: counted here anyway
            expected = np.zeros((len(table.tasks), k), dtype=bool)
            for out, j in enumerate(order, start=1):
                expected[cell[present[:, out] > 0, 0], j] = True
            rules.expected = expected
        return cls(
            reward_key=table.reward_key,
            secondaries=[table.keys[j] for j in order],
            threshold=float(threshold),
            labels=labels,
            cell=cell,
            attempts=attempts,
            successes=successes,
            status=status,
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
