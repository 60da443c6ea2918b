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
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from casstore.archive.discover import discover, discover_task
from casstore.errors import CheckError, UsageError
from casstore.store.core import Store
from casstore.store.lookup import resolve
from casstore.store.records import Reference, TaskRevision

__all__ = ["TASKS_FOLDER", "RunTask", "RunTasks", "resolve_source"]

TASKS_FOLDER = ".casstore-tasks"


@dataclass(frozen=True)
class RunTask:
    """One task to run: its native id (Harbor's task name), directory and content digest."""

    name: str
    path: Path
    content_digest: str


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


def resolve_source(source: str, store: Store | None, jobs_dir: Path) -> RunTasks:
    """The tasks of ``source`` (module docstring). UsageError when it is neither a directory
    nor a reference a store holds (``store`` None: no store to look in)."""
    path = Path(source)
    if path.is_dir():
        found = discover(path)
        tasks = [RunTask(t.id, t.source_dir, t.content_digest) for t in found]
        dataset = None if (path / "task.toml").exists() else path.resolve().name
        return RunTasks(sorted(tasks, key=lambda t: t.name), dataset)
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
    root, name = jobs_dir / TASKS_FOLDER / parsed.workspace / parsed.name, parsed.name
    missing = [revision for _, revision in items if not _kept(_place(root, revision))]
    if missing:
        _check_out(store, source, root, {revision.dir_name for revision in missing})
    tasks = [
        RunTask(revision.native_id, _place(root, revision)[0], revision.content_digest)
        for _, revision in items
    ]
    return RunTasks(sorted(tasks, key=lambda t: t.name), name)


def _place(root: Path, revision: TaskRevision) -> tuple[Path, str]:
    """Where a revision's task lives: ``(path, content digest)``."""
    return root / revision.dir_name, revision.content_digest


def _kept(place: tuple[Path, str]) -> bool:
    """Whether the task at ``place`` is there with its content digest (else it is removed)."""
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
