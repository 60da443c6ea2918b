"""What an operation needs of a store: :class:`StoreHandle`, its index and its filesets.

Every operation (publish, lookup, checkout, fsck, gc) is a function whose first argument is
a store handle; :class:`casstore.store.core.Store` is one, and binds them as its methods.
"""

from __future__ import annotations

from typing import Protocol

from casstore.store.fileset import Filesets
from casstore.store.index import Index

__all__ = ["StoreHandle"]


class StoreHandle(Protocol):
    """A store as its operations see it: the ``index`` (names, revisions, imported jobs)
    and the ``filesets`` (the archive files)."""

    index: Index
    filesets: Filesets
