"""Where trials come from: job directories, ``trials.jsonl`` files, imported jobs, tasksets.

:func:`load_sources` turns ``casstore rescore SOURCE...`` arguments into one
:class:`~scoring.table.RewardTable`:

* an existing directory: the Harbor job directories in it (``casstore.trials.find_jobs``),
  each parsed directly (``read_job``) with ``reward_key`` (default ``reward``);
* a ``.jsonl`` file: saved trials (``read_trials_jsonl``; their recorded reward key);
* anything else: the id or name of a job imported in the store (``Store.reward_table``).

All sources must agree on the primary reward key (:func:`concat_tables` refuses a mix).
:func:`check_taskset` matches the trials against a taskset's tasks (``Store.resolve``): a
trial whose task is not in the taskset, or a taskset task without trials, is an error naming
them; :func:`taskset_views` returns the views declared by the taskset's task revisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scoring._errors import ScoringError
from scoring._views import View, parse_views
from scoring.table import RewardTable

__all__ = ["check_taskset", "concat_tables", "load_sources", "open_store", "taskset_views"]

_LABELS = ("agents", "models", "datasets", "exceptions", "failures")
_COLUMNS = ("agent", "model", "dataset", "exception", "failure")


def open_store(root: Path | str) -> Any:
    """Open an existing store (never create one for reading)."""
    from casstore.store import Store

    try:
        return Store(root, create=False)
    except TypeError:  # pragma: no cover - a store without the create flag
        return Store(root)


def _union(lists: Iterable[list[str]], first: str | None = "") -> list[str]:
    out: list[str] = [] if first is None else [first]
    seen = set(out)
    for names in lists:
        for name in names:
            if name not in seen:
                seen.add(name)
                out.append(name)
    return out


def concat_tables(tables: Sequence[RewardTable]) -> RewardTable:
    """One table with the rows of ``tables`` in order (labels and secondary keys unified).

    Raises ScoringError when the tables disagree on the primary reward key.
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
    tasks = _union((t.tasks for t in tables), first=None)
    keys = sorted({key for t in tables for key in t.keys})
    labels = {name: _union(getattr(t, name) for t in tables) for name in _LABELS}
    n = sum(len(t) for t in tables)
    values = np.full((n, len(keys)), np.nan)
    kinds = np.zeros((n, len(keys)), dtype=np.int8)
    columns: dict[str, list[np.ndarray]] = {name: [] for name in ("task", *_COLUMNS)}
    start = 0
    task_pos = {name: i for i, name in enumerate(tasks)}
    key_pos = {name: i for i, name in enumerate(keys)}
    for table in tables:
        end = start + len(table)
        remap = np.array([task_pos[name] for name in table.tasks], dtype=np.int32)
        columns["task"].append(remap[table.task] if len(table) else table.task)
        for column, name in zip(_COLUMNS, _LABELS, strict=True):
            position = {label: i for i, label in enumerate(labels[name])}
            remap = np.array([position[label] for label in getattr(table, name)], np.int32)
            columns[column].append(remap[getattr(table, column)] if len(table) else remap[:0])
        for j, key in enumerate(table.keys):
            values[start:end, key_pos[key]] = table.values[:, j]
            kinds[start:end, key_pos[key]] = table.kinds[:, j]
        start = end
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
        jobs=_union((t.jobs for t in tables), first=None),
        **{name: np.concatenate(parts).astype(np.int32) for name, parts in columns.items()},
        **labels,
    )
    merged.validate()
    return merged


def load_sources(
    sources: Sequence[str | Path], store_root: Path | str, reward_key: str | None = None
) -> RewardTable:
    """The trials of every source, as one table (see the module docstring)."""
    from casstore.trials import find_jobs, read_job, read_trials_jsonl, table_from_records

    tables: list[RewardTable] = []
    store = None
    try:
        for source in sources:
            path = Path(source)
            if path.is_dir():
                for job in find_jobs([path]):
                    tables.append(read_job(job, reward_key or "reward").table)
            elif path.suffix == ".jsonl" and path.is_file():
                key, records = read_trials_jsonl(path)
                tables.append(table_from_records(records, key))
            else:
                if store is None:
                    store = open_store(store_root)
                tables.append(store.reward_table(str(source)))
    finally:
        if store is not None:
            store.close()
    return concat_tables(tables)


def _resolve(store_root: Path | str, ref: str) -> list[tuple[str, Any]]:
    store = open_store(store_root)
    try:
        return store.resolve(ref)[1]
    finally:
        store.close()


def _identities(key: str, revision: Any) -> set[str]:
    names = {key, key.rsplit("/", 1)[-1]}
    for attribute in ("native_id", "dir_name"):
        value = getattr(revision, attribute, None)
        if value:
            names.add(value)
    return names


def check_taskset(table: RewardTable, store_root: Path | str, ref: str) -> list[tuple[str, Any]]:
    """Check ``table`` against the taskset ``ref``; returns its ``(task key, revision)`` pairs.

    A trial task matches a taskset task by the task's key, name, native id or directory name.
    """
    items = _resolve(store_root, ref)
    identities = [(key, _identities(key, revision)) for key, revision in items]
    known = set().union(*(ids for _, ids in identities)) if identities else set()
    counts = np.bincount(table.task, minlength=len(table.tasks))
    used = {name for name, count in zip(table.tasks, counts.tolist(), strict=True) if count}
    unknown = sorted(used - known)
    if unknown:
        raise ScoringError(
            ref,
            f"{len(unknown)} trial task(s) not in the taskset: {', '.join(unknown[:10])}"
            + (" …" if len(unknown) > 10 else ""),
        )
    missing = [key for key, ids in identities if not ids & used]
    if missing:
        raise ScoringError(
            ref,
            f"{len(missing)} taskset task(s) without trials: {', '.join(missing[:10])}"
            + (" …" if len(missing) > 10 else ""),
        )
    return items


def taskset_views(items: Sequence[tuple[str, Any]]) -> list[View]:
    """The views declared by the task revisions (first declaration of a name wins)."""
    views: dict[str, View] = {}
    for key, revision in items:
        declared = getattr(revision, "views", None) or []
        if declared:
            for view in parse_views(list(declared), key):
                views.setdefault(view.name, view)
    return list(views.values())
