"""The store: an LMDB index plus filesets, with tasks, tasksets and publication (SPEC §4).

``Store(root)`` opens (creating if needed; ``create=False``: an existing store only)
``root/index`` and ``root/filesets``. Task names
and taskset names live in a workspace (default ``default``); their references are
``workspace/name`` (latest revision) or ``workspace/name#sha256:<hex>`` (one revision).

:class:`Store` is the facade: every operation lives in a module of its own (publish,
tasks, tasksets, lookup, checkout, fsck, gc) and takes the index and the filesets it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from casstore.archive.compress import Compression
from casstore.archive.discover import DiscoveredTask
from casstore.archive.limits import Limits
from casstore.errors import UsageError, is_text, printable
from casstore.progress import NO_PROGRESS, Progress
from casstore.store import checkout, fsck, gc, lookup, publish
from casstore.store.checkout import CheckoutResult
from casstore.store.fileset import DEFAULT_FILESET, Filesets
from casstore.store.fsck import Check, FsckReport
from casstore.store.gc import GcReport
from casstore.store.index import DEFAULT_MAP_SIZE, Index
from casstore.store.publish import PreparedTask, PublishResult
from casstore.store.records import DEFAULT_WORKSPACE, TaskRevision
from casstore.store.tasks import Tasks
from casstore.store.tasksets import Tasksets

__all__ = ["NO_STORE", "Store", "is_store"]

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
    ``retry`` write archives; ``resolve``, ``revision``, ``checkout``, ``fsck`` and ``gc``
    run the operations of their modules on this store.
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
        self.tasks = Tasks(self.index, self.filesets)
        self.tasksets = Tasksets(self.index)

    def close(self) -> None:
        """Close the index."""
        self.index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        """See :func:`casstore.store.publish.publish`."""
        return publish.publish(
            self.index,
            self.filesets,
            task,
            name,
            workspace=workspace,
            fileset=fileset,
            prefix=prefix,
            compression=compression,
            create=create,
            limits=limits,
        )

    def retry(self, prepared: PreparedTask) -> PublishResult:
        """See :func:`casstore.store.publish.retry`."""
        return publish.retry(self.index, self.filesets, prepared)

    def revision(self, digest: str) -> TaskRevision:
        """See :func:`casstore.store.lookup.revision`."""
        return lookup.revision(self.index, digest)

    def resolve(self, ref: str) -> tuple[str, list[tuple[str, TaskRevision]]]:
        """See :func:`casstore.store.lookup.resolve`."""
        return lookup.resolve(self.index, ref)

    def checkout(self, ref: str, dest: Path, progress: Progress = NO_PROGRESS) -> CheckoutResult:
        """See :func:`casstore.store.checkout.checkout`."""
        return checkout.checkout(self.index, self.filesets, ref, Path(dest), progress)

    def fsck(self, progress: Progress = NO_PROGRESS, checks: Sequence[Check] = ()) -> FsckReport:
        """See :func:`casstore.store.fsck.fsck`."""
        return fsck.fsck(self.index, self.filesets, progress, checks)

    def gc(self, dry_run: bool = False, min_age: float = 60.0) -> GcReport:
        """See :func:`casstore.store.gc.gc`."""
        return gc.gc(self.index, self.filesets, dry_run=dry_run, min_age=min_age)
