"""Where trials come from: job directories, ``trials.jsonl`` files, imported jobs, tasksets.

:func:`load_sources` turns ``casstore rescore SOURCE...`` arguments into one
:class:`~casstore.table.columns.RewardTable`:

* an existing directory: the Harbor job directories in it (``casstore.trials.find_jobs``),
  each parsed directly (``read_job``) with ``reward_key`` (default ``reward``);
* a ``.jsonl`` file: saved trials (``read_trials_jsonl``; their recorded reward key);
* anything else: the id or name of a job imported in the store (``Store.reward_table``).

A SOURCE that looks like a path (holds ``/`` or ends with ``.jsonl``) but does not exist is a
:class:`UsageError` ("no such file or directory") unless it is the name of an imported job.

All sources must agree on the primary reward key (:func:`concat_tables` refuses a mix). Each
trial (job id + trial name) may be given once: the same trial reached twice (the same job
directory named twice, an imported job plus its own job directory or exported trials.jsonl, a
trials file holding a line twice) is a :class:`ScoringError` naming the trial and both sources,
never silently counted twice nor silently dropped.

:func:`check_taskset` matches the trials against a taskset's tasks (``Store.resolve``): a
trial whose task is not in the taskset, or a taskset task without trials, is an error naming
them; :func:`taskset_views` returns the views declared by the taskset's task revisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from casstore.errors import UnknownReferenceError, UsageError
from casstore.table.columns import RewardTable
from casstore.table.concat import concat_tables
from casstore.trials import Jobs
from scoring._errors import ScoringError
from scoring._views import View, parse_views

__all__ = ["check_taskset", "load_sources", "open_store", "taskset_views"]


def open_store(root: Path | str) -> Any:
    """Open an existing store (never create one for reading)."""
    from casstore.store import Store

    try:
        return Store(root, create=False)
    except TypeError:  # pragma: no cover - a store without the create flag
        return Store(root)


def load_sources(
    sources: Sequence[str | Path], store_root: Path | str, reward_key: str | None = None
) -> RewardTable:
    """The trials of every source, as one table (see the module docstring).

    Raises ScoringError when a trial (job id + trial name) is given twice, UsageError when a
    path-like source does not exist.
    """
    from casstore.trials import find_jobs, read_job, read_trials_jsonl, table_from_records

    tables: list[RewardTable] = []
    trials = _TrialSources()
    store = None
    try:
        for source in sources:
            path = Path(source)
            if path.is_dir():
                for job in find_jobs([path]):
                    table = read_job(job, reward_key or "reward").table
                    trials.add(str(job), _by_job(table))
                    tables.append(table)
            elif path.suffix == ".jsonl" and path.is_file():
                key, records = read_trials_jsonl(path)
                by_job: dict[str, list[str]] = {}
                for record in records:
                    by_job.setdefault(record.job_id, []).append(record.trial_name)
                trials.add(str(path), by_job, unique=False)
                tables.append(table_from_records(records, key))
            else:
                if store is None:
                    store = _open_for(store_root, source)
                table = _imported(store, source)
                trials.add(f"imported job {source}", _by_job(table))
                tables.append(table)
    finally:
        if store is not None:
            store.close()
    return concat_tables(tables)


def _looks_like_path(source: str | Path) -> bool:
    text = str(source)
    return "/" in text or text.endswith(".jsonl")


def _missing(source: str | Path) -> UsageError:
    return UsageError(str(source), "no such file or directory")


def _open_for(store_root: Path | str, source: str | Path) -> Any:
    """The store, to look ``source`` up in; a missing path-like source is named as such."""
    try:
        return open_store(store_root)
    except UsageError:
        if _looks_like_path(source) and not Path(source).exists():
            raise _missing(source) from None
        raise


def _imported(store: Any, source: str | Path) -> RewardTable:
    """The imported job ``source``; a missing path-like source is named as such."""
    try:
        return Jobs(store).reward_table(str(source))
    except UnknownReferenceError:
        if _looks_like_path(source) and not Path(source).exists():
            raise _missing(source) from None
        raise


def _by_job(table: RewardTable) -> dict[str, Sequence[str]]:
    """``{job id: trial names}`` of a table built from one job (every directory or imported
    table); a table of several jobs without a per-row job keeps its trials under all of them
    joined (still catches the same table given twice)."""
    return {"+".join(table.jobs): table.trials}


class _TrialSources:
    """Which source gave each trial: refuses the same (job id, trial name) twice.

    Trial names are only compared within a job id given by more than one source (sources of
    different jobs cost nothing); ``unique=False`` also checks one source's own trials (a
    trials file may repeat a line; a job directory or an imported job cannot).
    """

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[str, Sequence[str]]]] = {}

    def add(self, source: str, by_job: dict[str, Sequence[str]], *, unique: bool = True) -> None:
        for job, names in by_job.items():
            if not unique:
                _check_repeats(job, names, source)
            earlier = self._seen.setdefault(job, [])
            if earlier:
                given = set(names)
                for other, other_names in earlier:
                    common = given.intersection(other_names)
                    if common:
                        where = (
                            f"{source} is given twice"
                            if other == source
                            else f"by {other} and by {source}"
                        )
                        raise ScoringError(
                            f"{job}/{min(common)}",
                            f"trial given twice, {where} ({len(common)} repeated trial(s)); "
                            "pass each trial once",
                        )
            earlier.append((source, names))


def _check_repeats(job: str, names: Sequence[str], source: str) -> None:
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    if twice:
        raise ScoringError(
            f"{job}/{min(twice)}",
            f"trial given twice by {source} ({len(twice)} repeated trial(s)); pass each trial once",
        )


def _resolve(store_root: Path | str, ref: str) -> list[tuple[str, Any]]:
    """The ``(task key, revision)`` pairs of taskset (or task) ``ref``."""
    store = open_store(store_root)
    try:
        return store.resolve(ref)[1]
    except UnknownReferenceError as error:
        # Store.resolve tries a taskset, then a task: when neither exists it reports the
        # task lookup ("no task of that name"), but --taskset asked for a taskset.
        if error.rule == "no task of that name":
            raise UnknownReferenceError(error.path, "no taskset (or task) of that name") from None
        raise
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
