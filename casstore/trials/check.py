"""What ``casstore fsck`` checks of imported jobs (read only, one read transaction).

For every job record of the ``jobs`` database: the record decodes (``corrupt_job``); every
trial record under ``<job id>/`` decodes (``corrupt_trial``); the job's reward table loads
with every column's CRC-32 verified, the lazily checked name columns included, passes
:meth:`RewardTable.validate` and has one row per trial record (``corrupt_reward_table``); and,
for a job read from its job directory (its record has ``imported_at``), every trial's evidence
entry and zstd dictionary exist (``missing_evidence``). Trials imported only from saved-trials
files keep their evidence where it was (see :func:`casstore.trials.store.import_records`), so
their evidence keys are not looked up.

Problems are ``(kind, ref, message)``: ``ref`` is the job id, or ``<job id>/<trial name>`` for
a trial; ``message`` the :class:`CorruptStoreError` line naming the database and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from casstore.errors import CorruptStoreError
from casstore.store.index import Txn, decode, unpack
from casstore.trials.records import JobRecord, TrialRecord
from casstore.trials.store import stored_job, stored_table, stored_trial

__all__ = ["JobsCheck", "Problem", "check_jobs"]


class Problem(NamedTuple):
    """One problem of imported trial data: ``kind``, ``ref`` (job id or job id/trial name),
    ``message``."""

    kind: str
    ref: str
    message: str


@dataclass
class JobsCheck:
    """What :func:`check_jobs` found: ``jobs`` and ``trials`` (records) counted, and
    ``problems``."""

    jobs: int = 0
    trials: int = 0
    problems: list[Problem] = field(default_factory=list)


def check_jobs(txn: Txn) -> JobsCheck:
    """Check every imported job of the index (see the module docstring); never raises for
    damaged data, which becomes a problem."""
    result = JobsCheck()
    for key, raw in txn.raw_items("jobs"):
        job_id = key.decode(errors="backslashreplace")
        record = _job(job_id, raw, result.problems)
        trials = _check_trials(txn, job_id, record, result.problems)
        table = _table_problem(txn, job_id, trials)
        if table is not None:
            result.problems.append(table)
        result.jobs += 1
        result.trials += trials
    return result


def _job(job_id: str, raw: bytes, problems: list[Problem]) -> JobRecord | None:
    """The job record stored as ``raw``, or None with a ``corrupt_job`` problem."""
    try:
        return stored_job(job_id, decode("jobs", job_id, unpack, raw))
    except CorruptStoreError as error:
        problems.append(Problem("corrupt_job", job_id, str(error)))
        return None


def _check_trials(txn: Txn, job_id: str, record: JobRecord | None, problems: list[Problem]) -> int:
    """Decode every trial record of ``job_id`` (``corrupt_trial``) and, for a job read from
    its directory, look its evidence up (``missing_evidence``); returns how many records
    there are (damaged ones included). Records are checked one at a time, never all kept."""
    path, reward_key = (record.path, record.reward_key) if record else (None, "")
    evidence = record is not None and record.imported_at is not None
    dictionaries: dict[str, bool] = {}
    count = 0
    for key, raw in txn.raw_items("trials", f"{job_id}/"):
        count += 1
        try:
            trial = stored_trial(key, raw, job_id, path, reward_key)
        except CorruptStoreError as error:
            ref = key.decode(errors="backslashreplace")
            problems.append(Problem("corrupt_trial", ref, str(error)))
            continue
        if evidence:
            problems.extend(_evidence_problems(txn, trial, dictionaries))
    return count


def _evidence_problems(
    txn: Txn, trial: TrialRecord, dictionaries: dict[str, bool]
) -> list[Problem]:
    """``missing_evidence`` when the trial's evidence entry, or the zstd dictionary it was
    compressed with, is not in the index (``dictionaries`` caches the lookups)."""
    ref = f"{trial.job_id}/{trial.trial_name}"
    problems = []
    if trial.evidence and not txn.has("evidence", trial.evidence):
        problems.append(Problem("missing_evidence", ref, f"evidence/{trial.evidence}: missing"))
    name = trial.evidence_dict
    if trial.evidence and name:
        if name not in dictionaries:
            dictionaries[name] = txn.has("zstd_dicts", name)
        if not dictionaries[name]:
            problems.append(Problem("missing_evidence", ref, f"zstd_dicts/{name}: missing"))
    return problems


def _table_problem(txn: Txn, job_id: str, trials: int) -> Problem | None:
    """A ``corrupt_reward_table`` problem when the job's table is missing, does not load or
    verify, or has other than ``trials`` rows; else None."""
    try:
        data = txn.get("reward_tables", job_id)
        if data is None:
            return Problem("corrupt_reward_table", job_id, f"reward_tables/{job_id}: missing")
        table = stored_table(job_id, data)
        decode("reward_tables", job_id, table.validate)
    except CorruptStoreError as error:
        return Problem("corrupt_reward_table", job_id, str(error))
    if len(table) != trials:
        message = f"reward_tables/{job_id}: {len(table)} rows, {trials} trial records"
        return Problem("corrupt_reward_table", job_id, message)
    return None
