"""Imported jobs in a store's LMDB index, and how they are read back.

Databases (keys UTF-8, values msgpack): ``jobs`` (job id → :class:`JobRecord`),
``trial_packs`` (``<job id>/<pack number, 8 digits>`` → a **trial pack**: the array of up to
:data:`~casstore.trials.packs.TRIALS_PER_PACK` trial records (:class:`TrialRecord`, by trial
name) in their stored form, each an array without what the job record implies, see
:mod:`casstore.trials.packs` and :func:`~casstore.trials.stored_form.encode_trial_pack`),
``reward_tables`` (job id → :meth:`RewardTable.to_bytes`), ``evidence`` (content-addressed:
``sha256:<hex>`` of the value; a pack of the zstd-compressed raw result.json files of the
trial directories read together (:data:`~casstore.trials.chunk.TRIALS_PER_CHUNK` or so), a trial's
reference ``<key>#<index>``, see :mod:`casstore.trials.evidence`),
``zstd_dicts`` (dictionary id → bytes). One value per few hundred trials, not one per trial:
an import of 100,000 trials writes 400 values instead of 200,000.

Stores of schema 1 and 2 kept one record per trial in ``trials`` (``<job id>/<trial name>``)
and one evidence entry per file: they are read alike (:func:`stored_trials`,
:func:`~casstore.trials.stored_evidence.evidence_bytes`); the next import into such a job
rewrites its records as packs (:mod:`casstore.trials.write`).

Stored values are read through :func:`stored_job`, :func:`stored_table`, :func:`stored_trial`,
:func:`stored_pack` and :func:`~casstore.trials.stored_evidence.evidence_bytes`: a value that
does not decode or validate (or a reward table one of whose column CRC-32s fails) is
:class:`CorruptStoreError` naming ``db/key``.
"""

from __future__ import annotations

import re
from typing import Any

from casstore.digest import DigestPrefix
from casstore.errors import (
    CorruptStoreError,
    UnknownReferenceError,
    is_text,
    printable,
    unknown_reference,
)
from casstore.store.index import Index, Txn
from casstore.store.prefixes import matching, unique
from casstore.store.values import decode
from casstore.table.columns import RewardTable
from casstore.trials.packs import job_packs, older_trials, sort_by_trial_name
from casstore.trials.records import JobRecord, TrialRecord, from_builtins
from casstore.trials.stored_form import decode_stored, decode_trial_pack

__all__ = [
    "TRIAL_DATABASES",
    "job_record",
    "jobs",
    "note_damage",
    "reward_table",
    "stored_job",
    "stored_pack",
    "stored_table",
    "stored_trial",
    "stored_trials",
    "trial_records",
]

TRIAL_DATABASES = ("jobs", "trial_packs", "trials", "reward_tables", "evidence", "zstd_dicts")


def stored_job(job_id: str, raw: Any) -> JobRecord:
    """The job record stored (unpacked) as ``raw`` at ``job_id``. Raises
    :class:`CorruptStoreError` when it does not validate."""
    return decode("jobs", job_id, from_builtins, raw, JobRecord)


def stored_table(job_id: str, data: bytes) -> RewardTable:
    """The reward table stored as ``data`` at ``job_id``, every column's CRC-32 checked now
    (the name columns too, which :meth:`RewardTable.from_bytes` leaves to their first use:
    a damaged one is found before any scoring or output). Raises :class:`CorruptStoreError`
    when it does not load or a CRC-32 fails."""
    return decode("reward_tables", job_id, _verified_table, data)


def _verified_table(data: bytes) -> RewardTable:
    """:meth:`RewardTable.from_bytes` and :meth:`RewardTable.verify` (raise ``ValueError``)."""
    table = RewardTable.from_bytes(data)
    table.verify()
    return table


def stored_trial(
    key: bytes, raw: bytes, job_id: str, path: str | None, reward_key: str
) -> TrialRecord:
    """The trial record stored as ``raw`` at ``key`` of ``trials`` (older stores: one record
    per trial) of job ``job_id`` (see :func:`decode_stored`). Raises
    :class:`CorruptStoreError` when it does not decode."""
    return decode("trials", key, decode_stored, raw, job_id, path, reward_key)


def stored_pack(
    key: bytes, raw: bytes, job_id: str, path: str | None, reward_key: str, checksums: bool
) -> list[TrialRecord]:
    """The trial records of the pack stored as ``raw`` at ``key`` of ``trial_packs``, its
    CRC-32 checked (``checksums``: the job record's ``pack_checksums``, see
    :func:`decode_trial_pack`). Raises :class:`CorruptStoreError` when it does not decode or
    its CRC-32 fails."""
    return decode("trial_packs", key, decode_trial_pack, raw, job_id, path, reward_key, checksums)


def stored_trials(
    txn: Txn, job: JobRecord, damaged: list[CorruptStoreError] | None = None
) -> list[TrialRecord]:
    """The stored trial records of ``job`` (by trial name), decoded for the job record's
    ``path`` and ``reward_key``, their packs' CRC-32 checked (see :func:`stored_pack`,
    :func:`stored_trial`). ``damaged`` given: a pack or record that does not decode is left
    out, its error appended there (an import that may replace it), instead of raised."""
    job_id, path, reward_key = job.job_id, job.path, job.reward_key
    records: list[TrialRecord] = []
    for key, raw in older_trials(txn, job_id):
        try:
            records.append(stored_trial(key, raw, job_id, path, reward_key))
        except CorruptStoreError as error:
            note_damage(error, damaged)
    for key, raw in job_packs(txn, job_id):
        try:
            records += stored_pack(key, raw, job_id, path, reward_key, job.pack_checksums)
        except CorruptStoreError as error:
            note_damage(error, damaged)
    sort_by_trial_name(records)  # packs hold trials in directory order
    return records


def note_damage(error: CorruptStoreError, damaged: list[CorruptStoreError] | None) -> None:
    """Keep ``error`` (a value that does not decode) in ``damaged``, or raise it when there is
    none (the caller reads every value or fails)."""
    if damaged is None:
        raise error
    damaged.append(error)


def jobs(index: Index) -> list[JobRecord]:
    """Every imported job, by job id. Raises :class:`CorruptStoreError` for a damaged one."""
    return index.read(lambda txn: [stored_job(key, raw) for key, raw in txn.items("jobs")])


def job_record(index: Index, job: str) -> JobRecord:
    """The job with id or name ``job``, else the one whose ``aliases`` hold it (a job adopted
    under another id), else the one whose id starts with ``job`` (a unique prefix of at
    least 8 hex digits: :func:`_id_starts`; AmbiguousPrefixError when several do).
    UnknownReferenceError if none (or a name is shared by several jobs: use the id);
    CorruptStoreError when a job record it reads is damaged."""

    if not is_text(job):
        raise unknown_reference(printable(job), "imported job", "id or name")

    def body(txn: Txn) -> JobRecord:
        raw = txn.get("jobs", job)
        if raw is not None:
            return stored_job(job, raw)
        records = list(txn.items("jobs"))
        for field in ("name", "aliases"):
            named = [(key, raw) for key, raw in records if _names(key, raw, field, job)]
            if len(named) == 1:
                return stored_job(*named[0])
            if named:
                raise UnknownReferenceError(job, f"{len(named)} jobs have that name; use the id")
        found = unique(job, matching(txn, ["jobs"], _id_starts(job)), "imported jobs")
        if found is not None:
            return stored_job(found[1], txn.get("jobs", found[1]))
        raise unknown_reference(job, "imported job", "id or name")

    return index.read(body)


_ID_PREFIX = re.compile(r"[0-9a-f]{8}[0-9a-f-]*")
"""The start of a Harbor job id (a UUID), as a prefix of it may be given."""


def _id_starts(job: str) -> list[str]:
    """What the job ids ``job`` is a prefix of start with (README, "Digests"): a digest
    prefix (``sha256:`` and 8+ hex digits: UsageError saying the rule when shorter), or 8+
    hex digits (dashes after them) of a UUID or, bare, of a digest id; none otherwise (a
    name that matched nothing)."""
    if job.startswith(("sha256:", "blake3:")):
        return DigestPrefix.parse(job, "sha256").keys()
    if not _ID_PREFIX.fullmatch(job):
        return []
    return [job] if "-" in job else [job, *DigestPrefix.parse(job, "sha256").keys()]


def _names(job_id: str, raw: Any, field: str, job: str) -> bool:
    """Whether the job record stored (unpacked) as ``raw`` is named ``job`` by ``field``
    (``name``, or one of its ``aliases``); CorruptStoreError when ``raw`` is not a map."""
    value = decode("jobs", job_id, dict.get, raw, field)
    return value == job if field == "name" else isinstance(value, list) and job in value


def reward_table(index: Index, job: str) -> RewardTable:
    """The stored :class:`RewardTable` of a job (by id or name); CorruptStoreError when it is
    damaged (see :func:`stored_table`) or missing (every import writes the job record and its
    table in one transaction: a job record without a table is damage, not a usage error)."""
    job_id = job_record(index, job).job_id
    data = index.read(lambda txn: txn.get("reward_tables", job_id))
    if data is None:
        raise CorruptStoreError(
            f"reward_tables/{job_id}", "missing (the job record names this job; fsck reports it)"
        )
    return stored_table(job_id, data)


def trial_records(index: Index, job: str) -> list[TrialRecord]:
    """The job's trial records (by id or name), by trial name. A relative ``result_path``
    (stored by older imports, as typed then) is made absolute under the job's path."""
    record = job_record(index, job)
    return index.read(lambda txn: stored_trials(txn, record))
