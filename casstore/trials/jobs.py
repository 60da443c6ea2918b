"""Read Harbor job directories (without a store): find them, parse their trials, build tables.

A **job directory** is what ``harbor run`` writes: job-level ``config.json`` (with
``job_name``), ``lock.json``, ``result.json`` and one sub-directory per trial holding the
trial's ``result.json``. A directory holding trial directories but no job-level files (e.g.
copied trials) is a job directory too. Every visible sub-directory of a job directory is a
trial directory, as Harbor itself reads it.
"""

from __future__ import annotations

import errno
import gc
import math
import os
import pickle
import signal
import socket
import stat
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np

from casstore.digest import Digest
from casstore.errors import CheckError, UsageError, is_text
from casstore.table.columns import Flag, Kind, RewardTable, harbor_evals_key
from casstore.table.labels import first_seen
from casstore.trials.evidence import Evidence, encode_evidence_pack, entry_key, reference, train
from casstore.trials.parse import parse_stored
from casstore.trials.records import (
    FAILURE_CODES,
    REWARD_KEY_METADATA,
    JobRecord,
    StoredTrialRecord,
    TrialRecord,
    decode_stored,
    job_id_problem,
    stored_with_attempt,
)
from casstore.trials.result import ResultUnreadable
from casstore.trials.rules import failure_code

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
TRAIN_SAMPLES = 256
DRIFT_SAMPLE = 200
_JSON = msgspec.json.Decoder()


class ImportedJob:
    """One parsed job directory.

    ``job_id``; ``record`` (:class:`JobRecord`); ``trials`` (one :class:`TrialRecord` per
    attempt with a readable result.json, attempts assigned); ``table`` (:class:`RewardTable`
    for ``reward_key``); ``diagnostics`` (dicts with ``code``); ``failure_codes`` (code →
    count; per-trial codes plus job-level ones); ``evidence`` (the ``evidence`` database
    values the trials' references name: key → value, see :mod:`casstore.trials.evidence`)
    and ``dictionary`` (zstd dictionary bytes or None) for the store.

    A job read by :func:`read_job` keeps its trials packed as the store writes them
    (``packed``); ``trials`` and ``evidence`` are decoded from them on first use.
    """

    def __init__(
        self,
        job_id: str,
        record: JobRecord,
        trials: list[TrialRecord] | None = None,
        table: RewardTable | None = None,
        diagnostics: list[dict[str, Any]] | None = None,
        failure_codes: dict[str, int] | None = None,
        evidence: dict[str, bytes] | None = None,
        dictionary: bytes | None = None,
        packed: _Packed | None = None,
    ) -> None:
        if table is None:
            if packed is None:
                raise TypeError("ImportedJob needs a table")
            table = packed.table
        self.job_id = job_id
        self.record = record
        self.table = table
        self.diagnostics = diagnostics if diagnostics is not None else []
        self.failure_codes = failure_codes if failure_codes is not None else {}
        self.dictionary = dictionary
        self.packed = packed
        self._trials = trials if trials is not None or packed is not None else []
        self._evidence = evidence if evidence is not None or packed is not None else {}

    @property
    def trials(self) -> list[TrialRecord]:
        if self._trials is None:
            assert self.packed is not None
            job_id, path, key = self.job_id, self.record.path, self.record.reward_key
            self._trials = [decode_stored(r, job_id, path, key) for r in self.packed.records]
        return self._trials

    @trials.setter
    def trials(self, value: list[TrialRecord]) -> None:
        self._unpack()
        self._trials = value

    @property
    def evidence(self) -> dict[str, bytes]:
        if self._evidence is None:
            assert self.packed is not None
            self._evidence = {key.decode(): value for key, value in self.packed.evidence}
        return self._evidence

    @evidence.setter
    def evidence(self, value: dict[str, bytes]) -> None:
        self._unpack()
        self._evidence = value

    def _unpack(self) -> None:
        """Trials and evidence decoded, the packed form dropped (it may no longer match)."""
        if self.packed is not None:
            _ = self.trials, self.evidence
            self.packed = None

    @property
    def n_trials(self) -> int:
        """``len(trials)`` without decoding them."""
        return len(self.packed.names) if self._trials is None and self.packed else len(self.trials)


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
        with os.scandir(path) as entries:  # the file types come with the listing (no stat)
            names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:  # unlistable, or an entry that needs a stat vanished: one by one
        return [child.name for child in _subdirs(path)]
    names = [name for name in names if name[0] != "."]
    names.sort()
    return names


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


def find_jobs(paths: Sequence[Path | str]) -> list[Path]:
    """The job directories among ``paths``, in order, without duplicates.

    Each path must be exactly one of:

    * a job directory: it holds a job ``config.json`` (with ``job_name``) or ``lock.json``, or
      trial directories (a ``result.json``/``config.json`` with ``trial_name``), e.g. trials
      copied out of a job;
    * a directory of job directories (Harbor's ``jobs/`` folder): every visible
      sub-directory is a job directory (there is at least one).

    Nothing deeper is searched: ``/tmp`` is not a source of jobs because some job lies
    somewhere below it. Raises :class:`UsageError` ``<path>: not a Harbor job directory (nor
    a directory of job directories)`` for anything else (with a hint for a trial directory
    or a folder mixing job directories with other ones).
    """
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise UsageError(str(path), "not a directory (expected a Harbor job directory)")
        for job in _jobs_at(path):
            key = job.resolve()
            if key not in seen:
                seen.add(key)
                found.append(job)
    return found


_NOT_A_JOB = "not a Harbor job directory (nor a directory of job directories)"


def _jobs_at(path: Path) -> list[Path]:
    """``[path]`` for a job directory, its sub-directories for a directory of job directories;
    UsageError otherwise."""
    if _is_job_dir(path):
        return [path]
    if _is_trial_dir(path):
        raise UsageError(str(path), f"{_NOT_A_JOB}; a trial directory: give its job directory")
    children = _subdirs(path)
    others = [child.name for child in children if not _is_job_dir(child)]
    if children and not others:
        return children
    hint = ""
    if others and len(others) < len(children):
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        hint = f"; not job directories: {shown}"
    raise UsageError(str(path), _NOT_A_JOB + hint)


# reading one job -----------------------------------------------------------------------------


def job_id_at(path: Path) -> str:
    """The id of the job directory at ``path``, as :func:`read_job` reads it
    (:func:`job_id_of` of its result.json and config.json)."""
    return job_id_of(
        path, _decode(_read_bytes(path / "result.json")), _read_bytes(path / "config.json")
    )


def job_id_of(path: Path, result: Any, config_bytes: bytes | None) -> str:
    """Harbor's job ``result.json`` ``id`` when it is a usable job id (:func:`job_id_problem`),
    else ``sha256:`` of the directory name and config.json bytes."""
    job_id = result.get("id") if isinstance(result, dict) else None
    if isinstance(job_id, str) and job_id_problem(job_id) is None:
        return job_id
    name = os.fsencode(path.resolve().name)
    return str(Digest.of(name + b"\0" + (config_bytes or b"")))


_READ_SIZE = 1 << 16
# O_NONBLOCK: a FIFO put where a result.json belongs reads as empty instead of blocking
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_MAX_RESULT_BYTES = 64 << 20  # a result.json beyond this is refused (a device, a runaway file)
_LABELS = ("agent", "model", "dataset", "exception", "failure", "evals")
_EXCEPTION, _NO_VERIFIER, _INVALID = int(Flag.EXCEPTION), int(Flag.NO_VERIFIER), int(Flag.INVALID)
_NUMBER = int(Kind.NUMBER)
_stored_kind = Kind.stored


class _Chunk(msgspec.Struct, array_like=True, gc=False):
    """One chunk of trial directories, parsed into store-ready pieces (what a worker sends).

    Per readable row (trial directories in order, unreadable ones left out): ``rows`` (int32
    index into the chunk's names), ``names``, ``records`` (the msgpack record as the store
    keeps it) and the reward-table columns: ``flags`` (uint8), ``primary``
    (float64), ``primary_kind`` (int8), ``labels`` (per label column its chunk-local labels,
    "" first) with ``codes`` (int32), ``value_keys`` (secondary reward keys of the chunk) with
    ``values`` (float64 rows x keys) and ``kinds`` (int8). ``errors``: ``(index into the
    chunk's names, reason)``. ``ev_key``/``ev_pack``: the store's evidence pack of the chunk
    (key and value; empty without rows), frame ``i`` the ``result.json`` of row ``i``.

    Attempts are assigned within the chunk (right for the whole job when no task has trials
    in another chunk, which :func:`_merge` checks): ``records`` carry them, ``attempts``
    (int32) lists them, ``order`` (int32) is the rows sorted by task, ``started_at``, trial
    name, and ``segments`` are ``(task, start, stop)`` ranges of ``order``.
    """

    rows: bytes
    errors: list[tuple[int, str]]
    names: list[str]
    records: list[bytes]
    ev_key: bytes
    ev_pack: bytes
    flags: bytes
    primary: bytes
    primary_kind: bytes
    labels: list[list[str]]
    codes: list[bytes]
    value_keys: list[str]
    values: bytes
    kinds: bytes
    order: bytes
    attempts: bytes
    segments: list[tuple[str, int, int]]


def _read_rest(fd: int, head: bytes) -> bytes:
    """``head`` and the rest of the file open at ``fd``; OSError (EFBIG) beyond
    ``_MAX_RESULT_BYTES``."""
    parts, size = [head], len(head)
    while part := os.read(fd, 1 << 20):
        parts.append(part)
        size += len(part)
        if size > _MAX_RESULT_BYTES:
            raise OSError(errno.EFBIG, f"larger than {_MAX_RESULT_BYTES} bytes")
    return b"".join(parts)


def _read_chunk(args: tuple[str, list[str], str], evidence: Evidence) -> _Chunk:
    """The chunk's trial directories read, parsed and made store-ready (see :class:`_Chunk`);
    the chunk's evidence is compressed in one call."""
    job_dir, names, reward_key = args
    try:
        dir_fd: int | None = os.open(job_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        dir_fd = None
    try:
        rows: list[int] = []
        errors: list[tuple[int, str]] = []
        records: list[StoredTrialRecord] = []
        datas: list[bytes] = []
        dict_id = evidence.id
        base = "" if dir_fd is not None else job_dir + "/"
        open_, read, close = os.open, os.read, os.close
        for index, name in enumerate(names):
            if not is_text(name):
                errors.append((index, "the trial directory's name is not valid UTF-8"))
                continue
            path = name + "/result.json"
            try:  # one open/read/close, no Python file object
                fd = open_(base + path, _OPEN_FLAGS, dir_fd=dir_fd)
                try:
                    data = read(fd, _READ_SIZE)
                    if len(data) == _READ_SIZE:
                        data = _read_rest(fd, data)
                finally:
                    close(fd)
            except FileNotFoundError:
                errors.append((index, "result.json missing"))
                continue
            except OSError as error:
                errors.append((index, f"result.json unreadable: {error.strerror or error}"))
                continue
            try:
                record = parse_stored(
                    data,
                    evidence="",  # its key once compressed (_pack_chunk)
                    evidence_dict=dict_id,
                    result_path=path,  # relative to the job, as stored
                )
            except ResultUnreadable as error:
                if not data or data.isspace():
                    errors.append((index, "result.json empty"))
                else:
                    errors.append((index, f"result.json unparseable: {error}"))
                continue
            rows.append(index)
            records.append(record)
            datas.append(data)
        blobs = evidence.compress_many(datas)
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return _pack_chunk(rows, errors, records, blobs, dict_id, reward_key)


def _shown(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 written ``\\xNN``."""
    if is_text(name):
        return name
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _pack_chunk(
    rows: list[int],
    errors: list[tuple[int, str]],
    records: list[StoredTrialRecord],
    blobs: list[bytes],
    dict_id: str | None,
    reward_key: str,
) -> _Chunk:
    """The chunk's records with their attempts (within the chunk) and evidence references
    (into the chunk's evidence pack of ``blobs``), encoded as the store keeps them
    (:func:`encode_stored`), and its table columns."""
    encode = _ENCODER.encode
    names = [r.trial_name for r in records]
    tasks = [r.task_name for r in records]
    started = [r.started_at or "" for r in records]
    order, attempts, segments = _attempts(tasks, started, names)
    for r, attempt in zip(records, attempts, strict=True):
        if attempt:
            r.attempt = attempt
    ev_key, ev_pack = "", b""
    if records:
        ev_pack = encode_evidence_pack(dict_id, blobs, [r.evidence_bytes for r in records])
        ev_key = entry_key(ev_pack)
        for i, r in enumerate(records):
            r.evidence = reference(ev_key, i)
    # the table columns: computed once per distinct (rewards, flags, labels) combination
    combos: dict[tuple[Any, ...], int] = {}
    firsts: list[TrialRecord] = []
    rows_combo: list[int] = []
    for r in records:
        combo = (
            id(r.rewards),
            id(r.kinds),
            r.valid,
            r.has_verifier,
            r.exception_type,
            r.failure,
            r.agent_name,
            r.agent_version,
            r.model_name,
            r.source,
        )
        k = combos.get(combo)
        if k is None:
            k = combos[combo] = len(firsts)
            firsts.append(r)
        rows_combo.append(k)
    m = len(firsts)
    c_flags = np.zeros(m, np.uint8)
    c_primary = np.full(m, math.nan, np.float64)
    c_primary_kind = np.zeros(m, np.int8)
    label_maps: list[dict[str, int]] = [{"": 0} for _ in _LABELS]
    c_codes = np.zeros((len(_LABELS), m), np.int32)
    secondary: list[tuple[int, str, float | int, int]] = []
    for k, r in enumerate(firsts):
        c_flags[k] = (
            (r.exception_type is not None) * _EXCEPTION
            | (not r.has_verifier) * _NO_VERIFIER
            | (not r.valid) * _INVALID
        )
        rewards = r.rewards
        if rewards and r.valid:
            row_kinds = r.kinds
            for key, value in rewards.items():
                if key == reward_key:
                    c_primary[k] = float(value)
                    c_primary_kind[k] = _stored_kind(value, row_kinds.get(key, _NUMBER))
                else:
                    secondary.append(
                        (k, key, value, _stored_kind(value, row_kinds.get(key, _NUMBER)))
                    )
        c_codes[:, k] = [
            labels.setdefault(label, len(labels))
            for labels, label in zip(label_maps, row_labels(r), strict=True)
        ]
    value_keys = sorted({key for _, key, _, _ in secondary})
    c_values = np.full((m, len(value_keys)), math.nan, np.float64)
    c_kinds = np.zeros((m, len(value_keys)), np.int8)
    if secondary:
        column = {k: j for j, k in enumerate(value_keys)}
        for k, key, value, kind in secondary:
            j = column[key]
            c_values[k, j] = value
            c_kinds[k, j] = kind
    at = np.array(rows_combo, np.intp)
    return _Chunk(
        rows=np.array(rows, np.int32).tobytes(),
        errors=errors,
        names=names,
        records=list(map(encode, records)),
        ev_key=ev_key.encode(),
        ev_pack=ev_pack,
        flags=c_flags[at].tobytes(),
        primary=c_primary[at].tobytes(),
        primary_kind=c_primary_kind[at].tobytes(),
        labels=[list(labels) for labels in label_maps],
        codes=[column[at].tobytes() for column in c_codes],
        value_keys=value_keys,
        values=c_values[at].tobytes(),
        kinds=c_kinds[at].tobytes(),
        order=np.array(order, np.int32).tobytes(),
        attempts=np.array(attempts, np.int32).tobytes(),
        segments=segments,
    )


def row_labels(record: TrialRecord) -> tuple[str, ...]:
    """The reward-table labels of a trial, in ``_LABELS`` order: ``name@version``, model,
    dataset (``source``), exception type, failure code ("" for none) and Harbor's evals key."""
    return (
        f"{record.agent_name}@{record.agent_version}",
        record.model_name or "",
        record.source or "",
        record.exception_type or "",
        record.failure
        or failure_code(record.valid, record.has_verifier, record.exception_type)
        or "",
        harbor_evals_key(record.agent_name, record.model_name, record.source),
    )


def _attempts(
    tasks: list[str], started: list[str], names: list[str]
) -> tuple[list[int], list[int], list[tuple[str, int, int]]]:
    """Rows sorted by task, ``started_at`` (missing: ""), trial name; each row's attempt
    (its index within its task in that order); ``(task, start, stop)`` ranges of the order."""
    sort_keys = list(zip(tasks, started, names, strict=True))
    order = sorted(range(len(names)), key=sort_keys.__getitem__)
    attempts = [0] * len(names)
    segments: list[tuple[str, int, int]] = []
    previous, attempt, start = None, 0, 0
    for row, i in enumerate(order):
        task = tasks[i]
        if task != previous:
            if previous is not None:
                segments.append((previous, start, row))
            previous, attempt, start = task, 0, row
        else:
            attempt += 1
        attempts[i] = attempt
    if previous is not None:
        segments.append((previous, start, len(order)))
    return order, attempts, segments


_ENCODER = msgspec.msgpack.Encoder()


_CHUNK_DECODER = msgspec.msgpack.Decoder(_Chunk)


def _decode_chunk(data: bytes) -> _Chunk:
    return _CHUNK_DECODER.decode(data)


def _disjoint_segments(
    chunks: list[_Chunk],
) -> list[tuple[str, np.ndarray, int, int]] | None:
    """``(task, chunk order offset into the job's rows, start, stop)`` per task, tasks
    sorted, when no task has rows in two chunks; else None."""
    found: list[tuple[str, int, int, int]] = []
    for k, c in enumerate(chunks):
        found.extend((task, k, a, b) for task, a, b in c.segments)
    found.sort()
    if any(found[i][0] == found[i + 1][0] for i in range(len(found) - 1)):
        return None
    orders = []
    base = 0
    for c in chunks:
        orders.append(np.frombuffer(c.order, np.int32).astype(np.intp) + base)
        base += len(c.names)
    return [(task, orders[k], a, b) for task, k, a, b in found]


class ChunkSink(Protocol):
    """Where :func:`read_job` hands the parsed chunks as soon as it has them (the store writes
    them while the rest is parsed): ``start(trials)`` once before parsing (the number of trial
    directories to read), then ``add(chunk)`` per chunk, in order of the trial directories, in
    the calling thread. A chunk's records carry attempts assigned within the chunk: they are the
    job's only when :attr:`_Packed.rewritten` is False."""

    def start(self, trials: int) -> None: ...

    def add(self, chunk: _Chunk) -> None: ...


@dataclass
class _Packed:
    """A job's parsed trials as the store keeps them (rows in trial-directory order):
    ``names`` (trial names), ``records`` (msgpack records, attempts set), ``evidence``
    (``(key, value)`` of the ``evidence`` database packs the records reference),
    ``failures`` (failure code → trials), ``counts`` (as :func:`job_counts`), ``table``;
    ``rewritten``: whether the merge changed or dropped records the chunks carried (a
    duplicate trial name, a task with trials in several chunks)."""

    names: list[str]
    records: list[bytes]
    evidence: list[tuple[bytes, bytes]]
    failures: dict[str, int]
    counts: dict[str, int]
    table: RewardTable
    rewritten: bool = False


def _merge(chunks: list[_Chunk], kept: np.ndarray | None, job_id: str, reward_key: str) -> _Packed:
    """The chunks' rows (only ``kept`` ones when given) merged: attempts assigned (each
    record patched), the reward table built from the chunks' columns (rows sorted by task,
    attempt; labels numbered in order of first appearance), as :func:`assign_attempts` and
    :func:`table_from_records` do on records."""

    def concatenated(name: str) -> list[Any]:
        return list(chain.from_iterable(getattr(c, name) for c in chunks))

    names, records = concatenated("names"), concatenated("records")
    evidence = [(c.ev_key, c.ev_pack) for c in chunks if c.ev_key]

    def joined(name: str, dtype: Any) -> np.ndarray:
        parts = [np.frombuffer(getattr(c, name), dtype) for c in chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    flags = joined("flags", np.uint8)
    primary = joined("primary", np.float64)
    primary_kind = joined("primary_kind", np.int8)
    label_maps: list[dict[str, int]] = [{"": 0} for _ in _LABELS]
    label_codes: list[np.ndarray] = []
    for column, labels in enumerate(label_maps):
        parts = [np.zeros(0, np.int32)]
        remaps: dict[tuple[str, ...], np.ndarray] = {}  # chunks mostly share their labels
        for c in chunks:
            local = tuple(c.labels[column])
            remap = remaps.get(local)
            if remap is None:
                remap = remaps[local] = np.array(
                    [labels.setdefault(v, len(labels)) for v in local], np.int32
                )
            parts.append(remap[np.frombuffer(c.codes[column], np.int32)])
        label_codes.append(np.concatenate(parts))
    value_keys = sorted({k for c in chunks for k in c.value_keys})
    n_all = len(names)
    values = np.full((n_all, len(value_keys)), math.nan, np.float64)
    kinds = np.zeros((n_all, len(value_keys)), np.int8)
    if value_keys:
        column_of = {k: j for j, k in enumerate(value_keys)}
        start = 0
        for c in chunks:
            m = len(c.names)
            if c.value_keys:
                at = [column_of[k] for k in c.value_keys]
                shape = (m, len(c.value_keys))
                values[start : start + m, at] = np.frombuffer(c.values, np.float64).reshape(shape)
                kinds[start : start + m, at] = np.frombuffer(c.kinds, np.int8).reshape(shape)
            start += m
    if kept is not None:
        rows = kept.tolist()
        names, records = [names[i] for i in rows], [records[i] for i in rows]
        flags, primary, primary_kind = flags[kept], primary[kept], primary_kind[kept]
        values, kinds = values[kept], kinds[kept]
        label_codes = [codes[kept] for codes in label_codes]
    n = len(names)
    # attempts: index within the task, by started_at then trial name; table rows in that order
    segments = _disjoint_segments(chunks) if kept is None else None
    if segments is not None:  # every task within one chunk: the chunks' attempts hold
        task_list = [task for task, _, _, _ in segments]
        o = np.concatenate([np.zeros(0, np.intp)] + [order[a:b] for _, order, a, b in segments])
        task_sorted = np.repeat(
            np.arange(len(segments), dtype=np.int32),
            np.array([b - a for _, _, a, b in segments], np.intp),
        )
        attempt_sorted = joined("attempts", np.int32)[o]
    else:
        local = joined("attempts", np.int32)
        if kept is not None:
            local = local[kept]
        tasks, started = _tasks_and_starts(records)
        order_list, attempts, task_segments = _attempts(tasks, started, names)
        records = [
            r if a == b else stored_with_attempt(r, a)
            for r, a, b in zip(records, attempts, local.tolist(), strict=True)
        ]
        task_list = [task for task, _, _ in task_segments]
        o = np.array(order_list, np.intp)
        task_sorted = np.repeat(
            np.arange(len(task_segments), dtype=np.int32),
            np.array([b - a for _, a, b in task_segments], np.intp),
        )
        attempt_sorted = np.array(attempts, np.int32)[o]
    table_labels: dict[str, list[str]] = {}
    table_codes: dict[str, np.ndarray] = {}
    for column, labels in zip(_LABELS, label_maps, strict=True):
        codes = label_codes[_LABELS.index(column)][o]
        table_labels[column], table_codes[column] = first_seen(codes, list(labels))
    failure_labels = table_labels["failure"]
    failure_counts = np.bincount(table_codes["failure"], minlength=len(failure_labels))
    failures = {
        label: int(count)
        for label, count in zip(failure_labels, failure_counts.tolist(), strict=True)
        if label and count
    }
    sorted_flags = flags[o]
    table = RewardTable(
        reward_key=reward_key,
        tasks=task_list,
        trials=[names[i] for i in o.tolist()],
        keys=value_keys,
        task=task_sorted,
        attempt=attempt_sorted,
        flags=sorted_flags,
        primary=primary[o],
        primary_kind=primary_kind[o],
        values=values[o],
        kinds=kinds[o],
        agents=table_labels["agent"],
        models=table_labels["model"],
        datasets=table_labels["dataset"],
        exceptions=table_labels["exception"],
        failures=failure_labels,
        evals_keys=table_labels["evals"],
        jobs=[job_id],
        **table_codes,
    )
    table.validate()
    counts = {
        "trials": n,
        "invalid": int(np.count_nonzero(sorted_flags & _INVALID)),
        "errored": int(np.count_nonzero(sorted_flags & _EXCEPTION)),
        "no_verifier": int(np.count_nonzero(sorted_flags & _NO_VERIFIER)),
    }
    return _Packed(
        names=names,
        records=records,
        evidence=evidence,
        failures=failures,
        counts=counts,
        table=table,
        rewritten=segments is None,
    )


def _tasks_and_starts(records: list[bytes]) -> tuple[list[str], list[str]]:
    """Each stored record's ``task_name`` and ``started_at`` (missing: "")."""
    decoded = [_STORED_DECODER.decode(r) for r in records]
    return [r.task_name for r in decoded], [r.started_at or "" for r in decoded]


_STORED_DECODER = msgspec.msgpack.Decoder(StoredTrialRecord)


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


def _cut(names: list[str]) -> list[tuple[int, int]]:
    """``(start, stop)`` chunks of ``names``: about ``CHUNK`` each, cut where the part before
    ``__`` (Harbor names trial directories ``<task>__<id>``) changes, so that a task's trials
    usually share a chunk (then attempts are assigned in the worker); at most 4 x ``CHUNK``."""
    cuts: list[tuple[int, int]] = []
    start, n = 0, len(names)
    while start < n:
        stop = min(start + CHUNK, n)
        if stop < n:
            prefix = names[stop - 1].partition("__")[0]
            limit = min(start + 4 * CHUNK, n)
            while stop < limit and names[stop].partition("__")[0] == prefix:
                stop += 1
        cuts.append((start, stop))
        start = stop
    return cuts


def _read_all(
    job_dir: str,
    names: list[str],
    reward_key: str,
    evidence: Evidence,
    workers: int,
    progress: Callable[[str], None] | None,
    sink: ChunkSink | None = None,
) -> list[_Chunk]:
    """Read and parse every trial directory, one :class:`_Chunk` per ``CHUNK`` of them, each
    handed to ``sink`` in order as soon as it and those before it are parsed. With
    ``workers`` > 1, ``workers - 1`` forked processes and the calling one share the chunks
    (see :func:`_read_parallel`)."""
    chunks = [(job_dir, names[a:b], reward_key) for a, b in _cut(names)]

    def done(chunk: _Chunk, i: int) -> _Chunk:
        if sink is not None:
            sink.add(chunk)
        _advance(progress, chunks[i][1])
        return chunk

    if workers <= 1 or len(chunks) < 2 or not _can_fork_workers():
        return [done(_read_chunk(chunk, evidence), i) for i, chunk in enumerate(chunks)]
    return _read_parallel(chunks, evidence, workers - 1, done)


_MESSAGE = struct.Struct("<qq")  # chunk index, length (< 0: a pickled error); with a file


def _can_fork_workers() -> bool:
    """Whether :func:`_read_parallel` works here (fork, in-memory files, descriptor passing)."""
    return (
        hasattr(os, "fork")
        and hasattr(os, "memfd_create")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "SOCK_SEQPACKET")
    )


def _read_parallel(
    chunks: list[tuple[str, list[str], str]],
    evidence: Evidence,
    workers: int,
    done: Callable[[_Chunk, int], _Chunk],
) -> list[_Chunk]:
    """:func:`_read_all` with ``workers`` forked processes. Every process (the calling one
    too) takes the next chunk from a shared counter. A worker writes each parsed chunk
    (msgpack) to a new in-memory file and passes the file on a socket; the calling process
    reads the finished ones between its own chunks (no threads, no pickling; each file freed
    once read) and hands the chunks to ``done`` in order (so the store appends trial records
    in key order). A chunk a dead worker took is parsed by the calling process; a worker's
    exception is raised here."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    n = len(chunks)
    bounds = context.RawArray("q", [0, n])  # [next chunk to take, end]
    lock = context.Lock()
    parts: list[_Chunk | None] = [None] * n
    receive, send = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    processes = []
    delivered = 0

    def deliver() -> None:
        """``done`` for the chunks parsed so far that follow the delivered ones."""
        nonlocal delivered
        while delivered < n and parts[delivered] is not None:
            done(parts[delivered], delivered)  # type: ignore[arg-type]
            delivered += 1

    def collect(block: bool) -> bool:
        """Take the workers' finished chunks; False once every worker has exited."""
        receive.setblocking(block)
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(receive, _MESSAGE.size, 1)
            except BlockingIOError:
                break
            if not message:
                return False
            receive.setblocking(False)
            i, length = _MESSAGE.unpack(message)
            try:
                data = os.pread(fds[0], abs(length), 0)
            finally:
                for fd in fds:
                    os.close(fd)
            if length < 0:
                raise pickle.loads(data)
            parts[i] = _decode_chunk(data)
        deliver()
        return True

    try:
        with send:
            for _ in range(workers):
                process = context.Process(
                    target=_worker_main,
                    args=(chunks, evidence.dictionary, bounds, lock, send, receive),
                    daemon=True,
                )
                process.start()
                processes.append(process)
        while (i := _next_chunk(bounds, lock)) is not None:
            parts[i] = _read_chunk(chunks[i], evidence)
            collect(False)
        while delivered < n and collect(True):
            pass
        for i, part in enumerate(parts):  # taken by a worker that died
            if part is None:
                parts[i] = _read_chunk(chunks[i], evidence)
        deliver()
    finally:
        for process in processes:
            if process.is_alive() and None in parts:
                process.terminate()
            process.join()
        receive.close()
    return [part for part in parts if part is not None]


def _next_chunk(bounds: Any, lock: Any) -> int | None:
    """Take the next chunk index from the shared ``bounds`` ([next, end]); None when none is
    left (the calling process takes from the front as the workers do)."""
    with lock:
        i = bounds[0]
        if i >= bounds[1]:
            return None
        bounds[0] = i + 1
        return i


def _worker_main(
    chunks: list[tuple[str, list[str], str]],
    dictionary: bytes | None,
    bounds: Any,
    lock: Any,
    send: socket.socket,
    receive: socket.socket,
) -> None:
    """A worker process: parse the next chunk until none is left, each written (msgpack) to
    an in-memory file passed on ``send``; an exception is sent pickled. Ends with
    ``os._exit`` (nothing inherited from the parent is flushed or finalized). The calling
    process's end is closed here: if that process dies, sending fails and the worker ends."""
    receive.close()
    _end_with_parent()
    gc.disable()
    evidence = Evidence(dictionary)
    while (i := _next_chunk(bounds, lock)) is not None:
        try:
            data = _ENCODER.encode(_read_chunk(chunks[i], evidence))
            length = len(data)
        except BaseException as error:  # sent to the calling process
            data = _pickled(error)
            length = -len(data)
        fd = os.memfd_create("casstore-import-chunk", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            socket.send_fds(send, [_MESSAGE.pack(i, length)], [fd])
        except OSError:  # the calling process is gone: nothing to report to
            os._exit(1)
        finally:
            os.close(fd)
        if length < 0:
            break
    os._exit(0)


def _end_with_parent() -> None:
    """Have the kernel kill this worker when the calling process dies (Linux
    ``PR_SET_PDEATHSIG``), so no worker outlives an interrupted import."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # died before the request: end now
        os._exit(1)


def _pickled(error: BaseException) -> bytes:
    """``error`` pickled, or a RuntimeError with its traceback when it cannot be."""
    try:
        return pickle.dumps(error)
    except Exception:  # whatever made it unpicklable
        import traceback

        text = "".join(traceback.format_exception(error))
        return pickle.dumps(RuntimeError(f"import worker failed:\n{text}"))


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
    them already.

    Diagnostics (``code``): ``job_result_missing_partial``, ``trial_count_mismatch``,
    ``result_unreadable`` (with the trial directories), ``harbor_schema_drift``,
    ``duplicate_trial_name``. Raises :class:`UsageError` when ``path`` is not a directory and
    :class:`CheckError` when no trial can be read and there is no job result.json either.
    """
    path = Path(path)
    if not path.is_dir():
        raise UsageError(str(path), "not a directory (expected a Harbor job directory)")
    if not is_text(str(path.resolve())):
        raise UsageError(os.fsdecode(path), "the job directory's path is not valid UTF-8")
    config_bytes = _read_bytes(path / "config.json")
    config = _decode(config_bytes)
    job_result_bytes = _read_bytes(path / "result.json")
    job_result = _decode(job_result_bytes)
    lock = _decode(_read_bytes(path / "lock.json"))
    job_id = job_id_of(path, job_result, config_bytes)
    skipped = set(skip)
    all_names = _subdir_names(path) if trial_dirs is None else trial_dirs
    names = [n for n in all_names if n not in skipped] if skipped else all_names
    # a dictionary trained on a sample, then parse (in parallel when large)
    if dictionary is None:
        samples = [_read_bytes(path / n / "result.json") for n in _sample(names, TRAIN_SAMPLES)]
        dictionary = train([s for s in samples if s])
    evidence = Evidence(dictionary)
    n_workers = workers if workers is not None else _default_workers(len(names))
    # trials' result_path absolute (as the job record's path): the rebuild hint of a saved-trials
    # file names the job directory, and must work from any folder
    root = str(path.resolve())
    if sink is not None:
        sink.start(len(names))
    chunks = _read_all(root, names, reward_key, evidence, n_workers, progress, sink)

    diagnostics: list[dict[str, Any]] = []
    unreadable: list[dict[str, str]] = []
    readable: list[str] = []  # trial directories with a record, in order
    for (start, stop), chunk in zip(_cut(names), chunks, strict=True):
        if not chunk.errors:  # every trial directory of the chunk has a record
            readable.extend(names[start:stop])
            continue
        for index, reason in chunk.errors:
            unreadable.append({"trial_dir": _shown(names[start + index]), "reason": reason})
        readable.extend([names[start + i] for i in np.frombuffer(chunk.rows, np.int32).tolist()])
    trial_names = list(chain.from_iterable(chunk.names for chunk in chunks))
    sorted_names = sorted(trial_names)  # (mostly sorted already: quick)
    kept: np.ndarray | None = None  # rows kept (None: all), the first of equal trial names
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
    packed = _merge(chunks, kept, job_id, reward_key)
    n_trials = len(packed.names)

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
    if not n_trials and not skipped and not isinstance(job_result, dict):
        raise CheckError(str(path), "no readable trial result.json and no job result.json")
    if not isinstance(job_result, dict) and (n_trials or skipped):
        codes["job_result_missing_partial"] = 1
        state = "missing" if job_result_bytes is None else "unreadable"
        diagnostics.append(
            {
                "code": "job_result_missing_partial",
                "message": f"job result.json {state}; trial files imported",
            }
        )
    expected, expected_from = _expected_trials(lock, job_result, config)
    found = n_trials + len(unreadable) + (len(skipped & set(all_names)) if skipped else 0)
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
        drift = _drift(path, readable, config_bytes)
        if drift is not None:
            diagnostics.append(drift)
    codes.update(packed.failures)
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
        name=name or Path(root).name,
        path=root,
        reward_key=reward_key,
        harbor_version=harbor.get("version") if isinstance(harbor, dict) else None,
        started_at=_str(job_result, "started_at"),
        finished_at=_str(job_result, "finished_at"),
        expected_trials=expected,
        expected_from=expected_from,
        trials=n_trials,
        trial_names=sorted_names if kept is None else sorted(packed.names),
        recorded_metrics=recorded,
        dictionary=evidence.id,
        failure_codes=_ordered(codes),
        diagnostics=diagnostics,
        imported_at=datetime.now(UTC).isoformat(),
    )
    table = packed.table
    _label_record(record, table)
    return ImportedJob(
        job_id=job_id,
        record=record,
        table=table,
        diagnostics=diagnostics,
        failure_codes=record.failure_codes,
        dictionary=dictionary,
        packed=packed,
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


def _sample[T](items: list[T], n: int) -> list[T]:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def _read_bytes(path: Path) -> bytes | None:
    """A job-level file's bytes; None when it is missing, unreadable or not a regular file."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return _read_rest(fd, b"")
    except OSError:
        return None
    finally:
        os.close(fd)


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
    readable: list[str],
    config_bytes: bytes | None,
) -> dict[str, Any] | None:
    """One ``harbor_schema_drift`` diagnostic when Harbor's own models reject parts of the
    job that do not matter for scoring (reward errors are not drift: they are INVALID).
    ``readable``: the trial directories with a record."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Harbor's deprecation warnings on old fields
        return _drift_checked(path, readable, config_bytes)


def _drift_checked(
    path: Path,
    readable: list[str],
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
    label_maps: list[dict[str, int]] = [{"": 0} for _ in _LABELS]
    label_codes: list[list[int]] = [[] for _ in _LABELS]
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
                kind = _stored_kind(value, row_kinds.get(key, number))
                if key == reward_key:
                    primary_rows.append(i)
                    primary_values.append(value)
                    primary_kinds.append(kind)
                else:
                    j = key_index[key]
                    values[i, j] = value
                    kinds[i, j] = kind
        for labels, codes, label in zip(label_maps, label_codes, row_labels(r), strict=True):
            codes.append(labels.setdefault(label, len(labels)))
    if primary_rows:
        at = np.array(primary_rows, np.intp)
        primary[at] = np.array([float(v) for v in primary_values], np.float64)
        primary_kind[at] = np.array(primary_kinds, np.int8)
    codes = {c: np.array(label_codes[i], np.int32).reshape(n) for i, c in enumerate(_LABELS)}
    labels = {c: list(label_maps[i]) for i, c in enumerate(_LABELS)}
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
        agents=labels["agent"],
        models=labels["model"],
        datasets=labels["dataset"],
        exceptions=labels["exception"],
        failures=labels["failure"],
        evals_keys=labels["evals"],
        jobs=list(jobs) if jobs is not None else sorted({r.job_id for r in rows}),
        **codes,
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
