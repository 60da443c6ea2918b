"""What ``casstore fsck`` checks of imported jobs (read only, one read transaction).

For every job record of the ``jobs`` database: the record decodes (``corrupt_job``); every trial
pack (and older single trial record) of the job decodes, its CRC-32 checked, no pack is empty
and no trial name is stored twice (``corrupt_trial``; importing the job directory again replaces
a damaged pack, see :func:`casstore.trials.write.store_job`); the job record's trial count and
names are those of the stored records (``corrupt_job``); the job's reward table loads with every
column's CRC-32 verified, the lazily checked name columns included, passes
:meth:`RewardTable.validate` and has one row per trial record (``corrupt_reward_table``; the row
count is not compared when a pack does not decode: its record count is unknown); and, for a job
read from its job directory (its record has ``imported_at``), every trial has an evidence
reference and its evidence and zstd dictionary exist (``missing_evidence``: importing the
directory again reads such trials again, see :func:`casstore.trials.references.to_read_again`),
and every evidence pack a trial references hashes to its key and holds the trial's frame, every
older per-file entry to its key, every dictionary to its id (``corrupt_evidence``), and a
trial's trace reference (schema 5) names a frame of that same pack, no other trial's
(``corrupt_trial``). Trials
imported only from saved-trials files keep their evidence where it was (see
:func:`casstore.trials.importing.import_records`), so their evidence is not looked up. Then the
values of the trial databases no job record reaches are ``orphan_*`` problems
(:mod:`casstore.trials.orphans`; evidence and dictionaries only when every job record and pack
decoded: else what they reference is unknown).

Problems are ``(kind, ref, message)``: ``ref`` is the job id, ``<job id>/<trial name>`` for a
trial, the key of a damaged pack or of an orphaned value; ``message`` the line naming the
database and key (a :class:`CorruptStoreError`'s, or what is wrong and how to repair it).
"""

from __future__ import annotations

from typing import NamedTuple

from casstore.errors import CorruptStoreError
from casstore.store.fsck import Checked, Problem
from casstore.store.index import Txn
from casstore.store.values import decode, decode_value
from casstore.trials.evidence import entry_key, frame_count, split_reference
from casstore.trials.orphans import Referenced, find_orphans
from casstore.trials.packs import job_packs, older_trials
from casstore.trials.records import JobRecord, TrialRecord
from casstore.trials.stored import stored_job, stored_pack, stored_table, stored_trial
from casstore.trials.stored_evidence import checked_dictionary, checked_entry

__all__ = ["check_jobs"]


def check_jobs(txn: Txn) -> Checked:
    """Check every imported job of the index (see the module docstring): a check of
    :func:`casstore.store.fsck.fsck`, counting ``jobs`` and their ``trials`` (records); never
    raises for damaged data, which becomes a problem."""
    result = Checked({"jobs": 0, "trials": 0})
    referenced = Referenced()
    for key, raw in txn.raw_items("jobs"):
        job_id = key.decode(errors="backslashreplace")
        record = _job(job_id, raw, result.problems)
        referenced.jobs.add(job_id)
        referenced.add_trial(None, record.dictionary if record else None)
        trials = _check_trials(txn, job_id, record, result.problems, referenced)
        referenced.complete &= trials.complete and record is not None
        if trials.complete and record is not None:
            result.problems += _record_problems(job_id, record, trials.names)
        table = _table_problem(txn, job_id, len(trials.names) if trials.complete else None)
        if table is not None:
            result.problems.append(table)
        referenced.tables += txn.has("reward_tables", job_id)
        result.counts["jobs"] += 1
        result.counts["trials"] += len(trials.names)
    result.problems += [Problem(o.kind, o.key, o.message) for o in find_orphans(txn, referenced)]
    return result


def _job(job_id: str, raw: bytes, problems: list[Problem]) -> JobRecord | None:
    """The job record stored as ``raw``, or None with a ``corrupt_job`` problem."""
    try:
        return stored_job(job_id, decode("jobs", job_id, decode_value, raw))
    except CorruptStoreError as error:
        problems.append(Problem("corrupt_job", job_id, str(error)))
        return None


class _Trials(NamedTuple):
    """The trial names of a job's decoded records, and whether every stored record decoded."""

    names: list[str]
    complete: bool


def _check_trials(
    txn: Txn,
    job_id: str,
    record: JobRecord | None,
    problems: list[Problem],
    referenced: Referenced,
) -> _Trials:
    """Decode every trial pack and older single record of ``job_id`` (``corrupt_trial``: a
    damaged or empty pack, a trial name stored twice) and, for a job read from its directory,
    check its evidence (:class:`_EvidenceCheck`); count them and their trials' references in
    ``referenced``. One pack or record is decoded at a time, never all kept."""
    path, reward_key = (record.path, record.reward_key) if record else (None, "")
    checksums = record.pack_checksums if record else False  # (unknown: checked when present)
    evidence = _EvidenceCheck(txn) if record is not None and record.imported_at else None
    names: list[str] = []
    where: dict[str, str] = {}  # trial name -> the pack or record holding it
    complete = True
    for db, items, decoder in (
        ("trials", older_trials(txn, job_id), _single),
        ("trial_packs", job_packs(txn, job_id), stored_pack),
    ):
        for key, raw in items:
            referenced.older += db == "trials"
            referenced.packs += db == "trial_packs"
            ref = f"{db}/{key.decode(errors='backslashreplace')}"
            try:
                trials = decoder(key, raw, job_id, path, reward_key, checksums)
            except CorruptStoreError as error:
                message = f"{error}{_REWRITE}"
                problems.append(Problem("corrupt_trial", ref.partition("/")[2], message))
                complete = False
                continue
            if not trials:
                problems.append(Problem("corrupt_trial", ref.partition("/")[2], f"{ref}: empty"))
            for trial in trials:
                name = trial.trial_name
                if name in where:
                    message = f"{ref}: trial {name!r} stored twice (also in {where[name]})"
                    problems.append(Problem("corrupt_trial", f"{job_id}/{name}", message))
                where[name] = ref
                names.append(name)
                referenced.add_trial(trial.evidence, trial.evidence_dict)
                if evidence is not None:
                    problems.extend(evidence.problems(trial))
    return _Trials(names, complete)


def _single(
    key: bytes, raw: bytes, job_id: str, path: str | None, reward_key: str, _: bool
) -> list[TrialRecord]:
    """:func:`stored_trial` as a list of one (an older store's single trial record)."""
    return [stored_trial(key, raw, job_id, path, reward_key)]


def _record_problems(job_id: str, record: JobRecord, names: list[str]) -> list[Problem]:
    """``corrupt_job`` when the job record's trial count or trial names are not those of the
    stored trial records."""
    if record.trials == len(names) and sorted(record.trial_names) == sorted(names):
        return []
    message = (
        f"jobs/{job_id}: the job record lists {record.trials} trials "
        f"({len(record.trial_names)} names), the store holds {len(names)} trial records"
    )
    if record.trials == len(names):
        message += " of other names"
    return [Problem("corrupt_job", job_id, message)]


class _EvidenceCheck:
    """The evidence checks of one job's trials, each pack, entry and dictionary looked up
    (and a pack hashed and decoded) once."""

    def __init__(self, txn: Txn) -> None:
        self.txn = txn
        self.values: dict[str, tuple[str | None, int]] = {}  # key -> (problem, frames)
        self.dictionaries: dict[str, str | None] = {}  # id -> problem
        self.referenced: dict[str, str] = {}  # evidence reference -> the trial naming it

    def problems(self, trial: TrialRecord) -> list[Problem]:
        """``missing_evidence`` when the trial's evidence (pack or entry) or its zstd
        dictionary is not in the index; ``corrupt_evidence`` when its pack does not hash to
        its key, does not decode, or has no frame at the trial's index, or an older entry
        does not hash to its key; ``corrupt_trial`` when another trial names the same
        evidence (a changed reference)."""
        ref = f"{trial.job_id}/{trial.trial_name}"
        if not trial.evidence:  # (saved trials without evidence merged into the job)
            return [Problem("missing_evidence", ref, f"{ref}: no evidence reference{_REFILL}")]
        try:
            key, index = split_reference(trial.evidence)
        except ValueError as error:
            return [Problem("corrupt_evidence", ref, f"evidence reference {error}")]
        if key not in self.values:
            self.values[key] = self._value(key, index is not None)
        problem, frames = self.values[key]
        found = []
        other = self.referenced.setdefault(trial.evidence, trial.trial_name)
        if other != trial.trial_name:
            message = f"evidence reference {trial.evidence} is trial {other!r}'s"
            found.append(Problem("corrupt_trial", ref, message))
        if problem is not None:
            found.append(_evidence_problem(ref, problem))
        elif index is not None and index >= frames:
            message = f"evidence/{key}: {frames} frames, no frame {index}"
            found.append(Problem("corrupt_evidence", ref, message))
        found += self._trace_problems(trial, ref, key, frames)
        name = trial.evidence_dict
        if name:
            if name not in self.dictionaries:
                self.dictionaries[name] = self._dictionary(name)
            problem = self.dictionaries[name]
            if problem is not None:
                found.append(_evidence_problem(ref, problem))
        return found

    def _trace_problems(self, trial: TrialRecord, ref: str, key: str, frames: int) -> list[Problem]:
        """``corrupt_trial`` when the trial's trace reference (schema 5) is not a frame of its
        own evidence pack after its result.json, or another trial names it too."""
        if trial.trace is None:
            return []
        try:
            trace_key, index = split_reference(trial.trace)
        except ValueError as error:
            return [Problem("corrupt_trial", ref, f"trace reference {error}")]
        if trace_key != key or index is None or index >= frames:
            message = f"trace reference {trial.trace} is no frame of the trial's evidence pack"
            return [Problem("corrupt_trial", ref, message)]
        other = self.referenced.setdefault(trial.trace, trial.trial_name)
        if other != trial.trial_name:
            return [Problem("corrupt_trial", ref, f"trace reference {trial.trace} is {other!r}'s")]
        return []

    def _dictionary(self, name: str) -> str | None:
        """The problem of the zstd dictionary ``name`` (missing; bytes not hashing to its
        id), or None."""
        try:
            checked_dictionary(self.txn, name)
        except (ValueError, CorruptStoreError) as error:
            return str(error)
        return None

    def _value(self, key: str, pack: bool) -> tuple[str | None, int]:
        """``(problem or None, frame count)`` of the evidence value at ``key`` (a pack's
        digest and frames checked; an older entry decompressed and checked against its key)."""
        raw = self.txn.raw_get("evidence", key)
        if raw is None:
            return f"evidence/{key}: missing", 0
        if not pack:  # an older store's entry: checked against its key
            try:
                decode("evidence", key, checked_entry, self.txn, key, raw)
            except CorruptStoreError as error:
                return str(error), 0
            return None, 0
        digest = entry_key(raw)
        if digest != key:
            return f"evidence/{key}: the pack's bytes hash to {digest}", 0
        try:
            frames = decode("evidence", key, frame_count, raw)
        except CorruptStoreError as error:
            return str(error), 0
        return None, frames


_REFILL = " (importing the job directory again reads it again)"
_REWRITE = " (importing the job directory again replaces it with the trials read again)"


def _evidence_problem(ref: str, problem: str) -> Problem:
    """The problem of a trial's evidence or dictionary: ``missing_evidence`` (with how to
    repair it) or ``corrupt_evidence``."""
    if problem.endswith(": missing"):
        return Problem("missing_evidence", ref, problem + _REFILL)
    return Problem("corrupt_evidence", ref, problem)


def _table_problem(txn: Txn, job_id: str, trials: int | None) -> Problem | None:
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
    if trials is not None and len(table) != trials:
        message = f"reward_tables/{job_id}: {len(table)} rows, {trials} trial records"
        return Problem("corrupt_reward_table", job_id, message)
    return None
