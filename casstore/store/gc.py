"""gc: remove the revisions no name reaches, the archive files no revision references, and
leftover temporaries.

A revision is reached from a name's history (every entry, not only the latest), and a task
revision also from a pin of a taskset revision some taskset name reaches: after ``rm`` of a
task a taskset still pins, its pinned revision and archive stay, the others go. They are
removed in the write transaction that holds the index's lock for the whole gc (taken as a
plain lock when nothing is to be removed from the index, which is then left as it was).

An unreferenced archive younger than the minimum age is spared: it may be a concurrent
publication's, stored and not yet registered; so is a temporary file (``.tmp-*``) younger
than it, which may be a publication's write in progress. An older temporary is the leftover
of a publication that was killed.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from casstore.bounds import finite, shown
from casstore.errors import UsageError
from casstore.store.fileset import Temporary
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.lookup import stored_name, stored_revision
from casstore.store.records import TaskRevision

__all__ = ["GcReport", "check_min_age", "gc", "unreachable"]


class GcReport(BaseModel):
    """``removed`` archive references (or those that would be, with ``dry_run``), removed
    ``temporaries`` (leftovers of killed writes: path, bytes, age), ``freed_bytes`` (both
    counted), and what was spared because younger than the minimum age: ``kept_young``
    (unreferenced archives) and ``kept_young_temporaries`` (writes that may be running);
    ``job_data``: the index values of imported jobs no job record references, removed as
    ``db/key`` (``casstore.gc`` fills it in, see ``casstore.trials.orphans``); ``revisions``:
    the task and taskset revisions no name reaches, removed from the index as ``db/digest``
    (``revisions/sha256:…``, ``taskset_revisions/sha256:…``)."""

    dry_run: bool
    removed: list[str]
    temporaries: list[Temporary]
    freed_bytes: int
    kept_young: list[str] = []
    job_data: list[str] = []
    kept_young_temporaries: list[Temporary] = []
    revisions: list[str] = []


def unreachable(txn: Txn) -> tuple[dict[str, TaskRevision], list[str]]:
    """``(task revisions, unreached)``: every task revision by digest, and the ``db/digest``
    of each task and taskset revision no name reaches (see the module docstring).
    CorruptStoreError when a record does not decode (nothing is removed then)."""
    named = {
        db: {
            entry.digest
            for key, raw in txn.items(db)
            for entry in stored_name(db, key, raw).history
        }
        for db in ("tasks", "tasksets")
    }
    unreached, pinned = [], set()
    for key, raw in txn.items("taskset_revisions"):
        if key in named["tasksets"]:
            pinned |= {
                pin["revision"] for pin in stored_revision("taskset_revisions", key, raw).tasks
            }
        else:
            unreached.append(f"taskset_revisions/{key}")
    revisions = {key: stored_revision("revisions", key, raw) for key, raw in txn.items("revisions")}
    unreached += [f"revisions/{key}" for key in revisions if key not in named["tasks"] | pinned]
    return revisions, unreached


def gc(store: StoreHandle, dry_run: bool = False, min_age: float = 60.0) -> GcReport:
    """Remove the archive files of ``store`` no revision references, and temporaries, older
    than ``min_age`` seconds (a concurrent publication's not yet registered archive is
    younger). Runs while holding the index's write lock, so no registration interleaves
    (StoreError on a store that cannot be written); ``dry_run`` only lists, in a read
    transaction. UsageError unless ``min_age`` is a finite number >= 0
    (:func:`check_min_age`)."""
    filesets = store.filesets
    min_age = check_min_age(min_age)
    cutoff = time.time() - min_age

    def body(txn: Txn) -> GcReport:
        revisions, unreached = unreachable(txn)
        if not dry_run and not pruning:
            unreached = []  # unreached since the read before the lock: for the next gc
        for ref in unreached if not dry_run else ():
            txn.delete(*ref.split("/", 1))
        gone = set(unreached)
        referenced = {
            revision.archive_ref
            for key, revision in revisions.items()
            if f"revisions/{key}" not in gone
        }
        removed, young, freed = [], [], 0
        for ref, path in filesets.archives():
            info = path.lstat()
            if ref in referenced:
                continue
            if info.st_mtime > cutoff:
                young.append(ref)
                continue
            removed.append(ref)
            freed += info.st_size
            if not dry_run:
                filesets.remove(path)
        temporaries, young_temporaries = [], []
        for temporary in filesets.temporaries():
            if temporary.age_seconds < min_age:
                young_temporaries.append(temporary)
                continue
            temporaries.append(temporary)
            freed += temporary.bytes
            if not dry_run:
                Path(temporary.path).unlink(missing_ok=True)
        return GcReport(
            dry_run=dry_run,
            removed=removed,
            temporaries=temporaries,
            freed_bytes=freed,
            kept_young=young,
            kept_young_temporaries=young_temporaries,
            revisions=unreached,
        )

    if dry_run:  # removes nothing: no lock needed, and a read-only store can be listed
        return store.index.read(body)
    pruning = bool(store.index.read(unreachable)[1])
    # the index written only when revisions are to go; else the transaction is the lock only
    return store.index.write(body, lock_only=not pruning)


def check_min_age(min_age: float) -> float:
    """``min_age`` (``gc --min-age``) as seconds; UsageError naming ``--min-age`` unless it
    is a finite number >= 0 (``inf`` would spare every file, ``nan`` compares with none)."""
    seconds = finite("--min-age", min_age)
    if seconds < 0:
        raise UsageError("--min-age", f"must be >= 0 seconds, not {shown(min_age)}")
    return seconds
