"""One reward table from several: rows in order, labels and secondary keys unified."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from casstore.errors import ScoringError
from casstore.table.columns import LABEL_COLUMNS, RewardTable
from casstore.table.labels import positions, renumber, union

__all__ = ["concat_tables"]


def concat_tables(tables: Sequence[RewardTable]) -> RewardTable:
    """One table with the rows of ``tables`` in order: tasks, labels, evals keys and jobs in
    order of first appearance, secondary keys sorted (a key a table lacks is missing there).

    Raises :class:`ScoringError` when there is no table or the tables disagree on the primary
    reward key (naming each key's jobs).
    """
    if not tables:
        raise ScoringError(None, "no trials to score")
    keys_seen = {table.reward_key for table in tables}
    if len(keys_seen) > 1:
        jobs = {table.reward_key: ", ".join(table.jobs) or "?" for table in tables}
        detail = "; ".join(f"{key!r} ({jobs[key]})" for key in sorted(keys_seen))
        raise ScoringError(None, f"trials disagree on the primary reward key: {detail}")
    if len(tables) == 1:
        return tables[0]
    tasks = union((t.tasks for t in tables), first=None)
    keys = sorted({key for t in tables for key in t.keys})
    labels = {name: union(getattr(t, name) for t in tables) for _, name in LABEL_COLUMNS}
    evals = [t.harbor_evals() for t in tables]
    evals_keys = union((keys for _, keys in evals), first=None)
    columns: dict[str, list[np.ndarray]] = {"task": [], "evals": []}
    columns |= {column: [] for column, _ in LABEL_COLUMNS}
    task_pos, evals_pos = positions(tasks), positions(evals_keys)
    label_pos = {name: positions(labels[name]) for _, name in LABEL_COLUMNS}
    for table, (codes, names) in zip(tables, evals, strict=True):
        columns["evals"].append(renumber(codes, names, evals_pos))
        columns["task"].append(renumber(table.task, table.tasks, task_pos))
        for column, name in LABEL_COLUMNS:
            columns[column].append(
                renumber(getattr(table, column), getattr(table, name), label_pos[name])
            )
    values, kinds = _secondaries(tables, keys)
    merged = RewardTable(
        reward_key=tables[0].reward_key,
        tasks=tasks,
        trials=[trial for t in tables for trial in t.trials],
        keys=keys,
        attempt=np.concatenate([t.attempt for t in tables]),
        flags=np.concatenate([t.flags for t in tables]),
        primary=np.concatenate([t.primary for t in tables]),
        primary_kind=np.concatenate([t.primary_kind for t in tables]),
        values=values,
        kinds=kinds,
        jobs=union((t.jobs for t in tables), first=None),
        evals_keys=evals_keys,
        agents=labels["agents"],
        models=labels["models"],
        datasets=labels["datasets"],
        exceptions=labels["exceptions"],
        failures=labels["failures"],
        **{name: np.concatenate(parts).astype(np.int32) for name, parts in columns.items()},
    )
    merged.validate()
    return merged


def _secondaries(tables: Sequence[RewardTable], keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The ``values`` (NaN where a table lacks a key) and ``kinds`` columns of the tables'
    rows over the merged secondary ``keys``."""
    n = sum(len(t) for t in tables)
    values = np.full((n, len(keys)), np.nan)
    kinds = np.zeros((n, len(keys)), dtype=np.int8)
    key_pos = positions(keys)
    start = 0
    for table in tables:
        end = start + len(table)
        for j, key in enumerate(table.keys):
            values[start:end, key_pos[key]] = table.values[:, j]
            kinds[start:end, key_pos[key]] = table.kinds[:, j]
        start = end
    return values, kinds
