"""The mode bits an archive records for each entry (README, §2 Packager): one rule.

``keep`` (the default) records the ``0o7777`` bits of each entry as the source holds them, so
a checkout made under another umask packs to another address; ``git`` records what git
records, so a tree packs to one address from any checkout of one commit: a regular file
``0o644``, or ``0o755`` when its owner may execute it; a directory ``0o755``; a symbolic link
as ``keep`` does (its own bits, ``0o777`` on Linux). Light: the command line reads these names
when it starts.
"""

from __future__ import annotations

import stat
from typing import Literal

from casstore.archive.tarformat import Kind
from casstore.errors import UsageError

__all__ = ["MODES", "Modes", "archived_mode", "check_modes"]

Modes = Literal["keep", "git"]
MODES: tuple[Modes, ...] = ("keep", "git")


def check_modes(modes: object) -> Modes:
    """``modes`` when it is one of :data:`MODES`; UsageError naming it otherwise."""
    if isinstance(modes, str) and modes in MODES:
        return modes
    raise UsageError("modes", f"{modes!r} is not keep or git")


def archived_mode(kind: Kind, st_mode: int, modes: Modes) -> int:
    """The mode bits the archive records for an entry of ``kind`` whose ``lstat`` mode is
    ``st_mode``, under the rule ``modes`` (see the module docstring)."""
    if modes == "keep" or kind == "symlink":
        return st_mode & 0o7777
    if kind == "dir":
        return 0o755
    return 0o755 if st_mode & stat.S_IXUSR else 0o644
