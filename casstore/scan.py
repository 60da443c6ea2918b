"""Scan a task directory for the packager: every entry, in archive order, checked.

The scan applies every source rule of SPEC section 2 before a byte is written: names valid
UTF-8, only directories, regular files and symbolic links, link targets inside the task (see
:mod:`casstore.links`), the entry/size/path limits, and the Harbor task layout.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from casstore.errors import EntryTypeError, SourceChangedError, UnsafePathError, UsageError
from casstore.limits import Limits
from casstore.links import Node, check_link
from casstore.structure import TaskLayout, check_config, check_tree_layout
from casstore.tarformat import Kind

__all__ = ["SourceEntry", "SourceTree", "scan_tree", "stat_key"]

_SPECIAL = {
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One entry of the source tree: ``parts`` below the task root (``()`` is the root),
    ``kind``, the ``lstat`` result seen by the scan, and a link's ``target``."""

    parts: tuple[str, ...]
    kind: Kind
    stat: os.stat_result
    target: str = ""


@dataclass(frozen=True, slots=True)
class SourceTree:
    """A scanned task: ``root`` (absolute), ``top`` (the archive's top-level name),
    ``entries`` in archive order, the checked ``layout`` and ``payload_bytes``."""

    root: Path
    top: str
    entries: tuple[SourceEntry, ...]
    layout: TaskLayout
    payload_bytes: int

    def path_of(self, parts: tuple[str, ...]) -> str:
        """Display name of an entry: ``top/relative/path``."""
        return "/".join((self.top, *parts))


def stat_key(info: os.stat_result) -> tuple[int, ...]:
    """What must not change while an entry is packed: mode, inode, device, size, mtime_ns."""
    return (info.st_mode, info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)


def scan_tree(source: Path, limits: Limits) -> SourceTree:
    """Scan and check the task directory ``source``.

    Raises :class:`UsageError` if ``source`` is not a directory; otherwise the check errors of
    :mod:`casstore.errors` (UnsafePathError, EntryTypeError, SymlinkError, LimitError,
    TaskFormatError) naming the offending path.
    """
    root = Path(os.path.abspath(source))
    try:
        root_stat = os.stat(root)
    except OSError as error:
        raise UsageError(str(source), f"cannot read task directory: {error.strerror}") from error
    if not stat.S_ISDIR(root_stat.st_mode):
        raise UsageError(str(source), "not a directory")
    root = root.resolve()
    top = _decode(root.name.encode("utf-8", "surrogateescape"), str(root))
    config = _read_config(root / "task.toml", f"{top}/task.toml", limits)
    if not os.path.islink(root / "task.toml"):  # a link there is the link rule's to report
        check_config(top, config)  # fail fast on a directory that is not a task at all
    entries = _walk(root, top, root_stat, limits)
    tree_view = {entry.parts: _node(entry) for entry in entries}
    for entry in entries:
        if entry.kind == "symlink":
            check_link("/".join((top, *entry.parts)), entry.parts, entry.target, tree_view.get)
    payload = _payload(entries, top, limits)
    layout = check_tree_layout(top, config, [(entry.parts, entry.kind) for entry in entries])
    return SourceTree(root, top, tuple(entries), layout, payload)


def _walk(root: Path, top: str, root_stat: os.stat_result, limits: Limits) -> list[SourceEntry]:
    entries: list[SourceEntry] = []
    stack: list[tuple[SourceEntry, bytes]] = [(SourceEntry((), "dir", root_stat), bytes(root))]
    while stack:
        entry, path = stack.pop()
        entries.append(entry)
        display = "/".join((top, *entry.parts))
        limits.check("max_entries", len(entries), display)
        if entry.kind == "symlink":  # a link target is a path too (the reader checks it)
            limits.check("max_path_bytes", len(entry.target.encode("utf-8")), display)
        if entry.kind == "dir":
            children = [
                _child(entry.parts, path, name, top, limits) for name in _listdir(path, display)
            ]
            stack.extend(reversed(sorted(children, key=lambda child: child[1])))
    return entries


def _child(
    parts: tuple[str, ...], directory: bytes, name: bytes, top: str, limits: Limits
) -> tuple[SourceEntry, bytes]:
    child = (*parts, _decode(name, "/".join((top, *parts, repr(name)[2:-1]))))
    display = "/".join((top, *child))
    limits.check("max_path_bytes", len(display.encode("utf-8")), display)
    path = directory + b"/" + name
    return _entry(child, path, top), path


def _listdir(directory: bytes, display: str) -> list[bytes]:
    try:
        return os.listdir(directory)
    except OSError as error:
        raise SourceChangedError(display, f"cannot list directory: {error.strerror}") from error


def _entry(parts: tuple[str, ...], path: bytes, top: str) -> SourceEntry:
    display = "/".join((top, *parts))
    try:
        info = os.lstat(path)
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            return SourceEntry(parts, "symlink", info, _decode(os.readlink(path), display))
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            raise UnsafePathError(display, "path is too long for this system") from error
        raise SourceChangedError(
            display, f"entry vanished while scanned: {error.strerror}"
        ) from error
    if stat.S_ISDIR(mode):
        return SourceEntry(parts, "dir", info)
    if stat.S_ISREG(mode):
        return SourceEntry(parts, "file", info)
    kind = _SPECIAL.get(stat.S_IFMT(mode), "unknown entry")
    raise EntryTypeError(display, f"a {kind} cannot be archived (only files, dirs, links)")


def _node(entry: SourceEntry) -> Node:
    return (entry.kind, entry.target)


def _decode(raw: bytes, display: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnsafePathError(display, "name is not valid UTF-8") from error


def _payload(entries: list[SourceEntry], top: str, limits: Limits) -> int:
    total = 0
    for entry in entries:
        if entry.kind == "file":
            display = "/".join((top, *entry.parts))
            limits.check("max_file_bytes", entry.stat.st_size, display)
            total += entry.stat.st_size
            limits.check("max_payload_bytes", total, display)
    return total


def _read_config(path: Path, display: str, limits: Limits) -> bytes | None:
    """task.toml's bytes, or None when it is absent or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        limits.check("max_config_bytes", info.st_size, display)
        return os.read(fd, info.st_size + 1)
    finally:
        os.close(fd)
