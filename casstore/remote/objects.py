"""The keys of a remote and the checks every object read from it passes before use.

Layout under the remote's prefix (every object but a ref is content-addressed and written
once; its bytes are what the local store keeps for it):

* ``filesets/<workspace>/<fileset>#<path>``: a task archive at its archive reference
  (``<path>`` is ``[<prefix>/]<task dir>/<sha256 hex>/task_archive``), the archive file's bytes;
* ``revisions/<digest>``, ``taskset_revisions/<digest>``: a task or taskset revision record,
  its index value (msgpack), hashing to its digest;
* ``jobs/<sha256>``: a job snapshot (msgpack: ``job_id``, ``record``, the job record's index
  value, ``reward_table``, ``packs`` = ``[[index key, digest]]``, ``evidence``,
  ``dictionaries``), ``trial_packs/<sha256>``, ``reward_tables/<sha256>`` (index values by the
  SHA-256 of their bytes), ``evidence/<key>`` and ``zstd_dicts/<id>`` (keyed as in the index);
* ``refs/tasks/<workspace>/<name>``, ``refs/tasksets/<workspace>/<name>``: the name record of
  the index (``workspace``, ``name``, ``history``: its last entry is the latest revision);
  ``refs/jobs/<job id>``: a name record of workspace ``jobs`` named by the job id, whose
  history lists job snapshots. Refs are the only objects rewritten, by conditional writes.

A read checks the bytes against the digest the key names (an archive: hash, structure and
content digest, by the reader ``verify`` uses), then decodes them as the index decodes its
values; any failure is :class:`~casstore.errors.CorruptRemoteError` naming the object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from casstore.digest import Digest
from casstore.errors import CasstoreError, CorruptRemoteError
from casstore.remote.client import Client
from casstore.store.records import (
    NamedRecord,
    TaskRevision,
    TasksetRevision,
    checked_name,
    checked_revision,
)
from casstore.store.values import decode_value

__all__ = [
    "JOB_WORKSPACE",
    "REF_KINDS",
    "archive_key",
    "checked",
    "ref_key",
    "remote_decode",
    "value_key",
    "verified_bytes",
    "verified_ref",
    "verified_revision",
]

JOB_WORKSPACE = "jobs"
REF_KINDS = ("tasks", "tasksets", "jobs")
_MODELS: dict[str, type[TaskRevision] | type[TasksetRevision]] = {
    "revisions": TaskRevision,
    "taskset_revisions": TasksetRevision,
}


def archive_key(archive_ref: str) -> str:
    """The key of the archive at ``archive_ref`` (``workspace/fileset#path``)."""
    return f"filesets/{archive_ref}"


def value_key(db: str, digest: str) -> str:
    """The key of a content-addressed value of the index database ``db`` (``revisions``,
    ``taskset_revisions``, ``jobs``, ``trial_packs``, ``reward_tables``, ``evidence``,
    ``zstd_dicts``)."""
    return f"{db}/{digest}"


def ref_key(kind: str, key: str) -> str:
    """The key of the ref of ``kind`` (``tasks``, ``tasksets``, ``jobs``) for the name
    ``key`` (``workspace/name``; a job id)."""
    return f"refs/{kind}/{key}"


def remote_decode[T](client: Client, key: str, decoder: Callable[..., T], *args: Any) -> T:
    """``decoder(*args)`` on the bytes of ``key``: any failure is CorruptRemoteError naming
    the object (a :class:`CasstoreError` keeps its rule)."""
    try:
        return decoder(*args)
    except CasstoreError as error:
        raise CorruptRemoteError(client.where(key), error.rule) from error
    except Exception as error:  # damaged bytes can fail any way
        text = " ".join(str(error).split()) or type(error).__name__
        raise CorruptRemoteError(client.where(key), f"does not decode: {text}") from error


def checked(client: Client, key: str, data: bytes, digest: str) -> bytes:
    """``data`` when it hashes to ``digest`` (``sha256:<hex>``); CorruptRemoteError naming
    ``key`` otherwise."""
    found = str(Digest.of(data))
    if found != digest:
        rule = f"the object's bytes hash to {found}, not to {digest} (damaged or replaced)"
        raise CorruptRemoteError(client.where(key), rule)
    return data


def verified_bytes(client: Client, key: str, data: bytes | None, named_by: str) -> bytes:
    """``data`` read at ``key``; CorruptRemoteError when it is None (the remote lacks an
    object ``named_by`` names)."""
    if data is None:
        raise CorruptRemoteError(client.where(key), f"missing (named by {named_by})")
    return data


def verified_revision(client: Client, db: str, digest: str, data: bytes) -> Any:
    """The revision record of ``db`` (``revisions`` or ``taskset_revisions``) read as
    ``data`` at its digest: it must decode and hash to ``digest``."""
    key = value_key(db, digest)
    raw = remote_decode(client, key, decode_value, data)
    return remote_decode(client, key, checked_revision, _MODELS[db], digest, raw)


def verified_ref(client: Client, kind: str, key: str, data: bytes) -> NamedRecord:
    """The name record of the ref ``kind``/``key`` read as ``data``: it must decode and name
    its key (a job's: ``jobs/<job id>``)."""
    where = ref_key(kind, key)
    named = f"{JOB_WORKSPACE}/{key}" if kind == "jobs" else key
    raw = remote_decode(client, where, decode_value, data)
    return remote_decode(client, where, checked_name, named, raw)
