"""What a job's stored trials reference, read without decoding their records; and which of
them lack their evidence in the index.

A trial read from its job directory has its evidence (the raw result.json, in an evidence pack)
and zstd dictionary in the store. A trial imported from saved trials keeps the references it
was saved with: to evidence in another store, or none. :func:`without_evidence` names the
trials whose evidence the index lacks, which an import of the job's directory reads again
(:mod:`casstore.trials.importing`), and fsck reports (``missing_evidence``) until then.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from casstore.digest import Digest
from casstore.store.index import Txn
from casstore.store.values import decode
from casstore.trials.evidence import frame_count
from casstore.trials.packs import job_packs, older_trials
from casstore.trials.records import JobRecord
from casstore.trials.stored import stored_trial
from casstore.trials.stored_form import decode_pack_references

__all__ = ["TrialReferences", "job_references", "without_evidence"]


class TrialReferences(NamedTuple):
    """A stored trial's ``trial_name``, ``evidence`` reference and ``evidence_dict`` id."""

    trial_name: str
    evidence: str | None
    evidence_dict: str | None


def job_references(txn: Txn, job_id: str, checksums: bool) -> Iterator[list[TrialReferences]]:
    """The references of every stored trial of ``job_id``, a list per pack or older single
    record (packs: only those fields decoded, as
    :data:`~casstore.trials.stored_form.StoredReferences` of the same fields; an older store's
    single records: decoded whole). Raises :class:`CorruptStoreError` for a value that does
    not decode."""
    for key, raw in job_packs(txn, job_id):
        yield decode("trial_packs", key, decode_pack_references, raw, checksums)
    for key, raw in older_trials(txn, job_id):
        record = stored_trial(key, raw, job_id, None, "")
        yield [TrialReferences(record.trial_name, record.evidence, record.evidence_dict)]


def without_evidence(txn: Txn, job: JobRecord) -> set[str]:
    """The names of the stored trials of ``job`` whose evidence the index lacks: no
    reference, or one to an evidence value, a frame of it or a zstd dictionary that is not
    there (each value looked up once; hashes are fsck's to check)."""
    frames: dict[str, int | None] = {}  # evidence key -> frames of its pack (None: an entry)
    dictionaries: dict[str | None, bool] = {None: True, "": True}
    missing = set()
    for trials in job_references(txn, job.job_id, job.pack_checksums):
        for trial in trials:
            key, _, index = (trial.evidence or "").partition("#")
            if key not in frames:
                frames[key] = _frames(txn, key, bool(index))
            name = trial.evidence_dict
            if name not in dictionaries:
                dictionaries[name] = txn.has("zstd_dicts", name or "")
            found = frames[key]
            if index:  # a frame of a pack
                present = found is not None and index.isdecimal() and int(index) < found
            else:  # an older store's entry
                present = found is None
            if not present or not dictionaries[name]:
                missing.add(trial.trial_name)
    return missing


def _frames(txn: Txn, key: str, pack: bool) -> int | None:
    """The frames of the evidence pack at ``key`` (0: none there, damaged, or no evidence
    key), None for an older store's entry (no frames)."""
    if not Digest.is_digest(key):
        return 0
    value = txn.raw_get("evidence", key)
    if value is None:
        return 0
    if not pack:
        return None
    try:
        return frame_count(value)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):  # damaged: read again
        return 0
