"""The imported Harbor jobs of a store: ``Jobs(store)``.

The store itself knows tasks, tasksets and its databases; its jobs, trial records, reward
tables and evidence are read and written through this class, which takes the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from casstore.progress import Progress
from casstore.store.core import Store
from casstore.table.columns import RewardTable
from casstore.trials import store as imported
from casstore.trials.records import ImportReport, JobRecord, TrialRecord

__all__ = ["Jobs"]


class Jobs:
    """The imported jobs of ``store`` (see :mod:`casstore.trials.store` for the databases)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def import_jobs(
        self,
        paths: Sequence[Path | str],
        reward_key: str = "reward",
        name: str | None = None,
        progress: Progress | None = None,
    ) -> list[ImportReport]:
        """Import job directories, directories of them, or saved-trials ``.jsonl`` files: one
        :class:`ImportReport` per job (see :func:`casstore.trials.store.import_jobs`)."""
        return imported.import_jobs(self.store, paths, reward_key, name, progress)

    def list(self) -> list[JobRecord]:
        """Every imported job's record, by job id."""
        return imported.jobs(self.store)

    def get(self, job: str) -> JobRecord:
        """The record of the job with id or name ``job``; UnknownReferenceError if none."""
        return imported.job_record(self.store, job)

    def reward_table(self, job: str) -> RewardTable:
        """The stored reward table of a job (id or name); UnknownReferenceError if none."""
        return imported.reward_table(self.store, job)

    def trial_records(self, job: str) -> list[TrialRecord]:
        """The trial records of a job (id or name), by trial name."""
        return imported.trial_records(self.store, job)

    def evidence(self, reference: str) -> bytes:
        """The raw result.json bytes kept as evidence (a trial's ``evidence`` reference)."""
        return imported.evidence_bytes(self.store, reference)
