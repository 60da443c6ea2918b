"""The store's LMDB index: one environment at ``<store>/index`` with named databases.

Databases (keys UTF-8, values msgpack): ``meta`` (``schema`` → version), ``tasks``
(``workspace/name`` → task record), ``revisions`` (revision digest → revision record),
``tasksets`` (``workspace/name`` → taskset record), ``taskset_revisions`` (digest → record);
imported Harbor jobs (:mod:`casstore.trials.store`): ``jobs``, ``trials``, ``reward_tables``,
``evidence``, ``zstd_dicts``. New databases are created on open: older stores stay valid.
Opening a store of an older schema this code reads (:data:`UPGRADED_SCHEMAS`) marks it as
:data:`SCHEMA_VERSION`; a newer or unknown schema is refused.

One writer at a time across processes (LMDB's lock), any number of readers. Every
read-modify-write runs inside ONE write transaction (:meth:`Index.write`); the map doubles on
``MapFullError`` and the transaction is retried; a map grown by another process is adopted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import msgpack

from casstore.errors import StoreError

__all__ = ["DATABASES", "SCHEMA_VERSION", "Index", "Txn", "fsync_dir", "pack", "unpack"]

SCHEMA_VERSION = 2
UPGRADED_SCHEMAS = (1,)
"""Versions this code reads and marks as :data:`SCHEMA_VERSION` on open: schema 2 keeps trial
records as arrays (:func:`casstore.trials.records.encode_stored`), schema 1 as maps, which
still decode. Code that knows only schema 1 refuses a schema-2 store."""
DATABASES = (
    "meta",
    "tasks",
    "revisions",
    "tasksets",
    "taskset_revisions",
    "jobs",
    "trials",
    "reward_tables",
    "evidence",
    "zstd_dicts",
)
DEFAULT_MAP_SIZE = 32 << 20
T = TypeVar("T")


def pack(value: Any) -> bytes:
    """msgpack with binary type (the index's value encoding)."""
    return msgpack.packb(value, use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Inverse of :func:`pack`."""
    return msgpack.unpackb(data, raw=False)


class Txn:
    """One LMDB transaction over the named databases: ``get/put/delete/items`` by db name."""

    def __init__(self, txn: lmdb.Transaction, dbs: dict[str, Any]) -> None:
        self._txn = txn
        self._dbs = dbs

    def get(self, db: str, key: str) -> Any | None:
        """The decoded value at ``key`` of ``db`` or None."""
        raw = self._txn.get(key.encode(), db=self._dbs[db])
        return None if raw is None else unpack(raw)

    def put(self, db: str, key: str, value: Any) -> None:
        """Store ``value`` at ``key`` of ``db`` (write transactions only)."""
        self._txn.put(key.encode(), pack(value), db=self._dbs[db])

    def delete(self, db: str, key: str) -> bool:
        """Remove ``key`` from ``db``; True if it was there."""
        return self._txn.delete(key.encode(), db=self._dbs[db])

    def items(self, db: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """``(key, value)`` of ``db`` in key order, keys starting with ``prefix``."""
        for key, raw in self.raw_items(db, prefix):
            yield key.decode(), unpack(raw)

    def raw_items(self, db: str, prefix: str = "") -> Iterator[tuple[bytes, bytes]]:
        """:meth:`items` undecoded: ``(key, value)`` bytes."""
        cursor = self._txn.cursor(db=self._dbs[db])
        start = prefix.encode()
        if not cursor.set_range(start):
            return
        for key, raw in cursor:
            if not key.startswith(start):
                return
            yield key, raw

    def count(self, db: str) -> int:
        """Number of entries in ``db``."""
        return self._txn.stat(self._dbs[db])["entries"]


class Index:
    """The LMDB environment of a store (see the module docstring). Use as a context manager.

    Raises :class:`StoreError` when the environment cannot be opened (``create=False``: also
    when it does not exist) or its schema version is neither :data:`SCHEMA_VERSION` nor one of
    :data:`UPGRADED_SCHEMAS`.
    """

    def __init__(self, path: Path, map_size: int = DEFAULT_MAP_SIZE, create: bool = True) -> None:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        try:
            self.env = lmdb.open(
                str(path),
                map_size=map_size,
                max_dbs=len(DATABASES) + 2,
                lock=True,
                subdir=True,
                readahead=False,
                create=create,
            )
        except lmdb.Error as error:
            raise StoreError(str(path), f"cannot open the index: {error}") from error
        self.dbs = self._open_dbs()
        self.write(self._check_schema)

    def _open_dbs(self) -> dict[str, Any]:
        """The named databases (created when missing); retried when another process grew the
        map meanwhile (``MapResizedError``). Opening them takes the write lock."""
        while True:
            try:
                return {name: self.env.open_db(name.encode()) for name in DATABASES}
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)

    @staticmethod
    def _check_schema(txn: Txn) -> None:
        version = txn.get("meta", "schema")
        if version is None or version in UPGRADED_SCHEMAS:
            txn.put("meta", "schema", SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            raise StoreError("index", f"schema version {version}, expected {SCHEMA_VERSION}")

    def write(self, body: Callable[[Txn], T]) -> T:
        """Run ``body(txn)`` in one write transaction and commit; retried on a full map.

        ``body`` must be repeatable (it may run again after ``MapFullError``).
        """
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    return body(Txn(txn, self.dbs))
            except lmdb.MapFullError:
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)

    def read(self, body: Callable[[Txn], T]) -> T:
        """Run ``body(txn)`` in one read-only transaction (a consistent snapshot)."""
        while True:
            try:
                with self.env.begin(write=False) as txn:
                    return body(Txn(txn, self.dbs))
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)

    @property
    def map_size(self) -> int:
        """Current map size in bytes."""
        return self.env.info()["map_size"]

    def close(self) -> None:
        """Close the environment (idempotent)."""
        self.env.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or link inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
