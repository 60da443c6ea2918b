"""Read one Harbor job directory without a store: :func:`read_job` → :class:`ImportedJob`.

The job-level files give the job's id and record; its trial directories are read in chunks
(:mod:`casstore.trials.workers`), merged (:mod:`casstore.trials.merge`) and checked: trial
directories without a readable result.json, duplicate trial names, a missing job result.json,
a trial count other than the job expected, Harbor schema drift (:mod:`casstore.trials.drift`).
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from casstore.errors import CheckError, UsageError, is_text
from casstore.table.codes import FailureCode, ordered_counts
from casstore.trials.chunk import Chunk, ChunkSink, cut
from casstore.trials.drift import drift
from casstore.trials.evidence import Evidence, train
from casstore.trials.files import decode_json, read_bytes, read_job_file, shown, text_at
from casstore.trials.find import subdir_names
from casstore.trials.identity import job_identity
from casstore.trials.imported import ImportedJob
from casstore.trials.merge import Packed, merge
from casstore.trials.records import Diagnostic, JobRecord, label_record
from casstore.trials.rules import LAUNCH_MESSAGES, launch_codes
from casstore.trials.sample import sample
from casstore.trials.workers import default_workers, read_all

__all__ = ["TRAIN_SAMPLES", "paused_gc", "read_job"]

TRAIN_SAMPLES = 256
"""Trials (evenly spaced) whose result.json a job's zstd dictionary is trained on."""


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused (restored on exit). Importing creates millions of
    small acyclic objects; collector passes over them cost more than a tenth of the time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


_JOB_FILES = ("config.json", "lock.json", "result.json", "launcher_result.json", "cancelled.json")
"""The job-level files Harbor writes, then those ``casstore run``'s launcher writes
(:mod:`casstore.run.launcher`)."""


@dataclass
class _JobDir:
    """A job directory about to be read: ``path`` as given and ``root`` (absolute), its
    job-level files' bytes (None: missing or unreadable) and JSON, why those there were not
    read (``unread``: file name → reason), its ``job_id``, its trial directories
    (``all_names``) and those to read (``names``: all but ``skipped``)."""

    path: Path
    root: str
    config_bytes: bytes | None
    config: Any
    result_bytes: bytes | None
    result: Any
    lock: Any
    launcher: Any
    cancelled: bool
    unread: dict[str, str]
    job_id: str
    all_names: list[str]
    names: list[str]
    skipped: set[str]

    @classmethod
    def open(
        cls, path: Path, skip: Iterable[str], trial_dirs: list[str] | None, job_id: str | None
    ) -> _JobDir:
        """The job directory at ``path`` (``job_id``: its id when the caller knows it, else
        :func:`job_identity`'s); UsageError when it is no directory or its path is not UTF-8."""
        if not path.is_dir():
            raise UsageError(str(path), "not a directory (expected a Harbor job directory)")
        # trials' result_path absolute (as the job record's path): the rebuild hint of a
        # saved-trials file names the job directory, and must work from any folder
        root = str(path.resolve())
        if not is_text(root):
            raise UsageError(os.fsdecode(path), "the job directory's path is not valid UTF-8")
        files = {name: read_job_file(path / name) for name in _JOB_FILES}
        config_bytes, result_bytes = files["config.json"][0], files["result.json"][0]
        result = decode_json(result_bytes)
        skipped = set(skip)
        all_names = subdir_names(path) if trial_dirs is None else trial_dirs
        if job_id is None:
            job_id = job_identity(path, result, config_bytes, all_names).id
        names = [n for n in all_names if n not in skipped] if skipped else all_names
        return cls(
            path=path,
            root=root,
            config_bytes=config_bytes,
            config=decode_json(config_bytes),
            result_bytes=result_bytes,
            result=result,
            lock=decode_json(files["lock.json"][0]),
            launcher=decode_json(files["launcher_result.json"][0]),
            cancelled=files["cancelled.json"][0] is not None,
            unread={name: reason for name, (_, reason) in files.items() if reason},
            job_id=job_id,
            all_names=all_names,
            names=names,
            skipped=skipped,
        )

    def found(self, packed: Packed, trials: _Trials) -> int:
        """The trial directories found: read (a record or unreadable) or skipped."""
        skipped = len(self.skipped & set(self.all_names)) if self.skipped else 0
        return len(packed.names) + len(trials.unreadable) + skipped


@dataclass
class _Trials:
    """What reading the trial directories found: ``readable`` (the directories with a record,
    in order), ``unreadable`` (``{"trial_dir", "reason"}``), ``duplicates`` (directories whose
    trial name an earlier one has), ``kept`` (rows kept, the first of equal trial names; None:
    all), ``sorted_names`` (the trial names of every row, sorted)."""

    readable: list[str]
    unreadable: list[dict[str, str]]
    duplicates: list[str]
    kept: np.ndarray | None
    sorted_names: list[str]


@paused_gc()
def read_job(
    path: Path | str,
    reward_key: str = "reward",
    *,
    name: str | None = None,
    skip: Iterable[str] = (),
    dictionary: bytes | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
    check_harbor: bool = True,
    sink: ChunkSink | None = None,
    trial_dirs: list[str] | None = None,
    job_id: str | None = None,
) -> ImportedJob:
    """Parse one Harbor job directory (no store involved).

    ``reward_key`` selects the primary reward of the table. ``skip``: trial directory names
    not to read (already imported; their trials are absent from the result). ``dictionary``:
    reuse this zstd dictionary instead of training one. ``progress(label)`` is called once per
    trial directory. ``workers``: processes parsing (default: one per usable core when the job
    has at least ``PARALLEL_MIN`` trials, else 1; the calling process is one).
    ``check_harbor``: validate job files and a sample of trials (up to ``DRIFT_SAMPLE``)
    with Harbor's own models to report ``harbor_schema_drift``. ``sink``: receives the parsed
    chunks as they come (see :class:`ChunkSink`; the store's import writes them meanwhile).
    ``trial_dirs``: the visible sub-directories of ``path``, sorted, when the caller listed
    them already. ``job_id``: the job's id when the caller named it already (an import, from
    :func:`~casstore.trials.identity.job_identity_at`), else read as that function does.

    Diagnostics (``code``): ``job_result_missing_partial``, ``trial_count_mismatch``,
    ``result_unreadable`` (with the trial directories), ``harbor_schema_drift``,
    ``duplicate_trial_name``, ``job_file_unreadable`` (a job-level file there but not read:
    ``file``, ``message`` ``config.json: not a regular file (a FIFO)``). Raises
    :class:`UsageError` when ``path`` is not a directory and :class:`CheckError` when no trial
    can be read and there is no job result.json either.
    """
    job = _JobDir.open(Path(path), skip, trial_dirs, job_id)
    evidence = Evidence(dictionary if dictionary is not None else _trained(job))
    n_workers = workers if workers is not None else default_workers(len(job.names))
    if sink is not None:
        sink.start(len(job.names))
    chunks = read_all(job.root, job.names, reward_key, evidence, n_workers, progress, sink)
    trials = _trials(job.names, chunks)
    packed = merge(chunks, trials.kept, [job.job_id], reward_key)
    if not packed.names and not job.skipped and not isinstance(job.result, dict):
        raise CheckError(str(job.path), "no readable trial result.json and no job result.json")
    expected = _expected_trials(job.lock, job.result, job.config)
    diagnostics, codes = _diagnostics(job, trials, packed, expected)
    if check_harbor and (drifted := drift(job.path, trials.readable, job.config_bytes)):
        diagnostics.append(drifted)
    record = _job_record(
        job,
        expected,
        packed,
        name=name or Path(job.root).name,
        reward_key=reward_key,
        trial_names=trials.sorted_names if trials.kept is None else sorted(packed.names),
        dictionary=evidence.id,
        failure_codes=ordered_counts(codes),
        diagnostics=diagnostics,
    )
    return ImportedJob(
        job.job_id,
        record,
        table=packed.table,
        diagnostics=diagnostics,
        failure_codes=record.failure_codes,
        dictionary=evidence.dictionary,
        packed=packed,
    )


def _trained(job: _JobDir) -> bytes | None:
    """A zstd dictionary trained on a sample of the job's trial result.json files (None:
    too few to train on)."""
    samples = [read_bytes(job.path / n / "result.json") for n in sample(job.names, TRAIN_SAMPLES)]
    return train([s for s in samples if s])


def _trials(names: list[str], chunks: list[Chunk]) -> _Trials:
    """The trial directories ``names`` as the ``chunks`` read them (see :class:`_Trials`)."""
    unreadable: list[dict[str, str]] = []
    readable: list[str] = []
    for (start, stop), chunk in zip(cut(names), chunks, strict=True):
        if not chunk.errors:  # every trial directory of the chunk has a record
            readable.extend(names[start:stop])
            continue
        for index, reason in chunk.errors:
            unreadable.append({"trial_dir": shown(names[start + index]), "reason": reason})
        readable.extend([names[start + i] for i in np.frombuffer(chunk.rows, np.int32).tolist()])
    trial_names = list(chain.from_iterable(chunk.names for chunk in chunks))
    sorted_names = sorted(trial_names)  # (mostly sorted already: quick)
    kept: np.ndarray | None = None
    duplicates: list[str] = []
    if any(map(str.__eq__, sorted_names, islice(sorted_names, 1, None))):
        seen: set[str] = set()
        keep = np.ones(len(trial_names), bool)
        for i, (trial_dir, trial_name) in enumerate(zip(readable, trial_names, strict=True)):
            if trial_name in seen:
                duplicates.append(trial_dir)
                keep[i] = False
            else:
                seen.add(trial_name)
        kept = np.flatnonzero(keep)
    return _Trials(readable, unreadable, duplicates, kept, sorted_names)


def _diagnostics(
    job: _JobDir, trials: _Trials, packed: Packed, expected_trials: tuple[int | None, str | None]
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The job's diagnostics but drift, and its failure codes (code → count, the trials' and
    the job's): unreadable trial directories, duplicate trial names, a missing job
    result.json (when trials were read or skipped), job-level files there but not read (a
    FIFO, ...), a trial count other than the one expected (``expected_trials``:
    :func:`_expected_trials`)."""
    diagnostics: list[dict[str, Any]] = []
    codes: Counter[str] = Counter()
    if unreadable := trials.unreadable:
        codes[FailureCode.RESULT_UNREADABLE] = len(unreadable)
        code: FailureCode | Diagnostic = FailureCode.RESULT_UNREADABLE
        diagnostics.append({"code": code, "count": len(unreadable), "trials": unreadable})
    if duplicates := trials.duplicates:
        code = Diagnostic.DUPLICATE_TRIAL_NAME
        diagnostics.append({"code": code, "count": len(duplicates), "trial_dirs": duplicates})
    if not isinstance(job.result, dict) and (packed.names or job.skipped):
        codes[FailureCode.JOB_RESULT_MISSING_PARTIAL] = 1
        unread = job.result_bytes is not None or "result.json" in job.unread
        state = "unreadable" if unread else "missing"
        message = f"job result.json {state}; trial files imported"
        diagnostics.append({"code": FailureCode.JOB_RESULT_MISSING_PARTIAL, "message": message})
    imported = bool(packed.names or job.skipped or trials.unreadable)
    for launch_code in launch_codes(
        job.launcher, job.cancelled, isinstance(job.result, dict), imported
    ):
        codes[launch_code] = 1
        diagnostics.append({"code": launch_code, "message": LAUNCH_MESSAGES[launch_code]})
    for name, reason in job.unread.items():  # there, but not read: said as a trial's are
        code = Diagnostic.JOB_FILE_UNREADABLE
        diagnostics.append({"code": code, "file": name, "message": f"{name}: {reason}"})
    expected, expected_from = expected_trials
    found = job.found(packed, trials)
    if expected is not None and expected != found:
        codes[FailureCode.TRIAL_COUNT_MISMATCH] = 1
        diagnostics.append(
            {
                "code": FailureCode.TRIAL_COUNT_MISMATCH,
                "expected": expected,
                "found": found,
                "source": expected_from,
            }
        )
    codes.update(packed.failures)
    return diagnostics, codes


def _expected_trials(lock: Any, result: Any, config: Any) -> tuple[int | None, str | None]:
    """Trials the job expected: lock.json's trial list, else result.json's n_total_trials,
    else config.json's explicit tasks x agents x n_attempts (datasets: unknown)."""
    if isinstance(lock, dict) and isinstance(lock.get("trials"), list):
        return len(lock["trials"]), "lock.json"
    if isinstance(result, dict) and isinstance(result.get("n_total_trials"), int):
        return result["n_total_trials"], "result.json"
    if isinstance(config, dict) and not config.get("datasets"):
        tasks, agents = config.get("tasks"), config.get("agents") or [{}]
        attempts = config.get("n_attempts", 1)
        if isinstance(tasks, list) and tasks and isinstance(attempts, int):
            return len(tasks) * len(agents) * attempts, "config.json"
    return None, None


def _job_record(
    job: _JobDir, expected_trials: tuple[int | None, str | None], packed: Packed, **fields: Any
) -> JobRecord:
    """The job's record: what its files and parsed trials say, and ``fields`` (its name,
    reward key, ...) as given."""
    result = job.result
    recorded = {}
    stats = result.get("stats") if isinstance(result, dict) else None
    if isinstance(stats, dict) and isinstance(stats.get("evals"), dict):
        recorded = {
            key: value.get("metrics")
            for key, value in stats["evals"].items()
            if isinstance(value, dict)
        }
    harbor = job.lock.get("harbor") if isinstance(job.lock, dict) else None
    expected, expected_from = expected_trials
    record = JobRecord(
        job_id=job.job_id,
        path=job.root,
        **fields,
        harbor_version=harbor.get("version") if isinstance(harbor, dict) else None,
        started_at=text_at(result, "started_at"),
        finished_at=text_at(result, "finished_at"),
        expected_trials=expected,
        expected_from=expected_from,
        trials=len(packed.names),
        recorded_metrics=recorded,
        imported_at=datetime.now(UTC).isoformat(),
    )
    label_record(record, packed.table)
    return record
