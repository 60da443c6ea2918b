"""Task names: ``store.tasks.create``/``replace`` publish a task, ``get`` and ``list`` read
the names and their revisions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from casstore.store.handle import StoreHandle
from casstore.store.lookup import Names
from casstore.store.records import TaskRevision

if TYPE_CHECKING:
    from casstore.archive.discover import DiscoveredTask
    from casstore.store.publish import PublishResult

__all__ = ["Tasks"]


class Tasks(Names[TaskRevision]):
    """Task names of a store: ``create``/``replace`` publish, ``get`` and ``list`` read."""

    def __init__(self, store: StoreHandle) -> None:
        super().__init__(store, "tasks", "revisions", TaskRevision)

    def create(self, name: str, task: DiscoveredTask, **options: Any) -> PublishResult:
        """Publish ``task`` under a new ``name``; StoreError if it exists (see publish)."""
        from casstore.store.publish import publish  # here: for start-up time (``ls``)

        return publish(self._store, task, name, create=True, **options)

    def replace(self, name: str, task: DiscoveredTask, **options: Any) -> PublishResult:
        """Publish ``task`` under ``name``, creating it or adding a revision (see publish)."""
        from casstore.store.publish import publish

        return publish(self._store, task, name, create=False, **options)
