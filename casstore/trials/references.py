"""What a job's stored trials reference, read without decoding their records; and which of
them an import of the job's directory reads again.

A trial read from its job directory has its evidence (the raw result.json, in an evidence pack)
and zstd dictionary in the store. A trial imported from saved trials keeps the references it
was saved with: to evidence in another store, or none. :func:`to_read_again` names the
trials whose evidence the index lacks, and those of a damaged or lost trial pack (the job
record's trial names no intact pack holds), which an import of the job's directory reads again
(:mod:`casstore.trials.importing`); fsck reports them (``missing_evidence``,
``corrupt_trial``) until then.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from casstore.digest import Digest
from casstore.errors import CorruptStoreError
from casstore.store.index import Txn
from casstore.store.values import decode
from casstore.trials.evidence import frame_count
from casstore.trials.packs import job_packs, older_trials
from casstore.trials.records import JobRecord
from casstore.trials.stored import note_damage, stored_trial
from casstore.trials.stored_form import decode_pack_references

__all__ = ["TrialReferences", "job_references", "to_read_again"]


class TrialReferences(NamedTuple):
    """A stored trial's ``trial_name``, ``evidence`` reference and ``evidence_dict`` id."""

    trial_name: str
    evidence: str | None
    evidence_dict: str | None


def job_references(
    txn: Txn, job_id: str, checksums: bool, damaged: list[CorruptStoreError] | None = None
) -> Iterator[list[TrialReferences]]:
    """The references of every stored trial of ``job_id``, a list per pack or older single
    record (packs: only those fields decoded, as
    :data:`~casstore.trials.stored_form.StoredReferences` of the same fields; an older store's
    single records: decoded whole). Raises :class:`CorruptStoreError` for a value that does
    not decode, unless ``damaged`` is given: then the error is appended there and the value
    passed over."""
    for key, raw in job_packs(txn, job_id):
        try:
            yield decode("trial_packs", key, decode_pack_references, raw, checksums)
        except CorruptStoreError as error:
            note_damage(error, damaged)
    for key, raw in older_trials(txn, job_id):
        try:
            record = stored_trial(key, raw, job_id, None, "")
        except CorruptStoreError as error:
            note_damage(error, damaged)
            continue
        yield [TrialReferences(record.trial_name, record.evidence, record.evidence_dict)]


def to_read_again(txn: Txn, job: JobRecord) -> set[str]:
    """The names of the stored trials of ``job`` an import of its directory reads again: those
    whose evidence the index lacks (no reference, or one to an evidence value, a frame of it or
    a zstd dictionary that is not there; each value looked up once, hashes are fsck's to
    check) and those the job record lists that no stored record holds (a damaged or lost
    pack's, whose records :func:`~casstore.trials.write.store_job` then replaces)."""
    frames: dict[str, int | None] = {}  # evidence key -> frames of its pack (None: an entry)
    dictionaries: dict[str | None, bool] = {None: True, "": True}
    missing = set()
    damaged: list[CorruptStoreError] = []
    held = 0
    for trials in job_references(txn, job.job_id, job.pack_checksums, damaged):
        held += len(trials)
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
    if damaged or held != len(job.trial_names):  # (rare: names collected only then)
        names = job_references(txn, job.job_id, job.pack_checksums, [])
        found_names = {trial.trial_name for trials in names for trial in trials}
        missing.update(name for name in job.trial_names if name not in found_names)
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
