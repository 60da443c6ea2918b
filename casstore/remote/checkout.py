"""``casstore checkout NAME:REF DEST``: a taskset or task straight from a remote, as a worker
prepares its dataset, nothing kept in the local store.

The REF is resolved through the remote's refs (a taskset first, then a task), its revisions
fetched and checked, every archive streamed in parallel into a private scratch folder and
verified there (:func:`casstore.remote.fetch.fetch_archive`); only then is the dataset laid
out as a local checkout lays it out (:func:`casstore.store.checkout.lay_out`: verified again
while extracted, each task loaded with Harbor, moved into ``DEST`` when all passed). Any
failure leaves ``DEST`` as it was and removes the scratch folder.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

from casstore.archive.limits import Limits
from casstore.progress import NO_PROGRESS, Progress
from casstore.remote.client import Client
from casstore.remote.fetch import fetch_archive, fetch_pins, fetch_revision, resolve_remote
from casstore.remote.objects import ref_key
from casstore.remote.transfer import run_parallel
from casstore.store.checkout import CheckoutResult, lay_out
from casstore.store.records import TaskRevision

__all__ = ["checkout_remote", "remote_items"]


def remote_items(client: Client, ref: str) -> tuple[str, list[tuple[str, TaskRevision]]]:
    """``(kind, [(task key, revision)])`` of ``ref`` on the remote, as
    :func:`casstore.store.lookup.resolve` gives them for a local store."""
    resolved = resolve_remote(client, ref, ("tasksets", "tasks"))
    named_by = ref_key(resolved.kind, resolved.key)
    if resolved.kind == "tasks":
        task = fetch_revision(client, "revisions", resolved.entry.digest, named_by)
        return "task", [(resolved.key, task)]
    taskset = fetch_revision(client, "taskset_revisions", resolved.entry.digest, named_by)
    pins = fetch_pins(client, taskset)
    return "taskset", [(pin["task"], rev) for pin, rev in zip(taskset.tasks, pins, strict=True)]


def checkout_remote(
    client: Client,
    ref: str,
    dest: Path,
    progress: Progress = NO_PROGRESS,
    limits: Limits | None = None,
) -> CheckoutResult:
    """Check out ``ref`` of the remote into ``dest`` (see the module docstring);
    ``progress`` counts the archives fetched. UnknownReferenceError when the remote has no
    such taskset or task; CorruptRemoteError naming the object that fails its checks."""
    limits = limits or Limits()
    kind, items = remote_items(client, ref)
    with tempfile.TemporaryDirectory(prefix="casstore-checkout-") as scratch:
        paths = [Path(scratch, f"{n}.archive") for n in range(len(items))]
        work = [
            (task, partial(fetch_archive, client, rev, path, limits))
            for (task, rev), path in zip(items, paths, strict=True)
        ]
        run_parallel(work, progress)
        located = [(task, rev, path) for (task, rev), path in zip(items, paths, strict=True)]
        return lay_out(f"{client.remote.name}:{ref}", kind, located, dest)
