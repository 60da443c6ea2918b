"""Read the files of a job directory safely (the job's id: :mod:`casstore.trials.identity`).

A job-level file (``config.json``, ``lock.json``, ``result.json``) or a trial's
``result.json`` is read only when it is a regular file, opened without blocking
(:mod:`casstore.inputs`: a FIFO, a device or a socket in its place is never read), and refused
beyond :data:`MAX_RESULT_BYTES` (a runaway file).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import msgspec

from casstore.errors import UsageError, is_text
from casstore.inputs import open_regular

__all__ = [
    "MAX_RESULT_BYTES",
    "READ_SIZE",
    "decode_json",
    "read_bytes",
    "read_job_file",
    "read_rest",
    "shown",
    "text_at",
]

READ_SIZE = 1 << 16
"""Bytes of the first read of a file (most trial result.json files fit)."""
MAX_RESULT_BYTES = 64 << 20
"""A result.json beyond this size is refused (a device, a runaway file)."""
_JSON = msgspec.json.Decoder()


def read_rest(fd: int, head: bytes) -> bytes:
    """``head`` and the rest of the file open at ``fd``; OSError (EFBIG) beyond
    :data:`MAX_RESULT_BYTES`."""
    parts, size = [head], len(head)
    while part := os.read(fd, 1 << 20):
        parts.append(part)
        size += len(part)
        if size > MAX_RESULT_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_RESULT_BYTES} bytes")
    return b"".join(parts)


def read_bytes(path: Path) -> bytes | None:
    """A job-level file's bytes; None when it is missing, unreadable or not a regular file."""
    return read_job_file(path)[0]


def read_job_file(path: Path) -> tuple[bytes | None, str | None]:
    """``(bytes, None)`` of a job-level file; ``(None, None)`` when it is missing; ``(None,
    reason)`` when it is there but not read: ``not a regular file (a FIFO)``
    (:func:`casstore.inputs.not_regular`), ``cannot open: Permission denied``, ..."""
    try:
        fd = open_regular(path)
    except UsageError as error:
        return None, error.rule if os.path.lexists(path) else None
    try:
        return read_rest(fd, b""), None
    except OSError as error:
        return None, f"cannot read: {error.strerror or error}"
    finally:
        os.close(fd)


def decode_json(data: bytes | None) -> Any:
    """The JSON value of ``data`` (NaN/Infinity literals allowed); None for no data or bytes
    that are not JSON."""
    if data is None:
        return None
    try:
        return _JSON.decode(data)
    except msgspec.DecodeError:
        try:
            return json.loads(data)
        except ValueError:
            return None


def text_at(obj: Any, key: str) -> str | None:
    """``obj[key]`` when ``obj`` is a dict and the value a string, else None."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def shown(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 written ``\\xNN``."""
    if is_text(name):
        return name
    return os.fsencode(name).decode("utf-8", "backslashreplace")
