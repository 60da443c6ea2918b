"""Taskset names: ``store.tasksets.create``/``replace`` pin the current (or named) revision of
each task, ``get`` and ``list`` read the names and their revisions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from casstore.errors import StoreError, UsageError
from casstore.names import check_name
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.lookup import Names, pick, read_name
from casstore.store.records import (
    DEFAULT_WORKSPACE,
    NamedRecord,
    Reference,
    RevisionEntry,
    TasksetRevision,
    now,
)

__all__ = ["TasksetResult", "Tasksets"]


@dataclass(frozen=True, slots=True)
class TasksetResult:
    """A created or replaced taskset: ``ref`` (``workspace/name``), ``revision`` (digest),
    ``tasks`` (``[{"task": "workspace/name", "revision": digest}]``) and ``reused``."""

    ref: str
    revision: str
    tasks: list[dict[str, str]]
    reused: bool

    def to_json(self) -> dict[str, object]:
        """The ``casstore taskset create --json`` object: ``id`` (the reference),
        ``revision`` and ``tasks``."""
        return {"id": self.ref, "revision": self.revision, "tasks": self.tasks}


class Tasksets(Names[TasksetRevision]):
    """Taskset names of a store: ``create``/``replace`` pin task revisions."""

    def __init__(self, store: StoreHandle) -> None:
        super().__init__(store, "tasksets", "taskset_revisions", TasksetRevision)

    def create(
        self, name: str, tasks: Sequence[str], workspace: str = DEFAULT_WORKSPACE
    ) -> TasksetResult:
        """A new taskset pinning the current revision of each task reference in ``tasks``
        (names in ``workspace``, ``ws/name`` or ``ws/name#digest``). StoreError if the name
        exists; UnknownReferenceError for an unknown task; UsageError for no or repeated
        tasks."""
        return self._write(name, tasks, workspace, create=True)

    def replace(
        self, name: str, tasks: Sequence[str], workspace: str = DEFAULT_WORKSPACE
    ) -> TasksetResult:
        """Create the taskset or add a revision (identical pins → the existing revision)."""
        return self._write(name, tasks, workspace, create=False)

    def _write(
        self, name: str, tasks: Iterable[str], workspace: str, create: bool
    ) -> TasksetResult:
        key = f"{check_name(workspace)}/{check_name(name)}"
        refs = [Reference.parse(task, workspace) for task in tasks]
        if not refs:
            raise UsageError(key, "a taskset needs at least one task")
        if len({ref.key for ref in refs}) != len(refs):
            raise UsageError(key, "a task is named twice")

        def body(txn: Txn) -> TasksetResult:
            pins = []
            for ref in sorted(refs, key=lambda r: r.key):
                _, pinned = pick(txn, "tasks", "revisions", ref)
                pins.append({"task": ref.key, "revision": pinned.digest})
            revision = TasksetRevision(workspace=workspace, tasks=pins).sealed()
            record = read_name(txn, "tasksets", key)
            if record is not None:
                if create:
                    raise StoreError(key, "a taskset of that name exists (use taskset replace)")
                if record.latest == revision.digest:
                    return TasksetResult(ref=key, revision=revision.digest, tasks=pins, reused=True)
            if txn.get("taskset_revisions", revision.digest) is None:
                txn.put("taskset_revisions", revision.digest, revision.to_builtins())
            if record is None:
                record = NamedRecord(workspace=workspace, name=name, history=[])
            record.history.append(RevisionEntry(digest=revision.digest, created=now()))
            txn.put("tasksets", key, record.to_builtins())
            return TasksetResult(ref=key, revision=revision.digest, tasks=pins, reused=False)

        return self._store.index.write(body)
