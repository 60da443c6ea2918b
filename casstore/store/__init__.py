"""The store (README, §4 Store): an LMDB index and filesets of immutable archives.

``Store(root)`` is the entry point: ``publish``/``retry``, ``tasks`` and ``tasksets``
(``create``/``replace``/``get``/``list``), ``resolve``, ``checkout``, ``fsck`` and ``gc``.
Names are loaded on first use, for start-up time (README, "Start-up"): ``ls`` needs neither
the packer nor the reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from casstore.lazy import load_name

if TYPE_CHECKING:
    from casstore.progress import Progress
    from casstore.store.checkout import CheckoutResult, load_harbor_task
    from casstore.store.core import Store
    from casstore.store.fileset import DEFAULT_FILESET, ArchiveRef
    from casstore.store.fsck import FsckReport
    from casstore.store.gc import GcReport
    from casstore.store.index import SCHEMA_VERSION, Index
    from casstore.store.publish import PreparedTask, PublishResult
    from casstore.store.records import (
        DEFAULT_WORKSPACE,
        Reference,
        TaskRevision,
        TasksetRevision,
    )
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

_HOMES = {
    "Progress": "casstore.progress",
    "CheckoutResult": "casstore.store.checkout",
    "load_harbor_task": "casstore.store.checkout",
    "Store": "casstore.store.core",
    "DEFAULT_FILESET": "casstore.store.fileset",
    "ArchiveRef": "casstore.store.fileset",
    "FsckReport": "casstore.store.fsck",
    "GcReport": "casstore.store.gc",
    "SCHEMA_VERSION": "casstore.store.index",
    "Index": "casstore.store.index",
    "PreparedTask": "casstore.store.publish",
    "PublishResult": "casstore.store.publish",
    "DEFAULT_WORKSPACE": "casstore.store.records",
    "Reference": "casstore.store.records",
    "TaskRevision": "casstore.store.records",
    "TasksetRevision": "casstore.store.records",
    "TasksetResult": "casstore.store.tasksets",
}


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, imported from its module on first use."""
    return load_name(globals(), _HOMES, name)


def __dir__() -> list[str]:
    """The public names (``__all__``)."""
    return sorted(__all__)
