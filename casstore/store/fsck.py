"""fsck: re-verify a store, report only (never deletes; :mod:`casstore.store.gc` removes).

Problems: ``missing_archive`` (a revision's file is absent), ``corrupt_archive`` (fails
verification: address, structure or content digest), ``dangling_reference`` (a name's history or a
taskset pin names a revision that does not exist); of imported jobs (:mod:`casstore.trials.check`,
passed in as a check): ``corrupt_job``, ``corrupt_trial``, ``corrupt_reward_table`` (damaged,
failing a CRC-32, or not one row per trial record), ``missing_evidence`` and ``corrupt_evidence`` (a
pack not hashing to its digest, or without the trial's frame). Information: ``orphans`` (archive
files no revision references) and ``temporaries`` (leftovers of interrupted writes, with
sizes and ages).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from casstore.archive.read import verify_archive
from casstore.errors import CheckError
from casstore.progress import NO_PROGRESS, Progress
from casstore.store.fileset import Temporary, in_archive
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.records import NamedRecord, TaskRevision, TasksetRevision

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
    "message"}]``, ``orphans`` (archive references) and ``temporaries`` (leftover temporary
    files: ``{"path", "bytes", "age_seconds"}``, information like orphans)."""

    model_config = ConfigDict(extra="allow")  # the checks' counts

    ok: bool
    tasks: int
    tasksets: int
    revisions: int
    archives: int
    problems: list[dict[str, str | None]]
    orphans: list[str]
    temporaries: list[Temporary]

    def count(self, name: str) -> int:
        """A check's count (``"jobs"``, ``"trials"``), 0 when no check counted it."""
        return int((self.model_extra or {}).get(name, 0))


def _snapshot(txn: Txn) -> dict[str, dict[str, Any]]:
    return {
        db: dict(txn.items(db)) for db in ("tasks", "revisions", "tasksets", "taskset_revisions")
    }


def _dangling(snap: dict[str, dict[str, Any]]) -> list[dict[str, str | None]]:
    problems = []
    for names, revisions in (("tasks", "revisions"), ("tasksets", "taskset_revisions")):
        for key, raw in snap[names].items():
            for entry in NamedRecord.model_validate(raw).history:
                if entry.digest not in snap[revisions]:
                    problems.append(_problem("dangling_reference", key, None, entry.digest))
    for digest, raw in snap["taskset_revisions"].items():
        for pin in TasksetRevision.model_validate(raw).tasks:
            if pin["revision"] not in snap["revisions"]:
                ref = f"{pin['task']}#{pin['revision']}"
                problems.append(_problem("dangling_reference", digest, None, ref))
    return problems


def _problem(kind: str, ref: str, path: Path | None, detail: str) -> dict[str, str | None]:
    return {"kind": kind, "ref": ref, "path": str(path) if path else None, "message": detail}


def fsck(
    store: StoreHandle, progress: Progress = NO_PROGRESS, checks: Sequence[Check] = ()
) -> FsckReport:
    """Re-verify every archive and reference of ``store``, and run ``checks`` (e.g. of the
    imported jobs) on its index; never modifies anything. Without ``checks`` the imported
    jobs go unchecked: ``casstore.fsck(store)`` (what ``casstore fsck`` runs) passes theirs."""
    index, filesets = store.index, store.filesets
    snap = index.read(_snapshot)
    problems = _dangling(snap)
    counts: dict[str, int] = {}
    for check in checks:
        checked = index.read(check)
        counts |= checked.counts
        problems += [_problem(p.kind, p.ref, None, p.message) for p in checked.problems]
    referenced: set[str] = set()
    failures: dict[str, str | None] = {}  # archive reference → failure (None: it passed)
    progress.start(len(snap["revisions"]))
    for digest, raw in snap["revisions"].items():
        revision = TaskRevision.model_validate(raw)
        referenced.add(revision.archive_ref)
        path = filesets.path_of(revision.archive_ref)
        if revision.archive_ref not in failures:
            failures[revision.archive_ref] = _check_archive(path, revision)
        failure = failures[revision.archive_ref]
        if failure is not None:
            kind = "missing_archive" if failure == "missing" else "corrupt_archive"
            problems.append(_problem(kind, f"{revision.archive_ref} ({digest})", path, failure))
        progress.advance(revision.dir_name)
    on_disk = dict(filesets.archives())
    return FsckReport(
        ok=not problems,
        tasks=len(snap["tasks"]),
        tasksets=len(snap["tasksets"]),
        revisions=len(snap["revisions"]),
        archives=len(on_disk),
        problems=problems,
        orphans=sorted(set(on_disk) - referenced),
        temporaries=filesets.temporaries(),
        **counts,
    )


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
