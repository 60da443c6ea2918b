"""Read Harbor job directories (without a store): find them, parse their trials, build tables.

A **job directory** is what ``harbor run`` writes: job-level ``config.json`` (with
``job_name``), ``lock.json``, ``result.json`` and one sub-directory per trial holding the
trial's ``result.json``. A directory holding trial directories but no job-level files (e.g.
copied trials) is a job directory too. Every visible sub-directory of a job directory is a
trial directory, as Harbor itself reads it.
"""

from __future__ import annotations

import gc
import hashlib
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from casstore.errors import CheckError, UsageError
from casstore.trials.evidence import Evidence, train
from casstore.trials.parse import ResultUnreadable, failure_of, parse_result
from casstore.trials.records import (
    FAILURE_CODES,
    REWARD_KEY_METADATA,
    JobRecord,
    TrialRecord,
)
from scoring.table import Flag, Kind, RewardTable

__all__ = [
    "ImportedJob",
    "assign_attempts",
    "find_jobs",
    "job_counts",
    "read_job",
    "table_from_records",
]

PARALLEL_MIN = 4000
CHUNK = 500
TRAIN_SAMPLES = 500
DRIFT_SAMPLE = 200
_JSON = msgspec.json.Decoder()


@dataclass
class ImportedJob:
    """One parsed job directory.

    ``job_id``; ``record`` (:class:`JobRecord`); ``trials`` (one :class:`TrialRecord` per
    attempt with a readable result.json, attempts assigned); ``table`` (:class:`RewardTable`
    for ``reward_key``); ``diagnostics`` (dicts with ``code``); ``failure_codes`` (code →
    count; per-trial codes plus job-level ones); ``evidence`` (evidence key → compressed
    bytes) and ``dictionary`` (zstd dictionary bytes or None) for the store.
    """

    job_id: str
    record: JobRecord
    trials: list[TrialRecord]
    table: RewardTable
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    failure_codes: dict[str, int] = field(default_factory=dict)
    evidence: dict[str, bytes] = field(default_factory=dict)
    dictionary: bytes | None = None


# finding jobs --------------------------------------------------------------------------------


def _load_json(path: Path) -> Any:
    try:
        return _JSON.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None


def _is_trial_dir(path: Path) -> bool:
    for name in ("config.json", "result.json"):
        file = path / name
        if file.is_file():
            data = _load_json(file)
            if isinstance(data, dict) and "trial_name" in data:
                return True
    return False


def _is_job_dir(path: Path) -> bool:
    config = _load_json(path / "config.json") if (path / "config.json").is_file() else None
    if isinstance(config, dict) and "job_name" in config:
        return True
    if (path / "lock.json").is_file() and not _is_trial_dir(path):
        return True
    if _is_trial_dir(path):
        return False
    return any(_is_trial_dir(child) for child in _subdirs(path)[:8])


def _subdir_names(path: Path) -> list[str]:
    """Names of the visible sub-directories of ``path`` (not following links), sorted."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    names = []
    for entry in entries:
        try:
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
        except OSError:
            continue
    return sorted(names)


def _subdirs(path: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                found.append(Path(entry.path))
        except OSError:
            continue
    return found


def find_jobs(paths: Sequence[Path | str], depth: int = 3) -> list[Path]:
    """The job directories among ``paths`` (each a job directory or a directory of them,
    searched ``depth`` levels down), in order, without duplicates.

    Raises :class:`UsageError` naming the first path that is not a directory or holds no job
    directory (a trial directory alone is refused: give its job directory).
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise UsageError(str(path), "not a directory (expected a Harbor job directory)")
        jobs = _search(path, depth)
        if not jobs:
            hint = " (a trial directory: give its job directory)" if _is_trial_dir(path) else ""
            raise UsageError(str(path), f"not a Harbor job directory and holds none{hint}")
        for job in jobs:
            if job.resolve() not in {f.resolve() for f in found}:
                found.append(job)
    return found


def _search(path: Path, depth: int) -> list[Path]:
    if _is_job_dir(path):
        return [path]
    if depth <= 0 or _is_trial_dir(path):
        return []
    return [job for child in _subdirs(path) for job in _search(child, depth - 1)]


# reading one job -----------------------------------------------------------------------------


def job_id_of(path: Path, result: Any, config_bytes: bytes | None) -> str:
    """Harbor's job ``result.json`` ``id`` when present, else ``sha256:`` of the directory
    name and config.json bytes."""
    if isinstance(result, dict) and isinstance(result.get("id"), str) and result["id"]:
        return result["id"]
    digest = hashlib.sha256(path.resolve().name.encode() + b"\0" + (config_bytes or b""))
    return f"sha256:{digest.hexdigest()}"


_RowT = tuple[TrialRecord | None, bytes | None, str | None]
_READ_SIZE = 1 << 16
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _read_file(name: str, dir_fd: int | None, job_dir: str) -> bytes:
    """``<name>/result.json`` (relative to ``dir_fd``, else under ``job_dir``): one
    ``open``/``read``/``close`` for files below 64 KiB, no Python file object."""
    relative = f"{name}/result.json"
    fd = (
        os.open(relative, _OPEN_FLAGS, dir_fd=dir_fd)
        if dir_fd is not None
        else os.open(f"{job_dir}/{relative}", _OPEN_FLAGS)
    )
    try:
        data = os.read(fd, _READ_SIZE)
        if len(data) == _READ_SIZE:
            parts = [data]
            while part := os.read(fd, 1 << 20):
                parts.append(part)
            data = b"".join(parts)
    finally:
        os.close(fd)
    return data


def _read_chunk(args: tuple[str, list[str], str, str], evidence: Evidence) -> list[_RowT]:
    """``(record, compressed evidence, None)`` or ``(None, None, reason)`` per trial
    directory of the chunk; the chunk's evidence is compressed in one call."""
    job_dir, names, job_id, reward_key = args
    try:
        dir_fd: int | None = os.open(job_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        dir_fd = None
    try:
        rows: list[_RowT] = []
        datas: list[bytes] = []
        sha256 = hashlib.sha256
        dict_id = evidence.id
        for name in names:
            try:
                data = _read_file(name, dir_fd, job_dir)
            except FileNotFoundError:
                rows.append((None, None, "result.json missing"))
                continue
            except OSError as error:
                rows.append((None, None, f"result.json unreadable: {error.strerror or error}"))
                continue
            if not data or data.isspace():
                rows.append((None, None, "result.json empty"))
                continue
            try:
                record = parse_result(data, job_id, reward_key)
            except ResultUnreadable as error:
                rows.append((None, None, f"result.json unparseable: {error}"))
                continue
            record.result_path = f"{job_dir}/{name}/result.json"
            record.evidence = "sha256:" + sha256(data).hexdigest()
            record.evidence_bytes = len(data)
            record.evidence_dict = dict_id
            rows.append((record, None, None))
            datas.append(data)
        blobs = iter(evidence.compress_many(datas))
        return [(r, next(blobs), None) if r is not None else (r, b, e) for r, b, e in rows]
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


_WORKER: dict[str, Any] = {}
_Row = _RowT
_ENCODER = msgspec.msgpack.Encoder()


def _worker_init(dictionary: bytes | None) -> None:
    _WORKER["evidence"] = Evidence(dictionary)


def _worker_chunk(args: tuple[str, list[str], str, str]) -> bytes:
    """A chunk parsed in a worker, its rows msgpack-encoded."""
    with paused_gc():
        return _ENCODER.encode(_read_chunk(args, _WORKER["evidence"]))


_CHUNK_DECODER = msgspec.msgpack.Decoder(list[_Row])


def _decode_chunk(data: bytes) -> list[_Row]:
    return _CHUNK_DECODER.decode(data)


def _advance(progress: Callable[[str], None] | None, names: list[str]) -> None:
    if progress is not None:
        for name in names:
            progress(name)


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


def _read_all(
    job_dir: str,
    names: list[str],
    job_id: str,
    reward_key: str,
    evidence: Evidence,
    workers: int,
    progress: Callable[[str], None] | None,
) -> list[_Row]:
    """Read and parse every trial directory. With ``workers`` > 1, ``workers - 1`` forked
    processes take chunks from the front while the calling process takes them from the back
    (a chunk not yet started by a worker is cancelled and parsed here), decoding the workers'
    finished chunks in between: both sides stay busy until they meet."""
    chunks = [
        (job_dir, names[i : i + CHUNK], job_id, reward_key) for i in range(0, len(names), CHUNK)
    ]
    if workers <= 1 or len(chunks) < 2:
        rows: list[_Row] = []
        for chunk in chunks:
            rows.extend(_read_chunk(chunk, evidence))
            _advance(progress, chunk[1])
        return rows
    parts: list[list[_Row] | None] = [None] * len(chunks)
    with ProcessPoolExecutor(
        workers - 1,
        mp_context=_fork_context(),
        initializer=_worker_init,
        initargs=(evidence.dictionary,),
    ) as pool:
        remote = [pool.submit(_worker_chunk, chunk) for chunk in chunks]
        collected = 0

        def collect(block: bool) -> int:
            i = collected
            while i < len(chunks) and parts[i] is None and (block or remote[i].done()):
                parts[i] = _decode_chunk(remote[i].result())
                _advance(progress, chunks[i][1])
                i += 1
            while i < len(chunks) and parts[i] is not None:
                i += 1
            return i

        for i in range(len(chunks) - 1, -1, -1):
            if not remote[i].cancel():
                break
            parts[i] = _read_chunk(chunks[i], evidence)
            _advance(progress, chunks[i][1])
            collected = collect(False)
        collected = collect(True)
    return [row for part in parts if part is not None for row in part]


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
) -> ImportedJob:
    """Parse one Harbor job directory (no store involved).

    ``reward_key`` selects the primary reward of the table. ``skip``: trial directory names
    not to read (already imported; their trials are absent from the result). ``dictionary``:
    reuse this zstd dictionary instead of training one. ``progress(label)`` is called once per
    trial directory. ``workers``: processes parsing (default: one per usable core when the job
    has at least ``PARALLEL_MIN`` trials, else 1; the calling process is one).
    ``check_harbor``: validate job files and a sample of trials (up to ``DRIFT_SAMPLE``)
    with Harbor's own models to report ``harbor_schema_drift``.

    Diagnostics (``code``): ``job_result_missing_partial``, ``trial_count_mismatch``,
    ``result_unreadable`` (with the trial directories), ``harbor_schema_drift``,
    ``duplicate_trial_name``. Raises :class:`UsageError` when ``path`` is not a directory and
    :class:`CheckError` when no trial can be read and there is no job result.json either.
    """
    with paused_gc():
        return _read_job(
            path,
            reward_key,
            name=name,
            skip=skip,
            dictionary=dictionary,
            progress=progress,
            workers=workers,
            check_harbor=check_harbor,
        )


def _read_job(
    path: Path | str,
    reward_key: str = "reward",
    *,
    name: str | None = None,
    skip: Iterable[str] = (),
    dictionary: bytes | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
    check_harbor: bool = True,
) -> ImportedJob:
    path = Path(path)
    if not path.is_dir():
        raise UsageError(str(path), "not a directory (expected a Harbor job directory)")
    config_bytes = _read_bytes(path / "config.json")
    config = _decode(config_bytes)
    job_result_bytes = _read_bytes(path / "result.json")
    job_result = _decode(job_result_bytes)
    lock = _decode(_read_bytes(path / "lock.json"))
    job_id = job_id_of(path, job_result, config_bytes)
    skipped = set(skip)
    all_names = _subdir_names(path)
    names = [n for n in all_names if n not in skipped]
    # a dictionary trained on a sample, then parse (in parallel when large)
    if dictionary is None:
        samples = [_read_bytes(path / n / "result.json") for n in _sample(names, TRAIN_SAMPLES)]
        dictionary = train([s for s in samples if s])
    evidence = Evidence(dictionary)
    n_workers = workers if workers is not None else _default_workers(len(names))
    results = _read_all(str(path), names, job_id, reward_key, evidence, n_workers, progress)

    diagnostics: list[dict[str, Any]] = []
    trials: list[TrialRecord] = []
    blobs: dict[str, bytes] = {}
    unreadable: list[dict[str, str]] = []
    seen: set[str] = set()
    duplicates: list[str] = []
    for trial_dir, (record, blob, error) in zip(names, results, strict=True):
        if record is None:
            unreadable.append({"trial_dir": trial_dir, "reason": error or "unreadable"})
            continue
        if record.trial_name in seen:
            duplicates.append(trial_dir)
            continue
        seen.add(record.trial_name)
        trials.append(record)
        if record.evidence is not None and blob is not None:
            blobs[record.evidence] = blob

    codes: Counter[str] = Counter()
    if unreadable:
        codes["result_unreadable"] = len(unreadable)
        diagnostics.append(
            {"code": "result_unreadable", "count": len(unreadable), "trials": unreadable}
        )
    if duplicates:
        diagnostics.append(
            {"code": "duplicate_trial_name", "count": len(duplicates), "trial_dirs": duplicates}
        )
    if not trials and not skipped and not isinstance(job_result, dict):
        raise CheckError(str(path), "no readable trial result.json and no job result.json")
    if not isinstance(job_result, dict) and (trials or skipped):
        codes["job_result_missing_partial"] = 1
        state = "missing" if job_result_bytes is None else "unreadable"
        diagnostics.append(
            {
                "code": "job_result_missing_partial",
                "message": f"job result.json {state}; trial files imported",
            }
        )
    expected, expected_from = _expected_trials(lock, job_result, config)
    found = len(trials) + len(unreadable) + len(skipped & set(all_names))
    if expected is not None and expected != found:
        codes["trial_count_mismatch"] = 1
        diagnostics.append(
            {
                "code": "trial_count_mismatch",
                "expected": expected,
                "found": found,
                "source": expected_from,
            }
        )
    if check_harbor:
        drift = _drift(path, names, results, config_bytes)
        if drift is not None:
            diagnostics.append(drift)
    assign_attempts(trials)
    for record in trials:
        if record.failure:
            codes[record.failure] += 1
    recorded = {}
    stats = job_result.get("stats") if isinstance(job_result, dict) else None
    if isinstance(stats, dict) and isinstance(stats.get("evals"), dict):
        recorded = {
            key: value.get("metrics")
            for key, value in stats["evals"].items()
            if isinstance(value, dict)
        }
    harbor = lock.get("harbor") if isinstance(lock, dict) else None
    record = JobRecord(
        job_id=job_id,
        name=name or path.resolve().name,
        path=str(path.resolve()),
        reward_key=reward_key,
        harbor_version=harbor.get("version") if isinstance(harbor, dict) else None,
        started_at=_str(job_result, "started_at"),
        finished_at=_str(job_result, "finished_at"),
        expected_trials=expected,
        expected_from=expected_from,
        trials=len(trials),
        trial_names=sorted(r.trial_name for r in trials),
        recorded_metrics=recorded,
        dictionary=evidence.id,
        failure_codes=_ordered(codes),
        diagnostics=diagnostics,
        imported_at=datetime.now(UTC).isoformat(),
    )
    table = table_from_records(trials, reward_key, jobs=[job_id])
    _label_record(record, table)
    return ImportedJob(
        job_id=job_id,
        record=record,
        trials=trials,
        table=table,
        diagnostics=diagnostics,
        failure_codes=record.failure_codes,
        evidence=blobs,
        dictionary=dictionary,
    )


def _default_workers(n: int) -> int:
    """One process per usable core for a job of at least ``PARALLEL_MIN`` trials, else 1
    (the calling process is one of them)."""
    if n < PARALLEL_MIN:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without it
        return max(1, os.cpu_count() or 1)


def _fork_context() -> Any:
    import multiprocessing

    try:
        return multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        return multiprocessing.get_context()


def _sample[T](items: list[T], n: int) -> list[T]:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _decode(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return _JSON.decode(data)
    except msgspec.DecodeError:
        import json

        try:
            return json.loads(data)
        except ValueError:
            return None


def _str(obj: Any, key: str) -> str | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def _ordered(codes: Counter[str]) -> dict[str, int]:
    return {code: codes[code] for code in FAILURE_CODES if codes.get(code)}


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


def _drift(
    path: Path,
    names: list[str],
    results: list[tuple[TrialRecord | None, bytes | None, str | None]],
    config_bytes: bytes | None,
) -> dict[str, Any] | None:
    """One ``harbor_schema_drift`` diagnostic when Harbor's own models reject parts of the
    job that do not matter for scoring (reward errors are not drift: they are INVALID)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Harbor's deprecation warnings on old fields
        return _drift_checked(path, names, results, config_bytes)


def _drift_checked(
    path: Path,
    names: list[str],
    results: list[tuple[TrialRecord | None, bytes | None, str | None]],
    config_bytes: bytes | None,
) -> dict[str, Any] | None:
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.result import TrialResult
    from pydantic import ValidationError

    fields: Counter[str] = Counter()
    job_files = []
    if config_bytes is not None:
        try:
            JobConfig.model_validate_json(config_bytes)
        except ValidationError as error:
            job_files.append("config.json")
            for item in error.errors():
                fields["config.json:" + _loc(item["loc"])] += 1
        except ValueError:
            job_files.append("config.json")
    readable = [n for n, (record, _, _) in zip(names, results, strict=True) if record]
    checked = _sample(readable, DRIFT_SAMPLE)
    drifted = 0
    for name in checked:
        data = _read_bytes(path / name / "result.json")
        if data is None:
            continue
        try:
            TrialResult.model_validate_json(data)
        except ValidationError as error:
            locs = [_loc(item["loc"]) for item in error.errors() if not _is_reward_loc(item["loc"])]
            if locs:
                drifted += 1
                for loc in set(locs):
                    fields[loc] += 1
    if not fields:
        return None
    return {
        "code": "harbor_schema_drift",
        "message": "Harbor's own models reject fields that do not matter for scoring; "
        "trials imported anyway",
        "count": drifted,
        "checked": len(checked),
        "trials": len(readable),
        "job_files": job_files,
        "fields": dict(sorted(fields.items())[:20]),
    }


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _is_reward_loc(loc: tuple[Any, ...]) -> bool:
    parts = [str(p) for p in loc]
    return "verifier_result" in parts


# attempts and tables -------------------------------------------------------------------------


def assign_attempts(records: list[TrialRecord]) -> None:
    """Set ``attempt`` on each record: index within its task (by job), trials sorted by
    ``started_at`` (missing first) then ``trial_name``."""
    groups: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
    for i, r in enumerate(records):
        key = (r.job_id, r.task_name)
        entry = (r.started_at or "", r.trial_name, i)
        group = groups.get(key)
        if group is None:
            groups[key] = [entry]
        else:
            group.append(entry)
    for group in groups.values():
        group.sort()
        for index, (_, _, i) in enumerate(group):
            records[i].attempt = index


def table_from_records(
    records: Sequence[TrialRecord], reward_key: str, jobs: list[str] | None = None
) -> RewardTable:
    """The :class:`RewardTable` of ``records`` for ``reward_key`` (rows sorted by task, job,
    attempt, trial name). Attempts are taken from the records (see :func:`assign_attempts`).

    Secondary ``keys`` are the other reward keys of valid mappings, sorted. Invalid rows keep
    no reward (NaN, Kind MISSING) and carry Flag.INVALID.
    """
    groups: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
    for i, r in enumerate(records):
        key = (r.task_name, r.job_id)
        entry = (r.attempt, r.trial_name, i)
        group = groups.get(key)
        if group is None:
            groups[key] = [entry]
        else:
            group.append(entry)
    rows = [records[i] for key in sorted(groups) for _, _, i in sorted(groups[key])]
    n = len(rows)
    tasks = sorted({r.task_name for r in rows})
    keys = sorted({k for r in rows if r.valid and r.rewards for k in r.rewards if k != reward_key})
    key_index = {k: i for i, k in enumerate(keys)}
    names = ("agent", "model", "dataset", "exception", "failure")
    labels: dict[str, dict[str, int]] = {c: {"": 0} for c in names}
    agent_l, model_l, dataset_l, exception_l, failure_l = (labels[c] for c in names)
    agent_c: list[int] = []
    model_c: list[int] = []
    dataset_c: list[int] = []
    exception_c: list[int] = []
    failure_c: list[int] = []
    task_index = {t: i for i, t in enumerate(tasks)}
    task_c: list[int] = []
    attempt_c: list[int] = []
    flags_c: list[int] = []
    primary = np.full(n, math.nan, np.float64)
    primary_kind = np.zeros(n, np.int8)
    values = np.full((n, len(keys)), math.nan, np.float64)
    kinds = np.zeros((n, len(keys)), np.int8)
    exception_flag, no_verifier_flag, invalid_flag = (
        int(Flag.EXCEPTION),
        int(Flag.NO_VERIFIER),
        int(Flag.INVALID),
    )
    number = int(Kind.NUMBER)
    primary_rows: list[int] = []
    primary_values: list[float | int] = []
    primary_kinds: list[int] = []
    for i, r in enumerate(rows):
        task_c.append(task_index[r.task_name])
        attempt_c.append(r.attempt)
        flag = 0
        if r.exception_type is not None:
            flag |= exception_flag
        if not r.has_verifier:
            flag |= no_verifier_flag
        if not r.valid:
            flag |= invalid_flag
        flags_c.append(flag)
        rewards = r.rewards
        if rewards and r.valid:
            row_kinds = r.kinds
            for key, value in rewards.items():
                kind = row_kinds.get(key, number)
                if key == reward_key:
                    primary_rows.append(i)
                    primary_values.append(value)
                    primary_kinds.append(kind)
                else:
                    j = key_index[key]
                    values[i, j] = value
                    kinds[i, j] = kind
        value = f"{r.agent_name}@{r.agent_version}"
        agent_c.append(agent_l.setdefault(value, len(agent_l)))
        value = r.model_name or ""
        model_c.append(model_l.setdefault(value, len(model_l)))
        value = r.source or ""
        dataset_c.append(dataset_l.setdefault(value, len(dataset_l)))
        value = r.exception_type or ""
        exception_c.append(exception_l.setdefault(value, len(exception_l)))
        value = r.failure or failure_of(r) or ""
        failure_c.append(failure_l.setdefault(value, len(failure_l)))
    if primary_rows:
        at = np.array(primary_rows, np.intp)
        primary[at] = np.array([float(v) for v in primary_values], np.float64)
        primary_kind[at] = np.array(primary_kinds, np.int8)
    columns = {
        "agent": agent_c,
        "model": model_c,
        "dataset": dataset_c,
        "exception": exception_c,
        "failure": failure_c,
    }
    table = RewardTable(
        reward_key=reward_key,
        tasks=tasks,
        trials=[r.trial_name for r in rows],
        keys=keys,
        task=np.array(task_c, np.int32),
        attempt=np.array(attempt_c, np.int32),
        flags=np.array(flags_c, np.uint8),
        primary=primary,
        primary_kind=primary_kind,
        values=values,
        kinds=kinds,
        agents=list(agent_l),
        models=list(model_l),
        datasets=list(dataset_l),
        exceptions=list(exception_l),
        failures=list(failure_l),
        jobs=list(jobs) if jobs is not None else sorted({r.job_id for r in rows}),
        **{c: np.array(columns[c], np.int32).reshape(n) for c in names},
    )
    table.validate()
    return table


def _label_record(record: JobRecord, table: RewardTable) -> None:
    record.agents = [a for a in table.agents if a]
    record.models = [m for m in table.models if m]
    record.datasets = [d for d in table.datasets if d]


def job_counts(records: Iterable[TrialRecord]) -> dict[str, int]:
    """``{"trials", "invalid", "errored", "no_verifier"}`` over ``records``."""
    counts = {"trials": 0, "invalid": 0, "errored": 0, "no_verifier": 0}
    for r in records:
        counts["trials"] += 1
        counts["invalid"] += not r.valid
        counts["errored"] += r.exception_type is not None
        counts["no_verifier"] += not r.has_verifier
    return counts


def record_reward_key(records: Iterable[TrialRecord], reward_key: str) -> None:
    """Set ``metadata["harbor_primary_reward_key"]`` on every record."""
    for r in records:
        if r.metadata.get(REWARD_KEY_METADATA) != reward_key:
            r.metadata = {**r.metadata, REWARD_KEY_METADATA: reward_key}
