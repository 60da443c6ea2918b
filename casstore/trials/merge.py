"""Merge the chunks of a job (:class:`~casstore.trials.chunk.Chunk`) into its packed trials
and its reward table.

The table's rows are sorted by task then attempt, its tasks sorted, its labels numbered in
order of first appearance (:func:`~casstore.table.labels.first_seen`). Attempts follow
:func:`~casstore.trials.rules.attempt_order`: the chunks' own when no task has trials in two
chunks, else assigned again over the job (each record patched).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import msgspec
import numpy as np

from casstore.table.columns import RewardTable
from casstore.table.labels import first_seen, positions, renumber, union
from casstore.trials.chunk import LABELS, Chunk
from casstore.trials.rules import attempt_order, counts
from casstore.trials.stored_form import StoredTrialRecord, stored_with_attempt

__all__ = ["Packed", "merge"]

_STORED_DECODER = msgspec.msgpack.Decoder(StoredTrialRecord)


@dataclass
class Packed:
    """A job's parsed trials as the store keeps them (rows in trial-directory order):
    ``names`` (trial names), ``records`` (msgpack records, attempts set), ``evidence``
    (``(key, value)`` of the ``evidence`` database packs the records reference),
    ``failures`` (failure code → trials), ``counts`` (:func:`~casstore.trials.rules.counts`),
    ``table``; ``rewritten``: whether the merge changed or dropped records the chunks carried
    (a duplicate trial name, a task with trials in several chunks)."""

    names: list[str]
    records: list[bytes]
    evidence: list[tuple[bytes, bytes]]
    failures: dict[str, int]
    counts: dict[str, int]
    table: RewardTable
    rewritten: bool = False


@dataclass
class _Columns:
    """The table columns of the chunks' rows joined (rows in trial-directory order)."""

    flags: np.ndarray
    primary: np.ndarray
    primary_kind: np.ndarray
    labels: list[list[str]]  # per label column (LABELS order), "" first
    codes: list[np.ndarray]
    value_keys: list[str]
    values: np.ndarray
    kinds: np.ndarray

    def rows(self, kept: np.ndarray) -> _Columns:
        """Only the rows ``kept`` (indices)."""
        return _Columns(
            self.flags[kept],
            self.primary[kept],
            self.primary_kind[kept],
            self.labels,
            [codes[kept] for codes in self.codes],
            self.value_keys,
            self.values[kept],
            self.kinds[kept],
        )


@dataclass
class _Order:
    """The table's row order: ``rows`` (indices, by task then attempt), ``tasks`` (sorted),
    each sorted row's ``task`` (index into ``tasks``) and ``attempt``."""

    rows: np.ndarray
    tasks: list[str]
    task: np.ndarray
    attempt: np.ndarray


def merge(chunks: list[Chunk], kept: np.ndarray | None, jobs: list[str], reward_key: str) -> Packed:
    """The chunks' rows (only ``kept`` ones when given) merged: attempts assigned (each record
    patched when it changes) and the reward table for ``reward_key`` of the job(s) ``jobs``
    built from the chunks' columns (see the module docstring)."""
    names = list(chain.from_iterable(c.names for c in chunks))
    records = list(chain.from_iterable(c.records for c in chunks))
    joined = _joined(chunks)
    segments = _disjoint_segments(chunks) if kept is None else None
    if kept is not None:
        rows = kept.tolist()
        names, records = [names[i] for i in rows], [records[i] for i in rows]
        joined = joined.rows(kept)
    if segments is not None:  # every task within one chunk: the chunks' attempts hold
        order = _chunk_order(segments, _array(chunks, "attempts", np.int32))
    else:
        local = _array(chunks, "attempts", np.int32)
        order, records = _job_order(names, records, local if kept is None else local[kept])
    table = _table(joined, order, names, reward_key, jobs)
    return Packed(
        names=names,
        records=records,
        evidence=_evidence(chunks, kept),
        failures=_failures(table),
        counts=counts(table.flags),
        table=table,
        rewritten=segments is None,
    )


def _evidence(chunks: list[Chunk], kept: np.ndarray | None) -> list[tuple[bytes, bytes]]:
    """The chunks' evidence packs, but those of chunks none of whose rows is ``kept``: no
    record would reference them (a chunk of duplicate trial names)."""
    if kept is None:
        return [(c.ev_key, c.ev_pack) for c in chunks if c.ev_key]
    ends = np.cumsum([len(c.names) for c in chunks])
    alive = set(np.searchsorted(ends, kept, side="right").tolist())
    return [(c.ev_key, c.ev_pack) for k, c in enumerate(chunks) if c.ev_key and k in alive]


def _array(chunks: list[Chunk], name: str, dtype: Any) -> np.ndarray:
    """The chunks' column ``name`` (bytes of ``dtype``) joined."""
    parts = [np.frombuffer(getattr(c, name), dtype) for c in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _joined(chunks: list[Chunk]) -> _Columns:
    """The chunks' columns joined: labels merged (in order of first appearance, chunk after
    chunk) and codes renumbered into them, secondary keys merged (sorted)."""
    labels: list[list[str]] = []
    codes: list[np.ndarray] = []
    for column in range(len(LABELS)):
        merged = union(c.labels[column] for c in chunks)
        position = positions(merged)
        parts = [np.zeros(0, np.int32)]
        parts += [
            renumber(np.frombuffer(c.codes[column], np.int32), c.labels[column], position)
            for c in chunks
        ]
        labels.append(merged)
        codes.append(np.concatenate(parts))
    value_keys, values, kinds = _joined_values(chunks)
    return _Columns(
        flags=_array(chunks, "flags", np.uint8),
        primary=_array(chunks, "primary", np.float64),
        primary_kind=_array(chunks, "primary_kind", np.int8),
        labels=labels,
        codes=codes,
        value_keys=value_keys,
        values=values,
        kinds=kinds,
    )


def _joined_values(chunks: list[Chunk]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(value_keys, values, kinds)``: the chunks' secondary keys (sorted) and their value
    and kind arrays joined (NaN and MISSING where a chunk lacks a key)."""
    value_keys = sorted({k for c in chunks for k in c.value_keys})
    n = sum(len(c.names) for c in chunks)
    values = np.full((n, len(value_keys)), math.nan, np.float64)
    kinds = np.zeros((n, len(value_keys)), np.int8)
    if value_keys:
        column_of = {k: j for j, k in enumerate(value_keys)}
        start = 0
        for c in chunks:
            m = len(c.names)
            if c.value_keys:
                at = [column_of[k] for k in c.value_keys]
                shape = (m, len(c.value_keys))
                values[start : start + m, at] = np.frombuffer(c.values, np.float64).reshape(shape)
                kinds[start : start + m, at] = np.frombuffer(c.kinds, np.int8).reshape(shape)
            start += m
    return value_keys, values, kinds


def _disjoint_segments(
    chunks: list[Chunk],
) -> list[tuple[str, np.ndarray, int, int]] | None:
    """``(task, chunk order offset into the job's rows, start, stop)`` per task, tasks
    sorted, when no task has rows in two chunks; else None."""
    found: list[tuple[str, int, int, int]] = []
    for k, c in enumerate(chunks):
        found.extend((task, k, a, b) for task, a, b in c.segments)
    found.sort()
    if any(found[i][0] == found[i + 1][0] for i in range(len(found) - 1)):
        return None
    orders = []
    base = 0
    for c in chunks:
        orders.append(np.frombuffer(c.order, np.int32).astype(np.intp) + base)
        base += len(c.names)
    return [(task, orders[k], a, b) for task, k, a, b in found]


def _chunk_order(segments: list[tuple[str, np.ndarray, int, int]], attempts: np.ndarray) -> _Order:
    """The row order the chunks' own orders give (``segments`` of
    :func:`_disjoint_segments`), with the chunks' ``attempts``."""
    rows = np.concatenate([np.zeros(0, np.intp)] + [order[a:b] for _, order, a, b in segments])
    return _Order(
        rows=rows,
        tasks=[task for task, _, _, _ in segments],
        task=_task_column([b - a for _, _, a, b in segments]),
        attempt=attempts[rows],
    )


def _job_order(
    names: list[str], records: list[bytes], local: np.ndarray
) -> tuple[_Order, list[bytes]]:
    """The row order with attempts assigned over the whole job, and the records with their
    attempt patched where it differs from the chunk's (``local``)."""
    decoded = [_STORED_DECODER.decode(r) for r in records]
    tasks = [r.task_name for r in decoded]
    started = [r.started_at or "" for r in decoded]
    order, attempts, segments = attempt_order(tasks, started, names)
    records = [
        r if a == b else stored_with_attempt(r, a)
        for r, a, b in zip(records, attempts, local.tolist(), strict=True)
    ]
    rows = np.array(order, np.intp)
    by_row = _Order(
        rows=rows,
        tasks=[task for task, _, _ in segments],
        task=_task_column([b - a for _, a, b in segments]),
        attempt=np.array(attempts, np.int32)[rows],
    )
    return by_row, records


def _task_column(sizes: Sequence[int]) -> np.ndarray:
    """The int32 task column of rows sorted by task, the i-th task having ``sizes[i]`` rows."""
    return np.repeat(np.arange(len(sizes), dtype=np.int32), np.array(sizes, np.intp))


def _table(
    joined: _Columns, order: _Order, names: list[str], reward_key: str, jobs: list[str]
) -> RewardTable:
    """The reward table of the joined columns' rows in ``order``."""
    o = order.rows
    labels: dict[str, list[str]] = {}
    codes: dict[str, np.ndarray] = {}
    for column, merged, column_codes in zip(LABELS, joined.labels, joined.codes, strict=True):
        labels[column], codes[column] = first_seen(column_codes[o], merged)
    table = RewardTable(
        reward_key=reward_key,
        tasks=order.tasks,
        trials=[names[i] for i in o.tolist()],
        keys=joined.value_keys,
        task=order.task,
        attempt=order.attempt,
        flags=joined.flags[o],
        primary=joined.primary[o],
        primary_kind=joined.primary_kind[o],
        values=joined.values[o],
        kinds=joined.kinds[o],
        agents=labels["agent"],
        models=labels["model"],
        datasets=labels["dataset"],
        exceptions=labels["exception"],
        failures=labels["failure"],
        evals_keys=labels["evals"],
        jobs=jobs,
        **codes,
    )
    table.validate()
    return table


def _failures(table: RewardTable) -> dict[str, int]:
    """Failure code → trials of the table's rows."""
    found = np.bincount(table.failure, minlength=len(table.failures)).tolist()
    return {
        label: int(count)
        for label, count in zip(table.failures, found, strict=True)
        if label and count
    }
