"""The stored form of a trial record: items of the store's ``trial_packs`` database (and of
``trials`` in older schemas).

A msgpack array of the :class:`~casstore.trials.records.TrialRecord` fields in order, without
``job_id`` (the key's prefix), ``result_path`` relative to the job directory when it lies in
it, and ``metadata`` without the primary-reward-key entry when it is the job's. Fields added to
TrialRecord go last (an older array decodes with their defaults; a newer one's extra items are
ignored). Stores of schema 1 hold msgpack maps of all the fields: they decode as before. A
**trial pack** is the msgpack array of such records behind a CRC-32 of it
(:func:`encode_trial_pack`; schema 3 wrote the array alone): a byte changed anywhere in a
pack fails its check, never decodes into another reward.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import msgspec

from casstore.trials.records import REWARD_KEY_METADATA, TrialRecord, from_builtins

__all__ = [
    "StoredReferences",
    "StoredTrialRecord",
    "decode_pack_references",
    "decode_stored",
    "decode_trial_pack",
    "encode_parsed",
    "encode_stored",
    "encode_trial_pack",
    "pack_body",
    "stored_with_attempt",
]


def _stored_struct() -> Any:
    """The msgspec type of the stored array: TrialRecord's fields after ``job_id``."""
    spec: list[tuple[Any, ...]] = []
    for field in msgspec.structs.fields(TrialRecord)[1:]:
        if field.default_factory is not msgspec.NODEFAULT:
            default = msgspec.field(default_factory=field.default_factory)
            spec.append((field.name, field.type, default))
        elif field.default is not msgspec.NODEFAULT:
            spec.append((field.name, field.type, field.default))
        else:
            spec.append((field.name, field.type))
    return msgspec.defstruct("StoredTrialRecord", spec, array_like=True, gc=False)


_FIELDS = TrialRecord.__struct_fields__
_RESULT_PATH = _FIELDS.index("result_path")
if (
    _FIELDS[-3:] != ("result_path", "metadata", "trace") or _FIELDS[3] != "attempt"
):  # pragma: no cover
    raise ImportError("TrialRecord's fields changed: update the stored form")
StoredTrialRecord = _stored_struct()
"""A :class:`TrialRecord` in the stored form: its fields after ``job_id``, encoded as an array
(``result_path`` and ``metadata`` as :func:`encode_stored` leaves them)."""
_STORED_DECODER = msgspec.msgpack.Decoder(StoredTrialRecord)
_STORED_ENCODER = msgspec.msgpack.Encoder()
_astuple = msgspec.structs.astuple
_NO_METADATA: dict[str, str] = {}  # encoded only, never handed out


def encode_stored(record: TrialRecord, job_path: str | None, reward_key: str) -> bytes:
    """``record`` as the store keeps it (see above) for a job at ``job_path`` (absolute, or
    None) whose primary reward key is ``reward_key``."""
    metadata = record.metadata
    if metadata.get(REWARD_KEY_METADATA) == reward_key:
        if len(metadata) == 1:  # the usual case
            metadata = _NO_METADATA
        else:
            metadata = {k: v for k, v in metadata.items() if k != REWARD_KEY_METADATA}
    path = record.result_path
    if path and job_path and path.startswith(job_path):
        start = len(job_path) + 1
        if path[start - 1 : start] == "/":
            path = path[start:]
    # a concatenation: cheaper than unpacking into a new tuple
    fields = _astuple(record)[1:_RESULT_PATH] + (path, metadata)  # noqa: RUF005
    if record.trace is not None:  # schema 5; without one, the bytes schema 4 wrote
        fields += (record.trace,)
    return _STORED_ENCODER.encode(fields)


def encode_parsed(stored: Any) -> bytes:
    """A :data:`StoredTrialRecord` as the store keeps it: its array, without the trailing
    ``trace`` when it has none (the bytes of schema 4)."""
    fields = _astuple(stored)
    return _STORED_ENCODER.encode(fields if stored.trace is not None else fields[:-1])


def decode_stored(data: bytes, job_id: str, job_path: str | None, reward_key: str) -> TrialRecord:
    """Inverse of :func:`encode_stored` (a schema-1 map too). A relative ``result_path`` (this
    form, or one typed relative by an early import) names ``<trial dir>/result.json`` under
    ``job_path``. Raises ``msgspec.DecodeError``/``ValidationError`` on a bad value."""
    if 0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF):  # a map: schema 1
        record = from_builtins(msgspec.msgpack.decode(data), TrialRecord)
    else:
        record = TrialRecord(job_id, *_astuple(_STORED_DECODER.decode(data)))
    return _completed(record, job_path, reward_key)


_CHECKED = b"\xc1"  # a byte msgpack never uses: no older (unchecked) pack starts with it


def encode_trial_pack(records: list[bytes]) -> bytes:
    """A trial pack (a value of the ``trial_packs`` database): the byte ``0xC1``, the CRC-32
    (4 bytes, big-endian) of the rest, then the msgpack array of ``records``, each already in
    the stored form (:func:`encode_stored`), written as the array header and their
    concatenation (nothing re-encoded). Schema 3 wrote the array alone (:func:`pack_body`
    reads both)."""
    n = len(records)
    if n < 16:
        head = bytes((0x90 | n,))
    elif n < 1 << 16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        head = b"\xdd" + n.to_bytes(4, "big")
    joined = b"".join(records)
    checksum = zlib.crc32(joined, zlib.crc32(head))
    return b"".join((_CHECKED, checksum.to_bytes(4, "big"), head, joined))


def pack_body(data: bytes | memoryview, checksums: bool) -> bytes | memoryview:
    """The msgpack array of the trial pack ``data``, its CRC-32 checked. ``checksums``: the
    job's packs carry one (its record's ``pack_checksums``), so a pack without it is damage
    too; else a pack of schema 3 or older (the array alone) is read unchecked. Raises
    ``ValueError`` on a mismatch."""
    if data[:1] == _CHECKED:
        body = memoryview(data)[5:]
        if zlib.crc32(body) != int.from_bytes(data[1:5], "big"):
            raise ValueError("the trial pack's CRC-32 does not match its bytes")
        return body
    if checksums:
        raise ValueError("the trial pack has no CRC-32 (the job's packs carry one)")
    return data


def decode_trial_pack(
    data: bytes, job_id: str, job_path: str | None, reward_key: str, checksums: bool = False
) -> list[TrialRecord]:
    """Inverse of :func:`encode_trial_pack`: the pack's records as :func:`decode_stored` gives
    each (``checksums``: see :func:`pack_body`). Raises ``msgspec.DecodeError``/
    ``ValidationError``, or ``ValueError`` when the CRC-32 fails, on a bad value."""
    return [
        _completed(TrialRecord(job_id, *_astuple(stored)), job_path, reward_key)
        for stored in _PACK_DECODER.decode(pack_body(data, checksums))
    ]


_PACK_DECODER = msgspec.msgpack.Decoder(list[StoredTrialRecord])  # type: ignore[valid-type]


def _references_struct() -> Any:
    """The msgspec type reading of a stored record only its ``trial_name``, ``evidence`` and
    ``evidence_dict`` (the fields between them undecoded, those after them ignored)."""
    spec: list[tuple[Any, ...]] = []
    for field in msgspec.structs.fields(StoredTrialRecord):
        if field.name == "trial_name":
            spec.append((field.name, str))
        elif field.name in ("evidence", "evidence_dict"):
            spec.append((field.name, str | None, None))
        else:
            spec.append((field.name, msgspec.Raw, msgspec.Raw()))
        if field.name == "evidence_dict":
            break
    return msgspec.defstruct("StoredReferences", spec, array_like=True, gc=False)


StoredReferences = _references_struct()
"""What a stored record references: its ``trial_name``, ``evidence`` and ``evidence_dict``
(a fifth of the time of a whole record: the other fields are left undecoded)."""
_REFERENCES_DECODER = msgspec.msgpack.Decoder(list[StoredReferences])  # type: ignore[valid-type]


def decode_pack_references(data: bytes, checksums: bool) -> list[Any]:
    """The :data:`StoredReferences` of a trial pack's records (``checksums``: see
    :func:`pack_body`). Raises ``msgspec.DecodeError``/``ValidationError``, or
    ``ValueError`` when the CRC-32 fails, on a bad value."""
    return _REFERENCES_DECODER.decode(pack_body(data, checksums))


def _completed(record: TrialRecord, job_path: str | None, reward_key: str) -> TrialRecord:
    """A decoded record with an absolute ``result_path`` and the reward-key metadata."""
    path = record.result_path
    if path and job_path and not os.path.isabs(path):
        trial_dir = os.path.basename(os.path.dirname(path))
        record.result_path = os.path.join(job_path, trial_dir, "result.json")
    if REWARD_KEY_METADATA not in record.metadata:
        record.metadata = {**record.metadata, REWARD_KEY_METADATA: reward_key}
    return record


def _skip_str(data: bytes, at: int) -> int:
    """The offset after the msgpack str starting at ``at``."""
    first = data[at]
    if 0xA0 <= first <= 0xBF:  # fixstr
        return at + 1 + (first & 0x1F)
    width = {0xD9: 1, 0xDA: 2, 0xDB: 4}[first]
    return at + 1 + width + int.from_bytes(data[at + 1 : at + 1 + width], "big")


def _skip_uint(data: bytes, at: int) -> tuple[int, int]:
    """``(value, offset after it)`` of the msgpack unsigned int starting at ``at``."""
    first = data[at]
    if first < 0x80:  # positive fixint
        return first, at + 1
    width = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}[first]
    return int.from_bytes(data[at + 1 : at + 1 + width], "big"), at + 1 + width


def stored_with_attempt(data: bytes, attempt: int) -> bytes:
    """A record in the stored form (:func:`encode_stored`) with ``attempt`` instead of its own:
    the array's third item, after ``trial_name`` and ``task_name``."""
    head = {0xDC: 3, 0xDD: 5}.get(data[0], 1)  # array16, array32, fixarray
    split = _skip_str(data, _skip_str(data, head))
    current, end = _skip_uint(data, split)
    if current == attempt:
        return data
    return b"".join((data[:split], _STORED_ENCODER.encode(attempt), data[end:]))
