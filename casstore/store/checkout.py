"""Checkout: a taskset (or task) reference → a dataset directory ``harbor run`` can use.

Every archive is read, its address and structure verified while it is extracted safely
(:func:`casstore.archive.read.extract_archive`), its content digest compared with the revision's,
and the task loaded with Harbor's own ``Task``. ``dest`` follows extraction's rule
(:class:`casstore.archive.destination.Destination`: missing, its parents made, or an empty
directory); the dataset is built in its staging directory and moved into place only when every
task passed; on failure nothing is left.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from casstore.archive.destination import Destination
from casstore.archive.read import extract_archive
from casstore.errors import CheckError, DigestMismatchError, StoreError, TaskFormatError
from casstore.progress import NO_PROGRESS, Progress
from casstore.store.fileset import in_archive
from casstore.store.handle import StoreHandle
from casstore.store.lookup import resolve
from casstore.store.records import TaskRevision

__all__ = ["CheckoutResult", "checkout", "lay_out", "load_harbor_task"]


class CheckoutResult(BaseModel):
    """A checkout: ``ref``, ``kind`` (taskset or task), ``dest`` and ``tasks`` =
    ``[{"task", "revision", "address", "dir"}]``."""

    ref: str
    kind: str
    dest: str
    tasks: list[dict[str, str]]


def load_harbor_task(path: Path) -> Any:
    """Load ``path`` with Harbor's ``Task``; TaskFormatError naming it if Harbor refuses."""
    from harbor.models.task.task import Task

    try:
        return Task(path)
    except Exception as error:
        raise TaskFormatError(str(path), f"Harbor cannot load the task: {error}") from error


def checkout(
    store: StoreHandle, ref: str, dest: Path, progress: Progress = NO_PROGRESS
) -> CheckoutResult:
    """Check out ``ref`` of ``store`` into ``dest`` (missing, its parents made, or an empty
    directory: :class:`~casstore.archive.destination.Destination`), laid out as
    ``dest/<task dir name>/...``.

    Raises UnknownReferenceError / UsageError for a bad reference or ``dest``; StoreError
    for a missing archive or two tasks with one directory name; the check errors
    (DigestMismatchError, CorruptArchiveError, ...) for an archive that fails verification.
    """
    kind, items = resolve(store, ref)
    located = [
        (task, revision, store.filesets.path_of(revision.archive_ref)) for task, revision in items
    ]
    return lay_out(ref, kind, located, dest, progress)


def lay_out(
    ref: str,
    kind: str,
    items: list[tuple[str, TaskRevision, Path]],
    dest: Path,
    progress: Progress = NO_PROGRESS,
) -> CheckoutResult:
    """The dataset of ``items`` (``(task key, revision, archive file)``) laid out in ``dest``
    as :func:`checkout` lays it out: each archive verified while it is extracted, its task
    loaded with Harbor, the whole moved into place only when every one passed."""
    dirs = [revision.dir_name for _, revision, _ in items]
    if len(set(dirs)) != len(dirs):
        raise StoreError(ref, "two tasks share a directory name; cannot lay them out")
    destination = Destination(dest)
    rows = []
    try:
        progress.start(len(items))
        for position, (task, revision, path) in enumerate(items):
            _extract_task(path, revision, destination.staging, position)
            rows.append(
                {
                    "task": task,
                    "revision": revision.digest,
                    "address": revision.address,
                    "dir": revision.dir_name,
                }
            )
            progress.advance(task)
        destination.commit(0o755)
    except BaseException:
        destination.abort()
        raise
    return CheckoutResult(ref=ref, kind=kind, dest=str(dest), tasks=rows)


def _extract_task(path: Path, revision: TaskRevision, staging: Path, position: int) -> None:
    """Extract the archive ``path`` of ``revision`` into ``staging/<dir name>`` (through
    ``staging/.extract-<position>``), check its content digest and load it with Harbor."""
    if not path.is_file():
        raise StoreError(str(path), f"archive missing ({revision.archive_ref})")
    scratch = staging / f".extract-{position}"
    try:
        result = extract_archive(path, scratch, revision.address)
    except CheckError as error:
        in_archive(error, path)
        raise
    if str(result.content_digest) != revision.content_digest:
        raise DigestMismatchError(
            str(path),
            f"content digest {result.content_digest} != {revision.content_digest}",
        )
    target = staging / revision.dir_name
    os.rename(scratch / result.top, target)
    scratch.rmdir()
    load_harbor_task(target)
