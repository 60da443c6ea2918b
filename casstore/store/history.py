"""``log``: the revision history of a task or taskset name, newest first, with what changed
from each revision to the next (README, "Store management").

A name's history lists each revision it pointed to and when it became latest. A task's entry
says whether the archive's address, its content digest and its scoring definition (metrics,
views) changed from the entry before, and which files were added, removed or changed: the
member lists of the two archives, each read once from the store (members compared by path
below the top directory, kind, mode, size, link target and the BLAKE3 of their data; a mode
counts, as it does in the address). Archives with one content digest hold the same files and
are not read. A taskset's entry says which pins were added, removed or moved to another
revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from casstore.archive.compress import detect
from casstore.archive.limits import Limits
from casstore.archive.pipeline import decoded_stream
from casstore.archive.tarformat import Kind as EntryKind
from casstore.archive.tarstream import read_members
from casstore.digest import new_hasher
from casstore.errors import CasstoreError, CheckError
from casstore.inputs import open_binary
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.lookup import read_name, read_revision
from casstore.store.records import TaskRevision, TasksetRevision
from casstore.store.registrations import KINDS, Kind, name_key, registered_kind

__all__ = ["LogEntry", "NameLog", "log"]

Member = tuple[str, int, int, str, str]  # kind, mode, size, link target, data digest


class LogEntry(BaseModel):
    """One entry of a name's history: ``revision`` (digest), ``created`` (when it became
    latest) and ``changes`` from the entry before it (None for the first): for a task
    ``address``, ``content_digest`` (``[before, after]`` when changed), ``scoring`` (whether
    metrics or views changed), ``files`` (``added``, ``removed``, ``changed`` paths; None when
    an archive could not be read, then ``unread`` says why); for a taskset ``added`` and
    ``removed`` (``{task: revision}``) and ``changed`` (``{task: [before, after]}``)."""

    revision: str
    created: str
    changes: dict[str, Any] | None


class NameLog(BaseModel):
    """``casstore log NAME``: ``kind``, ``ref`` and ``entries``, newest first."""

    kind: Kind
    ref: str
    entries: list[LogEntry]


def log(store: StoreHandle, name: str, kind: Kind | None = None) -> NameLog:
    """The history of the taskset (tried first, as ``show`` does) or task ``name``
    (``[workspace/]name``; ``kind`` to choose), newest first (see the module docstring).
    UnknownReferenceError when there is no such name; CorruptStoreError when a revision of
    its history is missing or damaged."""
    ref = name_key(name, "log NAME")

    def body(txn: Txn) -> tuple[Kind, list[tuple[str, Any]]]:
        found = registered_kind(txn, ref, kind, reading=True)
        db = KINDS[found]
        record = read_name(txn, db, ref.key)
        assert record is not None
        revisions_db = "revisions" if found == "task" else "taskset_revisions"
        named_by = f"{db}/{ref.key}"
        return found, [
            (entry.created, read_revision(txn, revisions_db, entry.digest, named_by))
            for entry in record.history
        ]

    found, history = store.index.read(body)
    members: dict[str, dict[str, Member] | str] = {}
    entries = []
    for index, (created, revision) in enumerate(history):
        before = history[index - 1][1] if index else None
        if before is None:
            changes = None
        elif isinstance(revision, TaskRevision):
            changes = _task_changes(store, before, revision, members)
        else:
            changes = _pin_changes(before, revision)
        entries.append(LogEntry(revision=revision.digest, created=created, changes=changes))
    return NameLog(kind=found, ref=ref.key, entries=entries[::-1])


def _task_changes(
    store: StoreHandle,
    before: TaskRevision,
    after: TaskRevision,
    members: dict[str, dict[str, Member] | str],
) -> dict[str, Any]:
    """What changed from the task revision ``before`` to ``after`` (``members``: the member
    lists read so far, by address, or why one could not be read)."""
    changes: dict[str, Any] = {
        field: [getattr(before, field), getattr(after, field)]
        for field in ("address", "content_digest")
        if getattr(before, field) != getattr(after, field)
    }
    changes["scoring"] = not after.same_scoring(before.metrics, before.views)
    if before.content_digest == after.content_digest:
        changes["files"] = {"added": [], "removed": [], "changed": []}
        return changes
    lists = [_members(store, revision, members) for revision in (before, after)]
    unread = [found for found in lists if isinstance(found, str)]
    if unread:
        return changes | {"files": None, "unread": unread[0]}
    old, new = lists
    assert isinstance(old, dict) and isinstance(new, dict)
    changes["files"] = {
        "added": sorted(new.keys() - old.keys()),
        "removed": sorted(old.keys() - new.keys()),
        "changed": sorted(path for path in old.keys() & new.keys() if old[path] != new[path]),
    }
    return changes


def _pin_changes(before: TasksetRevision, after: TasksetRevision) -> dict[str, Any]:
    """The pins added, removed and moved from the taskset revision ``before`` to ``after``."""
    old = {pin["task"]: pin["revision"] for pin in before.tasks}
    new = {pin["task"]: pin["revision"] for pin in after.tasks}
    return {
        "added": {task: new[task] for task in sorted(new.keys() - old.keys())},
        "removed": {task: old[task] for task in sorted(old.keys() - new.keys())},
        "changed": {
            task: [old[task], new[task]]
            for task in sorted(old.keys() & new.keys())
            if old[task] != new[task]
        },
    }


def _members(
    store: StoreHandle, revision: TaskRevision, cache: dict[str, dict[str, Member] | str]
) -> dict[str, Member] | str:
    """The members of ``revision``'s archive (path below the top directory → kind, mode,
    size, link target, BLAKE3 of the data), read once per address; the reason as text when
    the file cannot be read or does not hash to the address."""
    if revision.address not in cache:
        path = store.filesets.path_of(revision.archive_ref)
        try:
            cache[revision.address] = _read_members(path, revision.address)
        except (CasstoreError, OSError) as error:  # damaged, or missing (cannot open)
            cache[revision.address] = f"{path}: {getattr(error, 'rule', None) or error}"
    return cache[revision.address]


class _Hashed:
    """A member's data sink: the BLAKE3 of the data, filed under its path when closed."""

    def __init__(self, found: dict[str, Member], path: str, entry: tuple[str, int, int, str]):
        self._found, self._path, self._entry = found, path, entry
        self._hasher = new_hasher("blake3")

    def write(self, data: memoryview) -> None:
        self._hasher.update(data)

    def close(self) -> None:
        self._found[self._path] = (*self._entry, self._hasher.digest().hex)


def _read_members(path: Path, address: str) -> dict[str, Member]:
    """The members of the archive at ``path``, which must hash to ``address`` (CheckError
    otherwise); bounded as every read is (:class:`Limits`)."""
    found: dict[str, Member] = {}
    limits = Limits()

    def visit(
        name: str, kind: EntryKind, mode: int, size: int, link: str, canonical: bool
    ) -> _Hashed | None:
        below = name.partition("/")[2]
        if not below:  # the top directory (named after the task directory)
            return None
        found[below] = (kind, mode, size, link, "")
        return _Hashed(found, below, (kind, mode, size, link))

    with open_binary(path, "cannot open archive") as handle:
        compression = detect(handle.read(512))
        handle.seek(0)
        with decoded_stream(handle, compression, limits) as (chunks, source):
            read_members(chunks, limits, visit)
    if str(source.address()) != address:
        raise CheckError(str(path), f"address is {source.address()}, expected {address}")
    return found
