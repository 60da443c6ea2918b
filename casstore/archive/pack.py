"""The deterministic packager: a Harbor task directory → one canonical archive.

Same tree, same bytes: whatever the files' mtimes, owners, inode order, the umask or the
machine (SPEC section 2). The stream is built in fixed blocks and never held whole in memory.
"""

from __future__ import annotations

import contextlib
import os
import queue
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from casstore.archive.compress import STREAM_BLOCK, Compression, new_encoder
from casstore.archive.layout import TaskLayout
from casstore.archive.limits import Limits
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
from casstore.archive.tarformat import BLOCK, Kind, end_of_archive, header_bytes, pad
from casstore.digest import Digest, new_hasher
from casstore.errors import SourceChangedError, UsageError

__all__ = ["PackResult", "pack_tree", "write_archive"]

_ZEROS = bytes(BLOCK)
# O_NONBLOCK: a FIFO put in a file's place after the scan must not block the open (its read
# or fstat then fails the pack); it changes nothing for a regular file.
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CHANGED = "entry changed while packing (size, mtime, inode or mode)"
_SIZE_CHANGED = "entry changed while packing"  # followed by how the size changed
FLUSH_EVERY = 32 << 20  # archive bytes between two background fdatasync calls
BACKGROUND_BLOCKS = 4  # full blocks that may wait to be hashed and compressed


@dataclass(frozen=True, slots=True)
class PackResult:
    """What packing produced.

    ``address``: ``sha256:`` of the compressed bytes; ``content_digest``: ``blake3:`` of the
    canonical uncompressed tar; ``entries``: archive members (top directory included);
    ``payload_bytes``: sum of file sizes; ``archive_bytes``: compressed size; ``compression``;
    ``layout``: the checked Harbor task layout (native id, steps).
    """

    address: Digest
    content_digest: Digest
    entries: int
    payload_bytes: int
    archive_bytes: int
    compression: Compression
    layout: TaskLayout

    def to_json(self) -> dict[str, object]:
        """The ``casstore pack --json`` object."""
        return {
            "address": str(self.address),
            "content_digest": str(self.content_digest),
            "entries": self.entries,
            "payload_bytes": self.payload_bytes,
            "archive_bytes": self.archive_bytes,
            "compression": self.compression,
        }


def pack_tree(
    source: Path,
    out: Path | BinaryIO | None,
    compression: Compression = "gzip",
    limits: Limits | None = None,
) -> PackResult:
    """Pack the task directory ``source``.

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
        out = _check_output(Path(out), Path(source))
        start = start_scan(source, limits)
        return _pack_to_path(out, lambda handle: _pack_walking(start, handle, compression, limits))
    if out is None:
        return _pack_walking(start_scan(source, limits), None, compression, limits)
    return write_archive(scan_tree(source, limits), out, compression, limits)


def _check_output(out: Path, source: Path) -> Path:
    """``out`` made absolute; UsageError naming it when packing cannot write there."""
    absolute = Path(os.path.abspath(out))
    if absolute.is_dir():
        raise UsageError(str(out), "output is a directory; name the archive file")
    if absolute.exists() and not absolute.is_file():  # replacing /dev/null would destroy it
        raise UsageError(str(out), "output exists and is not a regular file (device, FIFO?)")
    if not absolute.parent.is_dir():
        raise UsageError(str(out), "the output's folder does not exist")
    if absolute.parent.resolve().is_relative_to(Path(source).resolve()):
        raise UsageError(str(out), "the output is inside the task directory being packed")
    return absolute


def _pack_to_path(out: Path, write: Callable[[BinaryIO], PackResult]) -> PackResult:
    """Run ``write`` on a temporary file beside ``out``, fsync it and rename it to ``out``
    (mode 0o644); on any failure the temporary file is removed and the error raised — the
    first error: flushing or closing the temporary file after it never replaces it. An
    OSError of the output (disk full, read-only folder) names ``out``, not the temporary."""
    fd, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    handle = os.fdopen(fd, "wb")
    try:
        result = _write_synced(handle, write)
        os.chmod(temporary, 0o644)
        os.replace(temporary, out)
    except BaseException as error:
        with contextlib.suppress(OSError):  # flushes what is left: may fail again (disk full)
            handle.close()
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename in (None, temporary):
            raise OSError(error.errno, error.strerror or str(error), str(out)) from error
        raise
    return result


def _write_synced(handle: BinaryIO, write: Callable[[BinaryIO], PackResult]) -> PackResult:
    """``write(handle)`` through a :class:`_Flusher`, then flush, fsync and close ``handle``."""
    flusher = _Flusher(handle)
    try:
        result = write(flusher)  # type: ignore[arg-type]
    except BaseException:
        with contextlib.suppress(OSError):  # its own error would hide the one raised here
            flusher.join()
        raise
    flusher.join()
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
    return result


def write_archive(
    tree: SourceTree, out: BinaryIO | None, compression: Compression, limits: Limits
) -> PackResult:
    """Write the archive of an already scanned ``tree`` to ``out`` (None: digests only).
    Raises SourceChangedError naming the entry that changed since the scan, LimitError
    (``max_expanded_bytes``, ``max_archive_bytes``) or the output's OSError."""
    writer = _ArchiveWriter(out, compression, limits)
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
    writer = _ArchiveWriter(out, compression, limits)
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
    only): each entry is checked unchanged since the scan (SourceChangedError naming it)."""

    def __init__(self, out: BinaryIO | None, compression: Compression, limits: Limits) -> None:
        self._sink = _Sink(out, limits)
        self._stream = _TarStream(new_encoder(compression, self._sink.write), limits)
        self._compression = compression

    def add(self, entry: SourceEntry) -> None:
        """Append one entry (header, and a file's data and padding)."""
        _, kind, key, target, name, path = entry
        self._stream.entry = name  # what a max_expanded_bytes error names
        if kind == "file":
            _write_file(name, path, key, self._stream)
        else:
            _write_other(name, path, kind, key, target, self._stream)

    def finish(self, tree: SourceTree) -> PackResult:
        """Check that no directory changed since the scan, end the stream, and describe it."""
        _check_directories_unchanged(tree)
        self._stream.entry = None  # the end-of-archive blocks belong to no entry
        self._stream.close()
        return PackResult(
            address=self._sink.address.digest(),
            content_digest=self._stream.content.digest(),
            entries=len(tree.entries),
            payload_bytes=tree.payload_bytes,
            archive_bytes=self._sink.size,
            compression=self._compression,
            layout=tree.layout,
        )

    def stop(self) -> None:
        """Stop the background work (see :meth:`_TarStream.stop`); raise its error, if any."""
        self._stream.stop()

    def stop_quietly(self) -> Exception | None:
        """:meth:`stop`, returning its error instead of raising it."""
        try:
            self._stream.stop()
        except Exception as error:
            return error
        return None


def _write_other(
    name: str, path: bytes, kind: Kind, key: StatKey, target: str, stream: _TarStream
) -> None:
    """A directory or a symbolic link: unchanged since the scan, then its header."""
    _check_unchanged(name, key, _lstat(name, path))
    if kind == "symlink" and _readlink(name, path) != target:
        raise SourceChangedError(name, "link target changed while packing")
    stream.write(header_bytes(name, kind, key[0] & 0o7777, 0, target))  # key[0]: st_mode


def _write_file(name: str, path: bytes, key: StatKey, stream: _TarStream) -> None:
    """A regular file: its header, its data and padding. The file read must be the one the
    scan saw: its reads must find exactly the scanned size, and its fstat after the read must
    equal the scan's lstat (``key``), which was taken before the read. (A separate fstat
    before the read would add nothing: whatever it could see differ from the scan, the fstat
    after sees too; the data read is then discarded with the whole archive.)"""
    try:
        fd = os.open(path, _OPEN_FILE)
    except OSError as error:
        raise SourceChangedError(name, f"cannot open file: {error.strerror}") from error
    try:
        mode, size = key[0] & 0o7777, key[3]  # st_mode, st_size
        stream.add_file(name, header_bytes(name, "file", mode, size), fd, size)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if stat_key(after) != key:
        raise SourceChangedError(name, _changed_size(after.st_size, size) or _CHANGED)


def _changed_size(now: int, size: int) -> str | None:
    """The message for a file whose size went from ``size`` to ``now`` while it was read."""
    if now > size:
        return _size_message("grew", f"now {now} bytes, beyond {size}")
    if now < size:
        return _size_message("shrank", f"now {now} of {size} bytes")
    return None


def _size_message(how: str, detail: str) -> str:
    """The message of a file that ``how`` ("grew", "shrank") while it was packed."""
    return f"{_SIZE_CHANGED}: file {how} while packing ({detail})"


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


def _read_into(fd: int, buffers: list[memoryview | bytearray]) -> int:
    """Read from ``fd`` into ``buffers`` in turn (``os.readv``); the one place file data
    enters the stream."""
    return os.readv(fd, buffers)


def _read(name: str, fd: int, buffers: list[memoryview | bytearray]) -> int:
    """:func:`_read_into`; a read error (the path now names a directory or a FIFO, or the
    disk failed) is a :class:`SourceChangedError` naming the file."""
    try:
        return _read_into(fd, buffers)
    except OSError as error:
        raise SourceChangedError(name, f"cannot read file: {error.strerror}") from error


def _size_changed(name: str, read: int, size: int, how: str) -> NoReturn:
    """Raise the error of a read that found the file shorter (``how == "shrank"``, ``read``
    bytes in all) or longer (``"grew"``) than the ``size`` bytes the scan saw (before or while
    it was read: either way the entry changed)."""
    detail = f"{read}/{size} bytes" if how == "shrank" else f"beyond {size} bytes"
    raise SourceChangedError(name, _size_message(how, detail))


class _Sink:
    """Receives compressed bytes: hashes them (the address), counts, bounds and writes them."""

    def __init__(self, out: BinaryIO | None, limits: Limits) -> None:
        self._out = out
        self._limits = limits
        self.address = new_hasher("sha256")
        self.size = 0

    def write(self, data: bytes | bytearray) -> None:
        self.size += len(data)
        self._limits.check("max_archive_bytes", self.size, None)
        self.address.update(data)
        if self._out is not None:
            self._out.write(data)


class _Flusher:
    """The archive file seen by the sink: writes pass through to ``handle``, and every
    ``FLUSH_EVERY`` bytes a background thread ``fdatasync``s what was written so far, so the
    disk writes overlap the packing and the final ``fsync`` has little left to wait for. At
    most one sync runs at a time; a sync error is raised by the write that would start the
    next one, or by ``join`` (which the caller runs before closing the file, then fsyncs as
    before)."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._fd = handle.fileno()
        self._unsynced = 0
        self._thread: threading.Thread | None = None
        self._error: OSError | None = None

    def write(self, data: bytes | bytearray) -> None:
        self._handle.write(data)
        self._unsynced += len(data)
        if self._unsynced >= FLUSH_EVERY and not (self._thread and self._thread.is_alive()):
            self.join()
            self._handle.flush()
            self._unsynced = 0
            self._thread = threading.Thread(target=self._sync, name="casstore-fdatasync")
            self._thread.start()

    def join(self) -> None:
        """Wait for the running sync; raise its error if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    def _sync(self) -> None:
        try:
            os.fdatasync(self._fd)
        except OSError as error:
            self._error = error


class _TarStream:
    """The uncompressed tar stream in fixed ``STREAM_BLOCK`` blocks: hashed (content digest,
    BLAKE3) and handed to the encoder, on a background thread once a block is full (see
    :class:`_Background`); file data is read straight into the block.

    A block is a fresh zeroed ``bytearray`` whose bytes from ``_fill`` on are never written
    before they are counted, so padding and the end-of-archive zeros only advance ``_fill``
    when they fit in the current block. ``max_expanded_bytes`` is checked after each piece
    (header, data read, padding), as if each were a separate write.
    """

    def __init__(self, encoder, limits: Limits) -> None:
        self._encoder = encoder
        self._limits = limits
        self._max_offset = limits.max_expanded_bytes
        self._block = bytearray(STREAM_BLOCK)
        self._view = memoryview(self._block)
        self._fill = 0
        self._scratch = bytearray(1)  # receives the byte past the expected end, if any
        self.offset = 0
        self.entry: str | None = None  # the entry being written (named by a limit error)
        self.content = new_hasher("blake3")
        self._background: _Background | None = None  # hashes and encodes full blocks

    def write(self, data: bytes) -> None:
        fill, size = self._fill, len(data)
        if fill + size < STREAM_BLOCK:  # fits without completing the block (headers, padding)
            self._block[fill : fill + size] = data
            self._fill = fill + size
            self.offset += size
            if self.offset > self._max_offset:
                self._over_limit()
            return
        view = memoryview(data)
        while view:
            take = min(len(view), STREAM_BLOCK - self._fill)
            self._block[self._fill : self._fill + take] = view[:take]
            self._advance(take)
            view = view[take:]

    def add_file(self, name: str, header: bytes, fd: int, size: int) -> None:
        """Append ``header``, ``size`` bytes of ``fd`` and the block padding; the file must
        end after exactly ``size`` bytes (else :class:`SourceChangedError`)."""
        fill = self._fill
        start = fill + len(header)
        end = start + size
        stop = end + pad(size)
        if stop >= STREAM_BLOCK or self.offset + (stop - fill) > self._max_offset:
            self.write(header)  # crosses a block or reaches the limit: piece by piece
            self._copy_file(name, fd, size)
            return
        self._block[fill:start] = header
        window = self._view[start:end]
        got = _read(name, fd, [window, self._scratch])
        if got != size:
            self._read_rest(name, fd, window, got, 0, size)
        self._fill = stop  # the padding is already zero
        self.offset += stop - fill

    def _read_rest(
        self, name: str, fd: int, window: memoryview, got: int, before: int, size: int
    ) -> None:
        """Complete the read of the last ``len(window)`` bytes of a ``size``-byte file (the
        first ``before`` bytes are already read) after the first read into ``window`` and the
        scratch byte returned ``got`` bytes, and check that the file ends there."""
        want, done = len(window), 0
        while got <= want - done:  # nothing reached the scratch byte
            if got == 0:
                _size_changed(name, before + done, size, "shrank")
            done += got
            if done == want:
                return
            got = _read(name, fd, [window[done:], self._scratch])
        _size_changed(name, before + done, size, "grew")

    def _copy_file(self, name: str, fd: int, size: int) -> None:
        """Append ``size`` bytes of ``fd`` and the padding, block by block."""
        left = size
        while True:
            room = STREAM_BLOCK - self._fill
            if left < room:  # the rest fits: read it and check that the file ends there
                window = self._view[self._fill : self._fill + left]
                got = _read(name, fd, [window, self._scratch])
                if got != left:
                    self._read_rest(name, fd, window, got, size - left, size)
                self._advance(left)
                break
            got = _read(name, fd, [self._view[self._fill :]])
            if got == 0:
                _size_changed(name, size - left, size, "shrank")
            left -= got
            self._advance(got)
        if size % BLOCK:
            self.write(_ZEROS[: pad(size)])

    def close(self) -> None:
        """Write the end-of-archive blocks and flush everything to the encoder."""
        self.write(end_of_archive(self.offset))
        if self._fill and self._background is not None:
            self._background.put(self._block[: self._fill])
        elif self._fill:  # the whole stream in one block: no thread to start
            self._encode(self._block[: self._fill])
        self.stop()
        self._encoder.finish()

    def stop(self) -> None:
        """Hash and encode every block emitted so far, and stop the background thread; raise
        the error that hashing or encoding met, if any (it concerns earlier bytes of the stream
        than anything the caller met since). Idempotent; call it on every way out."""
        if self._background is not None:
            background, self._background = self._background, None
            background.join()

    def _advance(self, count: int) -> None:
        self._fill += count
        self.offset += count
        if self.offset > self._max_offset:
            self._over_limit()
        if self._fill == STREAM_BLOCK:
            self._emit(self._block)
            self._block = bytearray(STREAM_BLOCK)
            self._view = memoryview(self._block)
            self._fill = 0

    def _over_limit(self) -> None:
        self._limits.check("max_expanded_bytes", self.offset, self.entry)

    def _emit(self, block: bytearray) -> None:
        """Hand a full block to the background thread (started by the first one)."""
        if self._background is None:
            self._background = _Background(self._encode)
        self._background.put(block)

    def _encode(self, block: bytearray) -> None:
        self.content.update(block)
        self._encoder.feed(block)


class _Background:
    """Runs ``work`` over the blocks handed to ``put``, in order, on a thread of its own, at
    most ``BACKGROUND_BLOCKS`` blocks behind: reading files and building headers (Python code)
    overlaps hashing, compressing and writing the archive (C code that releases the GIL).

    After ``work`` fails, later blocks are skipped and ``put`` or ``join`` raise its error."""

    def __init__(self, work) -> None:
        self._work = work
        self._blocks: queue.Queue[bytearray | None] = queue.Queue(BACKGROUND_BLOCKS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="casstore-pack", daemon=True)
        self._thread.start()

    def put(self, block: bytearray) -> None:
        if self._error is not None:
            raise self._error
        self._blocks.put(block)

    def join(self) -> None:
        """Wait until every block is done and the thread ends; raise the error met, if any."""
        self._blocks.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while (block := self._blocks.get()) is not None:
            if self._error is None:
                try:
                    self._work(block)
                except BaseException as error:  # raised again by put or join
                    self._error = error
