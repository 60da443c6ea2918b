"""The job-directory lock: one ``casstore run`` at a time per job name.

Neither Harbor nor the seed's runner guards a pinned job name; two runs sharing one would
resume, delete and write each other's trials. A run holds an exclusive ``flock`` on
``<jobs dir>/.<job name>.casstore-lock`` (beside the job directory, which a stale stamp
removes) for its whole length; a second run on the same name fails at once. Harbor's process
inherits the locked descriptor (:func:`casstore.run.launcher.launch`), so the lock lasts while
anything of the run lives: a ``casstore run`` killed with SIGKILL leaves its Harbor running, and
the job locked, until that Harbor ends. The kernel drops the lock when the last process holding
it ends, however it ends.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from casstore.errors import RunError, UsageError, blocking_file

__all__ = ["HeldLock", "job_lock", "lock_path"]


def lock_path(jobs_dir: Path, job_name: str) -> Path:
    """The lock file of the job ``job_name`` under ``jobs_dir``."""
    return jobs_dir / f".{job_name}.casstore-lock"


class HeldLock(NamedTuple):
    """A held job lock: its file and the descriptor holding it (valid while held)."""

    path: Path
    fd: int


@contextmanager
def job_lock(jobs_dir: Path, job_name: str) -> Iterator[HeldLock]:
    """Hold the lock of ``jobs_dir/job_name`` (made with its folder when missing) while the
    block runs; :class:`~casstore.errors.RunError` at once when another process holds it."""
    if (blocker := blocking_file(jobs_dir)) is not None:
        raise UsageError(str(blocker), "is not a directory (in --jobs-dir's way)")
    jobs_dir.mkdir(parents=True, exist_ok=True)
    path = lock_path(jobs_dir, job_name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another process"
            raise RunError(
                str(jobs_dir / job_name),
                f"another casstore run (pid {holder}) is using this job; wait for it or "
                "choose another --job-name",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        yield HeldLock(path, fd)
    finally:
        os.close(fd)
