"""What the run's stat-based caches share (:mod:`casstore.run.sourcecache`,
:func:`casstore.run.identity.remembered_options_digest`): their folder
``<jobs dir>/.casstore-cache``, ``lstat`` rows, the rows of the code whose rules a cached
value applies (an upgrade of that code makes every entry unusable), and entries written as a
temporary file renamed over them (a cache that cannot be written or read is no cache: the
value is computed again).
"""

from __future__ import annotations

import contextlib
import os
import stat
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import msgspec

from casstore.digest import new_hasher

__all__ = [
    "CACHE_FOLDER",
    "RACY_NS",
    "code_rows",
    "fingerprint",
    "read_entry",
    "stat_row",
    "write_entry",
]

CACHE_FOLDER = ".casstore-cache"
RACY_NS = 2_000_000_000
"""A tree with an entry changed less than this long (ns) before it was read is not recorded:
a file changed within one timestamp tick of the read could keep its ``lstat`` (git's "racy"
entries)."""
_CODE: dict[tuple[str, ...], list[list[int]]] = {}


def stat_row(info: os.stat_result) -> list[int]:
    """Type, permission bits, size, inode, device, ``mtime_ns`` and ``ctime_ns``."""
    return [
        stat.S_IFMT(info.st_mode),
        stat.S_IMODE(info.st_mode),
        info.st_size,
        info.st_ino,
        info.st_dev,
        info.st_mtime_ns,
        info.st_ctime_ns,
    ]


def code_rows(*folders: str) -> list[list[int]]:
    """The ``lstat`` rows of the ``.py`` files of each folder ``package/sub/dir`` (found
    without importing the package; absent: one ``[-1]`` row), once per process."""
    if folders not in _CODE:
        rows: list[list[int]] = []
        for folder in folders:
            package, _, below = folder.partition("/")
            spec = find_spec(package)
            if spec is None or not spec.origin:
                rows.append([-1])
                continue
            base = Path(spec.origin).parent / below
            for path in sorted(base.glob("*.py")):
                try:
                    rows.append(stat_row(os.lstat(path)))
                except OSError:
                    rows.append([-1])
        _CODE[folders] = rows
    return _CODE[folders]


def fingerprint(root: Path, code: tuple[str, ...]) -> tuple[str, int]:
    """(``blake3:`` of the :func:`stat_row` of every entry under ``root``, the root included,
    sorted by path bytes, links not followed, with the :func:`code_rows` of ``code``; the
    newest ``mtime``/``ctime`` in ns under ``root``: compare it with :data:`RACY_NS`)."""
    top = os.fsencode(root)
    try:
        info = os.lstat(top)
    except OSError:
        info = None
    rows: list[tuple[bytes, list[int]]] = [(b".", [-1] if info is None else stat_row(info))]
    newest = 0 if info is None else max(info.st_mtime_ns, info.st_ctime_ns)
    pending = [(top, b"")] if info is not None and stat.S_ISDIR(info.st_mode) else []
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            rows.append((prefix, [-2]))
            continue
        for entry in entries:
            relative = prefix + entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                rows.append((relative, [-1]))
                continue
            newest = max(newest, info.st_mtime_ns, info.st_ctime_ns)
            rows.append((relative, stat_row(info)))
            if stat.S_ISDIR(info.st_mode):
                pending.append((entry.path, relative + b"/"))
    rows.sort()
    hasher = new_hasher("blake3")
    hasher.update(msgspec.msgpack.encode([code_rows(*code), rows]))
    return str(hasher.digest()), newest


def read_entry[T](place: Path, kind: type[T]) -> T | None:
    """The entry at ``place`` decoded as ``kind``; None when missing, unreadable or
    malformed."""
    try:
        return msgspec.json.decode(place.read_bytes(), type=kind)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def write_entry(place: Path, entry: Any) -> None:
    """Write ``entry`` at ``place`` (a temporary file renamed over it); OSError is ignored,
    and the temporary file is then removed (a cache that cannot be written leaves nothing).
    The temporary files of ``place`` left by processes that died before their rename
    (SIGKILL) are removed first."""
    temporary = place.with_name(f".{place.name}.tmp-{os.getpid()}")
    try:
        place.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans(place)
        temporary.write_bytes(msgspec.json.encode(entry))
        os.replace(temporary, place)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _remove_orphans(place: Path) -> None:
    """Remove ``.<name>.tmp-<pid>`` beside ``place`` whose process no longer exists."""
    for left in place.parent.glob(f".{place.name}.tmp-*"):
        pid = left.name.rpartition("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                left.unlink()


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
