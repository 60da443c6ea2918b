"""Writing checked members to disk without ever trusting the disk.

Members arrive in canonical depth-first order after their checks, so the parent of each one is
the innermost directory opened so far: the extractor keeps a stack of directory descriptors
and creates every entry relative to its parent's descriptor with ``O_EXCL | O_NOFOLLOW``
(never following a link on disk), inside the fresh private staging directory of its
:class:`~casstore.archive.destination.Destination` (the rule for ``DEST``: missing or an empty
directory). Modes are applied with ``fchmod`` (directories last, deepest first); nothing is
chowned. ``commit`` moves the result into place with ``RENAME_NOREPLACE``; ``abort`` removes
it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from casstore.archive.destination import Destination
from casstore.archive.tarformat import Member

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

    def add(self, member: Member, parts: tuple[str, ...], data: Iterable[memoryview]) -> None:
        """Create ``member`` (``parts`` below the top directory; ``()`` is the top itself),
        writing ``data`` for a file. The caller has checked the member already."""
        parent = self._parent(parts)
        name = parts[-1] if parts else member.name
        if not parts:
            self._top = member.name
        if member.kind == "dir":
            os.mkdir(name, 0o700, dir_fd=parent)
            self._stack.append((parts, os.open(name, _DIR_FLAGS, dir_fd=parent)))
            self._dir_modes.append((parts, member.mode))
        elif member.kind == "symlink":
            os.symlink(member.linkname, name, dir_fd=parent)
        else:
            _write_file(parent, name, member.mode, data)

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
        self.destination.commit(0o777 & ~_umask())

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


def _write_file(parent: int, name: str, mode: int, data: Iterable[memoryview]) -> None:
    fd = os.open(name, _FILE_FLAGS, 0o600, dir_fd=parent)
    try:
        for piece in data:
            while piece:
                piece = piece[os.write(fd, piece) :]
        os.fchmod(fd, mode)
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
