"""Where the compressed archive goes: its hash, size and bound, and the file it is written to.

:class:`Sink` receives the compressed bytes (the address, the archive size, the
``max_archive_bytes`` bound). :func:`write_to_path` writes an archive file atomically: a
temporary file beside it, ``fdatasync``-ed in the background while it is written
(:class:`_Flusher`), fsync-ed and renamed; nothing is left on failure.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from casstore.archive.limits import Limits
from casstore.archive.summary import ArchiveBytes
from casstore.errors import UsageError, missing_folder

__all__ = ["FLUSH_EVERY", "Sink", "check_output", "write_to_path"]

FLUSH_EVERY = 32 << 20  # archive bytes between two background fdatasync calls
# tempfile.mkstemp's flags, without its import (random and three extension modules)
_CREATE = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def check_output(out: Path, source: Path) -> Path:
    """``out`` made absolute; UsageError naming it when packing cannot write there."""
    absolute = Path(os.path.abspath(out))
    if absolute.is_dir():
        raise UsageError(str(out), "output is a directory; name the archive file")
    if absolute.exists() and not absolute.is_file():  # replacing /dev/null would destroy it
        raise UsageError(str(out), "output exists and is not a regular file (device, FIFO?)")
    if not absolute.parent.is_dir():
        raise UsageError(str(out), missing_folder(out))
    if absolute.parent.resolve().is_relative_to(Path(source).resolve()):
        raise UsageError(str(out), "the output is inside the task directory being packed")
    return absolute


def write_to_path[T](out: Path, write: Callable[[BinaryIO], T]) -> T:
    """Run ``write`` on a temporary file beside ``out``, fsync it and rename it to ``out``
    (mode 0o644); on any failure the temporary file is removed and the error raised — the
    first error: flushing or closing the temporary file after it never replaces it. An
    OSError of the output (disk full, read-only folder) names ``out``, not the temporary."""
    fd, temporary = _create_temporary(out)
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


def _create_temporary(out: Path) -> tuple[int, str]:
    """A new file ``.<name>.<random>.tmp`` beside ``out``, mode 0o600 (never a file that
    exists: ``O_EXCL``, as ``tempfile.mkstemp``): its descriptor and path."""
    for _ in range(100):
        temporary = os.path.join(out.parent, f".{out.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(temporary, _CREATE, 0o600), temporary
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(out.parent))


def _write_synced[T](handle: BinaryIO, write: Callable[[BinaryIO], T]) -> T:
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


class Sink:
    """Receives compressed bytes: hashes them (the address), counts, bounds and writes them."""

    def __init__(self, out: BinaryIO | None, limits: Limits) -> None:
        self._out = out
        self.bytes = ArchiveBytes(limits)

    def write(self, data: bytes | bytearray) -> None:
        self.bytes.add(data)
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
