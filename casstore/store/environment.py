"""Opening a store's LMDB environment safely: a damaged ``data.mdb`` is
:class:`~casstore.errors.CorruptStoreError`, never a crash.

LMDB would silently start a new index in an empty ``data.mdb``, refuses a file that is not
one of its own, and ends the process with SIGBUS when it reads a page past the end of a
truncated file: :func:`open_environment` refuses the first two by name and checks the file
against LMDB's meta pages (:func:`check_data_file`) before any other page is read.
"""

from __future__ import annotations

from pathlib import Path

import lmdb

from casstore.errors import CorruptStoreError, StoreError

__all__ = ["check_data_file", "open_environment"]


def open_environment(path: Path, map_size: int, max_dbs: int, create: bool) -> lmdb.Environment:
    """The LMDB environment of the index directory ``path`` (``map_size`` bytes of map,
    ``max_dbs`` named databases; created when missing if ``create``), its ``data.mdb`` checked
    by :func:`check_data_file`. An existing empty ``data.mdb`` or one LMDB refuses as not an
    LMDB file is :class:`CorruptStoreError`; any other failure to open :class:`StoreError`."""
    data = path / "data.mdb"
    if _size(data) == 0:
        raise CorruptStoreError(str(data), "data.mdb is 0 bytes, the index needs 2 pages")
    try:
        env = lmdb.open(
            str(path),
            map_size=map_size,
            max_dbs=max_dbs,
            lock=True,
            subdir=True,
            readahead=False,
            create=create,
        )
    except lmdb.InvalidError as error:
        rule = f"data.mdb ({_size(data)} bytes) is not an LMDB file"
        raise CorruptStoreError(str(data), rule) from error
    except lmdb.Error as error:
        raise StoreError(str(path), f"cannot open the index: {error}") from error
    try:
        check_data_file(env, data)
    except CorruptStoreError:
        env.close()
        raise
    return env


def _size(path: Path) -> int | None:
    """The size of the file at ``path``, None when there is none."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def check_data_file(env: lmdb.Environment, data: Path) -> None:
    """Raise :class:`CorruptStoreError` (naming ``data``) when the file is shorter than the
    pages LMDB's meta pages account for: two meta pages, and pages ``0..last_pgno`` of the
    latest commit. Reads only the meta pages (LMDB read both when opening, so they are in
    the file); run before any other page is touched, which past the end of the file would
    end the process with SIGBUS. A new index passes: LMDB writes its two meta pages when it
    creates the file."""
    page = env.stat()["psize"]
    pages = max(2, env.info()["last_pgno"] + 1)  # before the size: commits only grow the file
    size = _size(data) or 0
    if size < pages * page:
        need = pages * page
        rule = f"data.mdb is {size} bytes, the index needs {need} ({pages} pages of {page})"
        raise CorruptStoreError(str(data), rule)
