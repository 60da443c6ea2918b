"""The store's LMDB index: one environment at ``<store>/index`` with named databases.

Databases (keys UTF-8, values msgpack): ``meta`` (``schema`` → version), ``tasks``
(``workspace/name`` → task record), ``revisions`` (revision digest → revision record),
``tasksets`` (``workspace/name`` → taskset record), ``taskset_revisions`` (digest → record);
imported Harbor jobs (:mod:`casstore.trials.stored`): ``jobs``, ``trial_packs``, ``trials``
(older schemas), ``reward_tables``, ``evidence``, ``zstd_dicts``; the trial cache of
``casstore run`` (:mod:`casstore.run.cache`): ``trial_cache``.

Opening writes nothing: an existing index is opened read-only (a reading command works on a
store it cannot write and never waits for a writer), and read-write by its first write, which
creates the databases an older index lacks (older code ignores them) and fails with
``<store>: the store is read-only (...)`` when the store cannot be written. A new index is
created with every database and marked :data:`SCHEMA_VERSION`. An index of an older schema
this code reads (:data:`UPGRADED_SCHEMAS`) keeps its marker until the first write transaction
(:meth:`Index.write`, :meth:`Index.begin_write`) marks it :data:`SCHEMA_VERSION`, so reading
commands leave it usable by the older code; a newer or unknown schema is refused at open.

One writer at a time across processes (LMDB's lock), any number of readers. Every
read-modify-write runs inside ONE write transaction (:meth:`Index.write`); the map doubles on
``MapFullError`` and the transaction is retried; a map grown by another process is adopted. A
write that spans other work holds a transaction of :meth:`Index.begin_write` and commits or
aborts it itself; :meth:`Index.reserve` grows the map ahead of a big write. A write that fails
(a full disk) is dropped whole and is StoreError naming the store
(:mod:`casstore.store.faults`).

A damaged index is :class:`~casstore.errors.CorruptStoreError`, never a crash nor a wrong
answer where it can be told: every stored value is decoded through
:func:`casstore.store.values.decode` (naming ``db/key``), every LMDB error of a read names the
database (:class:`~casstore.store.txn.Txn`), a walk of a whole database checks its order and
count, an index of this schema must hold every database and a schema marker, and opening
checks ``data.mdb`` against LMDB's meta pages before any other page is read
(:func:`casstore.store.environment.check_data_file`): a file truncated below the pages LMDB has
written would otherwise end the process with SIGBUS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar, cast

import lmdb

from casstore.errors import CorruptStoreError, StoreError
from casstore.store.environment import check_writable, open_environment, page_damage
from casstore.store.faults import damaged, is_damage, is_retried, os_write_failure, write_failure
from casstore.store.txn import Txn, WriteTxn

__all__ = [
    "DATABASES",
    "SCHEMA_VERSION",
    "Index",
    "Txn",
    "WriteTxn",
]

SCHEMA_VERSION = 5
UPGRADED_SCHEMAS = (1, 2, 3, 4)
"""Versions this code reads, and marks as :data:`SCHEMA_VERSION` in its first write
transaction (never on open): schema 5 adds the database ``trial_cache`` (``casstore run``'s
attempts by task, agent and options digest; a schema-4 index gets it, empty, at its first
write, and reads as having none before) and keeps each trial's ATIF trajectory as evidence (a
frame of its chunk's evidence pack after the result.json frames, referenced by the record's
``trace``, a field added at the end of the stored record: a record without one has the bytes
schema 4 wrote); schema 4 writes each trial pack behind a CRC-32 of it
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
    "trial_cache",
)
ADDED_DATABASES = ("trial_cache",)
"""Databases of :data:`SCHEMA_VERSION` an older index lacks: created by the write that marks
it (never by opening it read-write for a write that marks nothing, such as gc's lock, so the
older code that wrote it still finds the databases it knows, and no more)."""
DEFAULT_MAP_SIZE = 32 << 20
MAX_DBS = len(DATABASES) + 2
T = TypeVar("T")


class Index:
    """The LMDB environment of a store (see the module docstring). Use as a context manager.

    An existing index is opened read-only, and read-write by its first write (:meth:`write`,
    :meth:`begin_write`, :meth:`reserve`): a store this process cannot write reads as any
    other, and a write asked of it is StoreError ``<store>: the store is read-only (...)``.
    A new index (``create`` and no ``data.mdb``) is created read-write.

    Raises :class:`StoreError` when the environment cannot be opened (``create=False``: also
    when it does not exist) or its schema version is neither :data:`SCHEMA_VERSION` nor one
    of :data:`UPGRADED_SCHEMAS`; :class:`CorruptStoreError` when ``data.mdb`` is damaged (see
    :func:`casstore.store.environment.open_environment`), holds data but no schema version, or
    lacks a database its schema has. Opening writes nothing.
    """

    def __init__(self, path: Path, map_size: int = DEFAULT_MAP_SIZE, create: bool = True) -> None:
        self._path = path
        self._map_size = map_size
        self.writable = create and not (path / "data.mdb").exists()  # a new index
        if self.writable:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise os_write_failure(path.parent, error) from error
        self.env = self._environment(create=self.writable)
        self._older = False  # an older schema, marked by the first write transaction
        try:
            self.dbs = self._open_dbs()
            if not self.writable:
                self._check_database_list()
            version = self.read(lambda txn: txn.get("meta", "schema"))
            if version is None and self._holds_data():
                raise CorruptStoreError(f"{path}/data.mdb", "the index holds data but no schema")
            if version is None and create:  # a new index: marked as it is created
                self.write(self._check_schema)
            elif version in UPGRADED_SCHEMAS:
                self._older = True
            elif version is not None and version != SCHEMA_VERSION:
                raise _schema_refused(version)
            elif version == SCHEMA_VERSION:
                self._check_databases()
        except CorruptStoreError as error:
            self.env.close()
            raise _opening_damage(path, error) from error
        except BaseException:
            self.env.close()
            raise

    def _environment(self, create: bool = False) -> lmdb.Environment:
        """The environment, read-write when :attr:`writable` (created if ``create``)."""
        return open_environment(
            self._path, self._map_size, MAX_DBS, create=create, readonly=not self.writable
        )

    def _open_dbs(self) -> dict[str, Any]:
        """The named databases: read-write, created when missing (a new index, or one of an
        older schema); read-only, None for a missing one. Retried when another process grew
        the map meanwhile (``MapResizedError``).

        Read-write they are opened in a write transaction, so opening waits for LMDB's writer
        lock (a running import holds it), which a write waits for anyway; when they all exist
        it commits nothing (LMDB writes no page for a transaction that changed none).
        Read-only they are opened in a read-only transaction, which waits for nothing and
        keeps its handles (py-lmdb commits it: a read-only ``Transaction`` of a read-write
        environment would reset instead, dropping them)."""
        while True:
            try:
                return {name: self._open_db(name) for name in DATABASES}
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
            except lmdb.Error as error:
                if self.writable and (is_retried(error) or not is_damage(error)):
                    raise write_failure(self._path.parent, error, self._path) from error
                raise damaged("the index's list of databases", None, error) from error

    def _open_db(self, name: str) -> Any:
        """The handle of database ``name`` (None: missing, and read-only or one of
        :data:`ADDED_DATABASES` of an index of an older schema, created by the write that
        marks it). An index without a schema marker (new, or its creation killed before the
        marker) gets every database."""
        if self.writable and (name not in ADDED_DATABASES or not self._older):
            return self.env.open_db(name.encode())
        try:
            return self.env.open_db(name.encode(), create=False)
        except lmdb.NotFoundError:
            return None

    def _check_database_list(self) -> None:
        """CorruptStoreError when fewer named databases were found than the meta page records
        in the main database (the list of databases): a damaged root page can make LMDB see
        an empty or short list, and the store would read as empty (``ls`` printing nothing,
        ``gc`` removing every archive). Reads no page: the count is the meta page's."""
        found = sum(handle is not None for handle in self.dbs.values())
        recorded = self.env.stat()["entries"]
        if found < recorded:
            rule = f"{found} of the {recorded} databases its meta page records were found"
            raise CorruptStoreError(f"{self._path}/data.mdb", rule)

    def _holds_data(self) -> bool:
        """Whether any database of the index holds an entry."""
        return self.read(lambda txn: any(txn.count(db) for db in DATABASES))

    def _check_databases(self) -> None:
        """CorruptStoreError when an index of :data:`SCHEMA_VERSION` lacks a database (every
        one is created before an index is marked so: the list of databases is damaged)."""
        missing = [name for name, handle in self.dbs.items() if handle is None]
        if missing:
            rule = f"the index lacks the database {missing[0]} (its list of databases is damaged)"
            raise CorruptStoreError(f"{self._path}/data.mdb", rule)

    def open_for_writing(self) -> None:
        """Reopen the index read-write (done by its first write; publication calls it before
        it writes an archive): StoreError ``<store>: the store is read-only (...)`` when the
        store cannot be written (:func:`casstore.store.environment.check_writable`); the index
        stays open read-only then."""
        if self.writable:
            return
        if isinstance(self.env, _Closed):
            raise StoreError(str(self._path), "the store is closed")
        check_writable(self._path)
        self.env.close()
        self.writable = True
        try:
            self.env = self._environment()
            self.dbs = self._open_dbs()
        except BaseException:
            with contextlib.suppress(Exception):
                self.env.close()
            self.writable = False
            self.env = self._environment()
            self.dbs = self._open_dbs()
            raise

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
            except lmdb.Error as error:  # not through Txn (begin): a write that failed
                raise write_failure(self._path.parent, error, self._path) from error
            return result

    def read(self, body: Callable[[Txn], T], buffers: bool = False) -> T:
        """Run ``body(txn)`` in one read-only transaction (a consistent snapshot); with
        ``buffers``, :meth:`Txn.raw_get` gives views into the map instead of copies (for big
        values; never to be kept beyond ``body``). An LMDB error ``body`` meets is
        :class:`CorruptStoreError` (a damaged page; :class:`Txn` names the database)."""
        while True:
            try:
                begun = (
                    self.env.begin(write=False, buffers=True)
                    if buffers
                    else self.env.begin(write=False)
                )
                with begun as txn:
                    return body(Txn(txn, self.dbs, self._path))
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
            except lmdb.Error as error:
                raise damaged(f"{self._path}/data.mdb", None, error) from error

    def begin_write(self) -> WriteTxn:
        """A write transaction left open while the caller does other work (an import writes
        a new job's chunks as it parses them), which the caller commits or aborts
        (:class:`WriteTxn`); waits for the writer lock. It marks an index of an older schema
        as :meth:`write` does, but nothing is retried: grow the map first (:meth:`reserve`).
        StoreError when the store cannot be written or the transaction cannot begin."""
        try:
            return self._begin(mark=True)
        except lmdb.Error as error:
            raise write_failure(self._path.parent, error, self._path) from error

    def _begin(self, mark: bool) -> WriteTxn:
        """Begin a write transaction (adopting a map grown by another process); with
        ``mark``, an index of an older schema is marked in it (:meth:`_check_schema`). The
        index is reopened read-write first (:meth:`open_for_writing`)."""
        self.open_for_writing()
        while True:
            try:
                begun = self.env.begin(write=True)
                break
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
        if not (mark and self._older):
            return WriteTxn(begun, self.dbs, self._path)
        try:  # the databases it lacks: theirs once the transaction commits
            dbs = {
                name: self.env.open_db(name.encode(), txn=begun) if handle is None else handle
                for name, handle in self.dbs.items()
            }
        except BaseException:
            begun.abort()
            raise
        txn = WriteTxn(begun, dbs, self._path)
        txn._committed = lambda: self._marked(dbs)
        try:
            self._check_schema(txn)
        except BaseException:
            txn.abort()
            raise
        return txn

    def _marked(self, dbs: dict[str, Any]) -> None:
        """An index of an older schema was marked :data:`SCHEMA_VERSION` (a commit), the
        databases it lacked created (``dbs``: every handle)."""
        self._older = False
        self.dbs = dbs

    def reserve(self, nbytes: int) -> None:
        """Grow the map (doubling) to hold ``2 * nbytes`` more bytes than the pages in use,
        ahead of a write of about ``nbytes``: not retried after each doubling. The index is
        reopened read-write first (:meth:`open_for_writing`)."""
        self.open_for_writing()
        info, stat = self.env.info(), self.env.stat()
        used = (info["last_pgno"] + 1) * stat["psize"]
        want = used + 2 * nbytes
        if want > info["map_size"]:
            size = info["map_size"]
            while size < want:
                size *= 2
            self.env.set_mapsize(size)

    @property
    def path(self) -> Path:
        """The index directory (``<store>/index``)."""
        return self._path

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


def _opening_damage(path: Path, error: CorruptStoreError) -> CorruptStoreError:
    """The error for damage met while opening the index directory ``path`` (its list of
    databases, its schema): what the offline verifier finds in its pages, which fsck (that
    cannot open it either) would report, else ``error`` itself."""
    findings = page_damage(path)
    if not findings:
        return error
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return CorruptStoreError(f"{path}/data.mdb", f"the index is damaged: {findings[0]}{more}")


def _schema_refused(version: object) -> StoreError:
    """The error for an index of a newer or unknown schema."""
    return StoreError("index", f"schema version {version}, expected {SCHEMA_VERSION}")
