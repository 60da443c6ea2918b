"""A stat-based cache of a SOURCE directory's discovery: its tasks' native ids, directories,
content digests and reward keys, so that a rerun does not re-read, re-validate and re-hash
every task (the stamp's rule is unchanged: it is compared with these digests).

An entry (``<jobs dir>/.casstore-cache/sources/<sha256 of the absolute SOURCE path>.json``) holds
the **fingerprint** of the tree it was recorded for: the BLAKE3 of every entry under SOURCE
(the root included, sorted by path bytes, links not followed but for SOURCE itself and the
folders above it: the tree of the directory it resolves to) with its ``lstat`` type and
mode, size, inode, device, ``mtime_ns`` and ``ctime_ns``, beside the code that discovers (the
``lstat`` of ``casstore/archive``'s and Harbor's ``models/task`` modules: an upgrade
rediscovers). Writing, truncating, renaming, chmod-ing or replacing anything under
SOURCE changes a ``ctime`` (which no user call can set back) or the listing, so a changed
task never matches: it is discovered again with every check. An entry is used only when the
fingerprint taken now equals it exactly.

An entry is recorded only when discovery succeeded without a warning, the tree's fingerprint
was the same before and after discovery, and every entry's ``mtime``/``ctime`` is older than
:data:`RACY_NS` before discovery started: a file changed within one timestamp tick of the
scan could otherwise keep its ``lstat`` (git's "racy" entries); such a tree is discovered
again next time. A missing, unreadable or malformed entry is no entry.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from casstore.run.statcache import CACHE_FOLDER, RACY_NS, fingerprint, read_entry, write_entry

__all__ = ["CachedTask", "cached_discovery"]

VERSION = 1
CODE = ("casstore/archive", "harbor/models/task")
"""The code whose rules discovery applies."""


class CachedTask(msgspec.Struct, array_like=True):
    """One discovered task: native id, directory, content digest and reward keys (primary
    first)."""

    name: str
    path: str
    content_digest: str
    metrics: list[str]


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    fingerprint: str
    dataset: str | None
    tasks: list[CachedTask]


def cached_discovery(
    source: Path,
    jobs_dir: Path,
    discover: Callable[[], tuple[list[CachedTask], str | None, bool]],
    pending: list[Callable[[], None]] | None = None,
) -> tuple[list[CachedTask], str | None]:
    """The tasks and dataset name of the directory ``source``: the cache's when its entry's
    fingerprint is the tree's now, else ``discover()`` (tasks, dataset, whether it may be
    recorded: False after a warning), recorded when the module docstring's rules allow: at
    once, or by the call appended to ``pending`` when given (a run records only once every
    check passed, so a refused run leaves no ``.casstore-cache``). Raises what ``discover``
    raises."""
    place = jobs_dir / CACHE_FOLDER / "sources" / f"{_key(source)}.json"
    real = Path(os.path.realpath(source))  # a linked SOURCE: its target's tree
    started = time.time_ns()
    before, newest = fingerprint(real, CODE)
    entry = _read(place)
    if entry is not None and entry.fingerprint == before:
        return entry.tasks, entry.dataset
    tasks, dataset, recordable = discover()
    if recordable and newest < started - RACY_NS and fingerprint(real, CODE)[0] == before:
        entry = _Entry(VERSION, before, dataset, tasks)
        if pending is None:
            write_entry(place, entry)
        else:
            pending.append(lambda: write_entry(place, entry))
    return tasks, dataset


def _key(source: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.abspath(source))).hexdigest()


def _read(place: Path) -> _Entry | None:
    entry = read_entry(place, _Entry)
    return entry if entry is not None and entry.version == VERSION else None
