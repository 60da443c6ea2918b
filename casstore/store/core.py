"""The store: an LMDB index plus filesets, with tasks, tasksets and publication (SPEC §4).

``Store(root)`` opens (creating if needed; ``create=False``: an existing store only)
``root/index`` and ``root/filesets``. Task names
and taskset names live in a workspace (default ``default``); their references are
``workspace/name`` (latest revision) or ``workspace/name#sha256:<hex>`` (one revision).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from casstore.archive.compress import Compression
from casstore.archive.discover import DiscoveredTask
from casstore.archive.limits import Limits
from casstore.archive.scan import scan_tree
from casstore.errors import (
    PublicationError,
    StoreError,
    UnknownReferenceError,
    UsageError,
    is_text,
    printable,
)
from casstore.names import check_name, check_prefix, default_name
from casstore.progress import NO_PROGRESS, Progress
from casstore.store.fileset import ArchiveRef, Filesets
from casstore.store.index import DEFAULT_MAP_SIZE, Index, Txn
from casstore.store.records import (
    NamedRecord,
    Reference,
    RevisionEntry,
    TaskRevision,
    TasksetRevision,
    now,
)

__all__ = [
    "DEFAULT_FILESET",
    "DEFAULT_WORKSPACE",
    "PreparedTask",
    "PublishResult",
    "Store",
    "TasksetResult",
]

DEFAULT_WORKSPACE = "default"
DEFAULT_FILESET = "harbor-tasks"


class PreparedTask(BaseModel):
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
        """The ``casstore publish --json`` item."""
        return self.model_dump(include=set(_PUBLISH_KEYS))


_PUBLISH_KEYS = (
    "name",
    "id",
    "revision",
    "address",
    "archive_ref",
    "content_digest",
    "reused",
    "repaired",
)


class TasksetResult(BaseModel):
    """A created or replaced taskset: ``id`` (``workspace/name``), ``revision`` (digest),
    ``tasks`` (``[{"task": "workspace/name", "revision": digest}]``) and ``reused``."""

    id: str
    revision: str
    tasks: list[dict[str, str]]
    reused: bool


NAME_EXISTS = "a task of that name exists (publish without --create to add a revision)"
NO_STORE = "no casstore store here (publish something first, or pass --store DIR)"


def is_store(root: Path) -> bool:
    """True when ``root`` holds a store's index (what ``Store(root, create=False)`` opens)."""
    return (root / "index" / "data.mdb").is_file()


class Store:
    """A store directory (see the module docstring). Use as a context manager.

    ``create=False`` opens an existing store only: :class:`UsageError` (naming ``root``) when
    ``root`` holds no index, and nothing is created. Read-only commands open stores that way;
    only publication creates one.

    ``tasks`` and ``tasksets`` give ``create``/``replace``/``get``/``list``; ``publish`` and
    ``retry`` write archives; ``checkout``, ``fsck`` and ``gc`` are in their own modules and
    exposed here as methods.
    """

    def __init__(
        self,
        root: Path | str = ".casstore",
        map_size: int = DEFAULT_MAP_SIZE,
        *,
        create: bool = True,
    ):
        if str(root) == "":
            raise UsageError('""', "no store directory given (pass --store DIR)")
        if not is_text(str(root)):  # undecodable bytes: no LMDB path
            raise UsageError(printable(str(root)), "the store path is not valid UTF-8")
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(str(root), "the store is not a directory")
        if not create and not is_store(self.root):
            raise UsageError(str(root), NO_STORE)
        self.root.mkdir(parents=True, exist_ok=True)
        self.index = Index(self.root / "index", map_size, create=create)
        self.filesets = Filesets(self.root / "filesets")
        self.tasks = Tasks(self)
        self.tasksets = Tasksets(self)

    def close(self) -> None:
        """Close the index."""
        self.index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # publication ------------------------------------------------------------------------

    def publish(
        self,
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
        """Publish one discovered task under ``name`` (default: native id with ``/`` → ``-``).

        If the name's latest revision has the same content digest and scoring definition
        (metrics, views) and its archive file passes verification (address, structure, content
        digest) it is returned with ``reused=True`` and nothing is written; if the file is
        missing or damaged, the task is re-packed and the file repaired (``repaired=True``:
        the address guarantees the new bytes are the right ones). Otherwise
        the task is re-scanned and re-packed; SourceChangedError (naming the directory) when
        its content digest differs from the discovered one; the archive is stored, read back
        and verified; then registered in one write transaction. ``create=True``: StoreError
        if the name exists. A failure after the archive was stored raises
        :class:`PublicationError` whose ``prepared`` :meth:`retry` accepts.
        """
        name = check_name(name) if name is not None else default_name(task.id)
        workspace, fileset = check_name(workspace), check_name(fileset)
        prefix = check_prefix(prefix)
        limits = limits or Limits()
        key = f"{workspace}/{name}"
        existing = self.index.read(lambda txn: _latest_revision(txn, key))
        damaged, archive_workspace = False, workspace
        if existing is not None:
            if create:
                raise StoreError(key, NAME_EXISTS)
            if _same_task(existing, task):
                if self.filesets.intact(existing, limits):
                    return _result(workspace, name, existing, reused=True)
                # Repair in place: the same location and compression give the same address.
                damaged = True
                at = ArchiveRef.parse(existing.archive_ref)
                archive_workspace, fileset, prefix = at.workspace, at.fileset, at.prefix
                compression = existing.compression
        tree = scan_tree(task.source_dir, limits)
        pack, stored = self.filesets.store(
            tree,
            archive_workspace,
            fileset,
            prefix,
            compression,
            limits,
            task.content_digest,
        )
        if damaged and existing is not None and str(pack.address) != existing.address:
            raise StoreError(
                existing.archive_ref,
                f"the archive is damaged and re-packing gave another address ({pack.address})",
            )
        revision = TaskRevision(
            native_id=tree.layout.native_id,
            dir_name=tree.top,
            archive_ref=str(stored.ref),
            address=str(pack.address),
            content_digest=str(pack.content_digest),
            compression=compression,
            entries=pack.entries,
            payload_bytes=pack.payload_bytes,
            archive_bytes=pack.archive_bytes,
            metrics=task.metrics,
            views=task.views,
        ).sealed()
        prepared = PreparedTask(
            workspace=workspace,
            name=name,
            create=create,
            revision=revision,
            source_dir=str(task.source_dir),
        )
        result = self.retry(prepared)
        repaired = stored.repaired or (damaged and stored.written)
        return result.model_copy(update={"written": stored.written, "repaired": repaired})

    def retry(self, prepared: PreparedTask) -> PublishResult:
        """Register a prepared task (its archive already stored) in one write transaction.

        Raises :class:`PublicationError` carrying ``prepared`` on any failure (e.g. the name
        exists and ``prepared.create``, the archive file is missing, the index fails).
        """
        try:
            return self.index.write(lambda txn: self._register(txn, prepared))
        except PublicationError:
            raise
        except (StoreError, OSError, Exception) as error:
            key = f"{prepared.workspace}/{prepared.name}"
            raise PublicationError(key, f"not registered: {error}", prepared) from error

    def _register(self, txn: Txn, prepared: PreparedTask) -> PublishResult:
        revision = prepared.revision
        key = f"{prepared.workspace}/{prepared.name}"
        if not self.filesets.path_of(revision.archive_ref).is_file():
            raise StoreError(revision.archive_ref, "archive missing at registration")
        raw = txn.get("tasks", key)
        record = NamedRecord.model_validate(raw) if raw else None
        if record is not None:
            if prepared.create:
                raise StoreError(key, NAME_EXISTS)
            latest = TaskRevision.model_validate(txn.get("revisions", record.latest))
            if latest.content_digest == revision.content_digest and latest.same_scoring(
                revision.metrics, revision.views
            ):
                return _result(prepared.workspace, prepared.name, latest, reused=True)
        stored = txn.get("revisions", revision.digest)
        if stored is None:
            txn.put("revisions", revision.digest, revision.model_dump())
        else:
            revision = TaskRevision.model_validate(stored)
        entry = RevisionEntry(digest=revision.digest, created=now())
        if record is None:
            record = NamedRecord(workspace=prepared.workspace, name=prepared.name, history=[])
        record.history.append(entry)
        txn.put("tasks", key, record.model_dump())
        return _result(prepared.workspace, prepared.name, revision, reused=False)

    # lookups ----------------------------------------------------------------------------

    def revision(self, digest: str) -> TaskRevision:
        """The task revision of ``digest``; UnknownReferenceError if absent."""
        raw = self.index.read(lambda txn: txn.get("revisions", digest))
        if raw is None:
            raise UnknownReferenceError(digest, "no task revision with that digest")
        return TaskRevision.model_validate(raw)

    def resolve(self, ref: str) -> tuple[str, list[tuple[str, TaskRevision]]]:
        """Resolve a taskset reference (tried first) or a task reference.

        Returns ``(kind, [(task key, revision), ...])`` with kind ``"taskset"`` or ``"task"``.
        Raises UnknownReferenceError when neither exists, UsageError when malformed.
        """
        parsed = Reference.parse(ref)

        def body(txn: Txn) -> tuple[str, list[tuple[str, TaskRevision]]]:
            if txn.get("tasksets", parsed.key) is not None:
                revision = _pick(txn, "tasksets", "taskset_revisions", parsed)
                pinned = TasksetRevision.model_validate(revision)
                items = []
                for pin in pinned.tasks:
                    raw = txn.get("revisions", pin["revision"])
                    if raw is None:
                        raise StoreError(pin["task"], f"dangling pin {pin['revision']}")
                    items.append((pin["task"], TaskRevision.model_validate(raw)))
                return "taskset", items
            raw = _pick(txn, "tasks", "revisions", parsed)
            return "task", [(parsed.key, TaskRevision.model_validate(raw))]

        return self.index.read(body)

    # operations in other modules ----------------------------------------------------------

    def checkout(self, ref: str, dest: Path, progress: Progress = NO_PROGRESS) -> Any:
        """See :func:`casstore.store.checkout.checkout`."""
        from casstore.store.checkout import checkout

        return checkout(self, ref, Path(dest), progress)

    def fsck(self, progress: Progress = NO_PROGRESS, checks: Sequence[Any] = ()) -> Any:
        """See :func:`casstore.store.fsck.fsck`."""
        from casstore.store.fsck import fsck

        return fsck(self, progress, checks)

    def gc(self, dry_run: bool = False, min_age: float = 60.0) -> Any:
        """See :func:`casstore.store.fsck.gc`."""
        from casstore.store.fsck import gc

        return gc(self, dry_run=dry_run, min_age=min_age)


class Tasks:
    """Task names of a store: ``create``/``replace`` publish, ``get`` and ``list`` read."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, name: str, task: DiscoveredTask, **options: Any) -> PublishResult:
        """Publish ``task`` under a new ``name``; StoreError if it exists (see publish)."""
        return self._store.publish(task, name, create=True, **options)

    def replace(self, name: str, task: DiscoveredTask, **options: Any) -> PublishResult:
        """Publish ``task`` under ``name``, creating it or adding a revision (see publish)."""
        return self._store.publish(task, name, create=False, **options)

    def get(self, ref: str) -> tuple[NamedRecord, TaskRevision]:
        """The name record and the referenced (default latest) revision of a task reference.

        UnknownReferenceError if the name or the revision is unknown."""
        parsed = Reference.parse(ref)

        def body(txn: Txn) -> tuple[NamedRecord, TaskRevision]:
            revision = TaskRevision.model_validate(_pick(txn, "tasks", "revisions", parsed))
            return NamedRecord.model_validate(txn.get("tasks", parsed.key)), revision

        return self._store.index.read(body)

    def list(self, workspace: str | None = None) -> list[tuple[NamedRecord, TaskRevision]]:
        """Every task (optionally of one workspace) with its latest revision, sorted."""
        prefix = f"{check_name(workspace)}/" if workspace else ""

        def body(txn: Txn) -> list[tuple[NamedRecord, TaskRevision]]:
            rows = []
            for _, raw in txn.items("tasks", prefix):
                record = NamedRecord.model_validate(raw)
                revision = TaskRevision.model_validate(txn.get("revisions", record.latest))
                rows.append((record, revision))
            return rows

        return self._store.index.read(body)


class Tasksets:
    """Taskset names of a store: ``create``/``replace`` pin task revisions."""

    def __init__(self, store: Store) -> None:
        self._store = store

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
                revision = TaskRevision.model_validate(_pick(txn, "tasks", "revisions", ref))
                pins.append({"task": ref.key, "revision": revision.digest})
            revision = TasksetRevision(workspace=workspace, tasks=pins).sealed()
            raw = txn.get("tasksets", key)
            record = NamedRecord.model_validate(raw) if raw else None
            if record is not None:
                if create:
                    raise StoreError(key, "a taskset of that name exists (use taskset replace)")
                if record.latest == revision.digest:
                    return TasksetResult(id=key, revision=revision.digest, tasks=pins, reused=True)
            if txn.get("taskset_revisions", revision.digest) is None:
                txn.put("taskset_revisions", revision.digest, revision.model_dump())
            if record is None:
                record = NamedRecord(workspace=workspace, name=name, history=[])
            record.history.append(RevisionEntry(digest=revision.digest, created=now()))
            txn.put("tasksets", key, record.model_dump())
            return TasksetResult(id=key, revision=revision.digest, tasks=pins, reused=False)

        return self._store.index.write(body)

    def get(self, ref: str) -> tuple[NamedRecord, TasksetRevision]:
        """The name record and referenced revision of a taskset; UnknownReferenceError."""
        parsed = Reference.parse(ref)

        def body(txn: Txn) -> tuple[NamedRecord, TasksetRevision]:
            raw = _pick(txn, "tasksets", "taskset_revisions", parsed)
            record = NamedRecord.model_validate(txn.get("tasksets", parsed.key))
            return record, TasksetRevision.model_validate(raw)

        return self._store.index.read(body)

    def list(self, workspace: str | None = None) -> list[tuple[NamedRecord, TasksetRevision]]:
        """Every taskset (optionally of one workspace) with its latest revision, sorted."""
        prefix = f"{check_name(workspace)}/" if workspace else ""

        def body(txn: Txn) -> list[tuple[NamedRecord, TasksetRevision]]:
            rows = []
            for _, raw in txn.items("tasksets", prefix):
                record = NamedRecord.model_validate(raw)
                revision = txn.get("taskset_revisions", record.latest)
                rows.append((record, TasksetRevision.model_validate(revision)))
            return rows

        return self._store.index.read(body)


def _pick(txn: Txn, names_db: str, revisions_db: str, ref: Reference) -> dict[str, Any]:
    raw = txn.get(names_db, ref.key)
    kind = "task" if names_db == "tasks" else "taskset"
    if raw is None:
        raise UnknownReferenceError(str(ref), f"no {kind} of that name")
    record = NamedRecord.model_validate(raw)
    digest = ref.digest or record.latest
    if ref.digest is not None and not record.has(ref.digest):
        raise UnknownReferenceError(str(ref), f"no such revision of that {kind}")
    revision = txn.get(revisions_db, digest)
    if revision is None:
        raise StoreError(str(ref), f"dangling reference to {digest}")
    return revision


def _latest_revision(txn: Txn, key: str) -> TaskRevision | None:
    raw = txn.get("tasks", key)
    if raw is None:
        return None
    revision = txn.get("revisions", NamedRecord.model_validate(raw).latest)
    return None if revision is None else TaskRevision.model_validate(revision)


def _same_task(revision: TaskRevision, task: DiscoveredTask) -> bool:
    return revision.content_digest == task.content_digest and revision.same_scoring(
        task.metrics, task.views
    )


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


def archive_path(store: Store, revision: TaskRevision) -> Path:
    """The file of a revision's archive."""
    return store.filesets.path_of(ArchiveRef.parse(revision.archive_ref))
