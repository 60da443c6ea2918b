"""The store's LMDB index: one environment at ``<store>/index`` with named databases.

Databases (keys UTF-8, values msgpack): ``meta`` (``schema`` → version), ``tasks``
(``workspace/name`` → task record), ``revisions`` (revision digest → revision record),
``tasksets`` (``workspace/name`` → taskset record), ``taskset_revisions`` (digest → record);
imported Harbor jobs (:mod:`casstore.trials.stored`): ``jobs``, ``trial_packs``, ``trials``
(older schemas), ``reward_tables``, ``evidence``, ``zstd_dicts``. Opening an index writes
nothing to ``data.mdb`` when every database exists; a missing one (a new index, or an older
one) is created then: older code ignores it. A new index is marked :data:`SCHEMA_VERSION` when
it is created. An index of an older schema this code reads (:data:`UPGRADED_SCHEMAS`) keeps
its marker until the first write transaction (:meth:`Index.write`, :meth:`Index.begin_write`)
marks it :data:`SCHEMA_VERSION`, so reading commands leave it usable by the older code; a
newer or unknown schema is refused at open.

One writer at a time across processes (LMDB's lock), any number of readers. Every
read-modify-write runs inside ONE write transaction (:meth:`Index.write`); the map doubles on
``MapFullError`` and the transaction is retried; a map grown by another process is adopted. A
write that spans other work holds a transaction of :meth:`Index.begin_write` and commits or
aborts it itself; :meth:`Index.reserve` grows the map ahead of a big write.

A damaged index is :class:`~casstore.errors.CorruptStoreError`, never a crash: every stored value is
decoded through :func:`casstore.store.values.decode` (naming ``db/key``), and opening checks
``data.mdb`` against LMDB's meta pages before any other page is read
(:func:`casstore.store.environment.check_data_file`): a file truncated below the pages LMDB has
written would otherwise end the process with SIGBUS.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeGuard, TypeVar, cast

import lmdb

from casstore.errors import StoreError
from casstore.store.environment import open_environment
from casstore.store.values import decode, decode_value, encode_value

__all__ = [
    "DATABASES",
    "SCHEMA_VERSION",
    "Index",
    "Txn",
    "WriteTxn",
]

SCHEMA_VERSION = 4
UPGRADED_SCHEMAS = (1, 2, 3)
"""Versions this code reads, and marks as :data:`SCHEMA_VERSION` in its first write
transaction (never on open): schema 4 writes each trial pack behind a CRC-32 of it
(:func:`casstore.trials.stored_form.encode_trial_pack`; a job record says its packs carry
them); schema 3 keeps a job's trial records in packs (``trial_packs``) without one and its
evidence in packs referenced ``<key>#<index>``; schema 2 one record per trial (``trials``) as
an array (:func:`casstore.trials.stored_form.encode_stored`) and one evidence entry per file;
schema 1 the records as maps. All of them still decode (:mod:`casstore.trials.stored`); the
next import into a job rewrites it as schema 4 does. Code that knows only an older schema
refuses a newer store (it would miss the packs, or their checks)."""
DATABASES = (
    "meta",
    "tasks",
    "revisions",
    "tasksets",
    "taskset_revisions",
    "jobs",
    "trial_packs",
    "trials",
    "reward_tables",
    "evidence",
    "zstd_dicts",
)
DEFAULT_MAP_SIZE = 32 << 20
T = TypeVar("T")


def _entry(key: bytes, raw: bytes) -> tuple[str, Any]:
    """A stored ``(key, value)`` decoded."""
    return key.decode(), decode_value(raw)


class Txn:
    """One LMDB transaction over the named databases: ``get/put/delete/items`` by db name
    (values decoded and encoded with :func:`decode_value`/:func:`encode_value`), ``raw_*``
    for values already encoded (bytes as stored). Keys are UTF-8 text or those bytes."""

    def __init__(self, txn: lmdb.Transaction, dbs: dict[str, Any]) -> None:
        self._txn = txn
        self._dbs = dbs

    def get(self, db: str, key: str) -> Any | None:
        """The decoded value at ``key`` of ``db`` or None."""
        raw = self._txn.get(key.encode(), db=self._dbs[db])
        return None if raw is None else decode(db, key, decode_value, raw)

    def raw_get(self, db: str, key: str | bytes) -> bytes | memoryview | None:
        """The stored bytes at ``key`` of ``db`` (undecoded) or None: a memoryview into the
        map, valid within this transaction, when it was begun with ``buffers``."""
        return self._txn.get(_key(key), db=self._dbs[db])

    def has(self, db: str, key: str) -> bool:
        """Whether ``key`` of ``db`` holds a value (nothing decoded)."""
        return self._txn.get(key.encode(), db=self._dbs[db]) is not None

    def put(self, db: str, key: str, value: Any) -> None:
        """Store ``value`` at ``key`` of ``db`` (write transactions only)."""
        self._txn.put(key.encode(), encode_value(value), db=self._dbs[db])

    def raw_put(self, db: str, key: str | bytes, value: bytes, *, overwrite: bool = True) -> bool:
        """Store the already-encoded ``value`` at ``key`` of ``db`` (write transactions only).
        Returns whether it was stored: False when ``overwrite`` is False and ``key`` holds a
        value already (that value is kept)."""
        return self._txn.put(_key(key), value, db=self._dbs[db], overwrite=overwrite)

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

    def delete(self, db: str, key: str | bytes) -> bool:
        """Remove ``key`` from ``db``; True if it was there."""
        return self._txn.delete(_key(key), db=self._dbs[db])

    def items(self, db: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """``(key, value)`` of ``db`` in key order, keys starting with ``prefix``; a key or
        value that does not decode raises :class:`CorruptStoreError`."""
        for key, raw in self.raw_items(db, prefix):
            yield decode(db, key, _entry, key, raw)

    def raw_items(self, db: str, prefix: str = "") -> Iterator[tuple[bytes, bytes]]:
        """:meth:`items` undecoded: ``(key, value)`` bytes."""
        cursor = self._txn.cursor(db=self._dbs[db])
        start = prefix.encode()
        if not cursor.set_range(start):
            return
        if not _copies(cursor):
            raise TypeError("raw_items needs a transaction begun without buffers")
        for key, raw in cursor:
            if not key.startswith(start):
                return
            yield key, raw

    def count(self, db: str) -> int:
        """Number of entries in ``db``."""
        return self._txn.stat(self._dbs[db])["entries"]


def _copies(cursor: lmdb.Cursor) -> TypeGuard[lmdb.Cursor[bytes]]:
    """Whether the positioned ``cursor`` gives copies (bytes), not views into the map (a
    transaction begun with ``buffers``): checked on its current key."""
    return isinstance(cursor.key(), bytes)


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
        """Commit what was written (``lmdb.Error`` when it cannot be)."""
        self._txn.commit()
        if self._committed is not None:
            self._committed()

    def abort(self) -> None:
        """Drop what was written: the index stays as it was before the transaction."""
        self._txn.abort()


class Index:
    """The LMDB environment of a store (see the module docstring). Use as a context manager.

    Raises :class:`StoreError` when the environment cannot be opened (``create=False``: also when it
    does not exist) or its schema version is neither :data:`SCHEMA_VERSION` nor one of
    :data:`UPGRADED_SCHEMAS`; :class:`CorruptStoreError` when ``data.mdb`` is damaged (see
    :func:`casstore.store.environment.open_environment`). Opening writes nothing to an index whose
    databases all exist.
    """

    def __init__(self, path: Path, map_size: int = DEFAULT_MAP_SIZE, create: bool = True) -> None:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        self._path = path
        self.env = open_environment(path, map_size, len(DATABASES) + 2, create)
        self.dbs = self._open_dbs()
        self._older = False  # an older schema, marked by the first write transaction
        try:
            version = self.read(lambda txn: txn.get("meta", "schema"))
            if version is None:  # a new index: marked as it is created
                self.write(self._check_schema)
            elif version in UPGRADED_SCHEMAS:
                self._older = True
            elif version != SCHEMA_VERSION:
                raise _schema_refused(version)
        except BaseException:
            self.env.close()
            raise

    def _open_dbs(self) -> dict[str, Any]:
        """The named databases (created when missing); retried when another process grew the
        map meanwhile (``MapResizedError``).

        They are opened in a write transaction, so opening waits for LMDB's writer lock (a
        running import holds it); when they all exist it commits nothing (LMDB writes no page
        for a transaction that changed none: ``data.mdb`` stays as it was). A read-only
        transaction would not wait, but its handles do not outlive it: LMDB keeps a handle
        only when the transaction that opened it commits, and py-lmdb's ``commit()`` of a
        read-only transaction resets it instead (py-lmdb 3.0: the handles are then invalid,
        ``mdb_get: Invalid argument``); ``open_db`` without a transaction begins a write one
        unless the whole environment was opened read-only."""
        while True:
            try:
                return {name: self.env.open_db(name.encode()) for name in DATABASES}
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)

    @staticmethod
    def _check_schema(txn: Txn) -> None:
        """Mark the index :data:`SCHEMA_VERSION` (new, or of an older schema this code
        reads); a newer or unknown schema is refused."""
        version = txn.get("meta", "schema")
        if version is None or version in UPGRADED_SCHEMAS:
            txn.put("meta", "schema", SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            raise _schema_refused(version)

    def write(self, body: Callable[[Txn], T], *, lock_only: bool = False) -> T:
        """Run ``body(txn)`` in one write transaction and commit; retried on a full map. The
        first one of an index of an older schema also marks it :data:`SCHEMA_VERSION`
        (unless ``lock_only``: the transaction only serves as the writer lock, ``body``
        writes nothing to the index).

        ``body`` must be repeatable (it may run again after ``MapFullError``).
        """
        while True:
            try:
                txn = self._begin(mark=not lock_only)
                try:
                    result = body(txn)
                    txn.commit()
                except BaseException:
                    txn.abort()
                    raise
            except lmdb.MapFullError:
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
                continue
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
                continue
            return result

    def read(self, body: Callable[[Txn], T], buffers: bool = False) -> T:
        """Run ``body(txn)`` in one read-only transaction (a consistent snapshot); with
        ``buffers``, :meth:`Txn.raw_get` gives views into the map instead of copies (for big
        values; never to be kept beyond ``body``)."""
        while True:
            try:
                begun = (
                    self.env.begin(write=False, buffers=True)
                    if buffers
                    else self.env.begin(write=False)
                )
                with begun as txn:
                    return body(Txn(txn, self.dbs))
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)

    def begin_write(self) -> WriteTxn:
        """A write transaction left open while the caller does other work (an import writes
        a new job's chunks as it parses them), which the caller commits or aborts
        (:class:`WriteTxn`); waits for the writer lock. It marks an index of an older schema
        as :meth:`write` does, but nothing is retried: grow the map first (:meth:`reserve`)."""
        return self._begin(mark=True)

    def _begin(self, mark: bool) -> WriteTxn:
        """Begin a write transaction (adopting a map grown by another process); with
        ``mark``, an index of an older schema is marked in it (:meth:`_check_schema`)."""
        while True:
            try:
                begun = self.env.begin(write=True)
                break
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
        txn = WriteTxn(begun, self.dbs)
        if mark and self._older:
            txn._committed = self._marked
            try:
                self._check_schema(txn)
            except BaseException:
                txn.abort()
                raise
        return txn

    def _marked(self) -> None:
        """An index of an older schema was marked :data:`SCHEMA_VERSION` (a commit)."""
        self._older = False

    def reserve(self, nbytes: int) -> None:
        """Grow the map (doubling) to hold ``2 * nbytes`` more bytes than the pages in use,
        ahead of a write of about ``nbytes``: not retried after each doubling."""
        info, stat = self.env.info(), self.env.stat()
        used = (info["last_pgno"] + 1) * stat["psize"]
        want = used + 2 * nbytes
        if want > info["map_size"]:
            size = info["map_size"]
            while size < want:
                size *= 2
            self.env.set_mapsize(size)

    @property
    def map_size(self) -> int:
        """Current map size in bytes."""
        return self.env.info()["map_size"]

    def close(self) -> None:
        """Close the environment (idempotent); any later use is StoreError (:class:`_Closed`)."""
        self.env.close()
        self.env = cast(lmdb.Environment, _Closed(self._path))

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Closed:
    """:attr:`Index.env` once closed: ``close()`` does nothing, any other use is StoreError."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> NoReturn:
        raise StoreError(str(self._path), "the store is closed")


def _schema_refused(version: object) -> StoreError:
    """The error for an index of a newer or unknown schema."""
    return StoreError("index", f"schema version {version}, expected {SCHEMA_VERSION}")
