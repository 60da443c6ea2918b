"""The reward table of trial records (saved trials, or a job's stored and new trials merged),
their attempts and counts: the rules and the table builder of an imported job, applied to
records.

:func:`table_from_records` packs the records into one chunk
(:func:`~casstore.trials.chunk.columns`) and merges it (:func:`~casstore.trials.merge.merge`):
the table an imported job gets, with rows sorted by task, job, attempt and trial name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from casstore.table.columns import RewardTable
from casstore.trials.chunk import Chunk, columns
from casstore.trials.merge import merge
from casstore.trials.records import TrialRecord
from casstore.trials.rules import attempt_order, counts, flags

__all__ = ["assign_attempts", "job_counts", "table_from_records"]


def assign_attempts(records: list[TrialRecord]) -> None:
    """Set ``attempt`` on each record: its index within its task (by job) in
    :func:`~casstore.trials.rules.attempt_order` (``started_at``, missing first, then
    ``trial_name``)."""
    by_job = len({r.job_id for r in records}) > 1  # (one job: plain task names sort faster)
    _, attempts, _ = attempt_order(
        [(r.job_id, r.task_name) for r in records] if by_job else [r.task_name for r in records],
        [r.started_at or "" for r in records],
        [r.trial_name for r in records],
    )
    for r, attempt in zip(records, attempts, strict=True):
        r.attempt = attempt


def table_from_records(
    records: Sequence[TrialRecord], reward_key: str, jobs: list[str] | None = None
) -> RewardTable:
    """The :class:`RewardTable` of ``records`` for ``reward_key`` (rows sorted by task, job,
    attempt, trial name) of the jobs ``jobs`` (default: the records' job ids, sorted).
    Attempts are taken from the records (see :func:`assign_attempts`).

    Secondary ``keys`` are the other reward keys of valid mappings, sorted. Invalid rows keep
    no reward (NaN, Kind MISSING) and carry Flag.INVALID.
    """
    job_ids = sorted({r.job_id for r in records})
    chunk = _chunk_of(records, reward_key, by_job=len(job_ids) > 1)
    return merge([chunk], None, list(jobs) if jobs is not None else job_ids, reward_key).table


def _chunk_of(records: Sequence[TrialRecord], reward_key: str, by_job: bool) -> Chunk:
    """The records as one chunk holding only what the table needs (no stored records, no
    evidence): its order is by task, then job (when ``by_job``: records of several jobs) and
    attempt, then trial name."""
    names = [r.trial_name for r in records]
    attempts = [r.attempt for r in records]
    order, _, segments = attempt_order(
        [r.task_name for r in records],
        [(r.job_id, r.attempt) for r in records] if by_job else attempts,
        names,
    )
    return Chunk(
        rows=b"",
        errors=[],
        names=names,
        records=[],
        ev_key=b"",
        ev_pack=b"",
        order=np.array(order, np.int32).tobytes(),
        attempts=np.array(attempts, np.int32).tobytes(),
        segments=segments,
        **columns(records, reward_key, combine=False),  # (decoded: no shared rewards)
    )


def job_counts(records: Iterable[TrialRecord]) -> dict[str, int]:
    """:func:`~casstore.trials.rules.counts` of the records' flags."""
    column = [flags(r.valid, r.has_verifier, r.exception_type) for r in records]
    return counts(np.array(column, np.uint8))
