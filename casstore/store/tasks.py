"""Task names: ``store.tasks.create``/``replace`` publish a task, ``get`` and ``list`` read
the names and their revisions."""

from __future__ import annotations

from typing import Any

from casstore.archive.discover import DiscoveredTask
from casstore.store.handle import StoreHandle
from casstore.store.lookup import Names
from casstore.store.publish import PublishResult, publish
from casstore.store.records import TaskRevision

__all__ = ["Tasks"]


class Tasks(Names[TaskRevision]):
    """Task names of a store: ``create``/``replace`` publish, ``get`` and ``list`` read."""

    def __init__(self, store: StoreHandle) -> None:
        super().__init__(store, "tasks", "revisions", TaskRevision)

    def create(self, name: str, task: DiscoveredTask, **options: Any) -> PublishResult:
        """Publish ``task`` under a new ``name``; StoreError if it exists (see publish)."""
        return publish(self._store, task, name, create=True, **options)

    def replace(self, name: str, task: DiscoveredTask, **options: Any) -> PublishResult:
        """Publish ``task`` under ``name``, creating it or adding a revision (see publish)."""
        return publish(self._store, task, name, create=False, **options)
