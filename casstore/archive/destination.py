"""Where ``extract`` and ``checkout`` put what they built: one rule for both (README, §3).

``DEST`` must be a path that does not exist, or an existing **empty directory** (``git clone``'s
rule); anything else (a file, a directory with entries, a symbolic link, whatever it points
to) is a :class:`~casstore.errors.UsageError` naming it, before anything is written. Missing
parent directories are made, as ``mkdir -p`` and ``git clone`` make them, and removed again
when the command fails, so a failure leaves nothing behind.

What is built goes into a fresh private staging directory and is moved into place only when
every check passed (:meth:`Destination.commit`):

- ``DEST`` missing: the staging directory sits beside it and is renamed to ``DEST`` with
  ``RENAME_NOREPLACE``, one atomic step;
- ``DEST`` an empty directory: the staging directory sits inside it (hidden, ``.<name>.*``) and
  each of its entries is renamed into ``DEST`` with ``RENAME_NOREPLACE``. ``DEST`` itself stays,
  with its mode and owner, a volume mounted on it or a shell whose working directory it is.
  ``extract`` moves one entry (one atomic step), ``checkout`` one per task; a name another
  process made meanwhile stops the moves and puts back those made.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path

from casstore.errors import UsageError, blocking_file
from casstore.inputs import file_kind

__all__ = ["Destination", "rename_noreplace"]


class Destination:
    """The destination ``dest`` of an extraction or a checkout, checked (module docstring),
    its missing parents made and a staging directory ready (:attr:`staging`) to build in."""

    def __init__(self, dest: Path | str) -> None:
        self.given = str(dest)
        self.path = Path(os.path.abspath(dest))
        self.existing = _is_empty_directory(self.path, self.given)
        self._made: list[Path] = _make_parents(self.path.parent, self.given)
        where = self.path if self.existing else self.path.parent
        try:
            self.staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=where))
        except OSError as error:  # e.g. under /proc: named by DEST, not the staging path
            self._remove_parents()
            rule = f"the destination cannot be made there: {error.strerror or error}"
            raise UsageError(self.given, rule) from None
        except BaseException:
            self._remove_parents()
            raise

    def commit(self, mode: int) -> None:
        """Move what :attr:`staging` holds into place; ``mode``: the permission bits of a
        ``DEST`` made here (an existing one keeps its own). UsageError when a name appeared
        there meanwhile (nothing moved then)."""
        if not self.existing:
            os.chmod(self.staging, mode)
            rename_noreplace(self.staging, self.path, self.given)
            return
        moved: list[str] = []
        try:
            for name in sorted(os.listdir(self.staging)):
                rename_noreplace(self.staging / name, self.path / name, self.given)
                moved.append(name)
        except BaseException:
            for name in reversed(moved):
                os.rename(self.path / name, self.staging / name)
            raise
        os.rmdir(self.staging)

    def abort(self) -> None:
        """Remove the staging directory and the parents made (those still empty)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        self._remove_parents()

    def _remove_parents(self) -> None:
        for made in reversed(self._made):
            try:
                os.rmdir(made)
            except OSError:
                break
        self._made = []


def _is_empty_directory(path: Path, given: str) -> bool:
    """False when nothing is at ``path``, True for an empty directory; UsageError otherwise."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a parent that is no directory: later
        return False
    if stat.S_ISDIR(info.st_mode):
        try:
            with os.scandir(path) as entries:
                if next(entries, None) is None:
                    return True
        except OSError as error:
            raise UsageError(given, f"cannot read the destination: {error.strerror}") from None
        kind = "a directory that is not empty"
    else:
        kind = file_kind(info.st_mode)
    rule = f"the destination must not exist or be an empty directory; it is {kind}"
    raise UsageError(given, rule)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _make_parents(parent: Path, given: str) -> list[Path]:
    """Make the missing directories of ``parent``, outermost first; those made. UsageError
    when an existing one is not a directory or one cannot be made."""
    if (blocker := blocking_file(parent)) is not None:
        # named as the user wrote it (afile, not /abs/afile) when the given path leads there
        shown = blocking_file(Path(given).parent)
        same = shown is not None and _same_file(shown, blocker)
        raise UsageError(given, f"{shown if same else blocker} is not a directory")
    missing: list[Path] = []
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = parent.parent
    made: list[Path] = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            if directory.is_dir():  # made meanwhile by someone else: not ours to remove
                continue
            error_text = "is not a directory"
        except OSError as error:
            error_text = f"cannot be made: {error.strerror}"
        else:
            made.append(directory)
            continue
        for done in reversed(made):
            os.rmdir(done)
        raise UsageError(given, f"the destination's parent {directory} {error_text}")
    return made


_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def rename_noreplace(source: Path | str, dest: Path, given: str) -> None:
    """``rename`` that fails instead of replacing an existing ``dest`` (Linux ``renameat2``;
    elsewhere a check then ``rename``): UsageError naming ``given`` when ``dest`` exists."""
    renameat2 = getattr(_libc, "renameat2", None)
    if renameat2 is not None:
        args = (_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(dest), _RENAME_NOREPLACE)
        if renameat2(*args) == 0:
            return
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise UsageError(given, f"{dest} appeared while it was being written")
        if code not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(code, os.strerror(code), str(dest))
    if os.path.lexists(dest):
        raise UsageError(given, f"{dest} appeared while it was being written")
    os.rename(source, dest)
