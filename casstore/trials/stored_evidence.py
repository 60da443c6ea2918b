"""Reading a trial's evidence back from the index: its raw result.json bytes, checked.

A trial's ``evidence`` reference is ``<pack key>#<index>`` (a frame of an evidence pack) or,
in an older store, the key of a per-file entry (see :mod:`casstore.trials.evidence`). Only
the frame asked for is decompressed (the pack is not copied) and its zstd content checksum
verified; an older entry, without a checksum, is checked against its key. A zstd dictionary
is checked against its id before use. :func:`checked_entry` and :func:`checked_dictionary`
raise ``ValueError`` (``fsck`` reports it as a problem); :func:`evidence_bytes` raises
:class:`CorruptStoreError` naming ``evidence/<key>``.
"""

from __future__ import annotations

import msgspec

from casstore.errors import UnknownReferenceError
from casstore.store.index import Index, Txn
from casstore.store.values import decode
from casstore.trials.evidence import (
    decompress,
    dictionary_id,
    entry_key,
    frame_count,
    frame_of,
    split_reference,
)

__all__ = ["checked_dictionary", "checked_entry", "evidence_bytes"]


def evidence_bytes(index: Index, ref: str) -> bytes:
    """The raw result.json bytes kept as evidence under ``ref`` (a trial's
    ``TrialRecord.evidence``: ``<pack key>#<index>``, or an older store's entry key),
    decompressed; only that frame of a pack is read (the value is not copied), its zstd
    content checksum verified. UnknownReferenceError when there is none (or ``ref`` is
    malformed); CorruptStoreError when it does not decode."""
    try:
        key, frame = split_reference(ref)
    except ValueError as error:
        raise UnknownReferenceError(ref, str(error).removeprefix(f"{ref}: ")) from error

    def body(txn: Txn) -> bytes:
        value = txn.raw_get("evidence", key)
        if value is None:
            raise UnknownReferenceError(ref, "no evidence with that digest")
        is_pack = _is_pack(value)
        if frame is not None and not is_pack:
            raise UnknownReferenceError(ref, "an evidence entry, not a pack: name it without #")
        if frame is not None and frame >= decode("evidence", key, frame_count, value):
            raise UnknownReferenceError(ref, "the evidence pack has no frame with that index")
        if frame is None and is_pack:
            raise UnknownReferenceError(ref, "an evidence pack: name a frame, <digest>#<index>")
        if frame is None:
            return decode("evidence", key, checked_entry, txn, key, value)
        return decode("evidence", key, _decompress, txn, value, frame)

    return index.read(body, buffers=True)


def _is_pack(value: bytes | memoryview) -> bool:
    """Whether the stored evidence ``value`` is a pack (not an older per-file entry)."""
    try:
        frame_count(value)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return False
    return True


def _decompress(txn: Txn, value: bytes | memoryview, frame: int | None) -> bytes:
    """The raw bytes of an ``evidence`` entry or pack frame (see :func:`frame_of`), with its
    zstd dictionary when it names one. A pack's frames carry zstd checksums; an older
    store's entry (no checksum) is checked against its key instead (``ValueError``)."""
    data, name, size = frame_of(value, frame)
    raw = decompress(data, checked_dictionary(txn, name) if name else None)
    if len(raw) != size:
        raise ValueError(f"{len(raw)} bytes decompressed, {size} recorded")
    return raw


def checked_dictionary(txn: Txn, name: str) -> bytes:
    """The zstd dictionary stored as ``name`` (its ``sha256:`` id). Raises ``ValueError``
    when it is missing or its bytes do not hash to its id (CorruptStoreError when the value
    does not decode)."""
    data = txn.get("zstd_dicts", name)
    if data is None:
        raise ValueError(f"zstd_dicts/{name}: missing")
    if not isinstance(data, bytes) or dictionary_id(data) != name:
        raise ValueError(f"zstd_dicts/{name}: the dictionary's bytes do not hash to its id")
    return data


def checked_entry(txn: Txn, key: str, value: bytes | memoryview) -> bytes:
    """The raw bytes of the older per-file evidence entry ``value`` stored at ``key``, which
    must be the SHA-256 of the entry (schema 2) or of those bytes (schema 1). Raises
    ``ValueError`` (or a decoding error) otherwise."""
    data = _decompress(txn, value, None)
    if entry_key(value) != key and entry_key(data) != key:
        raise ValueError("the entry hashes to neither its key nor its file's")
    return data
