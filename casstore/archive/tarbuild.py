"""Building the uncompressed tar stream: fixed blocks, hashed and compressed in the background.

:class:`TarStream` builds the stream in :data:`~casstore.archive.compress.STREAM_BLOCK`
blocks, reading file data straight into the block; a full block is hashed (the content digest)
and handed to the encoder on a thread of its own (:class:`_Background`), so reading files
overlaps hashing and compressing. A file that does not end after exactly the size the scan saw
is a :class:`SourceChangedError` naming it.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import NoReturn

from casstore.archive.compress import STREAM_BLOCK, Encoder
from casstore.archive.limits import Limits
from casstore.archive.tarformat import BLOCK, end_of_archive, pad
from casstore.digest import new_hasher
from casstore.errors import SourceChangedError

__all__ = ["BACKGROUND_BLOCKS", "TarStream", "size_change"]

_ZEROS = bytes(BLOCK)
_SIZE_CHANGED = "entry changed while packing"  # followed by how the size changed
BACKGROUND_BLOCKS = 4  # full blocks that may wait to be hashed and compressed


class TarStream:
    """The uncompressed tar stream in fixed ``STREAM_BLOCK`` blocks: hashed (content digest,
    BLAKE3) and handed to the encoder, on a background thread once a block is full (see
    :class:`_Background`); file data is read straight into the block.

    A block is a fresh zeroed ``bytearray`` whose bytes from ``_fill`` on are never written
    before they are counted, so padding and the end-of-archive zeros only advance ``_fill``
    when they fit in the current block. ``max_expanded_bytes`` is checked after each piece
    (header, data read, padding), as if each were a separate write.
    """

    def __init__(self, encoder: Encoder, limits: Limits) -> None:
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

    def __init__(self, work: Callable[[bytearray], None]) -> None:
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


def size_change(now: int, size: int) -> str | None:
    """The message for a file whose size went from ``size`` to ``now`` while it was read
    (None when it did not change)."""
    if now > size:
        return _size_message("grew", f"now {now} bytes, beyond {size}")
    if now < size:
        return _size_message("shrank", f"now {now} of {size} bytes")
    return None


def _size_message(how: str, detail: str) -> str:
    """The message of a file that ``how`` ("grew", "shrank") while it was packed."""
    return f"{_SIZE_CHANGED}: file {how} while packing ({detail})"
