"""The write of a new job while it is parsed: one write transaction open across the parse.

:func:`~casstore.trials.read.read_job` hands its chunks to a :class:`JobStream` (its
:class:`~casstore.trials.chunk.ChunkSink`) as it parses them; the evidence and full trial packs
are written at once, so that the end of the parse leaves little to write. Anything unexpected
aborts the transaction and the caller writes the parsed job the usual way
(:func:`~casstore.trials.write.store_job` in :meth:`Index.write`): the store ends the same.
"""

from __future__ import annotations

from typing import Any

import lmdb

from casstore.store.index import Index, WriteTxn
from casstore.trials.imported import ImportedJob
from casstore.trials.packs import has_trials, increasing, trial_packs, whole_packs
from casstore.trials.records import ImportReport
from casstore.trials.write import put_dictionary, put_evidence, store_packed

__all__ = ["JobStream"]

# map bytes reserved per trial directory of a streamed job (a record, its keys and evidence
# take about 1.5 KB; Index.reserve doubles it): a bigger job ends in the usual write (map grown)
_ROW_BYTES = 4096


class JobStream:
    """The write of new job ``job_id`` whose chunks are stored as ``read_job`` parses them:
    ``start`` grows the map for the job and opens the write transaction, ``add`` writes a
    chunk's evidence pack and every full trial pack (the records must come in trial-name
    order, as Harbor names trial directories after their trials), ``finish`` writes the
    last pack and the rest as :func:`store_packed` does and commits. Anything unexpected
    (the job appeared meanwhile, a full map, trial names out of order, records the merge
    rewrote) aborts the transaction: ``finish`` then returns None and the caller writes the
    parsed job the usual way."""

    def __init__(self, index: Index, job_id: str) -> None:
        self.index = index
        self.job_id = job_id
        self.txn: WriteTxn | None = None
        self.failed = False
        self.names: list[str] = []  # records not yet in a pack, and their trial names
        self.records: list[bytes] = []
        self.last: str | None = None  # the trial name of the last record added
        self.packs = 0  # packs written

    def start(self, trials: int) -> None:
        """Reserve map space for ``trials`` trial directories and begin the transaction."""
        self.index.reserve(_ROW_BYTES * trials)
        self.txn = txn = self.index.begin_write()
        if txn.get("jobs", self.job_id) is not None or has_trials(txn, self.job_id):
            self.failed = True  # imported meanwhile: the usual path merges with it

    def add(self, chunk: Any) -> None:
        """Write a parsed chunk's evidence pack and the full trial packs it completes."""
        if self.failed or self.txn is None or not chunk.records:
            return
        names = chunk.names
        if (self.last is not None and names[0] <= self.last) or not increasing(names):
            self.failed = True  # the usual path sorts them
            return
        self.last = names[-1]
        self.names += names
        self.records += chunk.records
        try:
            put_evidence(self.txn, [(chunk.ev_key, chunk.ev_pack)])
            self._write_packs(self.txn, full_only=True)
        except lmdb.Error:
            self.failed = True

    def _write_packs(self, txn: WriteTxn, full_only: bool) -> None:
        """Write the buffered records in packs (only full ones when ``full_only``)."""
        count = whole_packs(len(self.records)) if full_only else len(self.records)
        if count:
            packs = trial_packs(self.job_id, self.names[:count], self.records[:count], self.packs)
            txn.raw_put_many("trial_packs", packs)
            self.packs += len(packs)
            del self.names[:count], self.records[:count]

    def finish(self, parsed: ImportedJob) -> ImportReport | None:
        """Commit and report, or None (transaction aborted) when the job must be written
        the usual way."""
        if self.txn is None:
            return None
        packed = parsed.packed
        if self.failed or packed is None or packed.rewritten or parsed.job_id != self.job_id:
            self.abort()
            return None
        txn = self.txn
        try:
            self._write_packs(txn, full_only=False)
            put_dictionary(txn, parsed)
            report = store_packed(txn, parsed, None, rows=False)
            txn.commit()
        except lmdb.Error:
            self.abort()
            return None
        self.txn = None
        return report

    def abort(self) -> None:
        """Drop what was written (the index stays as it was); idempotent."""
        if self.txn is not None:
            self.txn.abort()
            self.txn = None
