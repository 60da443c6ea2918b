"""fsck: re-verify a store, report only (never deletes; :mod:`casstore.store.gc` removes).

Problems: ``corrupt_index`` (the index file's pages are damaged, :func:`check_pages`: then
nothing is read through LMDB; or a database's walk fails: an LMDB error, keys out of order, not
as many entries as LMDB counts), ``corrupt_record`` (a name or revision record that does not
decode, does not name its key or does not hash to its digest), ``missing_archive`` (a
revision's file is absent), ``corrupt_archive`` (fails verification: address, structure or
content digest), ``dangling_reference`` (a name's history or a taskset pin names a revision
that does not exist); of imported jobs (:mod:`casstore.trials.check`, passed in as a check):
``corrupt_job``, ``corrupt_trial``, ``corrupt_reward_table`` (damaged, failing a CRC-32, or not
one row per trial record), ``missing_evidence`` and ``corrupt_evidence`` (a pack not hashing to
its digest, or without the trial's frame), and the ``orphan_*`` kinds of orphaned job data
(:mod:`casstore.trials.orphans`). Information: ``orphans`` (archive files no revision
references), ``unreachable`` (revisions no name reaches, after ``rm``: ``gc`` removes them)
and ``temporaries`` (leftovers of interrupted writes, with sizes and ages).

Each part runs in a read transaction of its own: LMDB ends a transaction that met a damaged
page, and the rest is still checked. fsck never raises for damage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from casstore.archive.read import verify_archive
from casstore.errors import CheckError, CorruptStoreError
from casstore.progress import NO_PROGRESS, Progress
from casstore.store.fileset import Filesets, Temporary, in_archive
from casstore.store.gc import unreachable
from casstore.store.handle import StoreHandle
from casstore.store.index import DATABASES, Index, Txn
from casstore.store.lookup import stored_name, stored_revision
from casstore.store.pages import check_pages
from casstore.store.records import TaskRevision
from casstore.store.values import decode, decode_value

__all__ = ["Check", "Checked", "FsckReport", "Problem", "fsck"]


class Problem(NamedTuple):
    """One problem a check found: ``kind``, ``ref`` (what it is about, e.g. a job id or
    ``<job id>/<trial name>``), ``message``."""

    kind: str
    ref: str
    message: str


@dataclass
class Checked:
    """What one check of :func:`fsck` found: ``counts`` (what it checked, by name: reported
    beside the store's own counts) and ``problems``."""

    counts: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


Check = Callable[[Txn], Checked]
"""A check of the index run by :func:`fsck` in its read transaction (e.g.
:func:`casstore.trials.check.check_jobs`); it never raises for damaged data."""


class FsckReport(BaseModel):
    """``ok`` (no problem), counts (``tasks``, ``tasksets``, ``revisions``, ``archives``, then
    each check's own, e.g. ``jobs`` and ``trials``), ``problems`` = ``[{"kind", "ref", "path",
    "message"}]``, ``orphans`` (archive references), ``unreachable`` (``db/digest`` of the
    revisions no name reaches) and ``temporaries`` (leftover temporary files: ``{"path",
    "bytes", "age_seconds"}``), the last three information only."""

    model_config = ConfigDict(extra="allow")  # the checks' counts

    ok: bool
    tasks: int
    tasksets: int
    revisions: int
    archives: int
    problems: list[dict[str, str | None]]
    orphans: list[str]
    temporaries: list[Temporary]
    unreachable: list[str] = []

    def count(self, name: str) -> int:
        """A check's count (``"jobs"``, ``"trials"``), 0 when no check counted it."""
        return int((self.model_extra or {}).get(name, 0))


_NAMES = (("tasks", "revisions"), ("tasksets", "taskset_revisions"))
_RECORDS = ("tasks", "revisions", "tasksets", "taskset_revisions")
Snapshot = dict[str, dict[str, Any]]  # db -> key -> the record, checked
Found = dict[str, str | None]  # a problem as reported: kind, ref, path, message


def _snapshot(txn: Txn) -> tuple[Snapshot, list[Found]]:
    """The name and revision records (:data:`_RECORDS`), each checked as every read checks
    it (:func:`stored_name`, :func:`stored_revision`); a damaged one left out, as a
    ``corrupt_record`` problem."""
    snap: Snapshot = {}
    problems = []
    for db in _RECORDS:
        snap[db] = {}
        checked = stored_name if db in ("tasks", "tasksets") else stored_revision
        for key, raw in txn.raw_items(db):
            name = key.decode(errors="backslashreplace")
            try:
                snap[db][name] = checked(db, name, decode(db, name, decode_value, raw))
            except CorruptStoreError as error:
                problems.append(_problem("corrupt_record", f"{db}/{name}", None, str(error)))
    return snap, problems


def _dangling(snap: Snapshot) -> list[Found]:
    problems = []
    for names, revisions in _NAMES:
        for key, record in snap[names].items():
            for entry in record.history:
                if entry.digest not in snap[revisions]:
                    problems.append(_problem("dangling_reference", key, None, entry.digest))
    for digest, revision in snap["taskset_revisions"].items():
        for pin in revision.tasks:
            if pin["revision"] not in snap["revisions"]:
                ref = f"{pin['task']}#{pin['revision']}"
                problems.append(_problem("dangling_reference", digest, None, ref))
    return problems


def _walk_databases(txn: Txn) -> list[Found]:
    """Walk every database of the index through LMDB (keys in order, as many as counted:
    :meth:`Txn.walk`); a damaged one is a ``corrupt_index`` problem."""
    problems = []
    for db in DATABASES:
        try:
            txn.walk(db)
        except CorruptStoreError as error:
            problems.append(_problem("corrupt_index", db, None, str(error)))
            break  # LMDB ended the transaction, or the walk stopped: nothing more to learn
    return problems


def _problem(kind: str, ref: str, path: Path | None, detail: str) -> dict[str, str | None]:
    return {"kind": kind, "ref": ref, "path": str(path) if path else None, "message": detail}


def fsck(
    store: StoreHandle, progress: Progress = NO_PROGRESS, checks: Sequence[Check] = ()
) -> FsckReport:
    """Re-verify every archive and reference of ``store``, and run ``checks`` (e.g. of the
    imported jobs) on its index; never modifies anything. Without ``checks`` the imported
    jobs go unchecked: ``casstore.fsck(store)`` (what ``casstore fsck`` runs) passes theirs.

    The index file's pages are checked first (:func:`check_pages`); when they are damaged
    nothing is read through LMDB (which could fail any way on them): the problems found and
    the filesets' temporaries are reported, the counts left 0. Never raises for damage."""
    index, filesets = store.index, store.filesets
    problems = check_pages(index)
    snap: Snapshot = {db: {} for db in _RECORDS}
    counts: dict[str, int] = {}
    if not problems:
        walked, found = _guarded(index, _walk_databases)
        problems += (walked or []) + found
        read, found = _guarded(index, _snapshot)
        if read is not None:
            snap, damaged = read
            problems += damaged
        problems += found + _dangling(snap)
        for check in checks:
            checked, found = _guarded(index, check)
            problems += found
            if checked is not None:
                counts |= checked.counts
                problems += [_problem(p.kind, p.ref, None, p.message) for p in checked.problems]
    archives = _check_archives(filesets, snap["revisions"], progress)
    problems += archives.problems
    unreached: list[str] = []
    if not problems:  # every record read: the reachable ones are known (never raises)
        reach, problems = _guarded(index, unreachable)
        unreached = reach[1] if reach is not None else []
    return FsckReport(
        ok=not problems,
        tasks=len(snap["tasks"]),
        tasksets=len(snap["tasksets"]),
        revisions=len(snap["revisions"]),
        archives=len(archives.on_disk),
        problems=problems,
        orphans=sorted(set(archives.on_disk) - archives.referenced),
        temporaries=filesets.temporaries(),
        unreachable=unreached,
        **counts,
    )


def _guarded[T](index: Index, body: Callable[[Txn], T]) -> tuple[T | None, list[Found]]:
    """``(body's result, [])`` of ``body`` run in a read transaction of ``index``, or ``(None,
    [corrupt_index problem])`` when it raises CorruptStoreError (LMDB failed, a walk found
    damage): the other checks still run, each in a transaction of its own."""
    try:
        return index.read(body), []
    except CorruptStoreError as error:
        return None, [_problem("corrupt_index", error.path or "index", None, str(error))]


class _Archives(NamedTuple):
    """What :func:`_check_archives` found: ``problems``, the ``referenced`` archive
    references and the archives ``on_disk`` (reference → path)."""

    problems: list[dict[str, str | None]]
    referenced: set[str]
    on_disk: dict[str, Path]


def _check_archives(
    filesets: Filesets, revisions: dict[str, TaskRevision], progress: Progress
) -> _Archives:
    """Verify the archive file of every revision (each file once)."""
    problems = []
    referenced: set[str] = set()
    failures: dict[str, str | None] = {}  # archive reference → failure (None: it passed)
    progress.start(len(revisions))
    for digest, revision in revisions.items():
        referenced.add(revision.archive_ref)
        path = filesets.path_of(revision.archive_ref)
        if revision.archive_ref not in failures:
            failures[revision.archive_ref] = _check_archive(path, revision)
        failure = failures[revision.archive_ref]
        if failure is not None:
            kind = "missing_archive" if failure == "missing" else "corrupt_archive"
            problems.append(_problem(kind, f"{revision.archive_ref} ({digest})", path, failure))
        progress.advance(revision.dir_name)
    return _Archives(problems, referenced, dict(filesets.archives()))


def _check_archive(path: Path, revision: TaskRevision) -> str | None:
    if not path.is_file():
        return "missing"
    try:
        result = verify_archive(path, revision.address)
    except CheckError as error:
        return str(in_archive(error, path))
    if str(result.content_digest) != revision.content_digest:
        return f"{path}: content digest {result.content_digest} != {revision.content_digest}"
    return None
