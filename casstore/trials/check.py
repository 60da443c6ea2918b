"""What ``casstore fsck`` checks of imported jobs (read only, one read transaction).

For every job record of the ``jobs`` database: every trial pack (and older single trial
record) under ``<job id>/`` decodes (``corrupt_trial``); the job's reward table loads
with every column's CRC-32 verified, the lazily checked name columns included, passes
:meth:`RewardTable.validate` and has one row per trial record (``corrupt_reward_table``); and,
for a job read from its job directory (its record has ``imported_at``), every trial's evidence
and zstd dictionary exist (``missing_evidence``) and every evidence pack a trial references
hashes to its key and holds the trial's frame (``corrupt_evidence``; older per-file entries
are looked up only). Trials imported only from saved-trials files keep their evidence where
it was (see :func:`casstore.trials.store.import_records`), so their evidence is not looked up.

Problems are ``(kind, ref, message)``: ``ref`` is the job id, or ``<job id>/<trial name>`` for
a trial; ``message`` the :class:`CorruptStoreError` line naming the database and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from casstore.errors import CorruptStoreError
from casstore.store.index import Txn, decode, unpack
from casstore.trials.evidence import entry_key, split_reference
from casstore.trials.records import JobRecord, TrialRecord
from casstore.trials.store import stored_job, stored_pack, stored_table, stored_trial

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
    """Decode every trial pack and record of ``job_id`` (``corrupt_trial``) and, for a job read
    from its directory, check its evidence (:func:`_evidence_problems`); returns how many
    records there are (those of a damaged pack as its array header counts them). One pack
    or record is decoded at a time, never all kept."""
    path, reward_key = (record.path, record.reward_key) if record else (None, "")
    evidence = _EvidenceCheck(txn) if record is not None and record.imported_at else None
    count = 0
    prefix = f"{job_id}/"
    for db, decoder in (("trials", _single), ("trial_packs", stored_pack)):
        for key, raw in txn.raw_items(db, prefix):
            try:
                trials = decoder(key, raw, job_id, path, reward_key)
            except CorruptStoreError as error:
                ref = key.decode(errors="backslashreplace")
                problems.append(Problem("corrupt_trial", ref, str(error)))
                count += 1 if db == "trials" else _declared_length(raw)
                continue
            count += len(trials)
            if evidence is not None:
                for trial in trials:
                    problems.extend(evidence.problems(trial))
    return count


def _single(
    key: bytes, raw: bytes, job_id: str, path: str | None, reward_key: str
) -> list[TrialRecord]:
    """:func:`stored_trial` as a list of one (an older store's single trial record)."""
    return [stored_trial(key, raw, job_id, path, reward_key)]


def _declared_length(raw: bytes) -> int:
    """The item count in the msgpack array header of a (damaged) trial pack; 0 if none."""
    if raw[:1] and 0x90 <= raw[0] <= 0x9F:
        return raw[0] & 0x0F
    width = {b"\xdc": 2, b"\xdd": 4}.get(raw[:1])
    return int.from_bytes(raw[1 : 1 + width], "big") if width and len(raw) > width else 0


class _EvidenceCheck:
    """The evidence checks of one job's trials, each pack, entry and dictionary looked up
    (and a pack hashed and decoded) once."""

    def __init__(self, txn: Txn) -> None:
        self.txn = txn
        self.values: dict[str, tuple[str | None, int]] = {}  # key -> (problem, frames)
        self.dictionaries: dict[str, bool] = {}

    def problems(self, trial: TrialRecord) -> list[Problem]:
        """``missing_evidence`` when the trial's evidence (pack or entry) or its zstd
        dictionary is not in the index; ``corrupt_evidence`` when its pack does not hash to
        its key, does not decode, or has no frame at the trial's index."""
        if not trial.evidence:
            return []
        ref = f"{trial.job_id}/{trial.trial_name}"
        try:
            key, index = split_reference(trial.evidence)
        except ValueError as error:
            return [Problem("corrupt_evidence", ref, f"evidence reference {error}")]
        if key not in self.values:
            self.values[key] = self._value(key, index is not None)
        problem, frames = self.values[key]
        found = []
        if problem is not None:
            kind = "missing_evidence" if problem.endswith(": missing") else "corrupt_evidence"
            found.append(Problem(kind, ref, problem))
        elif index is not None and index >= frames:
            message = f"evidence/{key}: {frames} frames, no frame {index}"
            found.append(Problem("corrupt_evidence", ref, message))
        name = trial.evidence_dict
        if name:
            if name not in self.dictionaries:
                self.dictionaries[name] = self.txn.has("zstd_dicts", name)
            if not self.dictionaries[name]:
                found.append(Problem("missing_evidence", ref, f"zstd_dicts/{name}: missing"))
        return found

    def _value(self, key: str, pack: bool) -> tuple[str | None, int]:
        """``(problem or None, frame count)`` of the evidence value at ``key`` (a pack's
        digest and frames checked; an entry's presence only)."""
        raw = self.txn._txn.get(key.encode(), db=self.txn._dbs["evidence"])
        if raw is None:
            return f"evidence/{key}: missing", 0
        if not pack:
            return None, 0
        if entry_key(raw) != key:
            return f"evidence/{key}: the pack's bytes hash to {entry_key(raw)}", 0
        try:
            frames = decode("evidence", key, _frame_count, raw)
        except CorruptStoreError as error:
            return str(error), 0
        return None, frames


def _frame_count(raw: bytes) -> int:
    """How many frames the evidence pack ``raw`` holds (raises when it is no pack)."""
    value = unpack(raw)
    if len(value["frames"]) != len(value["sizes"]):
        raise ValueError(f"{len(value['frames'])} frames, {len(value['sizes'])} sizes")
    return len(value["frames"])


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
