"""``casstore push REF... [--to NAME]``: objects first, refs last.

The objects the REFs reach (:mod:`casstore.remote.gather`) that the remote lacks are put
create-only, in parallel (an existing key is never overwritten: it holds those bytes, or fsck
says it does not); only when every one is there are the refs moved, by conditional writes
(:mod:`casstore.remote.refs`). A push that dies half-way leaves objects no ref reaches yet,
never a ref naming a missing object; the next push sends only what is still missing. A local
archive is hashed as it is sent: one that no longer hashes to its address fails the push
(CorruptStoreError) and is removed from the remote again.
"""

from __future__ import annotations

import asyncio
from functools import partial

from pydantic import BaseModel

from casstore.digest import Digest
from casstore.errors import CorruptStoreError
from casstore.progress import NO_PROGRESS, Progress
from casstore.remote.client import Client
from casstore.remote.gather import Bundle, gather
from casstore.remote.refs import move_ref
from casstore.remote.transfer import run_parallel
from casstore.store.core import Store

__all__ = ["PushReport", "present_keys", "push"]


class PushReport(BaseModel):
    """A push: ``remote`` (its URL), ``objects`` (reached), ``sent`` (put now),
    ``sent_bytes``, ``refs`` = ``[{"ref", "revision", "moved"}]``."""

    remote: str
    objects: int
    sent: int
    sent_bytes: int
    refs: list[dict[str, str | bool]]


def present_keys(client: Client, keys: list[str]) -> set[str]:
    """Which of ``keys`` the remote holds (one listing per top-level folder they are in)."""
    folders = sorted({key.split("/", 1)[0] + "/" for key in keys})
    held: set[str] = set()
    for folder in folders:
        held.update(client.list(folder))
    return held


def push(
    store: Store, client: Client, refs: list[str], progress: Progress = NO_PROGRESS
) -> PushReport:
    """Push ``refs`` of ``store`` to ``client``'s remote (see the module docstring);
    ``progress`` counts the objects sent. Raises UnknownReferenceError for a REF the store
    lacks, CorruptStoreError for a local archive that does not hash to its address,
    RemoteError for a failed request (naming the key)."""
    bundle = gather(store, refs)
    keys = [*bundle.objects, *bundle.archives]
    held = present_keys(client, keys)
    missing = [key for key in keys if key not in held]
    sizes = run_parallel([(key, partial(_put, client, bundle, key)) for key in missing], progress)
    moved = []
    for update in bundle.refs:
        done = move_ref(
            client, update.kind, update.key, update.workspace, update.name, update.entry
        )
        label = update.key if update.kind != "jobs" else f"job {update.key}"
        moved.append({"ref": label, "revision": update.entry.digest, "moved": done})
    return PushReport(
        remote=client.remote.url,
        objects=len(keys),
        sent=sum(size > 0 for size in sizes),
        sent_bytes=sum(sizes),
        refs=moved,
    )


async def _put(client: Client, bundle: Bundle, key: str) -> int:
    """Put the object ``key`` create-only: its size when written now, 0 when the remote
    held it already (another pusher came first). An archive is hashed while it is sent (the
    two overlap); one that does not hash to its address is removed again when this put
    wrote it, and is CorruptStoreError."""
    if key in bundle.objects:
        data = bundle.objects[key]
        return len(data) if await client.put_new_async(key, data) else 0
    path, address = bundle.archives[key]
    data = await asyncio.to_thread(path.read_bytes)
    written, found = await asyncio.gather(
        client.put_new_async(key, data), asyncio.to_thread(_hash, data)
    )
    if found != address:
        if written:
            await client.delete_async(key)
        rule = f"the archive hashes to {found}, not to its address {address} (publish it again)"
        raise CorruptStoreError(str(path), rule)
    return len(data) if written else 0


def _hash(data: bytes) -> str:
    return str(Digest.of(data))
