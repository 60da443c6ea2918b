"""A job's trial records in the index: trial packs, and the single records of older schemas.

``trial_packs``: ``<job id>/<pack number, 8 digits>`` → a **trial pack**, the array of up to
:data:`TRIALS_PER_PACK` trial records in their stored form, by trial name (see
:func:`~casstore.trials.stored_form.encode_trial_pack`); a job's packs depend on its records
alone, not on how they were read or written. The keys are of a bounded size whatever the
trial names (an LMDB key holds at most 511 bytes). Stores of schemas 1 and 2 kept one record
per trial in ``trials`` (``<job id>/<trial name>``); they are listed alike
(:func:`older_trials`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from itertools import islice

from casstore.store.index import Txn
from casstore.trials.records import TrialRecord
from casstore.trials.stored_form import encode_trial_pack

__all__ = [
    "TRIALS_PER_PACK",
    "delete_trials",
    "has_trials",
    "increasing",
    "job_packs",
    "older_trials",
    "sort_by_trial_name",
    "trial_packs",
    "whole_packs",
]

TRIALS_PER_PACK = 500
"""Trial records per ``trial_packs`` value (the last pack of a job holds the rest)."""
_PACK_DIGITS = 8


def trial_packs(
    job_id: str, names: list[str], records: list[bytes], first: int = 0
) -> list[tuple[bytes, bytes]]:
    """``(key, pack)`` items holding ``records`` (stored form; their trial ``names`` alike)
    by trial name, :data:`TRIALS_PER_PACK` per pack, numbered from ``first``."""
    if not increasing(names):
        order = sorted(range(len(names)), key=names.__getitem__)
        records = [records[i] for i in order]
    return [
        (_pack_key(job_id, first + k), encode_trial_pack(records[start : start + TRIALS_PER_PACK]))
        for k, start in enumerate(range(0, len(records), TRIALS_PER_PACK))
    ]


def whole_packs(records: int) -> int:
    """How many of ``records`` records fill whole packs (the rest wait for more)."""
    return records - records % TRIALS_PER_PACK


def _pack_key(job_id: str, number: int) -> bytes:
    """The ``trial_packs`` key of the job's pack ``number`` (0 first)."""
    return f"{job_id}/{number:0{_PACK_DIGITS}d}".encode()


def increasing(names: list[str]) -> bool:
    """Whether ``names`` are strictly increasing."""
    return all(map(str.__lt__, names, islice(names, 1, None)))


def sort_by_trial_name(records: list[TrialRecord]) -> None:
    """Sort ``records`` in place by trial name, the order of a job's packs."""
    records.sort(key=_TRIAL_NAME)


_TRIAL_NAME = operator.attrgetter("trial_name")


def job_packs(txn: Txn, job_id: str) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of the job's ``trial_packs`` in pack order: the keys
    ``<job id>/<pack number, 8 digits>`` (another job whose id starts ``<job id>/`` has
    longer keys)."""
    prefix = f"{job_id}/"
    size = len(prefix.encode()) + _PACK_DIGITS
    for key, raw in txn.raw_items("trial_packs", prefix):
        if len(key) == size and key[-_PACK_DIGITS:].isdigit():
            yield key, raw


def older_trials(txn: Txn, job_id: str) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of the job's single trial records in ``trials`` (schemas 1 and 2:
    keys ``<job id>/<trial name>``)."""
    return txn.raw_items("trials", f"{job_id}/")


def has_trials(txn: Txn, job_id: str) -> bool:
    """Whether the index holds trial records of ``job_id`` (packs, or older single records)."""
    older = next(older_trials(txn, job_id), None)
    return older is not None or next(job_packs(txn, job_id), None) is not None


def delete_trials(txn: Txn, job_id: str) -> None:
    """Remove every trial record of ``job_id`` (packs, and older single records)."""
    for db, found in (
        ("trial_packs", job_packs(txn, job_id)),
        ("trials", older_trials(txn, job_id)),
    ):
        for key in [key for key, _ in found]:
            txn.delete(db, key)
