"""``casstore ls tasks|tasksets|jobs --remote NAME``: the refs of a remote, as ``ls`` lists a
store's names (rows of the same fields), each ref and latest revision read checked."""

from __future__ import annotations

from functools import partial
from typing import Any

from casstore.remote.client import Client
from casstore.remote.fetch import fetch_revision_async
from casstore.remote.jobdata import JobSnapshot
from casstore.remote.objects import ref_key, value_key, verified_bytes, verified_ref
from casstore.remote.transfer import run_parallel

__all__ = ["list_remote"]


def list_remote(client: Client, what: str) -> list[dict[str, Any]]:
    """The rows of ``what`` (``tasks``, ``tasksets``, ``jobs``) on the remote, by name:
    tasks ``{"ref", "id", "revision", "address", "revisions"}``, tasksets ``{"ref",
    "revision", "tasks", "revisions"}``, jobs ``{"job", "name", "trials", "revision"}``
    (``revision``: the job's latest snapshot)."""
    prefix = f"refs/{what}/"
    keys = sorted(key.removeprefix(prefix) for key in client.list(prefix))
    work = [(key, partial(_row, client, what, key)) for key in keys]
    return run_parallel(work)


async def _row(client: Client, what: str, key: str) -> dict[str, Any]:
    where = ref_key(what, key)
    data = verified_bytes(client, where, await client.get_async(where), "a listing")
    record = verified_ref(client, what, key, data)
    if what == "jobs":
        snapshot_key = value_key("jobs", record.latest)
        data = verified_bytes(client, snapshot_key, await client.get_async(snapshot_key), where)
        job = JobSnapshot.decode(client, record.latest, data).job()
        return {
            "job": key,
            "name": job.name,
            "trials": len(job.trial_names),
            "revision": record.latest,
        }
    db = "revisions" if what == "tasks" else "taskset_revisions"
    revision = await fetch_revision_async(client, db, record.latest, where)
    row = {"ref": key, "revision": revision.digest}
    if what == "tasks":
        row |= {"id": revision.native_id, "address": revision.address}
    else:
        row["tasks"] = len(revision.tasks)
    return row | {"revisions": len(record.history)}
