"""How the failures of LMDB and of the file system under a store become casstore errors.

Reading: LMDB reports a damaged page (``MDB_CORRUPTED``, ``MDB_PAGE_NOTFOUND``, a
transaction it ended, ...) as an ``lmdb.Error``; :func:`damaged` makes it
:class:`~casstore.errors.CorruptStoreError` naming the database (and key). Writing: a full
disk (``ENOSPC``, or the ``EIO`` LMDB reports for a short write, when the file system has no
room left), a store that cannot be written, or another failure of the disk, is a
:class:`~casstore.errors.StoreError` naming the store directory on one line
(:func:`write_failure`, :func:`os_write_failure`, :func:`read_only`); the transaction that
failed is dropped, so the index stays as it was before it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import lmdb

from casstore.errors import CorruptStoreError, StoreError

__all__ = [
    "DISK_FULL",
    "READ_ONLY",
    "damaged",
    "disk_full",
    "is_damage",
    "is_retried",
    "os_write_failure",
    "read_only",
    "write_failure",
]

READ_ONLY = "the store is read-only"
DISK_FULL = "the disk is full"
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.IncompatibleError, lmdb.InvalidError)
_NEARLY_FULL = 1 << 20  # bytes left under which a short write (EIO) means a full disk


def is_retried(error: lmdb.Error) -> bool:
    """Whether ``error`` is one :class:`~casstore.store.index.Index` retries after growing
    or adopting the map (not a failure)."""
    return isinstance(error, lmdb.MapFullError | lmdb.MapResizedError)


def is_damage(error: lmdb.Error) -> bool:
    """Whether ``error`` says a page LMDB read is damaged (not that a write failed)."""
    return isinstance(error, _DAMAGE)


def damaged(db: str, key: str | bytes | None, error: lmdb.Error) -> CorruptStoreError:
    """The error for a read of ``db`` (at ``key``) that LMDB could not complete: a damaged
    index page (fsck reports every one)."""
    where = db
    if key is not None:
        name = key.decode(errors="backslashreplace") if isinstance(key, bytes) else key
        where = f"{db}/{name}"
    text = " ".join(str(error).split()) or type(error).__name__
    return CorruptStoreError(where, f"the index is damaged here ({text}); run casstore fsck")


def read_only(root: Path, error: OSError) -> StoreError:
    """``<root>: the store is read-only (<why>)``: a write was asked of a store this process
    cannot write (a read-only file system, or no permission)."""
    why = error.strerror or str(error)
    if error.filename and error.errno != errno.EROFS:
        why = f"{why}: {error.filename}"
    return StoreError(str(root), f"{READ_ONLY} ({why})")


def disk_full(root: Path, detail: str) -> StoreError:
    """``<root>: the disk is full (<detail>)``."""
    return StoreError(str(root), f"{DISK_FULL} ({detail})")


def write_failure(root: Path, error: lmdb.Error, index: Path | None = None) -> StoreError:
    """The error for a write of the store at ``root`` that LMDB could not complete (a
    commit, a put, or opening the index for writing): a full disk, a read-only store, or
    the disk's own failure, on one line."""
    text = " ".join(str(error).split())
    if isinstance(error, lmdb.DiskError) or _names_errno(text, _FULL_ERRNOS):
        return disk_full(root, f"LMDB: {text}")
    if _names_errno(text, (errno.EIO,)) and (left := _free_bytes(index or root)) < _NEARLY_FULL:
        return disk_full(root, f"{left} bytes left; LMDB: {text}")
    if isinstance(error, lmdb.ReadonlyError) or _names_errno(text, (errno.EROFS,)):
        return read_only(root, OSError(errno.EROFS, text))
    return StoreError(str(root), f"cannot write the index: {text}")


def os_write_failure(root: Path, error: OSError) -> StoreError:
    """The error for writing a file of the store at ``root`` (an archive, a temporary):
    full disk and read-only store by name, the file named otherwise."""
    if error.errno in _FULL_ERRNOS:
        where = f": {error.filename}" if error.filename else ""
        return disk_full(root, f"{error.strerror}{where}")
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return read_only(root, error)
    return StoreError(str(error.filename or root), f"cannot write: {error.strerror or error}")


def _names_errno(text: str, numbers: tuple[int, ...]) -> bool:
    """Whether LMDB's message ``text`` (``<call>: <strerror>``) ends with the description of
    one of the errno ``numbers`` (py-lmdb raises a plain ``lmdb.Error`` for those it does not
    map to a class of its own)."""
    return any(text.endswith(os.strerror(number)) for number in numbers)


def _free_bytes(path: Path) -> int:
    """Bytes available to this user on the file system of ``path`` (its nearest existing
    ancestor); a large number when it cannot be told."""
    for where in (path, *path.parents):
        try:
            info = os.statvfs(where)
        except OSError:
            continue
        return info.f_bavail * info.f_frsize
    return 1 << 62
