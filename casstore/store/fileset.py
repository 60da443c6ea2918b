"""Filesets: archive files on disk, immutable and written atomically.

An archive lives at ``<store>/filesets/<workspace>/<fileset>/<prefix>/<task dir name>/<sha256
hex>/task_archive`` and is referenced as ``workspace/fileset#<prefix>/<dir>/<hex>/task_archive``.
A write goes to a temporary file in the task's directory, is fsync-ed, then hard-linked to its
address and the directory fsync-ed; the bytes are then read back and verified (hash and
structure). An existing file at the address is re-verified and kept; only one that fails
verification is replaced (renamed over) by the new, verified bytes: a repair.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from casstore.archive.formats import Compression
from casstore.archive.limits import Limits
from casstore.digest import Digest
from casstore.errors import CheckError, SourceChangedError, StoreError, UsageError
from casstore.names import DEFAULT_FILESET, check_name, check_prefix
from casstore.store.faults import os_write_failure
from casstore.store.records import TaskRevision

if TYPE_CHECKING:  # the packer and the reader are imported when used: ``ls`` needs neither
    from casstore.archive.pack import PackResult
    from casstore.archive.read import VerifyResult
    from casstore.archive.scan import SourceTree

__all__ = [
    "ARCHIVE_NAME",
    "DEFAULT_FILESET",
    "TEMP_PREFIX",
    "ArchiveRef",
    "Filesets",
    "StoredArchive",
    "Temporary",
    "in_archive",
]

ARCHIVE_NAME = "task_archive"
TEMP_PREFIX = ".tmp-"


@dataclass(frozen=True, slots=True)
class ArchiveRef:
    """``workspace/fileset#relative`` parsed; ``relative`` ends with ``<hex>/task_archive``."""

    workspace: str
    fileset: str
    relative: str

    @classmethod
    def parse(cls, text: str) -> ArchiveRef:
        """Parse an archive reference; raises :class:`UsageError` if malformed or unsafe."""
        head, sep, relative = text.partition("#")
        workspace, slash, fileset = head.partition("/")
        parts = relative.split("/")
        if not (sep and slash) or len(parts) < 3 or parts[-1] != ARCHIVE_NAME:
            raise UsageError(text, "an archive reference is workspace/fileset#path/task_archive")
        check_name(workspace)
        check_name(fileset)
        if not Digest.is_hex(parts[-2]) or any(p in {"", ".", ".."} for p in parts):
            raise UsageError(text, "unsafe or malformed archive path")
        return cls(workspace, fileset, relative)

    @property
    def prefix(self) -> str:
        """The fileset path prefix (``""`` or ``a/b``): ``relative`` before ``<dir>/<hex>/...``."""
        return "/".join(self.relative.split("/")[:-3])

    def __str__(self) -> str:
        return f"{self.workspace}/{self.fileset}#{self.relative}"


@dataclass(frozen=True, slots=True)
class Temporary:
    """A temporary file of the filesets: its ``path``, its size in ``bytes`` and its
    ``age_seconds`` (since it was last written)."""

    path: str
    bytes: int
    age_seconds: float


@dataclass(frozen=True, slots=True)
class StoredArchive:
    """An archive at its address: ``ref``, ``path``, the read-back ``verified`` result,
    whether this call ``written`` the file (False: it already existed and was re-verified) and
    whether it ``repaired`` it (an existing file failed verification and was replaced)."""

    ref: ArchiveRef
    path: Path
    verified: VerifyResult
    written: bool
    repaired: bool = False


def in_archive(error: CheckError, archive: Path) -> CheckError:
    """Make ``error`` (raised reading the file ``archive``) name it: ``<archive>: <rule>``,
    where an entry it named moves into the rule (``<archive>: <entry>: <rule>``). Returns
    ``error``, changed in place (its class, hence kind and exit code, are kept)."""
    where = str(archive)
    if error.path != where:
        rule = f"{error.path}: {error.rule}" if error.path else error.rule
        error.path, error.rule = where, rule
        error.args = (f"{where}: {rule}",)
    return error


class Filesets:
    """The ``<store>/filesets`` tree."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, ref: ArchiveRef | str) -> Path:
        """The file of an archive reference."""
        ref = ArchiveRef.parse(ref) if isinstance(ref, str) else ref
        return self.root / ref.workspace / ref.fileset / ref.relative

    def store(
        self,
        tree: SourceTree,
        workspace: str,
        fileset: str,
        prefix: str,
        compression: Compression,
        limits: Limits,
        expect_content: str | None = None,
    ) -> tuple[PackResult, StoredArchive]:
        """Pack the scanned ``tree`` into its fileset; return the pack result and the stored,
        read-back verified archive. Raises the packing check errors; SourceChangedError
        (nothing stored) when the content digest is not ``expect_content``; StoreError when the
        file at the address fails verification after the write.

        A file already at the address is re-verified and kept when intact; when it fails
        verification it is replaced (atomically, by rename) with the new bytes, which were
        verified first: the address guarantees they are the right ones (a repair).

        A full disk or a store that cannot be written is StoreError naming the store
        (:func:`casstore.store.faults.os_write_failure`); the temporary file is removed."""
        from casstore.archive.pack import write_archive  # here: for start-up time

        prefix = check_prefix(prefix)
        with self._writing():
            task_dir = self.root / workspace / fileset / prefix / tree.top
            task_dir.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=task_dir)
            try:
                with os.fdopen(fd, "wb") as handle:
                    result = write_archive(tree, handle, compression, limits)
                    handle.flush()
                    os.fsync(handle.fileno())
                if expect_content is not None and str(result.content_digest) != expect_content:
                    raise SourceChangedError(
                        str(tree.root), f"content changed since discovery ({expect_content})"
                    )
                os.chmod(temporary, 0o444)
                relative = "/".join(
                    p for p in (prefix, tree.top, result.address.hex, ARCHIVE_NAME) if p
                )
                ref = ArchiveRef(workspace, fileset, relative)
                final = self.path_of(ref)
                final.parent.mkdir(exist_ok=True)
                written, repaired = _place(
                    Path(temporary), final, result.address, result.content_digest, limits
                )
                _fsync_dir(final.parent)
            finally:
                Path(temporary).unlink(missing_ok=True)
            verified = _read_back(final, result, limits)
            return result, StoredArchive(ref, final, verified, written, repaired)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Run a write of the store: an OSError writing it (a full disk, a read-only file
        system, a permission refused on a file of the store; not reading the source) becomes
        :func:`casstore.store.faults.os_write_failure`."""
        try:
            yield
        except OSError as error:
            where = error.filename
            inside = where is None or Path(os.fsdecode(where)).is_relative_to(self.root)
            refused = error.errno in (errno.EACCES, errno.EPERM) and inside
            if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) or refused:
                raise os_write_failure(self.root.parent, error) from error
            raise

    def temporary_for(self, ref: ArchiveRef | str) -> Path:
        """A new empty temporary file (``.tmp-*``, which gc removes when left) in the folder
        of the archive ``ref``, for bytes received from elsewhere (:meth:`adopt`)."""
        with self._writing():
            folder = self.path_of(ref).parent.parent
            folder.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
            os.close(fd)
        return Path(temporary)

    def adopt(
        self, temporary: Path, revision: TaskRevision, limits: Limits, verified: bool = False
    ) -> bool:
        """Place the archive file ``temporary`` (from :meth:`temporary_for`) of ``revision``
        at its reference, as :meth:`store` places a packed one: verified (address,
        structure, content digest; the check errors otherwise; ``verified``: the caller
        verified it with :func:`~casstore.archive.read.verify_archive` already), fsync-ed,
        read-only, linked, the folder fsync-ed; an intact file there is kept. Whether it
        was written; the temporary is removed in every case."""
        from casstore.archive.read import verify_archive

        try:
            with self._writing():
                if not verified:
                    result = verify_archive(temporary, revision.address, limits)
                    if str(result.content_digest) != revision.content_digest:
                        rule = (
                            f"content digest {result.content_digest} != {revision.content_digest}"
                        )
                        raise StoreError(str(temporary), rule)
                _fsync_file(temporary)
                os.chmod(temporary, 0o444)
                final = self.path_of(revision.archive_ref)
                final.parent.mkdir(exist_ok=True)
                written, _ = _place(
                    temporary, final, revision.address, revision.content_digest, limits
                )
                _fsync_dir(final.parent)
        finally:
            temporary.unlink(missing_ok=True)
        return written

    def intact(self, revision: TaskRevision, limits: Limits) -> bool:
        """True when ``revision``'s archive file exists and passes verification (address,
        structure, content digest)."""
        path = self.path_of(revision.archive_ref)
        return _verifies(path, revision.address, revision.content_digest, limits)

    def archives(self) -> Iterator[tuple[str, Path]]:
        """Every ``(archive reference, path)`` on disk, sorted."""
        for path in sorted(self.root.glob(f"*/*/**/{ARCHIVE_NAME}")):
            parts = path.relative_to(self.root).parts
            yield f"{parts[0]}/{parts[1]}#{'/'.join(parts[2:])}", path

    def temporaries(self) -> list[Temporary]:
        """The temporary files of the filesets (``.tmp-*``: a write in progress, or the
        leftover of one that was killed), by path, with their sizes and ages."""
        found = []
        now = time.time()
        for path in sorted(self.root.glob(f"**/{TEMP_PREFIX}*")):
            try:
                info = path.lstat()
            except FileNotFoundError:  # its write ended meanwhile
                continue
            if stat.S_ISREG(info.st_mode):
                age = max(0.0, now - info.st_mtime)
                found.append(Temporary(path=str(path), bytes=info.st_size, age_seconds=age))
        return found

    def remove(self, path: Path) -> None:
        """Delete an archive file and its now-empty parent directories up to the fileset."""
        path.unlink(missing_ok=True)
        parent = path.parent
        while parent != self.root and len(parent.relative_to(self.root).parts) > 2:
            try:
                parent.rmdir()
            except OSError:
                return
            parent = parent.parent


def _place(
    temporary: Path, final: Path, address: Digest | str, content: Digest | str, limits: Limits
) -> tuple[bool, bool]:
    """Hard-link the archive file ``temporary`` (``address``, ``content`` digest) at its
    address ``final``:
    ``(written, repaired)``. A file already there that passes verification is kept
    ``(False, False)``; one that fails it is replaced by ``temporary``, verified first
    ``(True, True)``."""
    from casstore.archive.read import verify_archive

    try:
        os.link(temporary, final)
    except FileExistsError:
        if _verifies(final, address, content, limits):
            return False, False
        verify_archive(temporary, address, limits)
        os.replace(temporary, final)
        return True, True
    return True, False


def _read_back(final: Path, result: PackResult, limits: Limits) -> VerifyResult:
    """Verify the stored file ``final`` against ``result``; StoreError if it fails."""
    from casstore.archive.read import verify_archive

    try:
        verified = verify_archive(final, result.address, limits)
    except CheckError as error:
        raise StoreError(str(final), f"the stored archive fails verification: {error}") from error
    if verified.content_digest != result.content_digest:
        raise StoreError(str(final), "the stored archive holds different content")
    return verified


def _verifies(path: Path, address: Digest | str, content: Digest | str, limits: Limits) -> bool:
    """True when the archive file ``path`` has ``address`` and the ``content`` digest, and
    passes verification; False for any failure (absent, unreadable, damaged)."""
    from casstore.archive.read import verify_archive

    try:
        verified = verify_archive(path, address, limits)
    except (CheckError, UsageError, OSError):
        return False
    return str(verified.content_digest) == str(content)


def _fsync_file(path: Path) -> None:
    """fsync a file's data (written by another handle) before it is linked into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or link inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
