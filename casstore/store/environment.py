"""Opening a store's LMDB environment safely: read-only unless writing, a damaged
``data.mdb`` :class:`~casstore.errors.CorruptStoreError`, never a crash.

An environment is opened read-only (:func:`open_environment` with ``readonly``) until the
first write needs it read-write: a reading command then works on a store it cannot write (a
read-only mount, a colleague's directory) and never waits for a running writer. Where the lock
file can be used (always, unless it is not writable by this user) readers register in it as
LMDB readers do, so a writer never reuses the pages they read; LMDB uses no lock on a
read-only file system, where no writer can run. :func:`check_writable` says why a store
cannot be written (:func:`casstore.store.faults.read_only`) before any write is tried.

LMDB would silently start a new index in an empty ``data.mdb``, refuses a file that is not
one of its own, and ends the process with SIGBUS when it reads a page past the end of a
truncated file: :func:`open_environment` refuses the first two by name and checks the file
against LMDB's meta pages (:func:`check_data_file`) before any other page is read.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import lmdb
from lmdb import verify as lmdb_verify

from casstore.errors import CorruptStoreError, StoreError
from casstore.store.faults import os_write_failure, read_only, write_failure

__all__ = ["check_data_file", "check_writable", "open_environment", "page_damage"]

_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def open_environment(
    path: Path, map_size: int, max_dbs: int, *, create: bool, readonly: bool
) -> lmdb.Environment:
    """The LMDB environment of the index directory ``path`` (``map_size`` bytes of map,
    ``max_dbs`` named databases; created when missing if ``create``), its ``data.mdb`` checked
    by :func:`check_data_file`; ``readonly``: opened for reading only, with LMDB's lock file
    when this user can write it, else without. An existing empty ``data.mdb`` or one LMDB
    refuses as not an LMDB file is :class:`CorruptStoreError`; a store that cannot be written
    (``readonly`` False) or is full, a StoreError saying so; any other failure to open
    :class:`StoreError`."""
    data = path / "data.mdb"
    if _size(data) == 0:
        raise CorruptStoreError(str(data), "data.mdb is 0 bytes, the index needs 2 pages")
    if not readonly and data.exists():
        check_writable(path)
    env = _open(path, map_size, max_dbs, create and not readonly, readonly)
    try:
        check_data_file(env, data)
    except CorruptStoreError:
        env.close()
        raise
    return env


def _open(
    path: Path, map_size: int, max_dbs: int, create: bool, readonly: bool
) -> lmdb.Environment:
    """``lmdb.open`` of ``path``; read-only: retried without the lock file when this user
    cannot write it (LMDB itself skips it on a read-only file system)."""

    def opened(readonly: bool, lock: bool, create: bool) -> lmdb.Environment:
        return lmdb.open(
            str(path),
            map_size=map_size,
            max_dbs=max_dbs,
            subdir=True,
            readahead=False,
            readonly=readonly,
            lock=lock,
            create=create,
        )

    try:
        try:
            return opened(readonly, lock=True, create=create)
        except lmdb.ReadonlyError:  # EACCES: the lock file is not ours to write
            if not readonly:
                raise
            return opened(readonly=True, lock=False, create=False)
    except lmdb.InvalidError as error:
        data = path / "data.mdb"
        rule = f"data.mdb ({_size(data)} bytes) is not an LMDB file"
        raise CorruptStoreError(str(data), rule) from error
    except (lmdb.ReadonlyError, lmdb.DiskError) as error:
        raise write_failure(path.parent, error, path) from error
    except lmdb.Error as error:
        findings = page_damage(path)  # a damaged meta page can fail any way (ENOMEM, ...)
        if findings:
            raise CorruptStoreError(str(path / "data.mdb"), findings[0]) from error
        raise StoreError(str(path), f"cannot open the index: {error}") from error


def page_damage(path: Path) -> list[str]:
    """What py-lmdb's offline verifier (:func:`lmdb.verify.verify`) finds wrong with the
    pages of the index directory ``path``'s ``data.mdb``, read as bytes without LMDB (one
    finding per line; none when the file is sound)."""
    try:
        return lmdb_verify.verify(str(path), subdir=True)
    except lmdb_verify.VerifyError as error:  # the meta pages themselves are damaged
        return [str(error)]
    except OSError as error:
        return [f"data.mdb cannot be read: {error.strerror or error}"]


def check_writable(path: Path) -> None:
    """StoreError ``<store>: the store is read-only (...)`` when the index directory
    ``path`` or its files cannot be opened for writing by this process (a read-only file
    system, or permissions): probed by opening them, nothing written."""
    for probe in (path / "data.mdb", path / "lock.mdb"):
        try:
            os.close(os.open(probe, os.O_RDWR))
        except FileNotFoundError:
            continue
        except OSError as error:
            if error.errno in _READ_ONLY:
                raise read_only(path.parent, error) from error
            raise os_write_failure(path.parent, error) from error
    if not os.access(path, os.W_OK):
        raise read_only(path.parent, OSError(errno.EACCES, os.strerror(errno.EACCES), str(path)))


def _size(path: Path) -> int | None:
    """The size of the file at ``path``, None when there is none."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def check_data_file(env: lmdb.Environment, data: Path) -> None:
    """Raise :class:`CorruptStoreError` (naming ``data``) when the file is shorter than the
    pages LMDB's meta pages account for (two meta pages, and pages ``0..last_pgno`` of the
    latest commit), or when the meta pages' transaction ids are not those of successive
    commits (:func:`_check_meta_pages`), or when the main database's root page is damaged
    (:func:`_check_main_root`). Reads the meta pages (LMDB read both when opening, so they
    are in the file) and that one page; files of another layout (not LMDB 0.9's) are left
    to LMDB. Run before any other page is touched, which past the
    end of the file would end the process with SIGBUS. A new index passes: LMDB writes its
    two meta pages when it creates the file."""
    page = env.stat()["psize"]
    pages = max(2, env.info()["last_pgno"] + 1)  # before the size: commits only grow the file
    size = _size(data) or 0
    if size < pages * page:
        need = pages * page
        rule = f"data.mdb is {size} bytes, the index needs {need} ({pages} pages of {page})"
        raise CorruptStoreError(str(data), rule)
    with data.open("rb") as handle:  # the meta pages read once, for both checks
        metas = [os.pread(handle.fileno(), _META.size, n * page) for n in (0, 1)]
        if all(_META.unpack(meta)[0] == _META_MAGIC for meta in metas):  # else: LMDB's
            _check_meta_pages(data, [_META.unpack(meta)[1] for meta in metas])
            _check_main_root(data, handle.fileno(), page, metas)


_META_MAGIC = 0xBEEFC0DE
_META = struct.Struct("<16xI124xQ")  # LMDB 0.9 on 64 bits: page header, mm_magic ... mm_txnid


def _check_meta_pages(data: Path, txnids: list[int]) -> None:
    """CorruptStoreError unless the transaction ids of the two meta pages (``txnids``) are
    those LMDB writes: a commit of transaction ``n`` writes meta page ``n % 2``, so page 0
    holds an even id, page 1 an odd one (or 0 before the first commit), one apart. LMDB opens
    the meta page of the larger id: a damaged id would silently open an older state of the
    index (the last commit lost)."""
    first, second = txnids
    if first % 2 == 0 and (second % 2 == 1 or second == 0) and abs(first - second) <= 1:
        return
    rule = f"the meta pages hold transactions {first} and {second}, not two successive ones"
    raise CorruptStoreError(str(data), rule)


_MAIN_ROOT = struct.Struct("<16x112xQ")  # the main database's md_root in a meta page
_PAGE_HEADER = struct.Struct("<QHHHH")  # mp_pgno, mp_pad, mp_flags, mp_lower, mp_upper
_NODE = struct.Struct("<HHHH")  # mn_lo, mn_hi, mn_flags, mn_ksize
_BRANCH, _LEAF = 0x01, 0x02


def _check_main_root(data: Path, fd: int, page: int, metas: list[bytes]) -> None:
    """CorruptStoreError unless the root page of the main database (the list of named
    databases, which LMDB reads first on every open), named by the newer of the meta pages
    ``metas``, is a branch or leaf page whose node pointers and nodes lie inside it: LMDB
    follows a damaged pointer out of the page and the process ends with SIGBUS (a fresh
    tester's finding). One page read from ``fd``; the pages below are fsck's
    (:func:`casstore.store.pages.check_pages`)."""
    newer = max(metas, key=lambda meta: _META.unpack(meta)[1])
    (root,) = _MAIN_ROOT.unpack(newer[: _MAIN_ROOT.size])
    if root == 2**64 - 1:  # P_INVALID: no named database yet
        return
    problem = _root_problem(os.pread(fd, page, root * page), root, page)
    if problem is not None:
        rule = f"the index is damaged: main DB root page {root}: {problem}"
        raise CorruptStoreError(str(data), rule)


def _root_problem(raw: bytes, root: int, page: int) -> str | None:
    """What is wrong with the main database's root page ``raw`` (number ``root``), or None."""
    if len(raw) != page:
        return "beyond the end of the file"
    pgno, _, flags, lower, upper = _PAGE_HEADER.unpack_from(raw)
    if pgno != root or flags & ~0x10 not in (_BRANCH, _LEAF):  # 0x10: P_DIRTY, checked apart
        return f"holds page number {pgno} and flags {flags:#x}"
    if not _PAGE_HEADER.size <= lower <= upper <= page or (lower - _PAGE_HEADER.size) % 2:
        return f"bounds {lower}..{upper} out of the page"
    for slot in range(_PAGE_HEADER.size, lower, 2):
        (at,) = struct.unpack_from("<H", raw, slot)
        if not upper <= at <= page - _NODE.size:
            return f"node pointer {at} out of bounds"
        lo, hi, _, ksize = _NODE.unpack_from(raw, at)
        size = _NODE.size + ksize + ((lo | hi << 16) if flags & _LEAF else 0)
        if at + size > page:
            return f"node at {at} of {size} bytes runs past the page"
    return None
