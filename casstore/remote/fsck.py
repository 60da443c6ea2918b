"""``casstore fsck --remote NAME``: every object of a remote read and checked, nothing changed.

Problems: ``corrupt_ref`` (a ref that does not decode or names another key),
``dangling_ref`` (a ref's history names a revision or job snapshot the remote lacks),
``missing_object`` (a revision's archive, a taskset's pinned revision, a snapshot's value),
``corrupt_object`` (an object that does not hash to its key or fails its checks; an archive:
address, structure, content digest). Information: ``orphans``, objects no ref reaches (what
a push that died left before its refs moved; a later push reuses them).
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from casstore.archive.limits import Limits
from casstore.errors import CorruptRemoteError, RemoteError
from casstore.progress import NO_PROGRESS, Progress
from casstore.remote.client import Client
from casstore.remote.fetch import fetch_archive, fetch_revision_async
from casstore.remote.jobdata import JobSnapshot, check_value
from casstore.remote.objects import REF_KINDS, archive_key, value_key, verified_bytes, verified_ref
from casstore.remote.transfer import run_parallel

__all__ = ["RemoteFsckReport", "fsck_remote"]


class RemoteFsckReport(BaseModel):
    """``ok``, ``remote`` (URL), counts (``refs``, ``revisions``, ``archives``, ``jobs``),
    ``problems`` = ``[{"kind", "key", "message"}]``, ``orphans`` (keys)."""

    ok: bool
    remote: str
    refs: int
    revisions: int
    archives: int
    jobs: int
    problems: list[dict[str, str]]
    orphans: list[str]


class _Check:
    """The state of one fsck: the keys listed, those reached, the problems found."""

    def __init__(self, client: Client, keys: set[str]) -> None:
        self.client = client
        self.keys = keys
        self.reached: set[str] = set()
        self.problems: list[dict[str, str]] = []

    def problem(self, kind: str, key: str, message: str) -> None:
        self.problems.append({"kind": kind, "key": self.client.where(key), "message": message})

    def need(self, key: str, named_by: str, kind: str = "missing_object") -> bool:
        """Whether ``key`` is listed (reached either way); a problem when not."""
        self.reached.add(key)
        if key in self.keys:
            return True
        self.problem(kind, key, f"missing (named by {named_by})")
        return False


def fsck_remote(
    client: Client, progress: Progress = NO_PROGRESS, limits: Limits | None = None
) -> RemoteFsckReport:
    """Check every ref and object of ``client``'s remote (see the module docstring);
    ``progress`` counts the objects read."""
    limits = limits or Limits()
    check = _Check(client, set(client.list("")))
    refs = sorted(key for key in check.keys if key.startswith("refs/"))
    records = run_parallel([(key, partial(_ref, check, key)) for key in refs], progress)
    heads = [
        (kind, entry.digest, key)
        for key, found in zip(refs, records, strict=True)
        if found is not None
        for kind, record in [found]
        for entry in record.history
    ]
    revisions = _walk(check, heads, progress, limits)
    return RemoteFsckReport(
        ok=not check.problems,
        remote=client.remote.url,
        refs=len(refs),
        revisions=revisions["revisions"] + revisions["taskset_revisions"],
        archives=revisions["archives"],
        jobs=revisions["jobs"],
        problems=check.problems,
        orphans=sorted(check.keys - check.reached),
    )


async def _ref(check: _Check, key: str) -> tuple[str, Any] | None:
    """The kind and record of the ref ``key``; None (a problem) when it is damaged."""
    check.reached.add(key)
    _, kind, name = key.split("/", 2)
    if kind not in REF_KINDS:
        check.problem("corrupt_ref", key, f"not a ref kind ({', '.join(REF_KINDS)})")
        return None
    try:
        data = verified_bytes(check.client, key, await check.client.get_async(key), "a listing")
        return kind, verified_ref(check.client, kind, name, data)
    except CorruptRemoteError as error:
        check.problem("corrupt_ref", key, error.rule)
        return None


def _walk(
    check: _Check, heads: list[tuple[str, str, str]], progress: Progress, limits: Limits
) -> dict[str, int]:
    """Check what the refs' histories name, then what those name; counts by kind."""
    dbs = {"tasks": "revisions", "tasksets": "taskset_revisions", "jobs": "jobs"}
    wanted: dict[str, str] = {}
    for kind, digest, ref in heads:
        key = value_key(dbs[kind], digest)
        if key not in wanted and check.need(key, ref, "dangling_ref"):
            wanted[key] = ref
    sets = [key for key in wanted if key.startswith("taskset_revisions/")]
    found = run_parallel([(k, partial(_object, check, k, wanted[k])) for k in sets], progress)
    for taskset in filter(None, found):
        for pin in taskset.tasks:
            key = value_key("revisions", pin["revision"])
            if key not in wanted and check.need(
                key, value_key("taskset_revisions", taskset.digest)
            ):
                wanted[key] = value_key("taskset_revisions", taskset.digest)
    others = [key for key in wanted if not key.startswith("taskset_revisions/")]
    done = run_parallel([(k, partial(_object, check, k, wanted[k])) for k in others], progress)
    tasks = [rev for key, rev in zip(others, done, strict=True) if key.startswith("revisions/")]
    archives = [rev for rev in tasks if rev is not None]
    with tempfile.TemporaryDirectory(prefix="casstore-fsck-") as scratch:
        work = [
            (
                rev.archive_ref,
                partial(_archive, check, rev, Path(scratch, str(n)), limits),
            )
            for n, rev in enumerate(archives)
        ]
        run_parallel(work, progress, parallel=8)
    jobs = [snap for key, snap in zip(others, done, strict=True) if key.startswith("jobs/")]
    values = [(key, snap) for snap in jobs if snap is not None for key in _values(check, snap)]
    run_parallel([(k, partial(_value, check, k, s)) for k, s in values], progress)
    return {
        "revisions": len(tasks),
        "taskset_revisions": len(sets),
        "archives": len(archives),
        "jobs": len(jobs),
    }


async def _object(check: _Check, key: str, named_by: str) -> Any:
    """The revision or job snapshot at ``key``, checked; None (a problem) when it fails."""
    db, _, digest = key.partition("/")
    try:
        if db == "jobs":
            data = verified_bytes(check.client, key, await check.client.get_async(key), named_by)
            return JobSnapshot.decode(check.client, digest, data)
        return await fetch_revision_async(check.client, db, digest, named_by)
    except CorruptRemoteError as error:
        check.problem("corrupt_object", key, error.rule)
        return None


async def _archive(check: _Check, revision: Any, scratch: Path, limits: Limits) -> None:
    """Check the archive of ``revision``."""
    key = archive_key(revision.archive_ref)
    if not check.need(key, value_key("revisions", revision.digest)):
        return
    try:
        await fetch_archive(check.client, revision, scratch, limits)
    except CorruptRemoteError as error:
        check.problem("corrupt_object", key, error.rule)
    finally:
        scratch.unlink(missing_ok=True)


def _values(check: _Check, snapshot: JobSnapshot) -> list[str]:
    """The keys of the values ``snapshot`` names that the remote holds (the others: a
    problem)."""
    keys = [value_key("reward_tables", snapshot.reward_table)]
    keys += [value_key("trial_packs", digest) for _, digest in snapshot.packs]
    keys += [value_key("evidence", key) for key in snapshot.evidence]
    keys += [value_key("zstd_dicts", key) for key in snapshot.dictionaries]
    named_by = value_key("jobs", snapshot.digest)
    return [key for key in dict.fromkeys(keys) if check.need(key, named_by)]


async def _value(check: _Check, key: str, snapshot: JobSnapshot) -> None:
    """Check the job value ``key`` of ``snapshot``."""
    db, _, digest = key.partition("/")
    try:
        data = verified_bytes(check.client, key, await check.client.get_async(key), "a snapshot")
        check_value(check.client, db, digest, data, snapshot.job())
    except (CorruptRemoteError, RemoteError) as error:
        check.problem("corrupt_object", key, error.rule)
