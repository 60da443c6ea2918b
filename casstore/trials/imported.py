"""One parsed job directory: :class:`ImportedJob`, what ``read_job`` returns and the store
writes."""

from __future__ import annotations

from typing import Any

from casstore.table.columns import RewardTable
from casstore.trials.merge import Packed
from casstore.trials.records import JobRecord, TrialRecord
from casstore.trials.stored_form import decode_stored

__all__ = ["ImportedJob"]


class ImportedJob:
    """One parsed job directory.

    ``job_id``; ``record`` (:class:`JobRecord`); ``trials`` (one :class:`TrialRecord` per
    attempt with a readable result.json, attempts assigned); ``table`` (:class:`RewardTable`
    for ``reward_key``); ``diagnostics`` (dicts with ``code``); ``failure_codes`` (code →
    count; per-trial codes plus job-level ones); ``evidence`` (the ``evidence`` database
    values the trials' references name: key → value, see :mod:`casstore.trials.evidence`)
    and ``dictionary`` (zstd dictionary bytes or None) for the store.

    A job read by :func:`read_job` keeps its trials packed as the store writes them
    (``packed``); ``trials`` and ``evidence`` are decoded from them on first use.
    """

    def __init__(
        self,
        job_id: str,
        record: JobRecord,
        trials: list[TrialRecord] | None = None,
        table: RewardTable | None = None,
        diagnostics: list[dict[str, Any]] | None = None,
        failure_codes: dict[str, int] | None = None,
        evidence: dict[str, bytes] | None = None,
        dictionary: bytes | None = None,
        packed: Packed | None = None,
    ) -> None:
        if table is None:
            if packed is None:
                raise TypeError("ImportedJob needs a table")
            table = packed.table
        self.job_id = job_id
        self.record = record
        self.table = table
        self.diagnostics = diagnostics if diagnostics is not None else []
        self.failure_codes = failure_codes if failure_codes is not None else {}
        self.dictionary = dictionary
        self.packed = packed
        self._trials = trials if trials is not None or packed is not None else []
        self._evidence = evidence if evidence is not None or packed is not None else {}

    @property
    def trials(self) -> list[TrialRecord]:
        if self._trials is None:
            assert self.packed is not None
            job_id, path, key = self.job_id, self.record.path, self.record.reward_key
            self._trials = [decode_stored(r, job_id, path, key) for r in self.packed.records]
        return self._trials

    @trials.setter
    def trials(self, value: list[TrialRecord]) -> None:
        self._unpack()
        self._trials = value

    @property
    def evidence(self) -> dict[str, bytes]:
        if self._evidence is None:
            assert self.packed is not None
            self._evidence = {key.decode(): value for key, value in self.packed.evidence}
        return self._evidence

    @evidence.setter
    def evidence(self, value: dict[str, bytes]) -> None:
        self._unpack()
        self._evidence = value

    def _unpack(self) -> None:
        """Trials and evidence decoded, the packed form dropped (it may no longer match)."""
        if self.packed is not None:
            _ = self.trials, self.evidence
            self.packed = None

    @property
    def n_trials(self) -> int:
        """``len(trials)`` without decoding them."""
        return len(self.packed.names) if self._trials is None and self.packed else len(self.trials)
