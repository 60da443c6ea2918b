"""Importing Harbor job directories and saved-trials files into a store's index.

Re-importing a job is idempotent: trial directories already stored (by name) are not read
again, unless the index lacks their evidence (saved trials imported first: their records are
replaced by the directory's, evidence and all) or their trial pack is damaged (the pack is
written anew; see :func:`~casstore.trials.references.to_read_again`); new ones are added,
attempts are re-assigned over all of the job's trials and the job's reward table is rebuilt.
Importing with another ``reward_key`` rebuilds the table and the records' reward-key metadata.
A report's ``imported`` counts only the trials the store did not hold before (re-importing the
same job or saved-trials file reports 0 new).

A job directory's job id is Harbor's id of the job whatever moment it is imported at
(:mod:`casstore.trials.identity`); a job stored under a former id of the directory is adopted
first (:mod:`casstore.trials.adopt`): one Harbor job is one stored job.

A job keeps the name it was first imported with: re-importing it with another ``name`` is
refused (:class:`UsageError` naming the job and its current name), so that the name it was
known by never stops resolving.

Paths are absolute: the job record's ``path`` and the trials' ``result_path`` (the rebuild
hint of a saved-trials file names the job directory from them, and must work from any
folder).

A new job is written while it is parsed (:mod:`casstore.trials.stream`); a job stored already
is merged with in one write transaction after the parse (:mod:`casstore.trials.write`). The
databases are described in :mod:`casstore.trials.stored`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from casstore.errors import CheckError, UsageError, is_text, printable
from casstore.progress import Progress
from casstore.store.index import Index, Txn
from casstore.trials.adopt import adopt_former
from casstore.trials.find import find_jobs, not_a_job_file, subdir_names
from casstore.trials.identity import job_identity_at
from casstore.trials.imported import ImportedJob
from casstore.trials.read import paused_gc, read_job
from casstore.trials.records import ImportReport, JobRecord, TrialRecord
from casstore.trials.references import to_read_again
from casstore.trials.saved import read_trials_jsonl
from casstore.trials.stored import stored_job
from casstore.trials.stream import JobStream
from casstore.trials.table import assign_attempts, table_from_records
from casstore.trials.write import reserve_for, store_job

__all__ = ["import_jobs", "import_records"]


def import_jobs(
    index: Index,
    paths: Sequence[Path | str],
    reward_key: str = "reward",
    name: str | None = None,
    progress: Progress | None = None,
) -> list[ImportReport]:
    """Import Harbor job directories (or ``*.jsonl`` saved-trials files) into ``index``.

    ``paths``: job directories, directories of job directories, saved-trials files.
    ``name``: the job's name (only with a single job; default the directory name; a job
    already imported under another name is refused).
    ``progress``: ``start(total trial dirs)`` once, ``advance(trial dir)`` per trial.
    Returns one :class:`ImportReport` per job. Raises :class:`UsageError` for a path holding
    no job (or ``--name`` with several jobs), :class:`CheckError` for an unusable job or
    saved-trials file.
    """
    # any .jsonl that is no directory is a trials file: read_trials_jsonl refuses what is no
    # regular file (casstore.inputs)
    files = [Path(p) for p in paths if str(p).endswith(".jsonl") and _is_file_argument(p)]
    dirs = [Path(p) for p in paths if Path(p) not in files]
    for p in paths:
        if Path(p) not in files and _is_file_argument(p):
            raise not_a_job_file(p)
    job_dirs = find_jobs(dirs) if dirs else []
    if name is not None and len(job_dirs) + len(files) != 1:
        raise UsageError(name, "--name needs a single job")
    if name is not None and not is_text(name):
        raise UsageError(printable(name), "--name is not valid Unicode text")
    reports: list[ImportReport] = []
    # each job directory listed once (scandir, no stat per entry): for the total and the parse
    listings = {job_dir: subdir_names(job_dir) for job_dir in job_dirs}
    if progress is not None:
        progress.start(sum(len(names) for names in listings.values()))
    for job_dir in job_dirs:
        reports.append(
            _import_dir(index, job_dir, reward_key, name, progress, listings.pop(job_dir))
        )
    for file in files:
        reports += _import_file(index, file, name)
    return reports


def _is_file_argument(path: Path | str) -> bool:
    """Whether ``path`` names something that is no directory."""
    return os.path.exists(path) and not os.path.isdir(path)


def _import_file(index: Index, file: Path, name: str | None) -> list[ImportReport]:
    """Import a saved-trials file: one report per job it holds (the whole file checked
    before any job is imported)."""
    key, records = read_trials_jsonl(file)
    by_job: dict[str, list[TrialRecord]] = {}
    for record in records:
        by_job.setdefault(record.job_id, []).append(record)
    for job_id, group in by_job.items():
        _given_once(group, job_id, str(file))
    return [
        import_records(index, job_id, group, key, name, where=str(file))
        for job_id, group in by_job.items()
    ]


def _import_dir(
    index: Index,
    job_dir: Path,
    reward_key: str,
    name: str | None,
    progress: Progress | None,
    trial_dirs: list[str],
) -> ImportReport:
    """Import one job directory (``trial_dirs``: its subdirectories' names): a new job
    written while parsed, else the new trial directories merged with the stored ones."""
    identity = job_identity_at(job_dir, trial_dirs)
    job_id = identity.id  # read_job is given it: the stream writes under this id
    adopt_former(index, str(job_dir.resolve()), identity, trial_dirs)
    existing = index.read(lambda txn: txn.get("jobs", job_id))
    existing_record = stored_job(job_id, existing) if existing else None
    _check_name(str(job_dir), job_id, name, existing_record)
    skip: set[str] = set()
    refill: set[str] = set()  # stored trials whose evidence the index lacks: read again
    dictionary = None
    if existing_record is not None:
        stored_as = existing_record
        refill = index.read(lambda txn: to_read_again(txn, stored_as))
        skip = set(existing_record.trial_names) - refill
        if dict_id := existing_record.dictionary:
            dictionary = index.read(lambda txn: txn.get("zstd_dicts", dict_id))
    advance = progress.advance if progress is not None else None
    # a new job's trials are written while the rest is parsed (one write transaction)
    stream = JobStream(index, job_id) if existing_record is None else None
    try:
        parsed = read_job(
            job_dir,
            reward_key,
            name=name or (existing_record.name if existing_record else None),
            skip=skip & set(trial_dirs),  # Harbor names trial directories after their trials
            trial_dirs=trial_dirs,
            job_id=job_id,
            dictionary=dictionary,
            progress=advance,
            sink=stream,
        )
    except BaseException:
        if stream is not None:
            stream.abort()
        raise
    if stream is not None:
        with paused_gc():
            report = stream.finish(parsed)
        if report is not None:
            return report

    def body(txn: Txn) -> ImportReport:
        previous = existing_record
        if previous is None:  # imported meanwhile by another process?
            raw = txn.get("jobs", job_id)
            previous = stored_job(job_id, raw) if raw else None
            _check_name(str(job_dir), job_id, name, previous)
        return store_job(txn, parsed, previous, refill=refill)

    reserve_for(index, parsed)
    with paused_gc():
        return index.write(body)


def _check_name(where: str, job_id: str, name: str | None, previous: JobRecord | None) -> None:
    """UsageError when ``name`` would rename an already-imported job (names never change)."""
    if name is not None and previous is not None and previous.name != name:
        raise UsageError(
            where,
            f"job {job_id} is already imported as {previous.name!r}; a job keeps its name "
            f"(re-import without --name)",
        )


def import_records(
    index: Index,
    job_id: str,
    records: list[TrialRecord],
    reward_key: str,
    name: str | None = None,
    where: str | None = None,
) -> ImportReport:
    """Store saved trials (from ``trials.jsonl``) as job ``job_id``: records and the reward
    table only (their evidence stays where it was). ``name``: the job's name (default: its
    current one, else the job id; another name for an imported job is refused naming
    ``where``); the job's path is its trials' job directory (from their ``result_path``)
    when they agree on one. A stored trial of the same name is replaced. Raises
    :class:`CheckError` naming ``where`` when a trial name is given twice."""
    _given_once(records, job_id, where or job_id)
    existing = index.read(lambda txn: txn.get("jobs", job_id))
    previous = stored_job(job_id, existing) if existing else None
    _check_name(where or job_id, job_id, name, previous)
    assign_attempts(records)
    record = JobRecord(
        job_id=job_id, name=name or job_id, path=_common_job_dir(records), reward_key=reward_key
    )
    table = table_from_records(records, reward_key, jobs=[job_id])
    parsed = ImportedJob(job_id=job_id, record=record, trials=records, table=table)
    if previous is not None:
        record.name, record.path = previous.name, previous.path or record.path
        record.dictionary = previous.dictionary
    return index.write(lambda txn: store_job(txn, parsed, previous, replace=True))


def _given_once(records: list[TrialRecord], job_id: str, where: str) -> None:
    """CheckError naming ``where`` when two of the job's ``records`` have one trial name."""
    seen: set[str] = set()
    for r in records:
        if r.trial_name in seen:
            raise CheckError(
                where,
                f"trial {r.trial_name!r} of job {job_id} is given twice; pass each trial once",
            )
        seen.add(r.trial_name)


def _common_job_dir(records: list[TrialRecord]) -> str | None:
    """The absolute job directory the trials were read from, when they all name the same."""
    dirs = {r.job_dir for r in records if r.result_path and Path(r.result_path).is_absolute()}
    return dirs.pop() if len(dirs) == 1 else None
