"""Read the files of a job directory safely (the job's id: :mod:`casstore.trials.identity`).

A job-level file (``config.json``, ``lock.json``, ``result.json``) or a trial's
``result.json`` is opened without blocking (a FIFO put in its place reads as empty) and refused
beyond :data:`MAX_RESULT_BYTES` (a device, a runaway file).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import msgspec

from casstore.errors import is_text

__all__ = [
    "MAX_RESULT_BYTES",
    "OPEN_FLAGS",
    "READ_SIZE",
    "decode_json",
    "read_bytes",
    "read_rest",
    "shown",
    "text_at",
]

READ_SIZE = 1 << 16
"""Bytes of the first read of a file (most trial result.json files fit)."""
# O_NONBLOCK: a FIFO put where a result.json belongs reads as empty instead of blocking
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
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
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_rest(fd, b"")
    except OSError:
        return None
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
