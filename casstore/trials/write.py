"""Writing a parsed job into the index, merged with the trials stored for it.

One write transaction holds all of it: the job's evidence, its trial records (every record of
the job rewritten, in packs by trial name: attempts are re-assigned over all of the job's
trials), its reward table (rebuilt over all of them, for the job record's ``reward_key``) and
its job record (trial count and names, failure codes, labels). A job whose trials are its only
ones and still packed as :func:`~casstore.trials.read.read_job` made them is written as it is,
nothing decoded (:func:`store_packed`).

Evidence is content-addressed: a value stored at the same digest is kept unless its bytes
differ (damaged: the digest fixes the bytes), then replaced. The trials stored for a job
moved since they were read keep their ``result_path`` where the file still is, else it is
moved under the job's new directory (:func:`_rebase`).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import NamedTuple

import msgspec

from casstore.errors import CorruptStoreError
from casstore.store.index import Index, Txn
from casstore.table.codes import FailureCode, ordered_counts
from casstore.table.columns import RewardTable
from casstore.trials.imported import ImportedJob
from casstore.trials.orphans import drop_all_unreferenced, drop_unreferenced
from casstore.trials.packs import delete_trials, has_trials, sort_by_trial_name, trial_packs
from casstore.trials.records import (
    ImportReport,
    JobRecord,
    TrialRecord,
    label_record,
    record_reward_key,
)
from casstore.trials.stored import stored_trials
from casstore.trials.stored_form import encode_stored
from casstore.trials.table import assign_attempts, job_counts, table_from_records

__all__ = [
    "drop_replaced",
    "put_dictionary",
    "put_evidence",
    "reserve_for",
    "store_job",
    "store_packed",
]


def store_job(
    txn: Txn,
    parsed: ImportedJob,
    previous: JobRecord | None,
    replace: bool = False,
    refill: set[str] | frozenset[str] = frozenset(),
) -> ImportReport:
    """Write a parsed job, merged with the trials stored for it (``previous``: its stored job
    record, None for a new job). A parsed trial whose name is stored already replaces it
    when ``replace`` (saved trials) or when its name is in ``refill`` (stored trials whose
    evidence the index lacks, read again from the job directory), else is left out with a
    ``duplicate_trial_name`` diagnostic (a job directory: only directories not imported
    before are read, so such a trial is another directory's copy; the first one stays).
    A stored pack (or older record) that does not decode is replaced when the parsed trials
    hold every trial it may hold (:func:`_check_replaced`, else :class:`CorruptStoreError`);
    after such a pack, or one lost, every evidence value and dictionary no job references is
    removed (what the records referenced is unknown)."""
    job_id, record = parsed.job_id, parsed.record
    key = record.reward_key
    put_dictionary(txn, parsed)
    if parsed.packed is not None and not has_trials(txn, job_id):
        return store_packed(txn, parsed, previous)
    everything, kept, dropped, repaired = _merged(txn, parsed, previous, replace, refill)
    put_evidence(txn, _referenced(parsed.evidence, everything))
    record_reward_key(everything, key)
    if kept:
        assign_attempts(everything)
        table = table_from_records(everything, key, jobs=[job_id])
    else:  # the parsed trials alone: attempts and table as read_job made them
        table = parsed.table
    # every record rewritten, in packs by trial name (attempts may have changed anywhere)
    delete_trials(txn, job_id)
    sort_by_trial_name(everything)
    names = [t.trial_name for t in everything]
    records = [encode_stored(t, record.path, key) for t in everything]
    txn.raw_put_many("trial_packs", trial_packs(job_id, names, records))
    txn.put("reward_tables", job_id, table.to_bytes())
    record.trials, record.trial_names = len(everything), names
    codes = Counter(t.failure for t in everything if t.failure)
    _put_record(txn, parsed, previous, table, codes, bool(parsed.trials))
    if dropped:
        drop_replaced(txn, dropped, everything, record.dictionary)
    if repaired:  # what the damaged or lost records referenced is unknown
        drop_all_unreferenced(txn)
    known = set(previous.trial_names) if previous is not None else set()
    imported = sum(t.trial_name not in known for t in parsed.trials)
    return _report(record, job_counts(everything), imported)


def store_packed(
    txn: Txn, parsed: ImportedJob, previous: JobRecord | None, rows: bool = True
) -> ImportReport:
    """:func:`store_job` for a job read by ``read_job`` whose trials are the job's only ones:
    the packed records, evidence and table written as they are (nothing decoded). ``rows``
    False: the records and evidence are written already (:mod:`casstore.trials.stream`)."""
    packed = parsed.packed
    assert packed is not None
    job_id, record = parsed.job_id, parsed.record
    if rows:
        put_evidence(txn, packed.evidence)
        txn.raw_put_many("trial_packs", trial_packs(job_id, packed.names, packed.records))
    txn.put("reward_tables", job_id, packed.table.to_bytes())
    record.trials = len(packed.names)
    if len(record.trial_names) != len(packed.names):  # read_job sorted them already
        record.trial_names = sorted(packed.names)
    _put_record(txn, parsed, previous, packed.table, Counter(packed.failures), bool(packed.names))
    return _report(record, packed.counts, len(packed.names))


class _Merged(NamedTuple):
    """The job's ``trials`` once a parsed job is stored, whether a stored one stays
    (``kept``), the stored ones replaced (``dropped``), whether stored records were damaged
    or lost (``repaired``: trials the job record lists that no decoded record holds)."""

    trials: list[TrialRecord]
    kept: bool
    dropped: list[TrialRecord]
    repaired: bool = False


def _merged(
    txn: Txn,
    parsed: ImportedJob,
    previous: JobRecord | None,
    replace: bool,
    refill: set[str] | frozenset[str],
) -> _Merged:
    """The job's trials once ``parsed`` is stored (see :func:`store_job`): the stored ones
    that stay (their result paths rebased) and the new ones."""
    record = parsed.record
    stored_as = previous or record  # the job the stored records were written for
    damaged: list[CorruptStoreError] | None = [] if previous is not None else None
    stored = stored_trials(txn, stored_as, damaged)
    _rebase(stored, stored_as.path, record.path)
    new = list(parsed.trials)
    unheld = _unheld(previous, stored, bool(damaged))
    if damaged:
        _check_replaced(damaged, unheld, new)
    if replace:
        replaced = {trial.trial_name for trial in new}
    else:
        replaced = {trial.trial_name for trial in new} & refill if refill else set()
    old = [t for t in stored if t.trial_name not in replaced] if replaced else stored
    if not replace:
        new = _not_stored(new, old, record)
    dropped = [t for t in stored if t.trial_name in replaced] if replaced else []
    return _Merged(old + new, bool(old), dropped, bool(damaged or unheld))


def _unheld(previous: JobRecord | None, stored: list[TrialRecord], damaged: bool) -> list[str]:
    """The trial names the stored job record lists that none of its decoded ``stored``
    records holds (a damaged or lost pack's; compared only when ``damaged`` or the counts
    differ)."""
    if previous is None or (not damaged and len(stored) == len(previous.trial_names)):
        return []
    held = {t.trial_name for t in stored}
    return [name for name in previous.trial_names if name not in held]


def _check_replaced(
    damaged: list[CorruptStoreError], unheld: list[str], new: list[TrialRecord]
) -> None:
    """Damaged trial packs (or older records) of a stored job are replaced by the import when
    its ``new`` trials hold every ``unheld`` trial (those the job record lists that no intact
    record holds); else :class:`CorruptStoreError` (the first damaged value's, naming the
    trials missing): no trial is dropped without a copy."""
    held = {t.trial_name for t in new}
    lost = [name for name in unheld if name not in held]
    if lost:
        first = damaged[0]
        names = ", ".join(repr(name) for name in lost[:3]) + (", ..." if len(lost) > 3 else "")
        raise CorruptStoreError(
            first.path,
            f"{first.rule}; not replaced: {len(lost)} trial(s) it may hold are not among those "
            f"imported ({names}); import the job directory or a saved-trials file that holds "
            "them",
        )


def _referenced(evidence: dict[str, bytes], trials: list[TrialRecord]) -> list[tuple[bytes, bytes]]:
    """The items of ``evidence`` (key → value) the job's ``trials`` reference: a chunk whose
    trials were all left out is not stored (no trial would reference it); one re-read that
    stored trials reference is (it replaces a damaged value, see :func:`put_evidence`)."""
    keys = {t.evidence.partition("#")[0] for t in trials if t.evidence}
    return [(k.encode(), value) for k, value in evidence.items() if k in keys]


def drop_replaced(
    txn: Txn, dropped: list[TrialRecord], trials: list[TrialRecord], dictionary: str | None
) -> None:
    """Remove the evidence and dictionaries of the ``dropped`` trial records that neither the
    job's ``trials`` and ``dictionary`` nor any other job references
    (:func:`~casstore.trials.orphans.drop_unreferenced`)."""
    still = {t.evidence.partition("#")[0] for t in trials if t.evidence}
    keys = {t.evidence.partition("#")[0] for t in dropped if t.evidence} - still
    names = {t.evidence_dict for t in dropped if t.evidence_dict}
    names -= {t.evidence_dict for t in trials} | {dictionary}
    drop_unreferenced(txn, keys, {name for name in names if name})


_JOB_COUNTED = (
    FailureCode.RESULT_UNREADABLE,
    FailureCode.JOB_RESULT_MISSING_PARTIAL,
    FailureCode.TRIAL_COUNT_MISMATCH,
    FailureCode.LAUNCHER_FAILED,
    FailureCode.JOB_RESULT_MISSING,
    FailureCode.CANCELLED,
)
"""The failure codes no trial record carries (a trial file not read; the job's own): the
parse counts them."""


def _put_record(
    txn: Txn,
    parsed: ImportedJob,
    previous: JobRecord | None,
    table: RewardTable,
    codes: Counter[str],
    new_trials: bool,
) -> None:
    """Write the parsed job's record (its trial count and names set): what it keeps of
    ``previous``, its failure codes (the trials' ``codes`` and the parse's
    :data:`_JOB_COUNTED`), its labels from ``table``. Encoded straight from the struct (a
    third of the time of its builtins through ``Txn.put`` for 100,000 trial names; read back
    alike)."""
    record = parsed.record
    for code in _JOB_COUNTED:
        if parsed.failure_codes.get(code):
            codes[code] = parsed.failure_codes[code]
    if previous is not None:
        _keep_previous(record, previous, new_trials)
        _keep_job_files(record, previous, codes, parsed.packed is not None)
    record.failure_codes = ordered_counts(codes)
    record.pack_checksums = True  # (every pack of the job was written by this version)
    label_record(record, table)
    txn.raw_put("jobs", record.job_id, _ENCODER.encode(record))


_ENCODER = msgspec.msgpack.Encoder()


def _report(record: JobRecord, counts: dict[str, int], imported: int) -> ImportReport:
    """The report of the job written as ``record``: ``counts`` (see :func:`job_counts`) over
    all of its trials, ``imported`` of them new."""
    return ImportReport(
        job=record.job_id,
        name=record.name,
        trials=counts["trials"],
        imported=imported,
        invalid=counts["invalid"],
        exceptions=counts["exceptions"],
        no_verifier=counts["no_verifier"],
        failure_codes=record.failure_codes,
        diagnostics=record.diagnostics,
    )


def _keep_previous(record: JobRecord, previous: JobRecord, new_trials: bool) -> None:
    """What the new job record keeps of the stored one: its first import time, its aliases,
    the Harbor schema drift seen on trials read earlier, its zstd dictionary when no trial
    is new."""
    record.imported_at = previous.imported_at or record.imported_at
    record.aliases = list(dict.fromkeys([*previous.aliases, *record.aliases]))
    # drift seen on trials read earlier stays reported (a re-import reads only new ones)
    codes_now = {d.get("code") for d in record.diagnostics}
    record.diagnostics = record.diagnostics + [
        d
        for d in previous.diagnostics
        if d.get("code") == "harbor_schema_drift" and "harbor_schema_drift" not in codes_now
    ]
    if previous.dictionary and not new_trials:
        record.dictionary = previous.dictionary


_RESULT_FIELDS = ("started_at", "finished_at", "recorded_metrics")
"""The fields of a job record read from the job's result.json."""


def _keep_job_files(
    record: JobRecord, previous: JobRecord, codes: Counter[str], from_directory: bool
) -> None:
    """What the new job record keeps of the job-level files an earlier import read: a job
    result.json read once stays read (a partial copy of the job's trial directories or saved
    trials bring none: its fields are kept, no ``job_result_missing_partial``); one never
    read stays missing after saved trials (``from_directory`` False: no job file looked at);
    the trial count expected and the Harbor version when the new import found none."""
    missing = FailureCode.JOB_RESULT_MISSING_PARTIAL
    read_now = from_directory and not codes.get(missing)
    if not read_now and _result_read(previous):
        for field in _RESULT_FIELDS:
            setattr(record, field, getattr(previous, field))
        codes.pop(missing, None)
        record.diagnostics = [d for d in record.diagnostics if d.get("code") != missing]
    elif not from_directory and previous.failure_codes.get(missing):
        codes[missing] = previous.failure_codes[missing]
        kept = [d for d in previous.diagnostics if d.get("code") == missing]
        record.diagnostics = record.diagnostics + kept
    if record.expected_trials is None:
        record.expected_trials, record.expected_from = (
            previous.expected_trials,
            previous.expected_from,
        )
    record.harbor_version = record.harbor_version or previous.harbor_version


def _result_read(record: JobRecord) -> bool:
    """Whether a job result.json was read for the stored ``record``: not missing, and what
    one gives is there (saved trials alone give none)."""
    if record.failure_codes.get(FailureCode.JOB_RESULT_MISSING_PARTIAL):
        return False
    return record.expected_from == "result.json" or any(getattr(record, f) for f in _RESULT_FIELDS)


def _rebase(records: list[TrialRecord], old: str | None, new: str | None) -> None:
    """Result paths under a job's old directory ``old`` that no longer exist moved under
    ``new`` where the file is (the job directory was moved, then imported from there; a copy
    leaves the trials read before where they were read)."""
    if not old or not new or old == new:
        return
    prefix = old.rstrip("/") + "/"
    for r in records:
        path = r.result_path
        if path and path.startswith(prefix) and not os.path.exists(path):
            moved = new.rstrip("/") + "/" + path[len(prefix) :]
            if os.path.exists(moved):
                r.result_path = moved


def _not_stored(
    trials: list[TrialRecord], stored: list[TrialRecord], record: JobRecord
) -> list[TrialRecord]:
    """``trials`` whose names are not among ``stored``; those read from another directory
    than the stored trial of their name are reported on ``record``
    (``duplicate_trial_name``, with their trial directories)."""
    known = {t.trial_name: _trial_dir(t) for t in stored}
    dirs = [
        _trial_dir(t) for t in trials if known.get(t.trial_name, _trial_dir(t)) != _trial_dir(t)
    ]
    if dirs:
        code = "duplicate_trial_name"
        found = next((d for d in record.diagnostics if d.get("code") == code), None)
        if found is None:
            found = {"code": code, "count": 0, "trial_dirs": []}
            record.diagnostics.append(found)
        found["trial_dirs"] = list(dict.fromkeys([*found["trial_dirs"], *dirs]))  # (retries)
        found["count"] = len(found["trial_dirs"])
    return [t for t in trials if t.trial_name not in known]


def _trial_dir(record: TrialRecord) -> str:
    """The name of the trial directory a record was read from (else its trial name); with
    ``os.path`` (a tenth of the time of ``pathlib``, once per stored trial)."""
    path = record.result_path
    return os.path.basename(os.path.dirname(path)) if path else record.trial_name


def put_dictionary(txn: Txn, parsed: ImportedJob) -> None:
    """The job's zstd dictionary, unless stored already."""
    record = parsed.record
    if (
        parsed.dictionary is not None
        and record.dictionary is not None
        and txn.get("zstd_dicts", record.dictionary) is None
    ):
        txn.put("zstd_dicts", record.dictionary, parsed.dictionary)


def put_evidence(txn: Txn, items: list[tuple[bytes, bytes]]) -> None:
    """Store evidence values at their content digests. A value stored at the same digest is
    kept unless its bytes differ (damaged: the digest fixes the bytes), then replaced."""
    for key, value in items:
        kept = not txn.raw_put("evidence", key, value, overwrite=False)
        if kept and txn.raw_get("evidence", key) != value:
            txn.raw_put("evidence", key, value)


def reserve_for(index: Index, parsed: ImportedJob) -> None:
    """Grow the map before ``parsed`` is written in one write transaction, so that it is not
    retried from the start after each doubling (see :meth:`Index.reserve`)."""
    per_row = 2048 + 2 * (64 + 9 * len(parsed.table.keys))  # record, index and table bytes
    if parsed.packed is not None:
        evidence = sum(len(value) for _, value in parsed.packed.evidence)
        need = evidence + per_row * len(parsed.packed.names)
    else:
        need = sum(len(b) for b in parsed.evidence.values()) + per_row * len(parsed.trials)
    index.reserve(need)
