"""Deterministic compression of the tar stream, and bounded decompression.

gzip (the default): one member, header with mtime 0, no file name, no flags, XFL 0 and OS byte
255. The deflate stream is cut into fixed 1 MiB blocks compressed in parallel (each block primed
with the previous 32 KiB as its dictionary and ended by a sync flush, as pigz does), so the
bytes depend only on the input, never on the number of threads. zstd: level 3, checksum on, no
content size, fixed 1 MiB jobs compressed by one or more worker threads (zstd's output is the
same for any number of workers >= 1 with the same parameters; the small job size keeps peak
memory near 60 MiB where zstd's default jobs take about 200 MiB). ``none``: the tar stream
as is.

Decoders yield the uncompressed stream in pieces of at most :data:`STREAM_BLOCK` bytes whatever
the input (no decompression bomb reaches memory), refuse trailing bytes after the compressed
stream, and raise :class:`CorruptArchiveError` for any decoding failure.
"""

from __future__ import annotations

import os
import queue
import struct
import threading
import weakref
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from typing import Protocol

from isal.isal_zlib import crc32  # ISA-L: zlib's CRC-32 at ~6x its speed

from casstore.archive.formats import COMPRESSIONS, Compression
from casstore.errors import CorruptArchiveError, NotCanonicalError, UsageError

__all__ = [
    "COMPRESSIONS",
    "STREAM_BLOCK",
    "Compression",
    "Encoder",
    "check_compression",
    "decode",
    "detect",
    "new_encoder",
]

STREAM_BLOCK = 1 << 20
"""The block of the uncompressed tar stream (1 MiB): the packer builds, hashes and hands the
stream to the encoder in blocks of this size, gzip compresses it in blocks of this size, and
the decoders yield at most this many bytes at a time."""
GZIP_LEVEL = 6
ZSTD_LEVEL = 3
ZSTD_JOB_SIZE = 1 << 20
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_WINDOW = 1 << 15
_MAX_ZSTD_WINDOW = 1 << 27
_HEAD = 8  # bytes that hold any header _ZstdFrameEnd parses (5 of a frame's, 3 of a block's)

Write = Callable[[bytes | bytearray], object]


class _Source(Protocol):
    """What a decoder reads the compressed stream from: a binary file, or anything with its
    ``read(size)`` (at most ``size`` bytes; fewer, as a raw file may, and ``b""`` only at the
    end)."""

    def read(self, size: int, /) -> bytes: ...


class Encoder(Protocol):
    """Compresses a stream handed over in blocks; ``write`` receives the compressed bytes.

    A block must not be modified once fed: the gzip encoder may still be compressing it on a
    worker thread, and ``none`` hands the block itself to ``write``."""

    def feed(self, block: bytes | bytearray) -> None: ...

    def finish(self) -> None: ...


def workers() -> int:
    """Threads used for compression: the machine's cores (at least 1)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def check_compression(compression: object) -> Compression:
    """``compression`` when it is one of :data:`COMPRESSIONS`; UsageError naming it otherwise
    (an archive is never written with a compression nobody asked for)."""
    if isinstance(compression, str) and compression in COMPRESSIONS:
        return compression
    raise UsageError("compression", f"{compression!r} is not gzip, zstd or none")


def new_encoder(compression: Compression, write: Write) -> Encoder:
    """An encoder for ``compression`` that passes compressed bytes to ``write`` in order;
    UsageError for an unknown compression (:func:`check_compression`)."""
    compression = check_compression(compression)
    if compression == "gzip":
        return _GzipEncoder(write)
    if compression == "zstd":
        return _ZstdEncoder(write)
    return _PlainEncoder(write)


class _PlainEncoder:
    def __init__(self, write: Write) -> None:
        self._write = write

    def feed(self, block: bytes | bytearray) -> None:
        self._write(block)  # no copy: a fed block is never modified (see Encoder)

    def finish(self) -> None:
        pass


class _ZstdEncoder:
    def __init__(self, write: Write) -> None:
        import zstandard  # here: a gzip or plain stream never loads it (start-up time)

        self._write = write
        parameters = zstandard.ZstdCompressionParameters.from_level(
            ZSTD_LEVEL,
            threads=workers(),
            job_size=ZSTD_JOB_SIZE,
            write_checksum=True,
            write_content_size=False,
        )
        self._zstd = zstandard.ZstdCompressor(compression_params=parameters).compressobj()

    def feed(self, block: bytes | bytearray) -> None:
        out = self._zstd.compress(block)
        if out:
            self._write(out)

    def finish(self) -> None:
        self._write(self._zstd.flush())


def _deflate(block: bytes | bytearray, dictionary: bytes, last: bool) -> bytes:
    compressor = (
        zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15, 8, zdict=dictionary)
        if dictionary
        else zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15, 8)
    )
    out = compressor.compress(block)
    return out + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


class _GzipEncoder:
    """Block-parallel deflate: fixed :data:`STREAM_BLOCK` blocks, so the output never depends
    on timing."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._workers = workers()
        self._pool: _Deflaters | None = None  # started with the first full block
        self._pending: deque[_Deflation | bytes] = deque()
        self._buffer = bytearray()
        self._dictionary = b""
        self._crc = 0
        self._size = 0
        write(GZIP_HEADER)

    def feed(self, block: bytes | bytearray) -> None:
        if not self._buffer and len(block) == STREAM_BLOCK:
            self._submit(block, last=False)
            return
        self._buffer += block
        while len(self._buffer) >= STREAM_BLOCK:
            self._submit(bytes(self._buffer[:STREAM_BLOCK]), last=False)
            del self._buffer[:STREAM_BLOCK]

    def finish(self) -> None:
        self._submit(bytes(self._buffer), last=True)
        while self._pending:
            self._drain()
        if self._pool is not None:
            self._pool.stop()
        self._write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))

    def _submit(self, block: bytes | bytearray, last: bool) -> None:
        self._crc = crc32(block, self._crc)
        self._size += len(block)
        if self._workers == 1 or (last and not self._pending):  # nothing to overlap with
            self._pending.append(_deflate(block, self._dictionary, last))
        else:
            if self._pool is None:
                self._pool = _Deflaters(self._workers)
            self._pending.append(self._pool.submit(block, self._dictionary, last))
        self._dictionary = bytes(block[-_WINDOW:])
        while len(self._pending) > 2 * self._workers:
            self._drain()

    def _drain(self) -> None:
        done = self._pending.popleft()
        self._write(done if isinstance(done, bytes) else done.result())


class _Deflation:
    """One block's deflate, run by a :class:`_Deflaters` thread; ``result`` waits for its
    bytes (or raises the error it met)."""

    __slots__ = ("_done", "_outcome", "args")

    def __init__(self, block: bytes | bytearray, dictionary: bytes, last: bool) -> None:
        self.args: tuple = (block, dictionary, last)
        self._done = threading.Event()
        self._outcome: bytes | BaseException = b""

    def run(self) -> None:
        try:
            self._outcome = _deflate(*self.args)
        except BaseException as error:  # raised again by result
            self._outcome = error
        self.args = ()  # the block may be freed
        self._done.set()

    def result(self) -> bytes:
        self._done.wait()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome


class _Deflaters:
    """``count`` threads running the :class:`_Deflation` jobs of :meth:`submit`: plain
    threads and a queue, as concurrent.futures' import (logging with it) is start-up time.
    As with a ThreadPoolExecutor, the threads of a pool dropped without :meth:`stop` (a failed
    pack) end when it is collected."""

    def __init__(self, count: int) -> None:
        jobs: queue.SimpleQueue[_Deflation | None] = queue.SimpleQueue()
        self._jobs, self._threads = jobs, [_deflate_thread(jobs) for _ in range(count)]
        self._end = weakref.finalize(self, _end_jobs, jobs, count)  # holds no self

    def submit(self, block: bytes | bytearray, dictionary: bytes, last: bool) -> _Deflation:
        job = _Deflation(block, dictionary, last)
        self._jobs.put(job)
        return job

    def stop(self) -> None:
        """End the threads once the submitted blocks are done."""
        self._end()
        for thread in self._threads:
            thread.join()


def _deflate_thread(jobs: queue.SimpleQueue[_Deflation | None]) -> threading.Thread:
    def run() -> None:
        while (job := jobs.get()) is not None:
            job.run()

    thread = threading.Thread(target=run, name="casstore-deflate", daemon=True)
    thread.start()
    return thread


def _end_jobs(jobs: queue.SimpleQueue[_Deflation | None], count: int) -> None:
    for _ in range(count):
        jobs.put(None)


def detect(head: bytes) -> Compression:
    """The compression of a stream starting with ``head`` (its first 512 bytes), by magic.

    Raises :class:`CorruptArchiveError` when ``head`` is neither gzip, zstd nor a POSIX tar.
    """
    if head.startswith(GZIP_HEADER[:2]):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head[257:263] == b"ustar\0":
        return "none"
    raise CorruptArchiveError(None, "not an archive (neither gzip, zstd nor POSIX tar)")


def decode(compression: Compression, source: _Source) -> Iterator[bytes]:
    """Yield the uncompressed stream of ``source`` in pieces of at most ``STREAM_BLOCK`` bytes.

    Raises :class:`CorruptArchiveError` for a truncated or damaged stream, a bad checksum or
    bytes after its end; :class:`NotCanonicalError` for a gzip header the packager never writes.
    """
    if compression == "gzip":
        return _gunzip(source)
    if compression == "zstd":
        return _unzstd(source)
    return iter(lambda: source.read(STREAM_BLOCK), b"")


def _gunzip(source: _Source) -> Iterator[bytes]:
    header = _read_exact(source, len(GZIP_HEADER))
    if header != GZIP_HEADER:
        raise NotCanonicalError(
            None, "gzip header differs from the one casstore writes (flags 0, mtime 0, OS 255)"
        )
    inflater = zlib.decompressobj(-15)
    crc, size = 0, 0
    pending = b""
    while not inflater.eof:
        pending = inflater.unconsumed_tail or source.read(STREAM_BLOCK)
        if not pending:
            raise CorruptArchiveError(None, "gzip stream is truncated")
        try:
            out = inflater.decompress(pending, STREAM_BLOCK)
        except zlib.error as error:
            raise CorruptArchiveError(None, f"gzip stream is damaged: {error}") from error
        crc, size = crc32(out, crc), size + len(out)
        if out:
            yield out
    trailer = inflater.unused_data
    if len(trailer) < 8:
        trailer += _read_exact(source, 8 - len(trailer))
    _check_gzip_trailer(trailer[:8], crc, size)
    if trailer[8:] or source.read(1):
        raise CorruptArchiveError(None, "trailing bytes after the gzip stream")


def _read_exact(source: _Source, size: int) -> bytes:
    """``size`` bytes of ``source`` (fewer only at its end), however short its reads are."""
    data = source.read(size)
    while len(data) < size and (more := source.read(size - len(data))):
        data += more
    return data


def _check_gzip_trailer(trailer: bytes, crc: int, size: int) -> None:
    if len(trailer) < 8:
        raise CorruptArchiveError(None, "gzip trailer is truncated")
    expected_crc, expected_size = struct.unpack("<II", trailer)
    if expected_crc != crc:
        raise CorruptArchiveError(None, "gzip CRC-32 does not match the data")
    if expected_size != size & 0xFFFFFFFF:
        raise CorruptArchiveError(None, "gzip length does not match the data")


def _unzstd(source: _Source) -> Iterator[bytes]:
    import zstandard  # here: a gzip or plain stream never loads it (start-up time)

    tracker = _ZstdFrameEnd(source)
    decompressor = zstandard.ZstdDecompressor(max_window_size=_MAX_ZSTD_WINDOW)
    # zstandard's stub wants IO[bytes]; any object with read(size) is accepted
    reader = decompressor.stream_reader(tracker, read_size=STREAM_BLOCK)  # type: ignore[arg-type]
    try:
        while chunk := reader.read(STREAM_BLOCK):
            yield chunk
    except zstandard.ZstdError as error:
        raise CorruptArchiveError(None, f"zstd stream is damaged: {error}") from error
    tracker.drain()
    if tracker.end is None or tracker.end > tracker.total:
        raise CorruptArchiveError(None, "zstd frame is truncated")
    if tracker.total != tracker.end:
        raise CorruptArchiveError(
            None, f"{tracker.total - tracker.end} trailing bytes after the zstd frame"
        )


class _ZstdFrameEnd:
    """Reads through ``source`` and follows the zstd frame's block headers as the bytes pass,
    so that ``end`` (the frame's length) is known without seeking or buffering payloads: only
    a header cut in two by a read is kept until the next read. ``read`` ends at ``end``, so the
    decompressor sees one frame and nothing after it; :meth:`drain` counts the rest."""

    def __init__(self, source: _Source) -> None:
        self._source = source
        self._pending = b""  # the first bytes of a header the previous read cut
        self._next = 0  # stream offset of the next header to parse
        self._checksum = False
        self._in_blocks = False
        self.total = 0
        self.end: int | None = None

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        if self.end is None and data:
            self._scan(data)
        self.total += len(data)
        if self.end is not None and self.total > self.end:
            return data[: max(0, len(data) - (self.total - self.end))]
        return data

    def drain(self) -> None:
        """Read the source to its end (``total`` then counts every byte)."""
        while data := self._source.read(STREAM_BLOCK):
            self.total += len(data)

    def _scan(self, data: bytes) -> None:
        """Parse the headers that end in ``data`` (the stream from offset ``total`` on)."""
        while self.end is None:
            start = self._next - self.total
            if start >= len(data):
                return
            head = self._pending + data[:_HEAD] if start < 0 else data[start : start + _HEAD]
            if not self._parse(head):
                self._pending = head  # cut short by the end of data: wait for the next read
                return
            self._pending = b""

    def _parse(self, head: bytes) -> bool:
        if not self._in_blocks:
            if len(head) < 5:
                return False
            descriptor = head[4]
            single, dictionary, content = (descriptor >> 5) & 1, descriptor & 3, descriptor >> 6
            header = 5 + (1 - single) + (0, 1, 2, 4)[dictionary] + (single, 2, 4, 8)[content]
            self._checksum, self._in_blocks = bool(descriptor & 4), True
            self._next += header
            return True
        if len(head) < 3:
            return False
        raw = head[0] | head[1] << 8 | head[2] << 16
        self._next += 3 + (1 if (raw >> 1) & 3 == 1 else raw >> 3)
        if raw & 1:
            self.end = self._next + (4 if self._checksum else 0)
        return True
