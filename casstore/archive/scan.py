"""Scan a task directory for the packager: every entry, in archive order, checked.

The scan applies every source rule of README, §2 Packager: names valid UTF-8, only
directories, regular files and symbolic links, link targets inside the task (see
:mod:`casstore.archive.links`), the entry/size/path limits, and the Harbor task layout. It runs
in three steps so that a packer can write entries while the tree is walked: :func:`start_scan`
(the root and task.toml), :func:`walk_tree` (every entry in archive order, each checked on its
own) and :func:`finish_scan` (the rules that need the whole tree); :func:`scan_tree` runs all
three.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from casstore.archive.layout import TaskLayout, check_config, check_tree_layout
from casstore.archive.limits import Limits
from casstore.archive.links import Node, check_link
from casstore.archive.modes import Modes
from casstore.archive.tarformat import Kind
from casstore.errors import (
    CheckError,
    EntryTypeError,
    SourceChangedError,
    UnsafePathError,
    UsageError,
)
from casstore.inputs import file_kind, read_if_regular

__all__ = [
    "PayloadCount",
    "ScanStart",
    "SourceEntry",
    "SourceTree",
    "StatKey",
    "finish_scan",
    "scan_tree",
    "start_scan",
    "stat_key",
    "walk_tree",
]

StatKey = tuple[int, int, int, int, int]
"""What must not change while an entry is packed, from its ``lstat``: ``(mode, inode, device,
size, mtime_ns)`` (see :func:`stat_key`)."""

SourceEntry = tuple[tuple[str, ...], Kind, StatKey, str, str, bytes]
"""One entry of the source tree, ``(parts, kind, key, target, name, path)``: ``parts`` below
the task root (``()`` is the root), ``kind``, the :data:`StatKey` the scan saw, a link's
``target`` (empty otherwise), the display ``name`` (``top/relative/path``, the archive member's
name) and the absolute ``path`` on disk.

A plain tuple of strings, bytes and ints, not a NamedTuple holding an ``os.stat_result``: the
garbage collector stops tracking such tuples, so the entries of a big tree add nothing to the
full collections of a long-lived process (with a NamedTuple and a stat_result per entry, a
10,000-file tree cost 18 ms of collections per pack in a test process)."""


@dataclass(frozen=True, slots=True)
class SourceTree:
    """A scanned task: ``root`` (absolute), ``top`` (the archive's top-level name),
    ``entries`` in archive order, the checked ``layout``, ``payload_bytes`` and the ``modes``
    rule its archive records (:mod:`casstore.archive.modes`)."""

    root: Path
    top: str
    entries: tuple[SourceEntry, ...]
    layout: TaskLayout
    payload_bytes: int
    modes: Modes = "keep"

    def path_of(self, parts: tuple[str, ...]) -> str:
        """Display name of an entry: ``top/relative/path``."""
        return "/".join((self.top, *parts))


def stat_key(info: os.stat_result) -> StatKey:
    """What must not change while an entry is packed: mode, inode, device, size, mtime_ns."""
    return (info.st_mode, info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)


def scan_tree(source: Path, limits: Limits, modes: Modes = "keep") -> SourceTree:
    """Scan and check the task directory ``source``: :func:`start_scan`, every entry of
    :func:`walk_tree`, then :func:`finish_scan`; its archive records ``modes``.

    Raises :class:`UsageError` if ``source`` is not a directory; otherwise the check errors of
    :mod:`casstore.errors` (UnsafePathError, EntryTypeError, SymlinkError, LimitError,
    TaskFormatError) naming the offending path.
    """
    start = start_scan(source, limits, modes)
    return finish_scan(start, list(walk_tree(start, limits)), limits)


@dataclass(frozen=True, slots=True)
class ScanStart:
    """A task directory ready to be walked: ``root`` (absolute, resolved), ``top`` (the
    archive's top-level name), ``root_key`` (its :data:`StatKey`), ``config`` (task.toml's
    bytes; None when absent or not a regular file) and the ``modes`` its archive records."""

    root: Path
    top: str
    root_key: StatKey
    config: bytes | None
    modes: Modes = "keep"


def start_scan(source: Path, limits: Limits, modes: Modes = "keep") -> ScanStart:
    """Check what comes before the walk: ``source`` is a directory with a UTF-8 name whose
    task.toml Harbor accepts (a directory that is no task fails before it is walked).

    Raises :class:`UsageError` if ``source`` is not a directory; UnsafePathError, LimitError
    (``max_config_bytes``) or TaskFormatError naming the path.
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
    return ScanStart(root, top, stat_key(root_stat), config, modes)


def finish_scan(start: ScanStart, entries: list[SourceEntry], limits: Limits) -> SourceTree:
    """The checks that need the whole tree, over every entry :func:`walk_tree` yielded, in
    this order: link targets (resolved over the scanned tree, never the disk), the file and
    payload size limits, the Harbor task layout. Raises SymlinkError, LimitError or
    TaskFormatError naming the path."""
    links = [entry for entry in entries if entry[1] == "symlink"]  # (parts, kind, ...)
    if links:
        tree_view: dict[tuple[str, ...], Node] = {
            parts: (kind, target) for parts, kind, _, target, _, _ in entries
        }
        for parts, _, _, target, name, _ in links:
            check_link(name, parts, target, tree_view.get)
    payload = PayloadCount(limits)
    for _, kind, key, _, name, _ in entries:
        if kind == "file":
            payload.add(key[3], name)  # key[3]: st_size
    kinds = [(parts, kind) for parts, kind, _, _, _, _ in entries]
    layout = check_tree_layout(start.top, start.config, kinds)
    return SourceTree(start.root, start.top, tuple(entries), layout, payload.total, start.modes)


def walk_tree(start: ScanStart, limits: Limits) -> Iterator[SourceEntry]:
    """Every entry in archive order, each checked before it is yielded: depth first, a
    directory before its children, children sorted by name bytes. A directory is listed (and
    its children ``lstat``-ed) when the walk enters it, after its own entry was yielded.

    Raises UnsafePathError, EntryTypeError, LimitError (``max_entries``, ``max_path_bytes``) or
    SourceChangedError (a directory vanished) naming the path."""
    max_entries = limits.max_entries
    root: SourceEntry = ((), "dir", start.root_key, "", start.top, bytes(start.root))
    yield root
    count = 1
    pending = [iter(_children(root, limits))]  # the directories being walked
    while pending:
        for entry in pending[-1]:
            count += 1
            _, kind, _, target, name, _ = entry
            if count > max_entries:
                limits.check("max_entries", count, name)
            if kind == "symlink":  # a link target is a path too (the reader checks it)
                limits.check("max_path_bytes", len(target.encode("utf-8")), name)
            yield entry
            if kind == "dir":  # its entries come before its next sibling
                pending.append(iter(_children(entry, limits)))
                break
        else:
            pending.pop()


class PayloadCount:
    """The file size limits in archive order: ``add`` each regular file's size; ``total`` is
    the sum so far (bytes)."""

    __slots__ = ("_limits", "_max_file", "_max_payload", "total")

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._max_file, self._max_payload = limits.max_file_bytes, limits.max_payload_bytes
        self.total = 0

    def add(self, size: int, name: str) -> None:
        """Count a ``size``-byte file ``name``; LimitError (``max_file_bytes``, then
        ``max_payload_bytes``) naming it when a bound is passed."""
        if size > self._max_file:
            self._limits.check("max_file_bytes", size, name)
        self.total += size
        if self.total > self._max_payload:
            self._limits.check("max_payload_bytes", self.total, name)


def _children(directory: SourceEntry, limits: Limits) -> list[SourceEntry]:
    """The entries of ``directory``, sorted by name bytes, each checked in that order: a
    UTF-8 name, the path limit, a kind the archive can hold."""
    parts, _, _, _, display, directory_path = directory
    prefix, base = display + "/", directory_path + b"/"
    prefix_bytes, max_path = len(prefix.encode("utf-8")), limits.max_path_bytes
    children: list[SourceEntry] = []
    for raw in sorted(_listdir(directory_path, display)):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            shown = prefix + repr(raw)[2:-1]
            raise UnsafePathError(shown, "name is not valid UTF-8") from error
        name = prefix + text
        if prefix_bytes + len(raw) > max_path:
            limits.check("max_path_bytes", prefix_bytes + len(raw), name)
        path = base + raw
        try:
            info = os.lstat(path)
        except OSError as error:
            raise _vanished(name, error) from error
        mode = info.st_mode
        key = (mode, info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)  # stat_key
        if stat.S_ISREG(mode):
            children.append(((*parts, text), "file", key, "", name, path))
        elif stat.S_ISDIR(mode):
            children.append(((*parts, text), "dir", key, "", name, path))
        elif stat.S_ISLNK(mode):
            try:
                target = _decode(os.readlink(path), name)
            except OSError as error:
                raise _vanished(name, error) from error
            children.append(((*parts, text), "symlink", key, target, name, path))
        else:
            kind = file_kind(mode)
            raise EntryTypeError(name, f"{kind} cannot be archived (only files, dirs, links)")
    return children


def _listdir(directory: bytes, display: str) -> list[bytes]:
    try:
        return os.listdir(directory)
    except OSError as error:
        raise SourceChangedError(display, f"cannot list directory: {error.strerror}") from error


def _vanished(display: str, error: OSError) -> CheckError:
    if error.errno == errno.ENAMETOOLONG:
        return UnsafePathError(display, "path is too long for this system")
    return SourceChangedError(display, f"entry vanished while scanned: {error.strerror}")


def _decode(raw: bytes, display: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnsafePathError(display, "name is not valid UTF-8") from error


def _read_config(path: Path, display: str, limits: Limits) -> bytes | None:
    """task.toml's bytes, or None when it is absent or not a regular file (a link, a FIFO:
    :func:`casstore.inputs.read_if_regular`)."""

    def within_limits(info: os.stat_result) -> bool:
        limits.check("max_config_bytes", info.st_size, display)
        return True

    return read_if_regular(path, within_limits)
