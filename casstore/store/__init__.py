"""The store (README, §4 Store): an LMDB index and filesets of immutable archives.

``Store(root)`` is the entry point: ``publish``/``retry``, ``tasks`` and ``tasksets``
(``create``/``replace``/``get``/``list``), ``resolve``, ``checkout``, ``fsck`` and ``gc``.
"""

from casstore.progress import Progress
from casstore.store.checkout import CheckoutResult, load_harbor_task
from casstore.store.core import Store
from casstore.store.fileset import DEFAULT_FILESET, ArchiveRef
from casstore.store.fsck import FsckReport
from casstore.store.gc import GcReport
from casstore.store.index import SCHEMA_VERSION, Index
from casstore.store.publish import PreparedTask, PublishResult
from casstore.store.records import DEFAULT_WORKSPACE, Reference, TaskRevision, TasksetRevision
from casstore.store.tasksets import TasksetResult

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
