"""gc: remove the archive files no revision references, and leftover temporaries.

An unreferenced archive younger than the minimum age is spared: it may be a concurrent
publication's, stored and not yet registered.
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from casstore.errors import UsageError
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.records import TaskRevision

__all__ = ["GcReport", "gc"]


class GcReport(BaseModel):
    """``removed`` archive references (or those that would be, with ``dry_run``), removed
    ``temporaries``, ``freed_bytes``, and ``kept_young``: unreferenced archives spared because
    they are younger than the minimum age; ``job_data``: the index values of imported jobs
    no job record references, removed as ``db/key`` (``casstore.gc`` fills it in, see
    ``casstore.trials.orphans``)."""

    dry_run: bool
    removed: list[str]
    temporaries: list[str]
    freed_bytes: int
    kept_young: list[str] = []
    job_data: list[str] = []


def gc(store: StoreHandle, dry_run: bool = False, min_age: float = 60.0) -> GcReport:
    """Remove the archive files of ``store`` no revision references, and temporaries, older
    than ``min_age`` seconds (a concurrent publication's not yet registered archive is
    younger). Runs while holding the index's write lock, so no registration interleaves;
    ``dry_run`` only lists. UsageError unless ``min_age >= 0``."""
    filesets = store.filesets
    if not min_age >= 0:
        raise UsageError(str(min_age), "the minimum age must be a number of seconds >= 0")
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
