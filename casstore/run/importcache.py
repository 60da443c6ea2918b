"""The import of a kept job directory, remembered: a rerun whose job directory is unchanged
since the run that imported it does not import it again (the store holds it already).

An entry (``<jobs dir>/.casstore-cache/imports/<sha256 of the job directory and the store
root>.json``) holds the job directory's fingerprint: the ``lstat`` of every entry of the job
directory and, in each of its directories, of the files an import reads there
(:data:`TRIAL_FILES`: Harbor's trial ``config.json`` and ``result.json``, the trajectories
of :data:`casstore.trials.chunk.TRAJECTORIES` and their folders), with the ``lstat`` of the
importing code (a change of what an import reads changes that code), the SHA-256 of the run's
digests (options, agent, every task's content digest: the trial cache was indexed under
them) and the :class:`~casstore.trials.records.ImportReport` of that import. It is used only
when the fingerprint taken now and the digests are equal and the store still holds the job
with as many trials as the report says (the report returned then counts no trial
``imported`` new); otherwise the job is imported again. It is recorded
under :mod:`casstore.run.statcache`'s "racy" rule (an entry changed within
:data:`~casstore.run.statcache.RACY_NS` of the import leaves it unrecorded).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from casstore.digest import new_hasher
from casstore.errors import UnknownReferenceError
from casstore.run.statcache import (
    CACHE_FOLDER,
    RACY_NS,
    code_rows,
    read_entry,
    stat_row,
    write_entry,
)
from casstore.store.core import Store
from casstore.trials.chunk import TRAJECTORIES
from casstore.trials.jobstore import Jobs
from casstore.trials.records import ImportReport

__all__ = ["remembered_import"]

CODE = ("casstore/trials", "casstore/run", "harbor/models/job", "harbor/models/trial")
"""The code whose rules an import applies."""
TRIAL_FILES = (
    "config.json",
    "result.json",
    *sorted({os.path.dirname(where) for where in TRAJECTORIES}),
    *TRAJECTORIES,
)
"""What an import reads in a trial directory (the job directory's own files are entries)."""


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    fingerprint: str
    digests: str
    report: ImportReport


def remembered_import(
    store: Store,
    job_dir: Path,
    digests: tuple[str, str, Mapping[str, str]],
    import_job: Callable[[], ImportReport],
) -> ImportReport:
    """The report of ``job_dir``'s import into ``store``: the remembered one when the module
    docstring's rules allow, else ``import_job()`` (which imports and indexes), recorded."""
    options, agent, tasks = digests
    identity = msgspec.json.encode([options, agent, tasks], order="sorted")
    want = hashlib.sha256(identity).hexdigest()
    place = job_dir.parent / CACHE_FOLDER / "imports" / f"{_key(store, job_dir)}.json"
    started = time.time_ns()
    before, newest = _fingerprint(job_dir)
    entry = read_entry(place, _Entry)
    fresh = entry is not None and (entry.fingerprint, entry.digests) == (before, want)
    if entry is not None and fresh and _holds(store, entry.report):
        return msgspec.structs.replace(entry.report, imported=0)  # (nothing new this time)
    report = import_job()
    if newest < started - RACY_NS and _fingerprint(job_dir)[0] == before:
        write_entry(place, _Entry(before, want, report))
    return report


def _fingerprint(job_dir: Path) -> tuple[str, int]:
    """(``blake3:`` of the rows of the module docstring, the newest ``mtime``/``ctime``)."""
    rows: list[tuple[str, list[int]]] = [(".", stat_row(os.lstat(job_dir)))]
    with os.scandir(job_dir) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    for entry in listed:
        info = entry.stat(follow_symlinks=False)
        rows.append((entry.name, stat_row(info)))
        if stat.S_ISDIR(info.st_mode):
            for name in TRIAL_FILES:
                try:
                    rows.append((name, stat_row(os.lstat(f"{entry.path}/{name}"))))
                except FileNotFoundError:
                    rows.append((name, [-1]))
    newest = max(max(row[5], row[6]) for _, row in rows if len(row) > 1)
    hasher = new_hasher("blake3")
    hasher.update(msgspec.msgpack.encode([code_rows(*CODE), rows]))
    return str(hasher.digest()), newest


def _key(store: Store, job_dir: Path) -> str:
    where = [os.path.abspath(job_dir), os.path.abspath(store.root)]
    return hashlib.sha256(msgspec.json.encode(where)).hexdigest()


def _holds(store: Store, report: ImportReport) -> bool:
    """Whether ``store`` holds the job of ``report`` with its trials."""
    try:
        record = Jobs(store).get(report.job)
    except UnknownReferenceError:
        return False
    return record.trials == report.trials
