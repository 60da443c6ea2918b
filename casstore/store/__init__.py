"""The store (SPEC section 4): an LMDB index and filesets of immutable archives.

``Store(root)`` is the entry point: ``publish``/``retry``, ``tasks`` and ``tasksets``
(``create``/``replace``/``get``/``list``), ``resolve``, ``checkout``, ``fsck`` and ``gc``.
"""

from casstore.progress import Progress
from casstore.store.checkout import CheckoutResult, load_harbor_task
from casstore.store.core import (
    DEFAULT_FILESET,
    DEFAULT_WORKSPACE,
    PreparedTask,
    PublishResult,
    Store,
    TasksetResult,
)
from casstore.store.fileset import ArchiveRef
from casstore.store.fsck import FsckReport, GcReport
from casstore.store.index import SCHEMA_VERSION, Index
from casstore.store.records import Reference, TaskRevision, TasksetRevision

__all__ = [
    "DEFAULT_FILESET",
    "DEFAULT_WORKSPACE",
    "SCHEMA_VERSION",
    "ArchiveRef",
    "CheckoutResult",
    "FsckReport",
    "GcReport",
    "Index",
    "PreparedTask",
    "Progress",
    "PublishResult",
    "Reference",
    "Store",
    "TaskRevision",
    "TasksetResult",
    "TasksetRevision",
    "load_harbor_task",
]
