"""Opening the files casstore reads: regular files only, and never a wait.

A path given to casstore to read (an archive to verify or extract, a views file, a metric
script, a saved-trials file) or found in a tree it reads (a trial's ``result.json``, a job's
``config.json``, a task's ``task.toml``) must be a **regular file**. Anything else is refused at
once with a :class:`~casstore.errors.UsageError` naming the path and the rule, ``not a regular
file (a FIFO)``: a FIFO would block the read until some writer appears (``casstore verify
FIFO`` used to hang), ``/dev/zero`` never ends, a directory or a socket holds no bytes.

The check is made on the opened descriptor, not on the path: :func:`open_regular` opens with
``O_NONBLOCK`` (opening a FIFO for reading does not wait for a writer; a regular file ignores
the flag) and ``O_CLOEXEC``, then ``fstat``\\ s the descriptor, so nothing swapped in between a
check and the open can be read. A path that cannot be opened at all (a socket, a missing
file) is described by a ``stat`` of the path for the message only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO

from casstore.errors import UsageError, printable

__all__ = [
    "OPEN_FLAGS",
    "check_regular",
    "file_kind",
    "not_regular",
    "open_binary",
    "open_regular",
    "path_problem",
    "read_if_regular",
    "read_regular",
]

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
"""How an input is opened: read only, without waiting for a FIFO's writer, not inherited."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISREG, "a regular file"),
)


def file_kind(mode: int) -> str:
    """What an ``st_mode`` is, as messages name it: ``a FIFO``, ``a directory``, ..."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "an unknown kind of file"


def not_regular(mode: int) -> str | None:
    """The rule an ``st_mode`` breaks, ``not a regular file (a FIFO)``; None for a regular
    file."""
    if stat.S_ISREG(mode):
        return None
    return f"not a regular file ({file_kind(mode)})"


def check_regular(fd: int, path: str | os.PathLike[str]) -> os.stat_result:
    """The ``fstat`` of the open descriptor ``fd``; UsageError naming ``path`` unless it is a
    regular file."""
    info = os.fstat(fd)
    problem = not_regular(info.st_mode)
    if problem is not None:
        raise UsageError(printable(str(path)), problem)
    return info


def open_regular(
    path: str | os.PathLike[str],
    unopenable: str = "cannot open",
    *,
    dir_fd: int | None = None,
    follow: bool = True,
) -> int:
    """A descriptor of the regular file at ``path`` (relative to ``dir_fd`` when given; a
    final symbolic link refused unless ``follow``), opened with :data:`OPEN_FLAGS`.

    UsageError naming ``path``: ``not a regular file (a FIFO)`` (a directory, a device, a
    socket, ...), or ``<unopenable>: <reason>`` when it cannot be opened at all (``cannot
    open: No such file or directory``). The descriptor is the caller's to close.
    """
    flags = OPEN_FLAGS if follow else OPEN_FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as error:
        raise _unopenable(path, unopenable, error, dir_fd, follow) from None
    try:
        check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unopenable(
    path: str | os.PathLike[str],
    unopenable: str,
    error: OSError,
    dir_fd: int | None,
    follow: bool,
) -> UsageError:
    """The error for a path ``os.open`` refused: a special file that cannot be opened (a
    socket: ENXIO) is named by its kind, anything else by the reason."""
    rule = path_problem(path, dir_fd=dir_fd, follow=follow)
    return UsageError(printable(str(path)), rule or f"{unopenable}: {error.strerror or error}")


def path_problem(
    path: str | os.PathLike[str], *, dir_fd: int | None = None, follow: bool = True
) -> str | None:
    """What :func:`not_regular` says of the file at ``path`` by its ``stat``; None when it is
    a regular file or cannot be examined. For messages after an open failed only: a check
    that decides what is read must be made on the descriptor (:func:`check_regular`)."""
    try:
        info = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    except OSError:
        return None
    return not_regular(info.st_mode)


def open_binary(path: str | os.PathLike[str], unopenable: str = "cannot open") -> BinaryIO:
    """The regular file at ``path`` as a binary file object (:func:`open_regular`'s rules)."""
    return os.fdopen(open_regular(path, unopenable), "rb")


def read_regular(path: str | os.PathLike[str], unopenable: str = "cannot open") -> bytes:
    """The bytes of the regular file at ``path`` (:func:`open_regular`'s rules)."""
    with open_binary(path, unopenable) as handle:
        return handle.read()


def read_if_regular(
    path: str | os.PathLike[str], accept: Callable[[os.stat_result], bool]
) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (a final symbolic link not followed)
    whose ``fstat`` ``accept`` accepts; None when it is absent, a link, not a regular file or
    not accepted (``accept`` may raise instead): a file casstore finds rather than is given
    (a task's ``task.toml``, an entry of the validation cache). OSError reading it is raised."""
    try:
        fd = os.open(path, OPEN_FLAGS | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not accept(info):
            return None
        return os.read(fd, info.st_size + 1)
    finally:
        os.close(fd)
