"""The store: an LMDB index plus filesets, with tasks, tasksets and publication (README, §4 Store).

``Store(root)`` opens (creating if needed; ``create=False``: an existing store only)
``root/index`` and ``root/filesets``. Task names
and taskset names live in a workspace (default ``default``); their references are
``workspace/name`` (latest revision) or ``workspace/name#sha256:<hex>`` (one revision).

:class:`Store` is the facade: every operation lives in a module of its own (publish,
tasks, tasksets, lookup, checkout, fsck, gc) and takes the store as a
:class:`~casstore.store.handle.StoreHandle` (its index and filesets).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from casstore.errors import UsageError, is_text, printable
from casstore.inputs import file_kind
from casstore.lazy import DeferredMethod
from casstore.store.fileset import Filesets
from casstore.store.index import DEFAULT_MAP_SIZE, Index
from casstore.store.lookup import names_holding, resolve, revision, revision_of
from casstore.store.tasks import Tasks
from casstore.store.tasksets import Tasksets

if TYPE_CHECKING:
    from casstore.store.checkout import checkout
    from casstore.store.fsck import fsck
    from casstore.store.gc import gc
    from casstore.store.publish import publish, retry

__all__ = [
    "LAYOUT",
    "NO_STORE",
    "Store",
    "check_creatable",
    "check_layout",
    "check_store",
    "is_store",
]

NO_STORE = "no casstore store here (publish something first, or pass --store DIR)"
LAYOUT = (
    ("", True),
    ("index", True),
    ("filesets", True),
    ("index/data.mdb", False),
    ("index/lock.mdb", False),
)
"""The entries of a store directory (relative paths, ``""`` the directory itself), each with
whether it is a directory (else a regular file)."""


def is_store(root: Path) -> bool:
    """True when ``root`` holds a store's index (what ``Store(root, create=False)`` opens)."""
    return (root / "index" / "data.mdb").is_file()


def check_layout(root: Path) -> None:
    """UsageError naming ``root`` when an entry of :data:`LAYOUT` exists as another kind of
    file (followed when a symbolic link): ``not a casstore store (DIR/index is a regular file,
    not a directory)``. casstore never makes such a directory and cannot tell a foreign one
    from a damaged one, so every command refuses it alike (exit 2) before anything is opened
    or written; a missing entry is no error here (a new store creates them)."""
    for name, directory in LAYOUT:
        path = root / name if name else root
        try:
            mode = os.stat(path).st_mode
        except OSError:  # missing (or unreadable: opening says why)
            continue
        if (stat.S_ISDIR if directory else stat.S_ISREG)(mode):
            continue
        wanted = "a directory" if directory else "a regular file"
        rule = f"not a casstore store ({path} is {file_kind(mode)}, not {wanted})"
        raise UsageError(str(root), rule)


def check_creatable(root: Path) -> None:
    """UsageError naming ``root`` unless a new store may be made there: a missing or an empty
    directory (or one holding only the empty ``index``/``filesets`` directories an interrupted
    creation left). Anything else, e.g. archives without their index (``index/data.mdb``
    deleted), is refused rather than given a new, empty index beside them."""
    try:
        entries = sorted(os.listdir(root))
    except FileNotFoundError:
        return
    for entry in entries:
        path = root / entry
        if entry in ("index", "filesets") and path.is_dir() and not os.listdir(path):
            continue
        rule = (
            f"not a casstore store (no index/data.mdb) and not empty ({path} exists): "
            "a store is created only in a missing or an empty directory"
        )
        raise UsageError(str(root), rule)


class Store:
    """A store directory (see the module docstring). Use as a context manager.

    ``create=False`` opens an existing store only: :class:`UsageError` (naming ``root``) when
    ``root`` holds no index, and nothing is created. Read-only commands open stores that way;
    only publication creates one.

    ``tasks`` and ``tasksets`` give ``create``/``replace``/``get``/``list``; ``publish`` and
    ``retry`` write archives; ``resolve``, ``revision`` (a task revision by digest or unique
    prefix), ``revision_of`` (a task or taskset revision so), ``names_holding``,
    ``checkout``, ``fsck`` and ``gc`` run the operations of their modules on this store.
    ``fsck`` checks the archives and references only: ``casstore.fsck(store)`` checks the
    imported jobs too.
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
        check_layout(self.root)
        if not create and not is_store(self.root):
            raise UsageError(str(root), NO_STORE)
        if not is_store(self.root):
            check_creatable(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.index = Index(self.root / "index", map_size, create=create)
        self.filesets = Filesets(self.root / "filesets")

    @property
    def tasks(self) -> Tasks:
        """The task names: ``create``/``replace`` publish, ``get``/``list`` read."""
        return Tasks(self)

    @property
    def tasksets(self) -> Tasksets:
        """The taskset names: ``create``/``replace`` pin task revisions, ``get``/``list`` read."""
        return Tasksets(self)

    def close(self) -> None:
        """Close the index (idempotent); using the store afterwards is StoreError "the store
        is closed". Dropping the last reference to a store closes it too."""
        self.index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The operations: functions of their modules taking the store first, bound as methods
    # (their signatures and docstrings are the methods'); the writing and checking ones are
    # imported on first use, for start-up time (README, "Start-up"): ``ls`` needs none.
    revision = revision
    revision_of = revision_of
    names_holding = names_holding
    resolve = resolve
    if TYPE_CHECKING:
        publish = publish
        retry = retry
        checkout = checkout
        fsck = fsck
        gc = gc
    else:
        publish = DeferredMethod("casstore.store.publish", "publish")
        retry = DeferredMethod("casstore.store.publish", "retry")
        checkout = DeferredMethod("casstore.store.checkout", "checkout")
        fsck = DeferredMethod("casstore.store.fsck", "fsck")
        gc = DeferredMethod("casstore.store.gc", "gc")


def check_store(value: object, argument: str = "store") -> Store:
    """``value`` when it is a :class:`Store`; UsageError naming ``argument`` otherwise (a path
    is not opened behind the caller's back: who opens a store closes it)."""
    if isinstance(value, Store):
        return value
    if isinstance(value, str | os.PathLike):
        rule = f"expected a Store, not the path {str(value)!r}: open it with casstore.open_store"
    else:
        rule = f"expected a Store (casstore.open_store), not {type(value).__name__}"
    raise UsageError(argument, rule)
