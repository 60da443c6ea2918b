"""The deterministic packager: a Harbor task directory → one canonical archive.

Same tree, same bytes: whatever the files' mtimes, owners, inode order, the umask or the
machine (README, §2 Packager). The stream is built in fixed blocks and never held whole in memory
(:mod:`casstore.archive.tarbuild`); the compressed bytes go to :mod:`casstore.archive.output`.
Here: the entries, each checked unchanged since the scan as it is written, and the order of
the errors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from casstore.archive.compress import Compression, new_encoder
from casstore.archive.limits import Limits
from casstore.archive.modes import Modes, archived_mode
from casstore.archive.output import Sink, check_output, write_to_path
from casstore.archive.scan import (
    PayloadCount,
    ScanStart,
    SourceEntry,
    SourceTree,
    StatKey,
    finish_scan,
    scan_tree,
    start_scan,
    stat_key,
    walk_tree,
)
from casstore.archive.summary import ArchiveSummary
from casstore.archive.tarbuild import TarStream, size_change
from casstore.archive.tarformat import Kind, header_bytes
from casstore.errors import SourceChangedError

__all__ = ["PackResult", "pack_tree", "write_archive"]

# O_NONBLOCK: a FIFO put in a file's place after the scan must not block the open (its read
# or fstat then fails the pack); it changes nothing for a regular file.
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CHANGED = "entry changed while packing (size, mtime, inode or mode)"


@dataclass(frozen=True, slots=True)
class PackResult(ArchiveSummary):
    """What packing produced: an :class:`ArchiveSummary`."""

    def to_json(self) -> dict[str, object]:
        """The ``casstore pack --json`` object."""
        return self.digests() | {
            "payload_bytes": self.payload_bytes,
            "archive_bytes": self.archive_bytes,
            "compression": self.compression,
        }


def pack_tree(
    source: Path,
    out: Path | BinaryIO | None,
    compression: Compression = "gzip",
    limits: Limits | None = None,
    modes: Modes = "keep",
) -> PackResult:
    """Pack the task directory ``source``, its entries' modes recorded by the rule ``modes``
    (:func:`casstore.archive.modes.archived_mode`).

    ``out`` is a path (written to a temporary file beside it, then renamed; nothing is left on
    failure), a binary file object, or None to compute the digests only. With a path or None,
    entries are written while the tree is walked (see :func:`_pack_walking`); a file object
    receives nothing before the whole tree passed every check (it is scanned first). Either
    way the errors are the same: the check errors of :mod:`casstore.errors` naming the path
    (UnsafePathError, EntryTypeError, SymlinkError, LimitError, TaskFormatError, and
    SourceChangedError when the source changed while it was read: retrying may succeed), a
    scan's error always winning over a write's; UsageError when ``source`` is not a directory
    or the output path cannot be written (a directory, a missing folder, inside the task).
    """
    limits = limits or Limits()
    if isinstance(out, Path | str):
        out = check_output(Path(out), Path(source))
        start = start_scan(source, limits, modes)
        return write_to_path(out, lambda handle: _pack_walking(start, handle, compression, limits))
    if out is None:
        return _pack_walking(start_scan(source, limits, modes), None, compression, limits)
    return write_archive(scan_tree(source, limits, modes), out, compression, limits)


def write_archive(
    tree: SourceTree, out: BinaryIO | None, compression: Compression, limits: Limits
) -> PackResult:
    """Write the archive of an already scanned ``tree`` to ``out`` (None: digests only), its modes
    by ``tree.modes``. Raises SourceChangedError naming the entry that changed since the scan,
    LimitError (``max_expanded_bytes``, ``max_archive_bytes``) or the output's OSError."""
    writer = _ArchiveWriter(out, compression, limits, tree.modes)
    try:
        for entry in tree.entries:
            writer.add(entry)
        return writer.finish(tree)
    finally:
        writer.stop()  # on an error: an error met by the earlier blocks replaces it


def _pack_walking(
    start: ScanStart, out: BinaryIO | None, compression: Compression, limits: Limits
) -> PackResult:
    """Write each entry as soon as :func:`walk_tree` yields it, so the walk overlaps the
    compression, then run :func:`finish_scan` and finish the archive.

    Raises exactly what ``write_archive(scan_tree(...))`` would: every scan error (a bad entry
    met later in the walk, a link or limit rule over the whole tree) comes before any write
    error, so a write error is held until the scan has passed. After a write error, or once a
    file is known to break a size limit (the scan will fail), nothing more is read or written:
    the walk only completes. The caller discards ``out`` on any error."""
    writer = _ArchiveWriter(out, compression, limits, start.modes)
    entries: list[SourceEntry] = []
    failure: Exception | None = None
    payload = PayloadCount(limits)
    try:
        for entry in walk_tree(start, limits):
            entries.append(entry)
            if failure is None:
                failure = _write_or_fail(writer, payload, entry)
        tree = finish_scan(start, entries, limits)
    except BaseException:
        writer.stop_quietly()  # the scan's error comes first
        raise
    if failure is not None:
        raise failure
    try:
        return writer.finish(tree)
    finally:
        writer.stop()


def _write_or_fail(
    writer: _ArchiveWriter, payload: PayloadCount, entry: SourceEntry
) -> Exception | None:
    """Write ``entry``; return the error that stopped the writer instead of raising it (the
    background thread's if it met one: it concerns earlier bytes). A file over a size limit
    is refused before it is read (``payload``, the scan's own rule, raises)."""
    try:
        if entry[1] == "file":  # (parts, kind, key, target, name, path); key[3]: st_size
            payload.add(entry[2][3], entry[4])
        writer.add(entry)
    except Exception as error:
        return writer.stop_quietly() or error
    return None


class _ArchiveWriter:
    """Writes source entries, in archive order, into the tar stream of ``out`` (None: digests
    only): each entry is checked unchanged since the scan (SourceChangedError naming it), its
    mode recorded by the rule ``modes``."""

    def __init__(
        self, out: BinaryIO | None, compression: Compression, limits: Limits, modes: Modes
    ) -> None:
        self._sink = Sink(out, limits)
        self._stream = TarStream(new_encoder(compression, self._sink.write), limits)
        self._compression = compression
        self._modes = modes

    def add(self, entry: SourceEntry) -> None:
        """Append one entry (header, and a file's data and padding)."""
        _, kind, key, target, name, path = entry
        self._stream.entry = name  # what a max_expanded_bytes error names
        mode = archived_mode(kind, key[0], self._modes)  # key[0]: st_mode
        if kind == "file":
            _write_file(name, path, key, mode, self._stream)
        else:
            _write_other(name, path, kind, key, mode, target, self._stream)

    def finish(self, tree: SourceTree) -> PackResult:
        """Check that no directory changed since the scan, end the stream, and describe it."""
        _check_directories_unchanged(tree)
        self._stream.entry = None  # the end-of-archive blocks belong to no entry
        self._stream.close()
        return PackResult(
            address=self._sink.bytes.address(),
            content_digest=self._stream.content.digest(),
            entries=len(tree.entries),
            payload_bytes=tree.payload_bytes,
            archive_bytes=self._sink.bytes.size,
            compression=self._compression,
            layout=tree.layout,
        )

    def stop(self) -> None:
        """Stop the background work (see :meth:`TarStream.stop`); raise its error, if any."""
        self._stream.stop()

    def stop_quietly(self) -> Exception | None:
        """:meth:`stop`, returning its error instead of raising it."""
        try:
            self._stream.stop()
        except Exception as error:
            return error
        return None


def _write_other(
    name: str, path: bytes, kind: Kind, key: StatKey, mode: int, target: str, stream: TarStream
) -> None:
    """A directory or a symbolic link: unchanged since the scan, then its header (``mode``)."""
    _check_unchanged(name, key, _lstat(name, path))
    if kind == "symlink" and _readlink(name, path) != target:
        raise SourceChangedError(name, "link target changed while packing")
    stream.write(header_bytes(name, kind, mode, 0, target))


def _write_file(name: str, path: bytes, key: StatKey, mode: int, stream: TarStream) -> None:
    """A regular file: its header (``mode``), its data and padding. The file read must be the one
    the scan saw: its reads must find exactly the scanned size, and its fstat after the read must
    equal the scan's lstat (``key``), which was taken before the read. (A separate fstat before the
    read would add nothing: whatever it could see differ from the scan, the fstat after sees too;
    the data read is then discarded with the whole archive.)"""
    try:
        fd = os.open(path, _OPEN_FILE)
    except OSError as error:
        raise SourceChangedError(name, f"cannot open file: {error.strerror}") from error
    try:
        size = key[3]  # st_size
        stream.add_file(name, header_bytes(name, "file", mode, size), fd, size)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if stat_key(after) != key:
        raise SourceChangedError(name, size_change(after.st_size, size) or _CHANGED)


def _check_unchanged(name: str, key: StatKey, now: os.stat_result) -> None:
    if stat_key(now) != key:
        raise SourceChangedError(name, _CHANGED)


def _check_directories_unchanged(tree: SourceTree) -> None:
    for _, kind, key, _, name, path in tree.entries:
        if kind == "dir":
            _check_unchanged(name, key, _lstat(name, path))


def _lstat(name: str, path: bytes) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError as error:
        raise SourceChangedError(name, f"entry vanished while packing: {error.strerror}") from error


def _readlink(name: str, path: bytes) -> str:
    try:
        return os.readlink(path).decode("utf-8", "surrogateescape")
    except OSError as error:
        raise SourceChangedError(name, f"link vanished while packing: {error.strerror}") from error
