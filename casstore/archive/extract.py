"""Writing checked members to disk without ever trusting the disk.

Members arrive in canonical depth-first order after their checks, so the parent of each one is
the innermost directory opened so far: the extractor keeps a stack of directory descriptors
and creates every entry relative to its parent's descriptor with ``O_EXCL | O_NOFOLLOW``
(never following a link on disk), inside the fresh private staging directory of its
:class:`~casstore.archive.destination.Destination` (the rule for ``DEST``: missing or an empty
directory). A file is created with its mode when ``open`` can give it (no bits beyond
``0o777``, none the umask clears), else its mode is set with ``fchmod``: three system calls
for a small file (open, write, close; GNU tar makes six). Directories get their modes last,
deepest first; nothing is chowned. ``commit`` moves the result into place with
``RENAME_NOREPLACE``; ``abort`` removes it.
"""

from __future__ import annotations

import os
from pathlib import Path

from casstore.archive.destination import Destination
from casstore.archive.tarformat import Kind
from casstore.archive.tarstream import Sink

__all__ = ["Extractor"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Extractor:
    """Extracts into ``dest`` (missing, or an empty directory:
    :class:`~casstore.archive.destination.Destination`)."""

    def __init__(self, dest: Path) -> None:
        self.destination = Destination(dest)
        self._stack: list[tuple[tuple[str, ...], int]] = []
        try:
            self._root = os.open(self.destination.staging, _DIR_FLAGS)
        except BaseException:
            self.destination.abort()
            raise
        self._dir_modes: list[tuple[tuple[str, ...], int]] = []
        self._top = ""
        self._umask = _umask()

    def add(
        self, name: str, kind: Kind, mode: int, parts: tuple[str, ...], linkname: str
    ) -> Sink | None:
        """Create the member ``name`` (``parts`` below the top directory; ``()`` is the top
        itself); for a file, return the sink its data is written to. The caller has checked
        the member already."""
        parent = self._parent(parts)
        entry = parts[-1] if parts else name
        if not parts:
            self._top = name
        if kind == "dir":
            os.mkdir(entry, 0o700, dir_fd=parent)
            self._stack.append((parts, os.open(entry, _DIR_FLAGS, dir_fd=parent)))
            self._dir_modes.append((parts, mode))
            return None
        if kind == "symlink":
            os.symlink(linkname, entry, dir_fd=parent)
            return None
        if mode & ~0o777 or mode & self._umask:  # open() cannot give this mode: fchmod it
            return _File(os.open(entry, _FILE_FLAGS, 0o600, dir_fd=parent), mode)
        return _File(os.open(entry, _FILE_FLAGS, mode, dir_fd=parent), None)

    def _parent(self, parts: tuple[str, ...]) -> int:
        while self._stack and self._stack[-1][0] != parts[:-1]:
            os.close(self._stack.pop()[1])
        return self._stack[-1][1] if parts else self._root

    def commit(self) -> None:
        """Apply directory modes, deepest first, and move the result to ``dest`` atomically."""
        self._close_stack()
        self._apply_dir_modes()
        os.close(self._root)
        self._root = -1
        self.destination.commit(0o777 & ~self._umask)

    def _apply_dir_modes(self) -> None:
        # The directories again in archive order, each opened relative to its parent's
        # descriptor (no path grows beyond PATH_MAX however deep the tree), and its mode set
        # when it is left: after everything below it, before its parent.
        stack: list[tuple[tuple[str, ...], int, int]] = []
        try:
            for parts, mode in self._dir_modes:
                while stack and stack[-1][0] != parts[:-1]:
                    _chmod_and_close(*stack.pop()[1:])
                parent = stack[-1][1] if stack else self._root
                name = parts[-1] if parts else self._top
                stack.append((parts, os.open(name, _DIR_FLAGS, dir_fd=parent), mode))
            while stack:
                _chmod_and_close(*stack.pop()[1:])
        finally:
            for _, fd, _ in stack:
                os.close(fd)

    def abort(self) -> None:
        """Remove everything written so far."""
        self._close_stack()
        if self._root >= 0:
            os.close(self._root)
            self._root = -1
        self.destination.abort()

    def _close_stack(self) -> None:
        while self._stack:
            os.close(self._stack.pop()[1])


class _File:
    """A file being extracted: its data written as it is read, then its mode set (when the
    creation could not set it) and the descriptor closed."""

    __slots__ = ("_fd", "_mode")

    def __init__(self, fd: int, mode: int | None) -> None:
        self._fd = fd
        self._mode = mode

    def write(self, data: memoryview) -> None:
        while data:
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        try:
            if self._mode is not None:
                os.fchmod(fd, self._mode)
        finally:
            os.close(fd)


def _chmod_and_close(fd: int, mode: int) -> None:
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
