"""``casstore pull REF... [--from NAME]``: a remote's tasks, tasksets and jobs into the local
store, each object checked before it is kept.

Archives are streamed into temporary files of the store's filesets, verified on the way,
and each placed as soon as it passed, as publication places them
(:meth:`~casstore.store.fileset.Filesets.adopt`); when every one is in, one write
transaction adds the revisions, moves the names (the rule of a ref:
:func:`casstore.remote.refs.advance`) and writes the jobs' values. A pull that stops
half-way (interrupted, killed, a request failed) has registered nothing, but an archive
already intact in the store and a job whose snapshot it holds are not fetched again, and an
archive it was receiving (at least a block of it) is kept in ``.tmp-pull-<address hex>``:
the next pull asks only for the rest (a ranged GET) and verifies the whole file again, so a
pull goes on where it stopped.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from casstore.archive.limits import Limits
from casstore.digest import Digest
from casstore.errors import CorruptRemoteError
from casstore.progress import NO_PROGRESS, Progress
from casstore.remote.client import Client
from casstore.remote.fetch import (
    Resolved,
    fetch_archive,
    fetch_revision,
    fetch_revision_async,
    fetch_snapshot,
    resolve_remote,
)
from casstore.remote.jobdata import JobSnapshot, check_value, local_snapshot
from casstore.remote.objects import ref_key, value_key, verified_bytes
from casstore.remote.refs import advance
from casstore.remote.transfer import run_parallel
from casstore.store.core import Store
from casstore.store.fileset import TEMP_PREFIX
from casstore.store.index import Txn
from casstore.store.lookup import read_name
from casstore.store.records import NamedRecord, TaskRevision
from casstore.trials.orphans import drop_unreferenced
from casstore.trials.packs import job_packs
from casstore.trials.stored import stored_job

__all__ = ["PARTIAL_PREFIX", "PullReport", "pull"]

PARTIAL_PREFIX = f"{TEMP_PREFIX}pull-"
"""How the file an archive is being pulled into is named (then its address's hex)."""

KINDS = ("tasksets", "tasks", "jobs")


class PullReport(BaseModel):
    """A pull: ``remote`` (its URL), ``archives`` (fetched now), ``job_values`` (fetched
    now), ``refs`` = ``[{"ref", "kind", "revision", "moved"}]`` (``moved``: the local name
    or job changed)."""

    remote: str
    archives: int
    job_values: int
    refs: list[dict[str, str | bool]]


@dataclass
class _Plan:
    """What a pull writes: revisions by db and digest, names to move, jobs."""

    revisions: dict[tuple[str, str], Any] = field(default_factory=dict)
    names: list[Resolved] = field(default_factory=list)
    jobs: list[tuple[JobSnapshot, dict[str, bytes]]] = field(default_factory=list)


def pull(
    store: Store,
    client: Client,
    refs: list[str],
    progress: Progress = NO_PROGRESS,
    limits: Limits | None = None,
    kinds: tuple[str, ...] = KINDS,
) -> PullReport:
    """Pull ``refs`` from ``client``'s remote into ``store`` (see the module docstring);
    ``progress`` counts the archives and job values fetched. UnknownReferenceError for a
    REF the remote lacks (tried as ``kinds``, by default a taskset, a task, a job);
    CorruptRemoteError naming the object that fails its checks
    (nothing of that pull is registered)."""
    limits = limits or Limits()
    plan = _Plan()
    pins: dict[str, str] = {}  # task revision digest -> what names it
    for text in refs:
        resolved = resolve_remote(client, text, kinds)
        plan.names.append(resolved)
        if resolved.kind == "jobs":
            plan.jobs.append(_job(store, client, resolved))
        else:
            pins |= _revisions(client, resolved, plan)
    store.index.open_for_writing()  # a read-only store refused before any file is written
    fetched = _tasks(store, client, pins, plan, progress, limits)
    moved = store.index.write(lambda txn: _register(txn, plan))
    return PullReport(
        remote=client.remote.url,
        archives=fetched,
        job_values=sum(len(values) for _, values in plan.jobs),
        refs=moved,
    )


def _revisions(client: Client, resolved: Resolved, plan: _Plan) -> dict[str, str]:
    """The task revisions ``resolved`` names (a task's; a taskset's pins, its own revision
    fetched into ``plan``), each with the key that names it."""
    named_by = ref_key(resolved.kind, resolved.key)
    if resolved.kind == "tasks":
        return {resolved.entry.digest: named_by}
    taskset = fetch_revision(client, "taskset_revisions", resolved.entry.digest, named_by)
    plan.revisions["taskset_revisions", taskset.digest] = taskset
    pinned_by = value_key("taskset_revisions", taskset.digest)
    return {pin["revision"]: pinned_by for pin in taskset.tasks}


def _tasks(
    store: Store,
    client: Client,
    pins: dict[str, str],
    plan: _Plan,
    progress: Progress,
    limits: Limits,
) -> int:
    """Fetch the task revisions ``pins`` names into ``plan``, and each archive the store
    lacks, in parallel (a task's revision then its archive); each archive is placed as soon
    as it is verified, so a pull that stops half-way keeps those (the next one finds them
    intact). The number of archives fetched."""
    work = [
        (digest, partial(_task, store, client, digest, named_by, limits))
        for digest, named_by in pins.items()
    ]
    fetched = 0
    for revision, received in run_parallel(work, progress):
        plan.revisions["revisions", revision.digest] = revision
        fetched += received
    return fetched


async def _task(
    store: Store, client: Client, digest: str, named_by: str, limits: Limits
) -> tuple[TaskRevision, bool]:
    """The task revision ``digest``, and whether its archive was fetched now (and placed;
    not when the store holds it intact)."""
    revision = await fetch_revision_async(client, "revisions", digest, named_by)
    if store.filesets.intact(revision, limits):  # a missing file: at once
        return revision, False
    with _partial_file(store, revision) as (path, resume):
        try:
            await fetch_archive(client, revision, path, limits, resume)
        except BaseException as error:
            if not resume or isinstance(error, CorruptRemoteError) or _small(path):
                path.unlink(missing_ok=True)  # nothing worth resuming
            raise
        await asyncio.to_thread(_place, store, revision, path, limits)
    return revision, True


def _place(store: Store, task: TaskRevision, temporary: Path, limits: Limits) -> None:
    store.filesets.adopt(temporary, task, limits, verified=True)  # fetch_archive verified it


@contextmanager
def _partial_file(store: Store, revision: TaskRevision) -> Iterator[tuple[Path, bool]]:
    """The file an archive is received into and whether it may hold the bytes of an earlier,
    interrupted pull: ``.tmp-pull-<address hex>`` beside the archive's folder, locked
    (``flock``) for as long as the block runs; a new temporary when another pull holds it.
    Left behind it is a temporary as any other (``gc`` removes it)."""
    folder = store.filesets.path_of(revision.archive_ref).parent.parent
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{PARTIAL_PREFIX}{Digest.parse(revision.address).hex}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        same = os.path.samestat(os.fstat(fd), os.stat(path))  # not removed meanwhile
    except (BlockingIOError, FileNotFoundError):
        same = False
    try:
        if same:
            yield path, True
        else:
            yield store.filesets.temporary_for(revision.archive_ref), False
    finally:
        os.close(fd)


def _small(path: Path) -> bool:
    """True when ``path`` holds less than a block (or is gone): not worth resuming."""
    from casstore.archive.compress import STREAM_BLOCK

    try:
        return path.stat().st_size < STREAM_BLOCK
    except FileNotFoundError:
        return True


def _job(store: Store, client: Client, resolved: Resolved) -> tuple[JobSnapshot, dict[str, bytes]]:
    """The snapshot ``resolved`` names and the values of it the store lacks, checked."""
    snapshot = fetch_snapshot(client, resolved.entry.digest, ref_key("jobs", resolved.key))
    job = snapshot.job()
    if snapshot.job_id != resolved.key or job.job_id != resolved.key:
        where = client.where(value_key("jobs", snapshot.digest))
        raise CorruptRemoteError(where, f"the snapshot is of job {job.job_id}, not {resolved.key}")
    for key, _ in snapshot.packs:
        if not key.startswith(f"{job.job_id}/"):
            where = client.where(value_key("jobs", snapshot.digest))
            raise CorruptRemoteError(where, f"a trial pack key {key} of another job")

    def local(txn: Txn) -> tuple[str | None, set[str]]:
        raw = txn.get("jobs", job.job_id)
        digest = None if raw is None else local_snapshot(txn, stored_job(job.job_id, raw))[0].digest
        held = {value_key("evidence", key) for key in snapshot.evidence if txn.has("evidence", key)}
        held |= {
            value_key("zstd_dicts", k) for k in snapshot.dictionaries if txn.has("zstd_dicts", k)
        }
        return digest, held

    digest, held = store.index.read(local)
    if digest == snapshot.digest:
        return snapshot, {}
    keys = [value_key("reward_tables", snapshot.reward_table)]
    keys += [value_key("trial_packs", digest) for _, digest in snapshot.packs]
    keys += [value_key("evidence", key) for key in snapshot.evidence]
    keys += [value_key("zstd_dicts", key) for key in snapshot.dictionaries]
    named_by = value_key("jobs", snapshot.digest)

    async def one(key: str) -> bytes:
        data = verified_bytes(client, key, await client.get_async(key), named_by)
        db, _, digest = key.partition("/")
        return check_value(client, db, digest, data, job)

    wanted = [key for key in dict.fromkeys(keys) if key not in held]
    fetched = run_parallel([(key, partial(one, key)) for key in wanted])
    return snapshot, dict(zip(wanted, fetched, strict=True))


def _register(txn: Txn, plan: _Plan) -> list[dict[str, str | bool]]:
    """The write transaction of a pull: revisions, names, jobs."""
    for (db, digest), revision in plan.revisions.items():
        if not txn.has(db, digest):
            txn.put(db, digest, revision.to_builtins())
    for snapshot, values in plan.jobs:
        if values:
            _write_job(txn, snapshot, values)
    rows: list[dict[str, str | bool]] = []
    for resolved in plan.names:
        record = resolved.record
        if resolved.kind == "jobs":
            moved = any(values for snap, values in plan.jobs if snap.job_id == resolved.key)
        else:
            local = read_name(txn, resolved.kind, resolved.key) or NamedRecord(
                workspace=record.workspace, name=record.name, history=[]
            )
            moved = advance(local, resolved.entry)
            if moved:
                txn.put(resolved.kind, resolved.key, local.to_builtins())
        kind = resolved.kind.removesuffix("s")
        rows.append(
            {"ref": resolved.key, "kind": kind, "revision": resolved.entry.digest, "moved": moved}
        )
    return rows


def _write_job(txn: Txn, snapshot: JobSnapshot, values: dict[str, bytes]) -> None:
    """Write the job of ``snapshot`` (its record, table, packs; evidence and dictionaries the
    index lacks), replacing the job's values the index held; what the old record alone
    referenced is dropped."""
    job_id = snapshot.job_id
    old_raw = txn.get("jobs", job_id)
    old = local_snapshot(txn, stored_job(job_id, old_raw))[0] if old_raw is not None else None
    for old_key, _ in list(job_packs(txn, job_id)):
        txn.delete("trial_packs", old_key)
    txn.raw_put("jobs", job_id, snapshot.record)
    txn.raw_put("reward_tables", job_id, values[value_key("reward_tables", snapshot.reward_table)])
    for key, digest in snapshot.packs:
        txn.raw_put("trial_packs", key, values[value_key("trial_packs", digest)])
    for db, keys in (("evidence", snapshot.evidence), ("zstd_dicts", snapshot.dictionaries)):
        for name in keys:
            data = values.get(value_key(db, name))
            if data is not None:
                txn.raw_put(db, name, data, overwrite=False)
    if old is not None:
        drop_unreferenced(txn, old.evidence, old.dictionaries)
