"""How the index encodes its values, and the one place a stored value is decoded.

Values are msgpack with the binary type (:func:`encode_value`, :func:`decode_value`); records
the trials layer packs itself (trial packs, evidence, reward tables) are bytes of their own
format. Whatever the format, a stored value is decoded through :func:`decode`: damaged bytes
become :class:`~casstore.errors.CorruptStoreError` naming ``db/key``, never another exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgpack

from casstore.errors import CasstoreError, CorruptStoreError

__all__ = ["corrupt", "decode", "decode_value", "encode_value"]

T = TypeVar("T")


def encode_value(value: Any) -> bytes:
    """``value`` (builtins) as the index stores it: msgpack with the binary type."""
    return msgpack.packb(value, use_bin_type=True)


def decode_value(data: bytes) -> Any:
    """Stored bytes back to builtins, the inverse of :func:`encode_value` (a stored value is
    decoded through :func:`decode`, which names one that does not decode)."""
    return msgpack.unpackb(data, raw=False)


def corrupt(db: str, key: str | bytes, reason: object) -> CorruptStoreError:
    """The error for the value at ``key`` of ``db`` that does not decode (or fails a check):
    path ``db/key``, rule ``stored value does not decode: <reason>`` on one line."""
    name = key.decode(errors="backslashreplace") if isinstance(key, bytes) else key
    text = " ".join(str(reason).split()) or type(reason).__name__
    return CorruptStoreError(f"{db}/{name}", f"stored value does not decode: {text}")


def decode[T](db: str, key: str | bytes, decoder: Callable[..., T], *args: Any) -> T:
    """``decoder(*args)``: the one place a value stored at ``key`` of ``db`` is decoded or
    validated. Any failure of ``decoder`` (msgpack, msgspec, pydantic, a reward table's CRC)
    raises :class:`CorruptStoreError` (see :func:`corrupt`); a :class:`CasstoreError` it
    raises passes unchanged."""
    try:
        return decoder(*args)
    except CasstoreError:
        raise
    except Exception as error:  # damaged bytes can fail any way: all of them mean "corrupt"
        raise corrupt(db, key, error) from error
