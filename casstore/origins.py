"""Where the rows of a loaded reward table came from: their ``source`` (the SOURCE argument as
given) and their ``job`` (its name: an imported job's registered name, a job directory's name,
a trials file's or bundle's job id; two jobs of one name told apart as ``name#id``), the
columns ``--group-by job,source`` groups by (:func:`scoring.score`'s ``origins``).

A job directory or imported job holds one job; a trials file's rows are matched to their jobs
by task and trial name; a bundle's samples name their job id and, when the bundle was written
from origins (:mod:`casstore.bundle.lines`), the ``job`` and ``source`` labels their rows had
then: those are given back as they were, so the groups of the rescore that wrote the bundle
come back with the same labels in the same order (a bundle of older samples: its job ids and
its path).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from casstore.table.columns import RewardTable
from casstore.trials import TrialRecord

__all__ = ["Origins"]


class Origins:
    """Where the rows of each table came from, table after table (see the module docstring):
    :meth:`columns` gives them as :class:`Loaded` holds them."""

    def __init__(self) -> None:
        self._sources: list[tuple[list[str], np.ndarray]] = []  # (labels, codes) per table
        self._jobs: list[tuple[list[str], np.ndarray] | None] = []  # (job ids, codes)
        self._names: dict[str, str] = {}  # job id → name, the first one given

    def add(
        self,
        source: str,
        table: RewardTable,
        name: str | None,
        records: Sequence[TrialRecord] | None = None,
        row_jobs: Sequence[str] | None = None,
        row_labels: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> None:
        """The rows of ``table`` came from ``source``: all of the job ``name`` (a directory or
        an imported job), or each of its record's job (a trials file's ``records``), or the
        job id of each row (a bundle's samples: ``row_jobs``); ``row_labels``: each row's job
        label and source label as a bundle's samples recorded them (an empty label: not
        recorded, the job id and ``source`` stand)."""
        if row_labels is not None and row_jobs is not None and any(row_labels[1]):
            self._sources.append(_row_codes([label or source for label in row_labels[1]]))
        else:
            self._sources.append(([source], np.zeros(len(table), np.int32)))
        jobs = None  # several jobs and no record per row: the rows' jobs are not known
        if records is not None:
            jobs = _record_jobs(table, records)
        elif row_jobs is not None:
            jobs = _row_codes(row_jobs)
        elif len(table.jobs) == 1:
            jobs = (list(table.jobs), np.zeros(len(table), np.int32))
        self._jobs.append(jobs)
        if row_labels is not None and row_jobs is not None:
            for job, label in zip(row_jobs, row_labels[0], strict=True):
                if label:
                    self._names.setdefault(job, label)
        for job in jobs[0] if jobs else ():
            self._names.setdefault(job, name or job)

    def columns(self) -> dict[str, tuple[np.ndarray, list[str]]]:
        """``{"source": ..., "job": ...}``: codes int32[n] and labels (no ``job`` when a
        table's rows are not known by job)."""
        labels = list(dict.fromkeys(label for names, _ in self._sources for label in names))
        at = {label: i for i, label in enumerate(labels)}
        codes = [np.array([at[n] for n in names], np.int32)[c] for names, c in self._sources]
        columns = {"source": (_joined(codes), labels)}
        if all(part is not None for part in self._jobs):
            ids = list(self._names)
            position = {job: i for i, job in enumerate(ids)}
            parts = [
                np.array([position[j] for j in names], np.int32)[c]
                for names, c in filter(None, self._jobs)
            ]
            columns["job"] = (_joined(parts), _distinct_names(ids, self._names))
        return columns


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def _distinct_names(ids: list[str], names: dict[str, str]) -> list[str]:
    """The label of each job id: its name, or ``name#id`` when jobs share the name."""
    count = Counter(names[job] for job in ids)
    return [names[j] if count[names[j]] == 1 or names[j] == j else f"{names[j]}#{j}" for j in ids]


def _record_jobs(
    table: RewardTable, records: Sequence[TrialRecord]
) -> tuple[list[str], np.ndarray]:
    """The job of each row of the table of a trials file's ``records``: the record of its
    task and trial name (rows of one task and name are in job order, as the records')."""
    ids = sorted({record.job_id for record in records})
    if len(ids) == 1:
        return ids, np.zeros(len(table), np.int32)
    position = {job: i for i, job in enumerate(ids)}
    by_trial: dict[tuple[str, str], list[int]] = {}
    for record in sorted(records, key=lambda r: r.job_id, reverse=True):  # pop(): job order
        by_trial.setdefault((record.task_name, record.trial_name), []).append(
            position[record.job_id]
        )
    tasks = table.tasks
    codes = [
        by_trial[(tasks[t], trial)].pop()
        for t, trial in zip(table.task.tolist(), table.trials, strict=True)
    ]
    return ids, np.array(codes, np.int32)


def _row_codes(row_jobs: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """``(labels in order of first appearance, int32 code per row)`` of per-row labels (job
    ids, sources)."""
    ids = list(dict.fromkeys(row_jobs))
    position = {job: i for i, job in enumerate(ids)}
    return ids, np.fromiter((position[j] for j in row_jobs), np.int32, len(row_jobs))
