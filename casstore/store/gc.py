"""gc: remove the archive files no revision references, and leftover temporaries.

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
from casstore.store.lookup import stored_revision

__all__ = ["GcReport", "check_min_age", "gc"]


class GcReport(BaseModel):
    """``removed`` archive references (or those that would be, with ``dry_run``), removed
    ``temporaries`` (leftovers of killed writes: path, bytes, age), ``freed_bytes`` (both
    counted), and what was spared because younger than the minimum age: ``kept_young``
    (unreferenced archives) and ``kept_young_temporaries`` (writes that may be running);
    ``job_data``: the index values of imported jobs no job record references, removed as
    ``db/key`` (``casstore.gc`` fills it in, see ``casstore.trials.orphans``)."""

    dry_run: bool
    removed: list[str]
    temporaries: list[Temporary]
    freed_bytes: int
    kept_young: list[str] = []
    job_data: list[str] = []
    kept_young_temporaries: list[Temporary] = []


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
        referenced = {
            stored_revision("revisions", key, raw).archive_ref
            for key, raw in txn.items("revisions")
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
        )

    if dry_run:  # removes nothing: no lock needed, and a read-only store can be listed
        return store.index.read(body)
    return store.index.write(body, lock_only=True)  # it writes files, never the index


def check_min_age(min_age: float) -> float:
    """``min_age`` (``gc --min-age``) as seconds; UsageError naming ``--min-age`` unless it
    is a finite number >= 0 (``inf`` would spare every file, ``nan`` compares with none)."""
    seconds = finite("--min-age", min_age)
    if seconds < 0:
        raise UsageError("--min-age", f"must be >= 0 seconds, not {shown(min_age)}")
    return seconds
