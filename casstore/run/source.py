"""``casstore run``'s SOURCE: the tasks to run, each a directory with its content digest.

A SOURCE that is a directory is a task or a dataset, discovered with every check
(:func:`casstore.archive.discover.discover`), the tasks run where they are. Otherwise it is a
taskset (or task) reference of the store: each pinned revision is checked out, verified as
``checkout`` verifies it (address, structure, content digest, Harbor's ``Task``), into the
dataset folder ``<jobs dir>/.casstore-tasks/<workspace>/<name>/<task dir>``, the same for
every run of the reference, so that a later run finds an unchanged task at the same path
(Harbor resumes a trial only when its task path is the same). A task already there is
discovered again and kept only when its content digest is the revision's; the dataset's
name (Harbor's ``source`` of the trials) is the taskset's.

:func:`plan_source` does every check of SOURCE and writes nothing in a job's place (a bad
SOURCE fails before a job directory is locked or made); :meth:`SourcePlan.tasks` then checks
out what a reference still lacks. A directory's discovery is remembered by
:mod:`casstore.run.sourcecache` (stat-based: a changed task is discovered again).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from casstore.errors import CheckError, UsageError
from casstore.run.sourcecache import CachedTask, cached_discovery
from casstore.store.core import Store
from casstore.store.lookup import resolve
from casstore.store.records import Reference, TaskRevision

__all__ = ["TASKS_FOLDER", "RunTask", "RunTasks", "SourcePlan", "plan_source", "resolve_source"]

TASKS_FOLDER = ".casstore-tasks"


@dataclass(frozen=True)
class RunTask:
    """One task to run: its native id (Harbor's task name), directory, content digest and
    the reward keys it declares (primary first; ``reward`` alone when it declares none)."""

    name: str
    path: Path
    content_digest: str
    metrics: tuple[str, ...] = ("reward",)


@dataclass(frozen=True)
class RunTasks:
    """The tasks of a SOURCE, by native id, and the dataset name their trials carry
    (Harbor's ``source``: the dataset directory's or the taskset's name; None for one task
    directory, which Harbor calls ``adhoc``)."""

    tasks: list[RunTask]
    dataset: str | None

    def digests(self) -> dict[str, str]:
        """Native id → content digest."""
        return {task.name: task.content_digest for task in self.tasks}


@dataclass
class SourcePlan:
    """A checked SOURCE: its tasks (:meth:`tasks`), checking out first what a reference's
    revisions lack (``_store``, ``_source``, ``_root``: None for a directory)."""

    _tasks: list[RunTask]
    dataset: str | None
    _store: Store | None = field(default=None, repr=False)
    _source: str = ""
    _root: Path | None = None
    _revisions: list[TaskRevision] = field(default_factory=list)
    _pending: list[Callable[[], None]] = field(default_factory=list, repr=False)
    """The discovery cache's writes, made by :meth:`tasks` (once every check passed)."""

    def tasks_declared(self) -> list[RunTask]:
        """The tasks as planned (a reference's not checked out yet): names, digests, keys."""
        return list(self._tasks)

    def tasks(self) -> RunTasks:
        """The tasks of the SOURCE, sorted by native id (a reference's revisions checked out
        into their places first, a place holding another content removed; a directory's
        discovery recorded in the cache)."""
        while self._pending:
            self._pending.pop()()
        if self._store is not None and self._root is not None:
            root = self._root
            missing = {r.dir_name for r in self._revisions if not _kept(_place(root, r))}
            if missing:
                _check_out(self._store, self._source, root, missing)
        return RunTasks(sorted(self._tasks, key=lambda t: t.name), self.dataset)


def plan_source(source: str, store: Store | None, jobs_dir: Path) -> SourcePlan:
    """Check ``source`` (module docstring). UsageError when it is neither a directory nor a
    reference a store holds (``store`` None: no store to look in); a directory's discovery
    errors."""
    if not source:  # Path("") is ".": an unset variable would run the current directory
        raise UsageError("SOURCE", "empty: give a task or dataset directory or a reference")
    path = Path(source)
    if path.is_dir():
        _check_jobs_outside(path, jobs_dir)
        pending: list[Callable[[], None]] = []
        found, dataset = cached_discovery(path, jobs_dir, lambda: _discover(path), pending)
        tasks = [RunTask(t.name, Path(t.path), t.content_digest, tuple(t.metrics)) for t in found]
        return SourcePlan(tasks, dataset, _pending=pending)
    neither = UsageError(source, "neither a task or dataset directory nor a stored reference")
    if store is None or path.exists():
        raise neither
    try:
        parsed = Reference.parse(source)
    except UsageError:
        if "#" in source:  # a reference with a malformed digest: its own rule says more
            raise
        raise neither from None  # "./typo" is a path, not the workspace "."
    _, items = resolve(store, source)
    root = jobs_dir / TASKS_FOLDER / parsed.workspace / parsed.name
    tasks = [
        RunTask(r.native_id, _place(root, r)[0], r.content_digest, tuple(r.metrics))
        for _, r in items
    ]
    return SourcePlan(tasks, parsed.name, store, source, root, [r for _, r in items])


def _check_jobs_outside(source: Path, jobs_dir: Path) -> None:
    """UsageError naming ``--jobs-dir`` when it is the directory ``source`` or inside it: its
    jobs would be discovered with the tasks (a dataset's next run refuses ``jobs`` as a
    malformed task, a task's content digest changes with every run)."""
    real, jobs = source.resolve(), jobs_dir.resolve()
    if jobs == real or real in jobs.parents:
        raise UsageError(
            "--jobs-dir",
            f"{jobs} is inside SOURCE {real}: its jobs would be discovered as tasks; "
            "choose a folder outside it",
        )


def resolve_source(source: str, store: Store | None, jobs_dir: Path) -> RunTasks:
    """The tasks of ``source``: :func:`plan_source`, then :meth:`SourcePlan.tasks`."""
    return plan_source(source, store, jobs_dir).tasks()


def _discover(path: Path) -> tuple[list[CachedTask], str | None, bool]:
    """Discover the directory ``path`` with every check: its tasks, its dataset name (None
    for one task directory) and whether no warning was given."""
    from casstore.archive.discover import discover  # here: a cache hit needs none of it

    found = discover(path)
    tasks = [
        CachedTask(t.id, os.fspath(t.source_dir), t.content_digest, list(t.metrics)) for t in found
    ]
    dataset = None if (path / "task.toml").exists() else path.resolve().name
    return tasks, dataset, not found.warnings


def _place(root: Path, revision: TaskRevision) -> tuple[Path, str]:
    """Where a revision's task lives: ``(path, content digest)``."""
    return root / revision.dir_name, revision.content_digest


def _kept(place: tuple[Path, str]) -> bool:
    """Whether the task at ``place`` is there with its content digest (else it is removed)."""
    from casstore.archive.discover import discover_task

    path, digest = place
    if not path.is_dir():
        return False
    try:
        if discover_task(path).content_digest == digest:
            return True
    except CheckError:
        pass
    shutil.rmtree(path, ignore_errors=True)
    return False


def _check_out(store: Store, ref: str, root: Path, wanted: set[str]) -> None:
    """Check ``ref`` out (every archive verified) and move the task directories ``wanted``
    into their places under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".checkout-", dir=root.parent))
    try:
        result = store.checkout(ref, scratch / "dataset")
        by_dir = {row["dir"]: row for row in result.tasks}
        for _, revision in resolve(store, ref)[1]:
            if revision.dir_name not in wanted or revision.dir_name not in by_dir:
                continue
            target = _place(root, revision)[0]
            if not target.exists():
                os.rename(scratch / "dataset" / revision.dir_name, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
