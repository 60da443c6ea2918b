"""Reading an archive in stages that overlap: the file read and hashed, its stream decoded.

Verification is three kinds of work: reading the archive file and hashing it (its address,
SHA-256), decompressing it, and walking the tar stream with its checks (the caller, on its own
thread). hashlib, zlib and zstd release the GIL while they work, so :func:`decoded_stream` runs
the first two as stages on their own threads, each a few blocks ahead of the next: the three
use the machine's cores at once where they would take turns on one.

Each stage hands its output on in order through a bounded queue (at most :data:`DEPTH` blocks of
``STREAM_BLOCK`` bytes: the streaming pass stays in bounded memory, and no decompression bomb
gets further ahead than that). An exception in a stage reaches the consumer at the place in the
stream where it happened, as the same exception a single thread would have raised there.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import BinaryIO, TypeVar

from casstore.archive.compress import STREAM_BLOCK, Compression, decode
from casstore.archive.limits import Limits
from casstore.archive.summary import ArchiveBytes
from casstore.errors import CorruptArchiveError

__all__ = ["DEPTH", "Prefetch", "decoded_blocks", "decoded_stream"]

DEPTH = 4
"""Blocks a stage may run ahead of its consumer."""

T = TypeVar("T")


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class Prefetch[T]:
    """The items of ``items``, produced on a thread ``depth`` items ahead; iterate in order,
    then :meth:`close` (also after an error: it stops the thread and waits for it)."""

    def __init__(self, items: Iterator[T], depth: int, name: str) -> None:
        self._queue: queue.Queue[object] = queue.Queue(depth)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._run, args=(items,), name=name, daemon=True)
        self._thread.start()

    def _run(self, items: Iterator[T]) -> None:
        try:
            for item in items:
                if not self._offer(item):
                    return
            self._offer(_END)
        except BaseException as error:  # handed to the consumer, raised there
            self._offer(_Failed(error))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def _offer(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def __iter__(self) -> Prefetch[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._finished = True
            raise StopIteration
        if isinstance(item, _Failed):
            self._finished = True
            raise item.error
        return item  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the producing thread (if still running) and wait for it."""
        self._stop.set()
        self._thread.join()


def decoded_stream(
    handle: BinaryIO, compression: Compression, limits: Limits
) -> AbstractContextManager[tuple[Iterator[bytes], ArchiveBytes]]:
    """The uncompressed stream of the archive open in ``handle`` (at its start), as chunks of
    at most ``STREAM_BLOCK`` bytes, and the :class:`ArchiveBytes` that count, bound and hash
    the file's bytes as they are read (complete once the chunks are used up). The stages stop
    when the block exits."""
    return decoded_blocks(iter(partial(handle.read, STREAM_BLOCK), b""), compression, limits)


@contextmanager
def decoded_blocks(
    blocks: Iterator[bytes], compression: Compression, limits: Limits, prefetch: bool = True
) -> Iterator[tuple[Iterator[bytes], ArchiveBytes]]:
    """:func:`decoded_stream` of an archive given as its compressed bytes ``blocks`` (in
    order, of any sizes; e.g. as they arrive from the network), pulled on the first stage's
    thread (``prefetch`` False: on the consumer's, for bytes already in memory, where a
    thread would only add a hand-off)."""
    source = ArchiveBytes(limits)
    inline = _counted(blocks, source)
    counted: Iterator[bytes] = inline
    stages: list[Prefetch[bytes]] = []
    if prefetch:
        counted = Prefetch(inline, DEPTH, "casstore-read")
        stages.append(counted)
    try:
        chunks: Iterator[bytes] = counted
        if compression != "none":
            decoded = _decoded(compression, _BlockReader(counted))
            chunks = Prefetch(decoded, DEPTH, "casstore-decode")
            stages.append(chunks)
        yield chunks, source
    finally:
        for stage in reversed(stages):
            stage.close()
        inline.close()


def _counted(blocks: Iterator[bytes], source: ArchiveBytes) -> Generator[bytes]:
    try:
        for block in blocks:
            source.add(block)
            yield block
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()


def _decoded(compression: Compression, reader: _BlockReader) -> Iterator[bytes]:
    yield from decode(compression, reader)
    if reader.read(1):
        raise CorruptArchiveError(None, "trailing bytes after the compressed stream")


class _BlockReader:
    """``read(size)`` over a stream of blocks: at most ``size`` bytes from the block at hand
    (fewer at a block's end, ``b""`` only at the end), whole blocks without a copy."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self._blocks = blocks
        self._rest = b""

    def read(self, size: int) -> bytes:
        rest = self._rest or next(self._blocks, b"")
        if len(rest) <= size:
            self._rest = b""
            return rest
        self._rest = rest[size:]
        return rest[:size]
