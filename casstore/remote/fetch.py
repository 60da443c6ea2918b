"""Reading a remote: a REF resolved through its refs, and revisions, archives and job
snapshots fetched, each checked before it is used (:mod:`casstore.remote.objects`).

A REF is tried as a taskset, then a task (``[workspace/]name[#digest]``, the digest one of the
ref's history), then a job (its id, or the name its latest snapshot's record gives). An
archive is streamed into a file and checked on the way by the reader ``verify`` uses
(:func:`~casstore.archive.read.verify_blocks`: address, structure, content digest), so the
check overlaps the transfer; anything that fails is
:class:`~casstore.errors.CorruptRemoteError` naming the remote object, and the file is the
caller's to drop.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from casstore.archive.limits import Limits
from casstore.errors import (
    CheckError,
    CorruptRemoteError,
    UnknownReferenceError,
    UsageError,
)
from casstore.remote.client import Client
from casstore.remote.jobdata import JobSnapshot
from casstore.remote.objects import (
    archive_key,
    ref_key,
    value_key,
    verified_bytes,
    verified_revision,
)
from casstore.remote.refs import read_ref
from casstore.remote.transfer import run_parallel
from casstore.store.fileset import in_archive
from casstore.store.records import (
    NamedRecord,
    Reference,
    RevisionEntry,
    TaskRevision,
    TasksetRevision,
)

__all__ = [
    "Resolved",
    "fetch_archive",
    "fetch_pins",
    "fetch_revision",
    "fetch_revision_async",
    "fetch_snapshot",
    "resolve_remote",
]


@dataclass(frozen=True, slots=True)
class Resolved:
    """A REF on a remote: ``kind`` (``tasksets``, ``tasks``, ``jobs``), ``key`` (its ref's
    name key), its ref ``record`` and the ``entry`` chosen (the latest, or the digest named)."""

    kind: str
    key: str
    record: NamedRecord
    entry: RevisionEntry


def resolve_remote(client: Client, text: str, kinds: tuple[str, ...]) -> Resolved:
    """``text`` resolved among ``kinds`` (in that order; see the module docstring).
    UnknownReferenceError when none has that name or revision; CorruptRemoteError for a
    damaged ref."""
    try:
        ref: Reference | None = Reference.parse(text)
    except UsageError:
        if "jobs" not in kinds:
            raise
        ref = None
    for kind in kinds:
        if kind == "jobs":
            found = _job_ref(client, text)
        elif ref is not None:
            read = read_ref(client, kind, ref.key)
            found = None if read is None else (ref.key, read[0])
        else:
            found = None
        if found is not None:
            key, record = found
            return Resolved(kind, key, record, _entry(record, ref if kind != "jobs" else None))
    what = " or ".join(kind.removesuffix("s") for kind in kinds)
    rule = f"no {what} of that name on the remote {client.remote.name}"
    raise UnknownReferenceError(text, rule)


def _entry(record: NamedRecord, ref: Reference | None) -> RevisionEntry:
    """The history entry ``ref`` names (its digest, else the latest)."""
    if ref is None or ref.digest is None:
        return record.history[-1]
    for entry in reversed(record.history):
        if entry.digest == ref.digest:
            return entry
    raise UnknownReferenceError(str(ref), "no such revision of that name on the remote")


def _job_ref(client: Client, text: str) -> tuple[str, NamedRecord] | None:
    """The job ref of id ``text``, else the one whose latest snapshot's job is named so."""
    if "/" not in text:
        read = read_ref(client, "jobs", text)
        if read is not None:
            return text, read[0]
    named = []
    for key in sorted(client.list("refs/jobs/")):
        job_id = key.removeprefix("refs/jobs/")
        read = read_ref(client, "jobs", job_id)
        if read is None:
            continue
        snapshot = fetch_snapshot(client, read[0].latest, ref_key("jobs", job_id))
        job = snapshot.job()
        if job.name == text or text in (job.aliases or []):
            named.append((job_id, read[0]))
    if len(named) > 1:
        raise UnknownReferenceError(text, f"{len(named)} jobs have that name; use the id")
    return named[0] if named else None


def fetch_revision(client: Client, db: str, digest: str, named_by: str) -> Any:
    """The revision ``digest`` of ``db`` (``revisions``, ``taskset_revisions``) that
    ``named_by`` names, checked (CorruptRemoteError when missing or damaged)."""
    key = value_key(db, digest)
    data = verified_bytes(client, key, client.get(key), named_by)
    return verified_revision(client, db, digest, data)


async def fetch_revision_async(client: Client, db: str, digest: str, named_by: str) -> Any:
    """:func:`fetch_revision`, awaited."""
    key = value_key(db, digest)
    data = verified_bytes(client, key, await client.get_async(key), named_by)
    return verified_revision(client, db, digest, data)


def fetch_pins(client: Client, taskset: TasksetRevision) -> list[TaskRevision]:
    """The task revisions ``taskset`` pins, in its order, fetched in parallel and checked."""
    named_by = value_key("taskset_revisions", taskset.digest)
    work = [
        (pin["task"], partial(fetch_revision_async, client, "revisions", pin["revision"], named_by))
        for pin in taskset.tasks
    ]
    return run_parallel(work)


def fetch_snapshot(client: Client, digest: str, named_by: str) -> JobSnapshot:
    """The job snapshot ``digest`` that ``named_by`` names, checked."""
    key = value_key("jobs", digest)
    data = verified_bytes(client, key, client.get(key), named_by)
    return JobSnapshot.decode(client, digest, data)


async def fetch_archive(
    client: Client, revision: TaskRevision, out: Path, limits: Limits, resume: bool = False
) -> None:
    """Stream the archive of ``revision`` into the file ``out`` (new and empty, or with
    ``resume`` the bytes of an earlier, interrupted fetch of it), verified as it arrives
    (address, structure, content digest: when its last byte is written it is verified);
    CorruptRemoteError naming the remote object when it is missing or fails. With
    ``resume`` the bytes ``out`` holds are read back into the check and only the rest is
    requested (a ranged GET); when the whole then fails, it is fetched once more from byte 0
    (the prefix may have been the damaged part). An archive of one block or less is read
    whole on the event loop (no thread waits on the network for it), then checked."""
    held = out.stat().st_size if resume else 0
    if held:
        try:
            await _fetch(client, revision, out, limits, held, resume)
            return
        except CorruptRemoteError:
            pass  # the earlier bytes may be what failed: once more, from byte 0
    await _fetch(client, revision, out, limits, 0, resume)


async def _fetch(
    client: Client, revision: TaskRevision, out: Path, limits: Limits, held: int, resume: bool
) -> None:
    """:func:`fetch_archive` keeping the first ``held`` bytes ``out`` holds (0: none)."""
    from casstore.archive.compress import STREAM_BLOCK  # here: ``ls --remote`` needs no reader

    key = archive_key(revision.archive_ref)
    result = None
    size = await client.size_async(key) if held else None
    if not held or (size is not None and held < size):
        result = await client.open_async(key, held)
        size = None if result is None else result.meta["size"]
    if size is None:
        named_by = value_key("revisions", revision.digest)
        raise CorruptRemoteError(client.where(key), f"missing (named by {named_by})")
    if held > size:
        rule = f"{held} bytes kept from an earlier fetch, more than the object's {size}"
        raise CorruptRemoteError(client.where(key), rule)
    blocks: Iterable[bytes]
    if result is None:  # every byte is held: only the check is left
        blocks = ()
    elif size - held <= STREAM_BLOCK:
        blocks = (await client.body_async(key, result),)
    else:
        blocks = client.chunks(key, result, STREAM_BLOCK)
    stop = threading.Event()
    try:
        await asyncio.to_thread(
            _receive, client, key, blocks, revision, out, limits, (held, resume), stop
        )
    except BaseException:
        stop.set()  # a cancelled transfer: its thread stops at the next block
        raise


def _receive(
    client: Client,
    key: str,
    blocks: Iterable[bytes],
    revision: TaskRevision,
    out: Path,
    limits: Limits,
    kept: tuple[int, bool],
    stop: threading.Event,
) -> None:
    """``blocks`` (the body of ``key`` from byte ``held`` on) written to ``out`` after its
    first ``held`` bytes, all verified on the way, then fsync-ed; ``kept`` is ``(held,
    resume)`` (``resume``: ``out`` exists, and is not made again once removed). ``stop``
    set: the transfer was cancelled (_Stopped at the next block)."""
    from casstore.archive.compress import STREAM_BLOCK
    from casstore.archive.read import verify_blocks

    held, resume = kept
    with out.open("r+b" if resume else "wb") as handle:
        handle.truncate(held)
        earlier = iter(partial(handle.read, STREAM_BLOCK), b"")  # ends at byte ``held``
        whole: Iterable[bytes]
        if isinstance(blocks, tuple) and not held:  # in memory: read on this thread
            handle.writelines(blocks)
            whole = blocks
        else:
            whole = itertools.chain(earlier, _written(blocks, handle, stop))
        try:
            verified = verify_blocks(whole, str(out), revision.address, limits)
        except CheckError as error:
            in_archive(error, out)
            raise CorruptRemoteError(client.where(key), error.rule) from error
        handle.flush()
        os.fsync(handle.fileno())  # here, beside the other transfers: placing finds it clean
    if str(verified.content_digest) != revision.content_digest:
        rule = f"content digest {verified.content_digest}, expected {revision.content_digest}"
        raise CorruptRemoteError(client.where(key), rule)


class _Stopped(Exception):
    """The transfer of an archive was cancelled while its thread was receiving it."""


def _written(blocks: Iterable[bytes], handle: BinaryIO, stop: threading.Event) -> Iterator[bytes]:
    """``blocks``, each written to ``handle`` as it passes; _Stopped once ``stop``
    is set."""
    for block in blocks:
        if stop.is_set():
            raise _Stopped(handle.name)
        handle.write(block)
        yield block
