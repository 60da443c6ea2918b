"""What a push moves: the REFs given, resolved in the local store, and every object they
reach (a taskset's pinned revisions and their archives, a job's snapshot and values).

A REF is tried as a taskset, then a task (``[workspace/]name[#digest]``), then an imported
job (id or name), as ``resolve`` and ``rescore`` read them. Every object is taken as the
store keeps it: a revision's index value, an archive file's bytes (read whole and hashed
against its address first: a damaged local archive is never uploaded under its address).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from casstore.errors import CorruptStoreError, UnknownReferenceError, UsageError, unknown_reference
from casstore.remote.jobdata import local_snapshot
from casstore.remote.objects import archive_key, value_key
from casstore.store.core import Store
from casstore.store.index import Txn
from casstore.store.lookup import confirm_absent, pick, read_revision
from casstore.store.records import NamedRecord, Reference, RevisionEntry, TaskRevision
from casstore.trials.stored import job_record

__all__ = ["Bundle", "RefUpdate", "gather"]


@dataclass(frozen=True, slots=True)
class RefUpdate:
    """A ref to point at ``entry.digest``: its ``kind`` (``tasks``, ``tasksets``, ``jobs``),
    ``key`` (``workspace/name``; a job id), ``workspace`` and ``name`` of its record."""

    kind: str
    key: str
    workspace: str
    name: str
    entry: RevisionEntry


@dataclass
class Bundle:
    """Objects to put (key → bytes, or an archive: key → ``(file, address)``) and the refs
    to update after them."""

    objects: dict[str, bytes] = field(default_factory=dict)
    archives: dict[str, tuple[Path, str]] = field(default_factory=dict)
    refs: list[RefUpdate] = field(default_factory=list)


def gather(store: Store, refs: list[str]) -> Bundle:
    """The :class:`Bundle` of ``refs`` in ``store`` (see the module docstring).
    UnknownReferenceError naming a REF that is no taskset, task or imported job."""
    bundle = Bundle()
    for ref in refs:
        if not store.index.read(partial(_names, store=store, text=ref, bundle=bundle)):
            _job(store, ref, bundle)
    return bundle


def _names(txn: Txn, store: Store, text: str, bundle: Bundle) -> bool:
    """Add the taskset or task ``text`` names; False when it names neither (a job, maybe)."""
    try:
        ref = Reference.parse(text)
    except UsageError:
        return False
    if txn.has("tasksets", ref.key):
        record, taskset = pick(txn, "tasksets", "taskset_revisions", ref)
        _revision(txn, bundle, "taskset_revisions", taskset.digest)
        for pin in taskset.tasks:
            task = _revision(txn, bundle, "revisions", pin["revision"])
            _archive(store, bundle, task)
        bundle.refs.append(_update("tasksets", record, taskset.digest))
        return True
    if txn.has("tasks", ref.key):
        record, task = pick(txn, "tasks", "revisions", ref)
        _revision(txn, bundle, "revisions", task.digest)
        _archive(store, bundle, task)
        bundle.refs.append(_update("tasks", record, task.digest))
        return True
    confirm_absent(txn, "tasks")
    confirm_absent(txn, "tasksets")
    return False


def _update(kind: str, record: NamedRecord, digest: str) -> RefUpdate:
    """The ref update of ``record`` to ``digest``, with its (latest) history entry."""
    entry = next(e for e in reversed(record.history) if e.digest == digest)
    key = f"{record.workspace}/{record.name}"
    return RefUpdate(kind, key, record.workspace, record.name, entry)


def _revision(txn: Txn, bundle: Bundle, db: str, digest: str) -> TaskRevision:
    """Add the revision ``digest`` of ``db`` (its index value) and return it decoded."""
    revision = read_revision(txn, db, digest, "a reference pushed")
    raw = txn.raw_get(db, digest)
    bundle.objects[value_key(db, digest)] = bytes(raw or b"")
    return revision


def _archive(store: Store, bundle: Bundle, task: TaskRevision) -> None:
    """Add the archive file of ``task``."""
    path = store.filesets.path_of(task.archive_ref)
    if not path.is_file():
        raise CorruptStoreError(str(path), f"archive missing ({task.archive_ref})")
    bundle.archives[archive_key(task.archive_ref)] = (path, task.address)


def _job(store: Store, ref: str, bundle: Bundle) -> None:
    """Add the imported job ``ref`` (id or name) with its snapshot's values."""
    try:
        job = job_record(store.index, ref)
    except UnknownReferenceError as error:
        raise unknown_reference(ref, "taskset, task or imported job") from error
    snapshot, values = store.index.read(lambda txn: local_snapshot(txn, job))
    bundle.objects.update(values)
    bundle.objects[value_key("jobs", snapshot.digest)] = snapshot.encode()
    entry = RevisionEntry(digest=snapshot.digest, created=job.imported_at or "")
    bundle.refs.append(RefUpdate("jobs", job.job_id, "jobs", job.job_id, entry))
