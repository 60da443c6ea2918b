"""Adopt the job stored under a former id of a job directory (:mod:`casstore.trials.identity`).

Before an import reads a job directory, a job stored under one of its former ids (a digest
of the directory, from an import before Harbor's id was read; the trials' job id when the job
result.json names another) is moved under the directory's id, in one write transaction: its
trial records rewritten under the id, its reward table kept (its job label changed), its job
record re-keyed, the former id added to its ``aliases`` so that it still resolves, as its
name does. When a job is stored under the id as well (an older casstore imported the job
while it ran and again after it finished: two jobs of one), the former job's trials that one
lacks are merged into it and the former job's name joins its aliases. Nothing is left under
the former id.

A former job is adopted only when it is this directory's: its record's path is the
directory's; or, for a digest of the directory, one of its trials is one of the directory's
trial directories (two Harbor jobs with one directory name and one config.json share the
digest, never their trials). A job stored under the id the trials name (not the job
result.json's) from another directory is another Harbor job whose trial directories were
copied here: never adopted.
"""

from __future__ import annotations

import msgspec

from casstore.digest import Digest
from casstore.store.index import Index, Txn
from casstore.table.columns import RewardTable
from casstore.trials.identity import JobIdentity
from casstore.trials.imported import ImportedJob
from casstore.trials.orphans import drop_unreferenced
from casstore.trials.packs import delete_trials
from casstore.trials.records import JobRecord, TrialRecord
from casstore.trials.stored import stored_job, stored_table, stored_trials
from casstore.trials.table import table_from_records
from casstore.trials.write import store_job

__all__ = ["adopt_former"]


def adopt_former(index: Index, root: str, identity: JobIdentity, trial_dirs: list[str]) -> None:
    """Adopt the jobs stored under ``identity``'s former ids that are the job directory's at
    ``root`` (absolute; ``trial_dirs``: its trial directories), see the module docstring.
    Takes the write lock only when there is one."""
    if not identity.former:
        return
    dirs = set(trial_dirs)

    def found(txn: Txn) -> list[str]:
        return [old for old in identity.former if _former_job(txn, old, root, dirs) is not None]

    def adopt(txn: Txn) -> None:
        for old in found(txn):  # (again: in the write transaction)
            _adopt(txn, identity.id, old, root, dirs)

    if index.read(found):
        index.write(adopt)


def _former_job(txn: Txn, old: str, root: str, dirs: set[str]) -> JobRecord | None:
    """The job stored under ``old`` when it is the directory's (see the module docstring)."""
    raw = txn.get("jobs", old)
    if raw is None:
        return None
    record = stored_job(old, raw)
    if record.path == root:
        return record
    if Digest.is_digest(old) and not dirs.isdisjoint(record.trial_names):
        return record
    return None


def _adopt(txn: Txn, job_id: str, old: str, root: str, dirs: set[str]) -> None:
    """Move (or merge) the job stored under ``old`` under ``job_id``."""
    former = _former_job(txn, old, root, dirs)
    assert former is not None  # (found in this transaction)
    trials = stored_trials(txn, former)
    for trial in trials:
        trial.job_id = job_id
    raw = txn.get("jobs", job_id)
    current = stored_job(job_id, raw) if raw is not None else None
    record, table = _adopted(txn, job_id, former, current, trials)
    parsed = ImportedJob(
        job_id, record, trials=trials, table=table, failure_codes=dict(record.failure_codes)
    )
    store_job(txn, parsed, current)
    delete_trials(txn, old)
    txn.delete("reward_tables", old)
    txn.delete("jobs", old)
    # the evidence of the former job's trials a merge left out, its dictionary: orphans now?
    dictionaries = {t.evidence_dict or "" for t in trials} | {former.dictionary or ""}
    keys = {t.evidence.partition("#")[0] for t in trials if t.evidence}
    drop_unreferenced(txn, keys, dictionaries - {""})


def _adopted(
    txn: Txn,
    job_id: str,
    former: JobRecord,
    current: JobRecord | None,
    trials: list[TrialRecord],
) -> tuple[JobRecord, RewardTable]:
    """The job record and reward table the ``former`` job (its ``trials``) is written with
    under ``job_id``: moved, its own (the former id an alias); merged into ``current``, that
    one's (the former id and name aliases; the table rebuilt by the write)."""
    old = former.job_id
    if current is not None:
        names = [*former.aliases, old, former.name]
        aliases = [a for a in dict.fromkeys([*current.aliases, *names]) if a != current.name]
        record = msgspec.structs.replace(current, aliases=aliases)
        return record, table_from_records(trials, record.reward_key, jobs=[job_id])
    record = msgspec.structs.replace(former, job_id=job_id, aliases=[*former.aliases, old])
    data = txn.get("reward_tables", old)
    if data is None:  # (damaged: fsck reports it) rebuilt
        return record, table_from_records(trials, record.reward_key, jobs=[job_id])
    table = stored_table(old, data)
    table.jobs = [job_id]
    return record, table
