"""Refs on a remote: read checked, and moved by conditional writes.

A ref holds a name record (:class:`~casstore.store.records.NamedRecord`); moving it to a
revision appends that revision's history entry unless it is the latest already. The write
is conditional on the ETag read (``If-Match``; a new ref ``If-None-Match: *``): when another
writer moved the ref meanwhile, the write is refused and the update is made again on the ref
as it now is, so no update is lost and every entry is appended once, in the order the writes
won.
"""

from __future__ import annotations

import random
import time

from casstore.errors import RemoteError
from casstore.remote.client import Client
from casstore.remote.objects import ref_key, verified_ref
from casstore.store.records import NamedRecord, RevisionEntry
from casstore.store.values import encode_value

__all__ = ["MAX_ATTEMPTS", "advance", "move_ref", "read_ref"]

MAX_ATTEMPTS = 1000
"""Conditional writes tried before a ref update gives up (each refusal means another writer
moved the ref: a busy ref, not a failure)."""


def advance(record: NamedRecord, entry: RevisionEntry) -> bool:
    """Append ``entry`` to ``record``'s history unless its digest is the latest already
    (the rule of a ref and of a local name alike): whether it was appended."""
    if record.history and record.latest == entry.digest:
        return False
    record.history.append(entry)
    return True


def read_ref(client: Client, kind: str, key: str) -> tuple[NamedRecord, str] | None:
    """The record and ETag of the ref ``kind``/``key``; None when there is none;
    CorruptRemoteError naming it when it does not decode or names another key."""
    found = client.get_ref(ref_key(kind, key))
    if found is None:
        return None
    data, etag = found
    return verified_ref(client, kind, key, data), etag


def move_ref(
    client: Client, kind: str, key: str, workspace: str, name: str, entry: RevisionEntry
) -> bool:
    """Point the ref ``kind``/``key`` at ``entry.digest`` (see the module docstring):
    whether it moved (False: it pointed there already). RemoteError after
    :data:`MAX_ATTEMPTS` refused writes."""
    for attempt in range(MAX_ATTEMPTS):
        found = read_ref(client, kind, key)
        if found is None:
            record, etag = NamedRecord(workspace=workspace, name=name, history=[]), None
        else:
            record, etag = found
        if not advance(record, entry):
            return False
        if client.put_ref(ref_key(kind, key), encode_value(record.to_builtins()), etag):
            return True
        time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 50)))
    raise RemoteError(client.where(ref_key(kind, key)), "the ref kept moving; try again")
