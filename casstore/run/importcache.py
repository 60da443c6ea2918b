"""The import of a kept job directory, remembered: a rerun whose job directory is unchanged
since the run that imported it does not import it again (the store holds it already).

An entry (``<jobs dir>/.casstore-cache/imports/<sha256 of the job directory and the store
root>.json``) holds the job directory's :func:`casstore.run.statcache.fingerprint` (every
entry's ``lstat``, with the ``lstat`` of the importing code), the SHA-256 of the run's
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
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from casstore.errors import UnknownReferenceError
from casstore.run.statcache import CACHE_FOLDER, RACY_NS, fingerprint, read_entry, write_entry
from casstore.store.core import Store
from casstore.trials.jobstore import Jobs
from casstore.trials.records import ImportReport

__all__ = ["remembered_import"]

CODE = ("casstore/trials", "casstore/run", "harbor/models/job", "harbor/models/trial")
"""The code whose rules an import applies."""


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
    before, newest = fingerprint(job_dir, CODE)
    entry = read_entry(place, _Entry)
    fresh = entry is not None and (entry.fingerprint, entry.digests) == (before, want)
    if entry is not None and fresh and _holds(store, entry.report):
        return msgspec.structs.replace(entry.report, imported=0)  # (nothing new this time)
    report = import_job()
    if newest < started - RACY_NS and fingerprint(job_dir, CODE)[0] == before:
        write_entry(place, _Entry(before, want, report))
    return report


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
