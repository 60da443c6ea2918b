"""Lookups in the index: a reference → its revision, a digest → its task revision.

A name (``tasks`` or ``tasksets`` database, key ``workspace/name``) holds its history; its
revisions live in ``revisions`` (tasks) or ``taskset_revisions`` (tasksets), by digest.
:class:`Names` reads the names of one kind; :func:`resolve` tries a taskset reference first,
then a task reference.
"""

from __future__ import annotations

from typing import Any

from casstore.errors import StoreError, UnknownReferenceError, unknown_reference
from casstore.names import check_name
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.records import NamedRecord, Reference, TaskRevision, TasksetRevision

__all__ = ["Names", "latest_revision", "pick", "resolve", "revision"]


def pick(txn: Txn, names_db: str, revisions_db: str, ref: Reference) -> dict[str, Any]:
    """The raw revision ``ref`` names (its digest, or the name's latest) in ``revisions_db``.

    UnknownReferenceError when the name or the revision is unknown; StoreError when the
    name's revision is absent (a dangling reference)."""
    raw = txn.get(names_db, ref.key)
    kind = "task" if names_db == "tasks" else "taskset"
    if raw is None:
        raise unknown_reference(str(ref), kind)
    record = NamedRecord.model_validate(raw)
    digest = ref.digest or record.latest
    if ref.digest is not None and not record.has(ref.digest):
        raise UnknownReferenceError(str(ref), f"no such revision of that {kind}")
    revision = txn.get(revisions_db, digest)
    if revision is None:
        raise StoreError(str(ref), f"dangling reference to {digest}")
    return revision


def latest_revision(txn: Txn, key: str) -> TaskRevision | None:
    """The latest revision of the task name ``key`` (``workspace/name``); None if absent."""
    raw = txn.get("tasks", key)
    if raw is None:
        return None
    revision = txn.get("revisions", NamedRecord.model_validate(raw).latest)
    return None if revision is None else TaskRevision.model_validate(revision)


def revision(store: StoreHandle, digest: str) -> TaskRevision:
    """The task revision of ``digest`` in ``store``; UnknownReferenceError if absent."""
    raw = store.index.read(lambda txn: txn.get("revisions", digest))
    if raw is None:
        raise UnknownReferenceError(digest, "no task revision with that digest")
    return TaskRevision.model_validate(raw)


def resolve(store: StoreHandle, ref: str) -> tuple[str, list[tuple[str, TaskRevision]]]:
    """Resolve a taskset reference (tried first) or a task reference in ``store``.

    Returns ``(kind, [(task key, revision), ...])`` with kind ``"taskset"`` or ``"task"``.
    Raises UnknownReferenceError when neither exists (``no taskset or task of that name``),
    UsageError when malformed.
    """
    parsed = Reference.parse(ref)

    def body(txn: Txn) -> tuple[str, list[tuple[str, TaskRevision]]]:
        if txn.get("tasksets", parsed.key) is not None:
            pinned = TasksetRevision.model_validate(
                pick(txn, "tasksets", "taskset_revisions", parsed)
            )
            return "taskset", [_pinned(txn, pin) for pin in pinned.tasks]
        if txn.get("tasks", parsed.key) is None:
            raise unknown_reference(str(parsed), "taskset or task")
        raw = pick(txn, "tasks", "revisions", parsed)
        return "task", [(parsed.key, TaskRevision.model_validate(raw))]

    return store.index.read(body)


def _pinned(txn: Txn, pin: dict[str, str]) -> tuple[str, TaskRevision]:
    """``(task key, revision)`` of a taskset's pin; StoreError if the revision is absent."""
    raw = txn.get("revisions", pin["revision"])
    if raw is None:
        raise StoreError(pin["task"], f"dangling pin {pin['revision']}")
    return pin["task"], TaskRevision.model_validate(raw)


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
            raw = pick(txn, self._names_db, self._revisions_db, parsed)
            record = NamedRecord.model_validate(txn.get(self._names_db, parsed.key))
            return record, self._model.model_validate(raw)

        return self._store.index.read(body)

    def list(self, workspace: str | None = None) -> list[tuple[NamedRecord, R]]:
        """Every name (optionally of one workspace) with its latest revision, sorted."""
        prefix = f"{check_name(workspace)}/" if workspace else ""

        def body(txn: Txn) -> list[tuple[NamedRecord, R]]:
            rows = []
            for _, raw in txn.items(self._names_db, prefix):
                record = NamedRecord.model_validate(raw)
                latest = txn.get(self._revisions_db, record.latest)
                rows.append((record, self._model.model_validate(latest)))
            return rows

        return self._store.index.read(body)
