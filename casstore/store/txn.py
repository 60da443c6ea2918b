"""Transactions of the store's index (:class:`~casstore.store.index.Index`): reads and writes
by database name, and what a damaged page or a failed write becomes.

A read LMDB cannot complete (a damaged page) is :class:`~casstore.errors.CorruptStoreError`
naming the database and key (:func:`casstore.store.faults.damaged`); a walk of a whole
database checks that its keys come in order and are as many as LMDB counts, since a damaged
branch page can make LMDB skip or repeat entries without an error of its own. A write that
fails (a full disk, ...) is :class:`~casstore.errors.StoreError` naming the store
(:func:`casstore.store.faults.write_failure`), but for ``MapFullError`` and
``MapResizedError``, which :class:`~casstore.store.index.Index` handles.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeGuard, cast

import lmdb

from casstore.store.faults import damaged, is_damage, is_retried, write_failure
from casstore.store.values import corrupt, decode, decode_value, encode_value

__all__ = ["Txn", "WriteTxn"]


def _entry(key: bytes, raw: bytes) -> tuple[str, Any]:
    """A stored ``(key, value)`` decoded."""
    return key.decode(), decode_value(raw)


class Txn:
    """One LMDB transaction over the named databases: ``get/put/delete/items`` by db name
    (values decoded and encoded with :func:`decode_value`/:func:`encode_value`), ``raw_*``
    for values already encoded (bytes as stored). Keys are UTF-8 text or those bytes;
    ``path`` is the index directory (a failed write names its store). A database an older
    index lacks (its handle None: the index was opened read-only) reads as empty."""

    def __init__(self, txn: lmdb.Transaction, dbs: dict[str, Any], path: Path) -> None:
        self._txn = txn
        self._dbs = dbs
        self._path = path

    def get(self, db: str, key: str) -> Any | None:
        """The decoded value at ``key`` of ``db`` or None."""
        raw = self.raw_get(db, key)
        return None if raw is None else decode(db, key, decode_value, raw)

    def raw_get(self, db: str, key: str | bytes) -> bytes | memoryview | None:
        """The stored bytes at ``key`` of ``db`` (undecoded) or None: a memoryview into the
        map, valid within this transaction, when it was begun with ``buffers``. A key LMDB
        cannot hold (empty, over 511 bytes) holds nothing."""
        handle = self._dbs[db]
        if handle is None:
            return None
        try:
            return self._txn.get(_key(key), db=handle)
        except lmdb.BadValsizeError:
            return None
        except lmdb.Error as error:
            raise self._failed(db, key, error) from error

    def has(self, db: str, key: str) -> bool:
        """Whether ``key`` of ``db`` holds a value (nothing decoded)."""
        return self.raw_get(db, key) is not None

    def put(self, db: str, key: str, value: Any) -> None:
        """Store ``value`` at ``key`` of ``db`` (write transactions only)."""
        self.raw_put(db, key, encode_value(value))

    def raw_put(self, db: str, key: str | bytes, value: bytes, *, overwrite: bool = True) -> bool:
        """Store the already-encoded ``value`` at ``key`` of ``db`` (write transactions only).
        Returns whether it was stored: False when ``overwrite`` is False and ``key`` holds a
        value already (that value is kept)."""
        try:
            return self._txn.put(_key(key), value, db=self._dbs[db], overwrite=overwrite)
        except lmdb.Error as error:
            raise self._failed(db, key, error) from error

    def raw_put_many(
        self, db: str, items: list[tuple[bytes, bytes]], overwrite: bool = True
    ) -> None:
        """Store already-encoded ``(key, value)`` items in ``db`` as plain puts in key order
        would (the first of equal keys wins when not ``overwrite``): one ``putmulti``, which
        appends when every key is beyond the database's last one (a new job's records): pages
        filled (inserts in order would leave them half full), no search per key."""
        if not items:
            return
        items = sorted(items, key=_FIRST)
        try:
            cursor = self._txn.cursor(db=self._dbs[db])
            try:
                if not cursor.last() or (_copies(cursor) and cursor.key() < items[0][0]):
                    _, added = cursor.putmulti(items, overwrite=overwrite, append=True)
                    if added == len(items):
                        return
                    # equal keys among the items: not appended; the plain puts settle them
                cursor.putmulti(items, overwrite=overwrite)
            finally:
                cursor.close()
        except lmdb.Error as error:
            raise self._failed(db, None, error) from error

    def delete(self, db: str, key: str | bytes) -> bool:
        """Remove ``key`` from ``db``; True if it was there."""
        try:
            return self._txn.delete(_key(key), db=self._dbs[db])
        except lmdb.Error as error:
            raise self._failed(db, key, error) from error

    def items(self, db: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """``(key, value)`` of ``db`` in key order, keys starting with ``prefix``; a key or
        value that does not decode raises :class:`CorruptStoreError`."""
        for key, raw in self.raw_items(db, prefix):
            yield decode(db, key, _entry, key, raw)

    def raw_items(self, db: str, prefix: str = "") -> Iterator[tuple[bytes, bytes]]:
        """:meth:`items` undecoded: ``(key, value)`` bytes, checked as :meth:`_walk` checks."""
        for key, raw in self._walk(db, prefix, values=True):
            yield key, cast(bytes, raw)

    def keys(self, db: str, prefix: str) -> Iterator[str]:
        """The keys of ``db`` that start with ``prefix`` (not empty), in order: a cursor set
        at ``prefix`` (``set_range``), moved on while keys start with it; no value copied,
        the rest of the database never read."""
        if not prefix:
            raise ValueError("a range scan needs a prefix")
        for key, _ in self._walk(db, prefix, values=False):
            yield key.decode()

    def walk(self, db: str) -> int:
        """Walk every key of ``db`` (no value copied), checked as :meth:`_walk` checks: the
        number of entries, or CorruptStoreError."""
        return sum(1 for _ in self._walk(db, "", values=False))

    def _walk(self, db: str, prefix: str, values: bool) -> Iterator[tuple[bytes, bytes | None]]:
        """``(key, value or None)`` of ``db`` from ``prefix`` on, while keys start with it.
        Keys must come in increasing order and, walked to the end without a ``prefix``, be
        as many as LMDB counts in ``db`` (CorruptStoreError otherwise: a damaged page can
        make LMDB's walk skip or repeat entries without an error of its own)."""
        if self._dbs[db] is None:
            return
        start, last, seen = prefix.encode(), b"", 0
        try:
            cursor = self._txn.cursor(db=self._dbs[db])
            found = cursor.set_range(start)
            if found and not _copies(cursor):
                raise TypeError("a walk needs a transaction begun without buffers")
            entries: Iterator[tuple[Any, Any]] = iter(())
            if found:
                entries = cursor.iternext() if values else _keys_only(cursor)
            for key, raw in entries:
                if not key.startswith(start):
                    return
                if seen and key <= last:
                    raise corrupt(db, key, f"keys out of order after {last!r}")
                yield key, raw
                last, seen = key, seen + 1
        except lmdb.Error as error:
            raise self._failed(db, last or None, error) from error
        if not prefix and seen != (counted := self.count(db)):
            raise corrupt(db, last, f"the walk gave {seen} entries, LMDB counts {counted}")

    def count(self, db: str) -> int:
        """Number of entries in ``db``."""
        if self._dbs[db] is None:
            return 0
        try:
            return self._txn.stat(self._dbs[db])["entries"]
        except lmdb.Error as error:
            raise self._failed(db, None, error) from error

    def _failed(self, db: str, key: str | bytes | None, error: lmdb.Error) -> Exception:
        """The error to raise for an LMDB ``error`` in ``db``: ``error`` itself when
        :class:`Index` retries it, a write's failure in a write transaction, else damage."""
        if is_retried(error):
            return error
        if isinstance(self, WriteTxn) and not is_damage(error):
            return write_failure(self._path.parent, error, self._path)
        return damaged(db, key, error)


def _copies(cursor: lmdb.Cursor) -> TypeGuard[lmdb.Cursor[bytes]]:
    """Whether the positioned ``cursor`` gives copies (bytes), not views into the map (a
    transaction begun with ``buffers``): checked on its current key."""
    return isinstance(cursor.key(), bytes)


def _keys_only(cursor: lmdb.Cursor) -> Iterator[tuple[Any, None]]:
    """``(key, None)`` from the cursor's position on: no value copied."""
    for key in cursor.iternext(keys=True, values=False):
        yield key, None


def _key(key: str | bytes) -> bytes:
    """A key as LMDB takes it: text UTF-8 encoded, bytes as they are."""
    return key.encode() if isinstance(key, str) else key


_FIRST = operator.itemgetter(0)  # the key of a (key, value) item


class WriteTxn(Txn):
    """A write transaction the caller ends (:meth:`Index.begin_write`): :meth:`commit` or
    :meth:`abort`; nothing is retried (a put that fills the map raises
    ``lmdb.MapFullError``: abort, then write again after :meth:`Index.reserve`)."""

    _committed: Callable[[], None] | None = None  # called after a commit

    def commit(self) -> None:
        """Commit what was written. A commit that fails is dropped whole (the index stays as
        it was): StoreError naming the store (a full disk, ...), or the ``MapFullError`` a
        caller handles."""
        try:
            self._txn.commit()
        except lmdb.Error as error:
            self.abort()
            raise self._failed("", None, error) from error
        if self._committed is not None:
            self._committed()

    def abort(self) -> None:
        """Drop what was written: the index stays as it was before the transaction (also
        after a commit that failed, which LMDB ended itself)."""
        with contextlib.suppress(lmdb.Error):
            self._txn.abort()
