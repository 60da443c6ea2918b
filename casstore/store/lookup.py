"""Lookups in the index: a reference → its revision, a digest → its task revision.

A name (``tasks`` or ``tasksets`` database, key ``workspace/name``) holds its history; its
revisions live in ``revisions`` (tasks) or ``taskset_revisions`` (tasksets), by digest.
:class:`Names` reads the names of one kind; :func:`resolve` tries a taskset reference first,
then a task reference.

Every record is read checked (:func:`stored_name`, :func:`stored_revision`): a name record
must name its key, a revision must hash to its digest, and a revision a name or a pin names
must exist; anything else is :class:`~casstore.errors.CorruptStoreError` naming ``db/key``.
A name or digest not found is confirmed before it is reported unknown
(:func:`confirm_absent`): a damaged page can make LMDB miss a key without an error of its own.
"""

from __future__ import annotations

import builtins
from typing import Any

from casstore.digest import DigestPrefix
from casstore.errors import CorruptStoreError, unknown_reference
from casstore.names import check_name
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.prefixes import matching, unique
from casstore.store.records import (
    NamedRecord,
    Reference,
    RevisionEntry,
    TaskRevision,
    TasksetRevision,
    checked_name,
    checked_revision,
)
from casstore.store.values import decode

__all__ = [
    "Names",
    "confirm_absent",
    "find_revision",
    "latest_revision",
    "names_holding",
    "pick",
    "read_name",
    "read_revision",
    "resolve",
    "revision",
    "revision_of",
    "stored_name",
    "stored_revision",
]

_MODELS: dict[str, type[TaskRevision] | type[TasksetRevision]] = {
    "revisions": TaskRevision,
    "taskset_revisions": TasksetRevision,
}


def stored_name(db: str, key: str, raw: Any) -> NamedRecord:
    """The name record stored (unpacked) as ``raw`` at ``key`` of ``db`` (``tasks`` or
    ``tasksets``); CorruptStoreError unless it passes :func:`checked_name`."""
    return decode(db, key, checked_name, key, raw)


def stored_revision(db: str, key: str, raw: Any) -> Any:
    """The revision stored (unpacked) as ``raw`` at ``key`` of ``db`` (``revisions``: a
    :class:`TaskRevision`, ``taskset_revisions``: a :class:`TasksetRevision`);
    CorruptStoreError unless it passes :func:`checked_revision` (hashes to its key)."""
    return decode(db, key, checked_revision, _MODELS[db], key, raw)


def read_name(txn: Txn, db: str, key: str) -> NamedRecord | None:
    """The name record at ``key`` of ``db`` (``tasks`` or ``tasksets``), None when absent."""
    raw = txn.get(db, key)
    return None if raw is None else stored_name(db, key, raw)


def read_revision(txn: Txn, db: str, digest: str, named_by: str) -> Any:
    """The revision ``digest`` of ``db`` that ``named_by`` (a name or a taskset's pin) names:
    CorruptStoreError when it is absent (a name and its revision are written in one
    transaction: a missing one is damage) or damaged."""
    raw = txn.get(db, digest)
    if raw is None:
        raise CorruptStoreError(f"{db}/{digest}", f"missing (named by {named_by})")
    return stored_revision(db, digest, raw)


def confirm_absent(txn: Txn, db: str) -> None:
    """Walk ``db`` (a names or revisions database), every record checked as a read checks it
    (:meth:`Txn.items`: keys in order and as many as LMDB counts; :func:`stored_name` or
    :func:`stored_revision`): CorruptStoreError when it is damaged, so that a lookup that
    found nothing is told from a lookup a damaged page led astray. For the error path only:
    it reads the whole database."""
    checked = stored_name if db in ("tasks", "tasksets") else stored_revision
    for key, raw in txn.items(db):
        checked(db, key, raw)


def pick(txn: Txn, names_db: str, revisions_db: str, ref: Reference) -> tuple[NamedRecord, Any]:
    """The name record and the revision ``ref`` names (its digest, or the name's latest) in
    ``revisions_db``.

    UnknownReferenceError when the name (confirmed absent: :func:`confirm_absent`) or the
    revision is unknown; CorruptStoreError when the name's revision is absent (a dangling
    reference) or either is damaged."""
    record = read_name(txn, names_db, ref.key)
    kind = "task" if names_db == "tasks" else "taskset"
    if record is None:
        confirm_absent(txn, names_db)
        raise unknown_reference(str(ref), kind)
    digest = ref.digest or record.latest
    if ref.digest is not None and not ref.exact:
        digest = _revision_of(txn, record, revisions_db, ref, kind)
    if not record.has(digest):
        raise unknown_reference(str(ref), f"{kind} revision", "digest")
    return record, read_revision(txn, revisions_db, digest, f"{names_db}/{ref.key}")


def _revision_of(
    txn: Txn, record: NamedRecord, revisions_db: str, ref: Reference, kind: str
) -> str:
    """The one revision of ``record`` whose digest starts with the prefix ``ref`` gives
    (:mod:`casstore.store.prefixes`: a range scan of ``revisions_db``, kept to the name's
    history); AmbiguousPrefixError when several do. A history entry the scan did not find is
    returned as it is (:func:`read_revision` then reports it missing)."""
    assert ref.digest is not None
    history = {entry.digest for entry in record.history}
    found = unique(ref.digest, matching(txn, [revisions_db], [ref.digest], history), "revisions")
    if found is not None:
        return found[1]
    dangling = sorted(digest for digest in history if digest.startswith(ref.digest))
    return dangling[0] if dangling else ref.digest


def latest_revision(txn: Txn, key: str) -> TaskRevision | None:
    """The latest revision of the task name ``key`` (``workspace/name``); None if absent."""
    record = read_name(txn, "tasks", key)
    if record is None:
        return None
    return read_revision(txn, "revisions", record.latest, f"tasks/{key}")


def revision(store: StoreHandle, digest: str) -> TaskRevision:
    """The task revision of ``digest`` (whole, or a unique prefix of at least 8 hex digits,
    ``sha256:`` optional) in ``store``; UnknownReferenceError if absent (confirmed:
    :func:`confirm_absent`), AmbiguousPrefixError when several start with the prefix."""
    return find_revision(store, digest, ("revisions",))[2]


def find_revision(store: StoreHandle, digest: str, dbs: tuple[str, ...]) -> tuple[str, str, Any]:
    """``(db, digest, revision)`` of the revision of ``dbs`` (``revisions``,
    ``taskset_revisions``) whose digest is ``digest`` or starts with it (a unique prefix:
    :mod:`casstore.store.prefixes`). UnknownReferenceError when there is none (confirmed:
    :func:`confirm_absent`), AmbiguousPrefixError when several, UsageError when ``digest``
    is neither a digest nor a prefix of one."""
    prefix = DigestPrefix.parse(digest, "sha256")
    what = "task revision" if dbs == ("revisions",) else "taskset or task revision"

    def body(txn: Txn) -> tuple[str, str, Any]:
        if prefix.complete:
            candidates = [(db, str(prefix)) for db in dbs if txn.has(db, str(prefix))]
        else:
            candidates = matching(txn, dbs, prefix.keys())
        found = unique(str(prefix), candidates, "revisions")
        if found is None:
            for db in dbs:
                confirm_absent(txn, db)
            raise unknown_reference(str(prefix), what, "digest")
        db, key = found
        return db, key, read_revision(txn, db, key, str(prefix))

    return store.index.read(body)


def revision_of(store: StoreHandle, digest: str) -> tuple[str, str, Any]:
    """``(db, digest, revision)`` of the taskset or task revision whose digest is ``digest``
    or starts with it (``show DIGEST``; see :func:`find_revision`)."""
    return find_revision(store, digest, ("taskset_revisions", "revisions"))


def names_holding(store: StoreHandle, kind: str, digest: str) -> list[str]:
    """The ``workspace/name`` of every ``kind`` (``task`` or ``taskset``) name whose history
    holds the revision ``digest``, sorted (a walk of the names: for ``show DIGEST``)."""
    db = "tasks" if kind == "task" else "tasksets"

    def body(txn: Txn) -> list[str]:
        return [key for key, raw in txn.items(db) if stored_name(db, key, raw).has(digest)]

    return store.index.read(body)


def resolve(store: StoreHandle, ref: str) -> tuple[str, list[tuple[str, TaskRevision]]]:
    """Resolve a taskset reference (tried first) or a task reference in ``store``.

    Returns ``(kind, [(task key, revision), ...])`` with kind ``"taskset"`` or ``"task"``.
    Raises UnknownReferenceError when neither exists (both confirmed absent: ``no taskset or
    task of that name``), UsageError when malformed.
    """
    parsed = Reference.parse(ref)

    def body(txn: Txn) -> tuple[str, list[tuple[str, TaskRevision]]]:
        if txn.has("tasksets", parsed.key):
            _, pinned = pick(txn, "tasksets", "taskset_revisions", parsed)
            return "taskset", [_pinned(txn, pinned, pin) for pin in pinned.tasks]
        if not txn.has("tasks", parsed.key):
            confirm_absent(txn, "tasks")  # neither name: both confirmed, not led astray
            confirm_absent(txn, "tasksets")
            raise unknown_reference(str(parsed), "taskset or task")
        _, task = pick(txn, "tasks", "revisions", parsed)
        return "task", [(parsed.key, task)]

    return store.index.read(body)


def _pinned(txn: Txn, taskset: TasksetRevision, pin: dict[str, str]) -> tuple[str, TaskRevision]:
    """``(task key, revision)`` of a taskset's pin; CorruptStoreError if the revision is
    absent."""
    named_by = f"taskset_revisions/{taskset.digest}"
    return pin["task"], read_revision(txn, "revisions", pin["revision"], named_by)


class Names[R: (TaskRevision, TasksetRevision)]:
    """The names of one kind in a store: ``names_db`` (``tasks`` or ``tasksets``) and their
    revisions in ``revisions_db``, read as ``model``."""

    def __init__(
        self, store: StoreHandle, names_db: str, revisions_db: str, model: type[R]
    ) -> None:
        self._store = store
        self._names_db = names_db
        self._revisions_db = revisions_db
        self._model: type[R] = model

    def get(self, ref: str) -> tuple[NamedRecord, R]:
        """The name record and the referenced (default latest) revision of a reference.

        UnknownReferenceError if the name or the revision is unknown."""
        parsed = Reference.parse(ref)

        def body(txn: Txn) -> tuple[NamedRecord, R]:
            return pick(txn, self._names_db, self._revisions_db, parsed)

        return self._store.index.read(body)

    def list(self, workspace: str | None = None) -> list[tuple[NamedRecord, R]]:
        """Every name (optionally of one workspace) with its latest revision, sorted."""
        return [(record, found) for record, found, _ in self._entries(workspace, every=False)]

    def every_revision(
        self, workspace: str | None = None
    ) -> builtins.list[tuple[NamedRecord, R, RevisionEntry]]:
        """Every entry of every name's history (optionally of one workspace) with its
        revision: names sorted, each name's entries newest first (``ls --all``)."""
        return self._entries(workspace, every=True)

    def _entries(
        self, workspace: str | None, every: bool
    ) -> builtins.list[tuple[NamedRecord, R, RevisionEntry]]:
        """``(name record, revision, history entry)`` of each name (of ``workspace``), its
        latest entry or (``every``) all of them newest first."""
        prefix = f"{check_name(workspace)}/" if workspace else ""

        def body(txn: Txn) -> builtins.list[tuple[NamedRecord, R, RevisionEntry]]:
            rows = []
            for key, raw in txn.items(self._names_db, prefix):
                record = stored_name(self._names_db, key, raw)
                named_by = f"{self._names_db}/{key}"
                entries = reversed(record.history) if every else record.history[-1:]
                for entry in entries:
                    found = read_revision(txn, self._revisions_db, entry.digest, named_by)
                    rows.append((record, found, entry))
            return rows

        return self._store.index.read(body)
