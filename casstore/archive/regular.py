"""Reading a small regular file safely: never through a symbolic link, never waiting on a
FIFO or a device, and only when its ``fstat`` is accepted (task.toml of a task, an entry of
the validation cache)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["read_regular"]

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_regular(path: Path | str, accept: Callable[[os.stat_result], bool]) -> bytes | None:
    """The bytes of ``path`` when it is a regular file whose ``fstat`` ``accept`` accepts;
    None when it is absent, a link, not a regular file or not accepted (``accept`` may
    raise instead). An error reading it is raised (OSError)."""
    try:
        fd = os.open(path, _OPEN)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not accept(info):
            return None
        return os.read(fd, info.st_size + 1)
    finally:
        os.close(fd)
