"""casstore's public Python API: the operations of the command line, as functions.

Re-exported by :mod:`casstore` (see its docstring for the whole list and an example).
"""

from __future__ import annotations

from casstore.progress import NO_PROGRESS, Progress
from casstore.store.core import Store
from casstore.store.fsck import FsckReport
from casstore.trials.check import check_jobs

__all__ = ["fsck"]


def fsck(store: Store, progress: Progress = NO_PROGRESS) -> FsckReport:
    """Re-verify every archive, reference and imported job of ``store`` (what ``casstore
    fsck`` reports); never modifies anything. See :func:`casstore.store.fsck.fsck` and
    :func:`casstore.trials.check.check_jobs` for the problem kinds."""
    return store.fsck(progress, checks=(check_jobs,))
