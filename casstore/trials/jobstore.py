"""The imported Harbor jobs of a store: ``Jobs(store)``.

The store itself knows tasks, tasksets and its databases; its jobs, trial records, reward
tables and evidence are read and written through this class, which takes the store: the
import in :mod:`casstore.trials.importing`, the reads in :mod:`casstore.trials.stored` (which
describes the databases) and :mod:`casstore.trials.stored_evidence`.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from pathlib import Path

from casstore.progress import Progress
from casstore.store.core import Store, check_store
from casstore.table.columns import RewardTable
from casstore.trials import importing, stored
from casstore.trials.records import ImportReport, JobRecord, TrialRecord
from casstore.trials.stored_evidence import evidence_bytes

__all__ = ["Jobs"]


class Jobs:
    """The imported jobs of ``store``, an open :class:`Store` (UsageError otherwise; see
    :mod:`casstore.trials.stored` for the databases)."""

    def __init__(self, store: Store) -> None:
        self.store = check_store(store)

    def import_jobs(
        self,
        paths: Sequence[Path | str],
        reward_key: str = "reward",
        name: str | None = None,
        progress: Progress | None = None,
    ) -> list[ImportReport]:
        """Import job directories, directories of them, or saved-trials ``.jsonl`` files: one
        :class:`ImportReport` per job (see :func:`casstore.trials.importing.import_jobs`)."""
        return importing.import_jobs(self.store.index, paths, reward_key, name, progress)

    def list(self) -> list[JobRecord]:
        """Every imported job's record, by job id."""
        return stored.jobs(self.store.index)

    def get(self, job: str) -> JobRecord:
        """The record of the job with id or name ``job``; UnknownReferenceError if none."""
        return stored.job_record(self.store.index, job)

    def reward_table(self, job: str) -> RewardTable:
        """The stored reward table of a job (id or name); UnknownReferenceError if none."""
        return stored.reward_table(self.store.index, job)

    def trial_records(self, job: str) -> builtins.list[TrialRecord]:
        """The trial records of a job (id or name), by trial name."""
        return stored.trial_records(self.store.index, job)

    def evidence(self, reference: str) -> bytes:
        """The raw result.json bytes kept as evidence (a trial's ``evidence`` reference)."""
        return evidence_bytes(self.store.index, reference)
