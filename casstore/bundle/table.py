"""A bundle's reward table: the canonical form of a table, and the table of its samples.

The round trip table → samples → table is exact for a **canonical** table
(:func:`canonical`): tasks and every label list numbered in order of first appearance (``""``
at 0 for the labels), Harbor's evals key of each row stored, secondary keys sorted and each
held by some row. Scoring a table or its canonical form gives the same numbers; only the order
of labels (of groups, evals keys, exception names) can differ. So a bundle scores the
canonical table and writes its samples, and :func:`table_of_samples` gives that very table
back: a rescore of the bundle reproduces its summary bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from casstore.bundle.samples import Sample, read_value
from casstore.errors import CorruptArchiveError
from casstore.table.columns import LABEL_COLUMNS, Flag, Kind, RewardTable
from casstore.table.labels import first_seen

__all__ = ["canonical", "table_of_samples"]


def canonical(table: RewardTable) -> RewardTable:
    """``table`` as :func:`table_of_samples` gives it back from its samples (the module
    docstring): the same rows in the same order."""
    tasks, task = _by_first(table.task, table.tasks)
    columns: dict[str, Any] = {}
    for code, names in LABEL_COLUMNS:
        found = _with_empty(getattr(table, code), getattr(table, names))
        columns[names], columns[code] = first_seen(*found)
    evals_keys, evals = _by_first(*table.harbor_evals())
    held = [j for j in range(len(table.keys)) if np.any(table.kinds[:, j] != Kind.MISSING)]
    return RewardTable(
        reward_key=table.reward_key,
        tasks=tasks,
        trials=list(table.trials),
        keys=[table.keys[j] for j in held],
        task=task,
        attempt=np.asarray(table.attempt, np.int32),
        flags=np.asarray(table.flags, np.uint8),
        primary=np.asarray(table.primary, np.float64),
        primary_kind=np.asarray(table.primary_kind, np.int8),
        values=np.ascontiguousarray(table.values[:, held], np.float64),
        kinds=np.ascontiguousarray(table.kinds[:, held], np.int8),
        jobs=list(table.jobs),
        evals=evals,
        evals_keys=evals_keys,
        **columns,
    )


def _by_first(codes: np.ndarray, names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """``(names, int32 codes)`` renumbered in order of first appearance (unused names
    dropped)."""
    present, first = np.unique(codes, return_index=True)
    seen = present[np.argsort(first, kind="stable")]
    remap = np.zeros(max(len(names), 1), np.int32)
    remap[seen] = np.arange(len(seen), dtype=np.int32)
    return [names[c] for c in seen.tolist()], remap[codes].astype(np.int32)


def _with_empty(codes: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, names)`` with ``""`` at 0 (prepended when the list lacks it there), as
    :func:`~casstore.table.labels.first_seen` takes them."""
    names = list(names)
    codes = np.asarray(codes, np.int32)
    if names and names[0] == "":
        return codes, names
    return codes + 1, ["", *names]


_ABSENT: Any = object()
_KINDS = {float: Kind.NUMBER, bool: Kind.BOOLEAN, int: Kind.INTEGER}


def table_of_samples(samples: Sequence[Sample], reward_key: str, where: str) -> RewardTable:
    """The canonical reward table the ``samples`` were written from (rows in their order);
    CorruptArchiveError naming ``where`` and the line for a reward value no bundle writes."""
    n = len(samples)
    rewards = list(map(attrgetter("rewards"), samples))
    keys = sorted({key for found in rewards for key in found} - {reward_key})
    primary, primary_kind = _column(rewards, reward_key, where)
    values = np.full((n, len(keys)), np.nan)
    kinds = np.zeros((n, len(keys)), np.int8)
    for j, key in enumerate(keys):
        values[:, j], kinds[:, j] = _column(rewards, key, where)
    labels, flags = _labels(samples)
    tasks, task = _codes(list(map(attrgetter("task"), samples)))
    return RewardTable(
        reward_key=reward_key,
        tasks=tasks,
        trials=list(map(attrgetter("trial"), samples)),
        keys=keys,
        task=task,
        attempt=np.fromiter(map(attrgetter("attempt"), samples), np.int32, n),
        flags=flags,
        primary=primary,
        primary_kind=primary_kind,
        values=values,
        kinds=kinds,
        jobs=list(dict.fromkeys(map(attrgetter("job_id"), samples))),
        **labels,
    )


def _codes(names: list[Any]) -> tuple[list[Any], np.ndarray]:
    """``(distinct names by first appearance, int32 code of each name)``."""
    distinct = list(dict.fromkeys(names))
    position = {name: i for i, name in enumerate(distinct)}
    return distinct, np.fromiter(map(position.__getitem__, names), np.int32, len(names))


_LABELS = (
    ("agent", "agents", "agent"),
    ("model", "models", "model"),
    ("dataset", "datasets", "dataset"),
    ("exception", "exceptions", "exception_type"),
    ("failure", "failures", "failure"),
    ("evals", "evals_keys", "harbor_evals_key"),
)
_FLAGS: tuple[tuple[str, bool, Flag], ...] = (
    ("has_exception", True, Flag.EXCEPTION),
    ("has_verifier", False, Flag.NO_VERIFIER),
    ("valid", False, Flag.INVALID),
)


def _labels(samples: Sequence[Sample]) -> tuple[dict[str, Any], np.ndarray]:
    """The label columns and lists (``""`` at 0, by first appearance; the evals keys by first
    appearance) and the flags of the samples, in one pass: the rows' combinations of labels
    and flags are few, so each column is numbered through them."""
    fields = [field for _, _, field in _LABELS] + [name for name, _, _ in _FLAGS]
    combos, combo = _codes(list(map(attrgetter(*fields), samples)))
    out: dict[str, Any] = {}
    for i, (code, names, field) in enumerate(_LABELS):
        values = [values[i] or "" for values in combos]
        labels, remap = _codes(values if field == "harbor_evals_key" else ["", *values])
        if field != "harbor_evals_key":
            remap = remap[1:]
        out[names], out[code] = labels, remap[combo]
    bits = np.zeros(len(combos), np.uint8)
    for j, (_, when, flag) in enumerate(_FLAGS, start=len(_LABELS)):
        bits[[values[j] is when for values in combos]] |= np.uint8(flag)
    return out, bits[combo] if len(combo) else np.zeros(0, np.uint8)


def _column(rewards: list[dict[str, Any]], key: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``(float64 values, int8 kinds)`` of reward ``key`` over the rows (NaN, MISSING where
    absent)."""
    raw = [found.get(key, _ABSENT) for found in rewards]
    classes = set(map(type, raw))
    if classes == {float}:
        return np.array(raw, np.float64), np.full(len(raw), Kind.NUMBER, np.int8)
    values = np.array([v if v.__class__ is float else np.nan for v in raw], np.float64)
    kinds = np.fromiter((_KINDS.get(v.__class__, -1) for v in raw), np.int8, len(raw))
    for row in np.flatnonzero(kinds == -1).tolist():
        if raw[row] is _ABSENT:
            kinds[row] = Kind.MISSING
        else:
            values[row], kinds[row] = read_value(raw[row], f"{where}:{row + 1}")
    for row in np.flatnonzero((kinds == Kind.BOOLEAN) | (kinds == Kind.INTEGER)).tolist():
        try:
            values[row] = float(raw[row])
        except OverflowError:  # an integer no float64 holds: no bundle writes one
            raise CorruptArchiveError(
                f"{where}:{row + 1}",
                f"not a reward value as a bundle writes one: an integer of "
                f"{raw[row].bit_length()} bits (a float holds at most 1024)",
            ) from None
    return values, kinds
