"""Read one chunk of a job's trial directories: parse them and make them store-ready.

An import cuts a job's trial directories into chunks of about :data:`TRIALS_PER_CHUNK`
(:func:`cut`); each chunk is read (by the calling process or a worker, see
:mod:`casstore.trials.workers`) into a :class:`Chunk`: its records encoded as the store keeps
them, its evidence pack, and its rows of the reward table's columns. :mod:`casstore.trials.merge`
joins the chunks into the job.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec
import numpy as np

from casstore.errors import is_text
from casstore.inputs import OPEN_FLAGS, not_regular, path_problem
from casstore.table.columns import Kind, harbor_evals_key
from casstore.trials.evidence import Evidence, encode_evidence_pack, entry_key, references
from casstore.trials.files import READ_SIZE, read_rest
from casstore.trials.parse import parse_stored
from casstore.trials.records import TrialRecord
from casstore.trials.result import ResultUnreadable
from casstore.trials.rules import agent_label, attempt_order, failure_code, flags
from casstore.trials.stored_form import StoredTrialRecord, encode_parsed

__all__ = [
    "LABELS",
    "TRAJECTORIES",
    "TRIALS_PER_CHUNK",
    "Chunk",
    "ChunkSink",
    "columns",
    "cut",
    "decode_chunk",
    "encode_chunk",
    "pack_chunk",
    "read_chunk",
    "read_trajectory",
    "row_labels",
]

TRIALS_PER_CHUNK = 500
"""Trial directories per chunk (about: :func:`cut` keeps a task's trials together)."""
LABELS = ("agent", "model", "dataset", "exception", "failure", "evals")
"""The reward table's label columns, in the order of :func:`row_labels`."""
_NUMBER = int(Kind.NUMBER)
_stored_kind = Kind.stored
_encode = msgspec.msgpack.Encoder().encode


class Chunk(msgspec.Struct, array_like=True, gc=False):
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
    in another chunk, which :func:`~casstore.trials.merge.merge` checks): ``records`` carry
    them, ``attempts`` (int32) lists them, ``order`` (int32) is the rows sorted by task,
    ``started_at``, trial name, and ``segments`` are ``(task, start, stop)`` ranges of
    ``order`` (:func:`~casstore.trials.rules.attempt_order`).
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


class ChunkSink(Protocol):
    """Where ``read_job`` hands the parsed chunks as soon as it has them (the store writes
    them while the rest is parsed): ``start(trials)`` once before parsing (the number of trial
    directories to read), then ``add(chunk)`` per chunk, in order of the trial directories, in
    the calling thread. A chunk's records carry attempts assigned within the chunk: they are the
    job's only when :attr:`~casstore.trials.merge.Packed.rewritten` is False."""

    def start(self, trials: int) -> None: ...

    def add(self, chunk: Chunk) -> None: ...


_DECODER = msgspec.msgpack.Decoder(Chunk)


def encode_chunk(chunk: Chunk) -> bytes:
    """A chunk as msgpack (what a worker process sends)."""
    return _encode(chunk)


def decode_chunk(data: bytes) -> Chunk:
    """Inverse of :func:`encode_chunk`."""
    return _DECODER.decode(data)


def cut(names: list[str]) -> list[tuple[int, int]]:
    """``(start, stop)`` chunks of ``names``: about ``TRIALS_PER_CHUNK`` each, cut where the
    part before ``__`` (Harbor names trial directories ``<task>__<id>``) changes, so that a
    task's trials usually share a chunk (then attempts are assigned in the worker); at most 4
    x ``TRIALS_PER_CHUNK``."""
    size = TRIALS_PER_CHUNK
    cuts: list[tuple[int, int]] = []
    start, n = 0, len(names)
    while start < n:
        stop = min(start + size, n)
        if stop < n:
            prefix = names[stop - 1].partition("__")[0]
            limit = min(start + 4 * size, n)
            while stop < limit and names[stop].partition("__")[0] == prefix:
                stop += 1
        cuts.append((start, stop))
        start = stop
    return cuts


def read_chunk(args: tuple[str, list[str], str], evidence: Evidence) -> Chunk:
    """The chunk ``(job directory, trial directory names, reward key)`` read, parsed and made
    store-ready (see :class:`Chunk`); the chunk's evidence is compressed in one call."""
    job_dir, names, reward_key = args
    try:
        dir_fd: int | None = os.open(job_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        dir_fd = None
    try:
        base = "" if dir_fd is not None else job_dir + "/"
        rows, errors, records, datas = _parse_all(dir_fd, base, names, evidence.id)
        traces = [(i, read_trajectory(dir_fd, base, names[row])) for i, row in enumerate(rows)]
        found = [(i, data) for i, data in traces if isinstance(data, bytes)]
        for i, data in traces:
            if isinstance(data, str):  # refused: the reason kept on the trial
                records[i].metadata = {**records[i].metadata, TRACE_REFUSED: data}
        blobs = evidence.compress_many(datas + [data for _, data in found])
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    sizes = [(i, len(data)) for i, data in found]
    return pack_chunk(rows, errors, records, blobs, evidence.id, reward_key, sizes)


TRAJECTORIES = ("agent/trajectory.json", "artifacts/trajectory.json")
"""Where a trial directory holds its ATIF trajectory: Harbor's ``agent/`` folder, or the
``artifacts/`` an agent's trajectory was collected into; the first found is kept."""


TRACE_REFUSED = "trace_refused"
"""The trial record's ``metadata`` key saying why its trajectory was not kept (one was there
but could not be read as a regular file): ``<where>: <rule>``; ``show --trace`` says it."""


def read_trajectory(dir_fd: int | None, base: str, trial: str) -> bytes | str | None:
    """The bytes of the trial's ATIF trajectory (:data:`TRAJECTORIES`, a regular file, no
    link followed at its name, at most :data:`~casstore.trials.files.MAX_RESULT_BYTES`); else
    why the first one there was refused (``agent/trajectory.json: a symbolic link (not
    followed)``, ``...: not a regular file (a FIFO)``), or None when it has none."""
    refused = None
    for where in TRAJECTORIES:
        path = f"{base}{trial}/{where}"
        # a missing file (the usual case) costs one faccessat and no exception
        if not os.access(path, os.F_OK, dir_fd=dir_fd, follow_symlinks=False):
            continue
        try:
            data = _read_regular(path, dir_fd)
        except OSError as error:
            data = _unreadable(error)
        if isinstance(data, bytes):
            return data
        refused = refused or f"{where}: {data}"
    return refused


def _read_regular(path: str, dir_fd: int | None) -> bytes | str:
    """The bytes of the regular file at ``path`` (no link followed), or the rule it breaks;
    OSError when it cannot be opened or read."""
    fd = os.open(path, OPEN_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        problem = not_regular(os.fstat(fd).st_mode)
        return problem if problem is not None else read_rest(fd, b"")
    finally:
        os.close(fd)


def _unreadable(error: OSError) -> str:
    """Why an opened trajectory could not be read, as the diagnostic says it."""
    if error.errno == errno.ELOOP:
        return "a symbolic link (not followed)"
    return error.strerror or str(error)


def _parse_all(
    dir_fd: int | None, base: str, names: list[str], dict_id: str | None
) -> tuple[list[int], list[tuple[int, str]], list[StoredTrialRecord], list[bytes]]:
    """``(rows, errors, records, result.json bytes)`` of the trial directories ``names``
    (under ``dir_fd``, else ``base``): a record per readable one, a reason per other one.

    A result.json that is no regular file is refused by its kind (:mod:`casstore.inputs`):
    opened without blocking, it cannot be opened (a socket), fails to read (a directory, a
    FIFO whose writer wrote nothing yet), reads as empty (a FIFO without a writer,
    ``/dev/null``) or fills the first read (``/dev/zero``), and each of these is checked on
    the descriptor. A whole small first read, what a regular file gives, is not: an ``fstat``
    per trial would cost ~10% of the parse, and only a FIFO or a device that has just
    delivered those few bytes can look like one (bounded and without blocking)."""
    rows: list[int] = []
    errors: list[tuple[int, str]] = []
    records: list[StoredTrialRecord] = []
    datas: list[bytes] = []
    open_, fstat, read, close = os.open, os.fstat, os.read, os.close
    for index, name in enumerate(names):
        if not is_text(name):
            errors.append((index, "the trial directory's name is not valid UTF-8"))
            continue
        path = name + "/result.json"
        try:  # one open/read/close, no Python file object
            fd = open_(base + path, OPEN_FLAGS, dir_fd=dir_fd)
            try:
                data = read(fd, READ_SIZE)
                problem = None
                if not data or len(data) == READ_SIZE:  # empty or long: a FIFO, a device?
                    problem = not_regular(fstat(fd).st_mode)  # (_parse_all's docstring)
                    if problem is None and data:
                        data = read_rest(fd, data)
            finally:
                close(fd)
        except FileNotFoundError:
            errors.append((index, "result.json missing"))
            continue
        except OSError as error:  # a socket cannot be opened: named by its kind
            problem = path_problem(base + path, dir_fd=dir_fd)
            problem = problem or f"unreadable: {error.strerror or error}"
        if problem is not None:
            errors.append((index, f"result.json {problem}"))
            continue
        try:  # evidence: its key once compressed (pack_chunk); result_path relative, as stored
            record = parse_stored(data, evidence="", evidence_dict=dict_id, result_path=path)
        except ResultUnreadable as error:
            if not data or data.isspace():
                errors.append((index, "result.json empty"))
            else:
                errors.append((index, f"result.json unparseable: {error}"))
            continue
        rows.append(index)
        records.append(record)
        datas.append(data)
    return rows, errors, records, datas


def pack_chunk(
    rows: list[int],
    errors: list[tuple[int, str]],
    records: list[StoredTrialRecord],
    blobs: list[bytes],
    dict_id: str | None,
    reward_key: str,
    traces: Sequence[tuple[int, int]] = (),
) -> Chunk:
    """The chunk's records with their attempts (within the chunk) and evidence references
    (into the chunk's evidence pack of ``blobs``: a frame per record's result.json, then one
    per trajectory of ``traces``, ``(record index, bytes)``), encoded as the store keeps them
    (:func:`~casstore.trials.stored_form.encode_parsed`), and its table columns."""
    names = [r.trial_name for r in records]
    tasks = [r.task_name for r in records]
    started = [r.started_at or "" for r in records]
    order, attempts, segments = attempt_order(tasks, started, names)
    for r, attempt in zip(records, attempts, strict=True):
        if attempt:
            r.attempt = attempt
    ev_key, ev_pack = "", b""
    if records:
        sizes = [r.evidence_bytes for r in records] + [size for _, size in traces]
        ev_pack = encode_evidence_pack(dict_id, blobs, sizes)
        ev_key = entry_key(ev_pack)
        refs = references(ev_key, len(sizes))
        for r, ref in zip(records, refs, strict=False):
            r.evidence = ref
        for (i, _), ref in zip(traces, refs[len(records) :], strict=True):
            records[i].trace = ref
    return Chunk(
        rows=np.array(rows, np.int32).tobytes(),
        errors=errors,
        names=names,
        records=list(map(encode_parsed, records)),
        ev_key=ev_key.encode(),
        ev_pack=ev_pack,
        order=np.array(order, np.int32).tobytes(),
        attempts=np.array(attempts, np.int32).tobytes(),
        segments=segments,
        **columns(records, reward_key),
    )


def columns(
    records: Sequence[TrialRecord | StoredTrialRecord], reward_key: str, combine: bool = True
) -> dict[str, Any]:
    """The reward-table columns of ``records`` (rows in their order) as :class:`Chunk` holds
    them: ``flags``, ``primary``, ``primary_kind``, ``labels``, ``codes``, ``value_keys``,
    ``values``, ``kinds``. With ``combine``, computed once per distinct (rewards, flags,
    labels) combination, reward dicts told apart by identity: parsed records share them (the
    verdict cache), decoded ones do not (``combine=False`` then saves the look-up)."""
    if combine:
        firsts, combo_of_row = _combinations(records)
    else:
        firsts, combo_of_row = list(records), None
    flag_column, primary, primary_kind, labels, codes, secondary = _combination_columns(
        firsts, reward_key
    )
    value_keys, values, kinds = _secondary(secondary, len(firsts))
    if combo_of_row is not None:
        at = np.array(combo_of_row, np.intp)
        flag_column, primary, primary_kind = flag_column[at], primary[at], primary_kind[at]
        codes, values, kinds = [column[at] for column in codes], values[at], kinds[at]
    return {
        "flags": flag_column.tobytes(),
        "primary": primary.tobytes(),
        "primary_kind": primary_kind.tobytes(),
        "labels": labels,
        "codes": [column.tobytes() for column in codes],
        "value_keys": value_keys,
        "values": values.tobytes(),
        "kinds": kinds.tobytes(),
    }


def _combinations(records: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """The first record of each distinct combination of what the columns hold, and each
    record's combination (by index)."""
    combos: dict[tuple[Any, ...], int] = {}
    firsts: list[Any] = []
    combo_of_row: list[int] = []
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
        combo_of_row.append(k)
    return firsts, combo_of_row


def _combination_columns(firsts: list[Any], reward_key: str) -> tuple[Any, ...]:
    """``(flags, primary, primary_kind, labels, codes, secondary)`` of one row per
    combination: the arrays, the chunk-local labels of each label column and their codes,
    and the secondary rewards as ``(row, key, value, kind)``."""
    flag_list: list[int] = []
    primary_rows: list[int] = []
    primary_values: list[float] = []
    primary_kinds: list[int] = []
    label_maps: list[dict[str, int]] = [{"": 0} for _ in LABELS]
    code_lists: list[list[int]] = [[] for _ in LABELS]
    secondary: list[tuple[int, str, float | int, int]] = []
    for k, r in enumerate(firsts):
        flag_list.append(flags(r.valid, r.has_verifier, r.exception_type))
        rewards = r.rewards
        if rewards and r.valid:
            row_kinds = r.kinds
            for key, value in rewards.items():
                kind = _stored_kind(value, row_kinds.get(key, _NUMBER))
                if key == reward_key:
                    primary_rows.append(k)
                    primary_values.append(float(value))
                    primary_kinds.append(kind)
                else:
                    secondary.append((k, key, value, kind))
        for label_map, code_list, label in zip(label_maps, code_lists, row_labels(r), strict=True):
            code_list.append(label_map.setdefault(label, len(label_map)))
    m = len(firsts)
    primary = np.full(m, math.nan, np.float64)
    primary_kind = np.zeros(m, np.int8)
    primary[primary_rows] = primary_values
    primary_kind[primary_rows] = primary_kinds
    codes = [np.array(column, np.int32).reshape(m) for column in code_lists]
    labels = [list(labels) for labels in label_maps]
    return np.array(flag_list, np.uint8), primary, primary_kind, labels, codes, secondary


def _secondary(
    secondary: list[tuple[int, str, float | int, int]], m: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(value_keys, values, kinds)``: the secondary reward keys, sorted, and the ``m`` x
    keys value and kind arrays of ``secondary`` (``(row, key, value, kind)``)."""
    value_keys = sorted({key for _, key, _, _ in secondary})
    values = np.full((m, len(value_keys)), math.nan, np.float64)
    kinds = np.zeros((m, len(value_keys)), np.int8)
    if secondary:
        column = {k: j for j, k in enumerate(value_keys)}
        for k, key, value, kind in secondary:
            j = column[key]
            values[k, j] = value
            kinds[k, j] = kind
    return value_keys, values, kinds


def row_labels(record: TrialRecord | StoredTrialRecord) -> tuple[str, ...]:
    """The reward-table labels of a trial, in :data:`LABELS` order: ``name@version``, model,
    dataset (``source``), exception type, failure code ("" for none) and Harbor's evals key."""
    failure = record.failure or failure_code(
        record.valid, record.has_verifier, record.exception_type
    )
    return (
        agent_label(record.agent_name, record.agent_version),
        record.model_name or "",
        record.source or "",
        record.exception_type or "",
        failure or "",
        harbor_evals_key(record.agent_name, record.model_name, record.source),
    )
