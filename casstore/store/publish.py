"""Publication: a discovered task → a verified archive in a fileset → a task revision
registered under a name, in one write transaction.

A failure after the archive was stored raises :class:`PublicationError` carrying the
:class:`PreparedTask` that :func:`retry` registers without writing the archive again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel

from casstore.archive.compress import Compression, check_compression
from casstore.archive.discover import DiscoveredTask
from casstore.archive.limits import Limits
from casstore.archive.scan import scan_tree
from casstore.errors import PublicationError, StoreError, UsageError
from casstore.names import check_name, check_prefix, default_name
from casstore.store.fileset import DEFAULT_FILESET, ArchiveRef, Filesets, StoredArchive
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.lookup import latest_revision, read_name, read_revision, stored_revision
from casstore.store.records import (
    DEFAULT_WORKSPACE,
    NamedRecord,
    RevisionEntry,
    TaskRevision,
    now,
)

__all__ = ["NAME_EXISTS", "PreparedTask", "PublishResult", "check_task", "publish", "retry"]

NAME_EXISTS = "a task of that name exists (publish without --create to add a revision)"


@dataclass(frozen=True, slots=True)
class PreparedTask:
    """A task whose archive is stored and verified, ready to register: ``workspace``,
    ``name``, ``create`` (fail if the name exists), the sealed ``revision`` and
    ``source_dir``."""

    workspace: str
    name: str
    create: bool
    revision: TaskRevision
    source_dir: str


class PublishResult(BaseModel):
    """One published task: ``workspace``, ``name``, native ``id``, ``revision`` (digest),
    ``address``, ``archive_ref``, ``content_digest``, ``reused`` (the existing revision was
    returned), ``written`` (this call wrote the archive file) and ``repaired`` (the archive
    file at the address was missing or failed verification, and this call wrote verified
    bytes there)."""

    workspace: str
    name: str
    id: str
    revision: str
    address: str
    archive_ref: str
    content_digest: str
    reused: bool
    written: bool = False
    repaired: bool = False

    def to_json(self) -> dict[str, Any]:
        """The ``casstore publish --json`` item: every field but ``workspace`` and
        ``written``."""
        return self.model_dump(exclude={"workspace", "written"})


@dataclass(frozen=True, slots=True)
class _Target:
    """Where an archive is stored: its fileset location and ``compression``; ``damaged``:
    the revision whose archive file the write repairs, or None."""

    workspace: str
    fileset: str
    prefix: str
    compression: Compression
    damaged: TaskRevision | None = None


def check_task(value: object, argument: str = "task") -> DiscoveredTask:
    """``value`` when it is a :class:`DiscoveredTask`; UsageError naming ``argument``
    otherwise."""
    if isinstance(value, DiscoveredTask):
        return value
    rule = f"expected a DiscoveredTask (casstore.discover_tasks), not {type(value).__name__}"
    raise UsageError(argument, rule)


def publish(
    store: StoreHandle,
    task: DiscoveredTask,
    name: str | None = None,
    *,
    workspace: str = DEFAULT_WORKSPACE,
    fileset: str = DEFAULT_FILESET,
    prefix: str = "",
    compression: Compression = "gzip",
    create: bool = False,
    limits: Limits | None = None,
) -> PublishResult:
    """Publish one discovered task in ``store`` under ``name`` (default: native id with
    ``/`` → ``-``).

    If the name's latest revision has the same content digest and scoring definition
    (metrics, views) and its archive file passes verification (address, structure, content
    digest) it is returned with ``reused=True`` and nothing is written; if the file is
    missing or damaged, the task is re-packed and the file repaired (``repaired=True``:
    the address guarantees the new bytes are the right ones). Otherwise
    the task is re-scanned and re-packed; SourceChangedError (naming the directory) when
    its content digest differs from the discovered one; the archive is stored, read back
    and verified; then registered in one write transaction. ``create=True``: StoreError
    if the name exists. A failure after the archive was stored raises
    :class:`PublicationError` whose ``prepared`` :func:`retry` accepts. UsageError for a
    ``task`` that is no DiscoveredTask, a compression other than gzip, zstd or none (checked
    before the store is read: also when the revision would be reused).
    """
    task = check_task(task)
    name = check_name(name) if name is not None else default_name(task.id)
    workspace, fileset = check_name(workspace), check_name(fileset)
    target = _Target(workspace, fileset, check_prefix(prefix), check_compression(compression))
    limits = limits or Limits()
    key = f"{workspace}/{name}"
    existing = store.index.read(lambda txn: latest_revision(txn, key))
    if existing is not None:
        if create:
            raise StoreError(key, NAME_EXISTS)
        if _same(existing, task.content_digest, task.metrics, task.views):
            if store.filesets.intact(existing, limits):
                return _result(workspace, name, existing, reused=True)
            target = _repair(existing)
    store.index.open_for_writing()  # a read-only store refused before any file is written
    revision, stored = _store(store.filesets, task, target, limits)
    prepared = PreparedTask(
        workspace=workspace,
        name=name,
        create=create,
        revision=revision,
        source_dir=str(task.source_dir),
    )
    result = retry(store, prepared)
    repaired = stored.repaired or (target.damaged is not None and stored.written)
    return result.model_copy(update={"written": stored.written, "repaired": repaired})


def _repair(damaged: TaskRevision) -> _Target:
    """Repair in place: the same location and compression give the same address."""
    at = ArchiveRef.parse(damaged.archive_ref)
    compression = cast(Compression, damaged.compression)
    return _Target(at.workspace, at.fileset, at.prefix, compression, damaged)


def _store(
    filesets: Filesets, task: DiscoveredTask, target: _Target, limits: Limits
) -> tuple[TaskRevision, StoredArchive]:
    """Scan and pack ``task`` into ``target``: the sealed revision and the stored archive.
    StoreError when a repair's re-packing gives another address than the damaged one."""
    tree = scan_tree(task.source_dir, limits, task.modes)
    pack, stored = filesets.store(
        tree,
        target.workspace,
        target.fileset,
        target.prefix,
        target.compression,
        limits,
        task.content_digest,
    )
    damaged = target.damaged
    if damaged is not None and str(pack.address) != damaged.address:
        raise StoreError(
            damaged.archive_ref,
            f"the archive is damaged and re-packing gave another address ({pack.address})",
        )
    revision = TaskRevision(
        native_id=tree.layout.native_id,
        dir_name=tree.top,
        archive_ref=str(stored.ref),
        address=str(pack.address),
        content_digest=str(pack.content_digest),
        compression=target.compression,
        entries=pack.entries,
        payload_bytes=pack.payload_bytes,
        archive_bytes=pack.archive_bytes,
        metrics=task.metrics,
        views=task.views,
    ).sealed()
    return revision, stored


def retry(store: StoreHandle, prepared: PreparedTask) -> PublishResult:
    """Register a prepared task (its archive already stored in ``store``) in one write
    transaction.

    Raises :class:`PublicationError` carrying ``prepared`` on any failure (e.g. the name
    exists and ``prepared.create``, the archive file is missing, the index fails).
    """
    try:
        return store.index.write(lambda txn: _register(txn, store.filesets, prepared))
    except PublicationError:
        raise
    except (StoreError, OSError, Exception) as error:
        key = f"{prepared.workspace}/{prepared.name}"
        raise PublicationError(key, f"not registered: {error}", prepared) from error


def _register(txn: Txn, filesets: Filesets, prepared: PreparedTask) -> PublishResult:
    """The write transaction of :func:`retry`: the name's latest revision when it is the
    same task, else ``prepared.revision`` (stored once) appended to the name's history."""
    revision = prepared.revision
    key = f"{prepared.workspace}/{prepared.name}"
    if not filesets.path_of(revision.archive_ref).is_file():
        raise StoreError(revision.archive_ref, "archive missing at registration")
    record = read_name(txn, "tasks", key)
    if record is not None:
        if prepared.create:
            raise StoreError(key, NAME_EXISTS)
        latest = read_revision(txn, "revisions", record.latest, f"tasks/{key}")
        if _same(latest, revision.content_digest, revision.metrics, revision.views):
            return _result(prepared.workspace, prepared.name, latest, reused=True)
    stored = txn.get("revisions", revision.digest)
    if stored is None:
        txn.put("revisions", revision.digest, revision.to_builtins())
    else:
        revision = stored_revision("revisions", revision.digest, stored)
    entry = RevisionEntry(digest=revision.digest, created=now())
    if record is None:
        record = NamedRecord(workspace=prepared.workspace, name=prepared.name, history=[])
    record.history.append(entry)
    txn.put("tasks", key, record.to_builtins())
    return _result(prepared.workspace, prepared.name, revision, reused=False)


def _same(
    revision: TaskRevision, content_digest: str, metrics: list[str], views: list[dict[str, Any]]
) -> bool:
    """True when ``revision`` has this content digest and scoring definition: the same
    task, published again."""
    return revision.content_digest == content_digest and revision.same_scoring(metrics, views)


def _result(workspace: str, name: str, revision: TaskRevision, reused: bool) -> PublishResult:
    return PublishResult(
        workspace=workspace,
        name=name,
        id=revision.native_id,
        revision=revision.digest,
        address=revision.address,
        archive_ref=revision.archive_ref,
        content_digest=revision.content_digest,
        reused=reused,
    )
