"""gc: remove the archive files no revision references, and leftover temporaries.

An unreferenced archive younger than the minimum age is spared: it may be a concurrent
publication's, stored and not yet registered.
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from casstore.bounds import finite, shown
from casstore.errors import UsageError
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.records import TaskRevision

__all__ = ["GcReport", "check_min_age", "gc"]


class GcReport(BaseModel):
    """``removed`` archive references (or those that would be, with ``dry_run``), removed
    ``temporaries``, ``freed_bytes``, and ``kept_young``: unreferenced archives spared because
    they are younger than the minimum age."""

    dry_run: bool
    removed: list[str]
    temporaries: list[str]
    freed_bytes: int
    kept_young: list[str] = []


def gc(store: StoreHandle, dry_run: bool = False, min_age: float = 60.0) -> GcReport:
    """Remove the archive files of ``store`` no revision references, and temporaries, older
    than ``min_age`` seconds (a concurrent publication's not yet registered archive is
    younger). Runs while holding the index's write lock, so no registration interleaves;
    ``dry_run`` only lists. UsageError unless ``min_age`` is a finite number >= 0
    (:func:`check_min_age`)."""
    filesets = store.filesets
    min_age = check_min_age(min_age)
    cutoff = time.time() - min_age

    def body(txn: Txn) -> GcReport:
        referenced = {
            TaskRevision.model_validate(raw).archive_ref for _, raw in txn.items("revisions")
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
        temporaries = filesets.temporaries(older_than=min_age)
        for path in temporaries:
            freed += path.lstat().st_size
            if not dry_run:
                path.unlink(missing_ok=True)
        return GcReport(
            dry_run=dry_run,
            removed=removed,
            temporaries=[str(p) for p in temporaries],
            freed_bytes=freed,
            kept_young=young,
        )

    return store.index.write(body, lock_only=True)  # it writes files, never the index


def check_min_age(min_age: float) -> float:
    """``min_age`` (``gc --min-age``) as seconds; UsageError naming ``--min-age`` unless it
    is a finite number >= 0 (``inf`` would spare every file, ``nan`` compares with none)."""
    seconds = finite("--min-age", min_age)
    if seconds < 0:
        raise UsageError("--min-age", f"must be >= 0 seconds, not {shown(min_age)}")
    return seconds
