"""A bundle's files on disk: written whole or not at all, listed with their SHA-256, checked.

``manifest.json`` lists every other file of the bundle::

    {"schema": "casstore.bundle.manifest/1",
     "files": [{"path": "samples.jsonl", "sha256": "sha256:<hex>", "bytes": 123}, ...]}

paths relative to the bundle, ``/``-separated, sorted. :func:`write_files` builds the bundle in
a staging directory (:class:`casstore.archive.destination.Destination`: the destination must
not exist, or be an empty directory) and moves it into place only once every file and the
manifest are written: a failure leaves nothing. :func:`verify_files` checks a bundle against
its manifest: a file missing, added, not a regular file or whose bytes do not hash to what the
manifest says is an error naming that file.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec

from casstore.archive.destination import Destination
from casstore.errors import CorruptArchiveError, DigestMismatchError, UsageError, blocking_file
from casstore.inputs import open_regular, read_regular

__all__ = [
    "MANIFEST",
    "MANIFEST_SCHEMA",
    "FileEntry",
    "Manifest",
    "check_destination",
    "checked_files",
    "json_bytes",
    "read_manifest",
    "verified_files",
    "verify_files",
    "write_files",
]

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "casstore.bundle.manifest/1"

type Content = bytes | Iterable[bytes] | Path
"""A file to write: its bytes, blocks of them, or an existing file copied."""


class FileEntry(msgspec.Struct, frozen=True):
    """One file of the manifest."""

    path: str
    sha256: str
    bytes: int


class Manifest(msgspec.Struct, frozen=True):
    """``manifest.json``."""

    schema: str
    files: list[FileEntry]


def check_destination(dest: Path | str) -> None:
    """UsageError naming ``dest`` unless a bundle can be written there (missing, its parents
    files of none, or an empty directory): checked before any work, as
    :class:`~casstore.archive.destination.Destination` checks it again when writing."""
    path = Path(dest)
    blocker = blocking_file(path.parent)
    if blocker is not None:
        raise UsageError(str(dest), f"{blocker} is not a directory")
    empty = path.is_dir() and not path.is_symlink() and not any(path.iterdir())
    if os.path.lexists(path) and not empty:
        raise UsageError(
            str(dest), "the bundle destination must not exist or be an empty directory"
        )


def write_files(
    dest: Path | str,
    files: Mapping[str, Content | Callable[[Mapping[str, FileEntry]], Content]],
    manifest: Callable[[list[FileEntry]], tuple[str, bytes]] | None = None,
) -> list[FileEntry]:
    """Write the bundle ``dest``: each of ``files`` (relative path → content, or a function of
    the entries written before it, e.g. a summary naming the samples' digest), then the
    manifest: ``manifest.json`` (:class:`Manifest`), or the ``(path, bytes)`` that
    ``manifest`` makes of the entries; atomically (module docstring). Returns the entries.
    Raises UsageError for a destination that is not missing or empty."""
    destination = Destination(dest)
    try:
        written: dict[str, FileEntry] = {}
        for name, content in files.items():
            body = content(written) if callable(content) else content
            written[name] = _write(destination.staging, name, body)
        entries = sorted(written.values(), key=lambda e: e.path)
        name, data = (manifest or _manifest)(entries)
        (destination.staging / name).parent.mkdir(parents=True, exist_ok=True)
        (destination.staging / name).write_bytes(data)
        destination.commit(0o755)
    except BaseException:
        destination.abort()
        raise
    return entries


def _manifest(entries: list[FileEntry]) -> tuple[str, bytes]:
    """``manifest.json`` of a bundle's entries."""
    return MANIFEST, json_bytes(Manifest(MANIFEST_SCHEMA, entries))


def json_bytes(value: object) -> bytes:
    """Indented JSON (msgspec), ending with a newline."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n"


def _write(root: Path, name: str, content: Content) -> FileEntry:
    """Write ``content`` to ``root/name`` (its folders made), hashing it as it goes: blocks
    of an iterable are hashed and written by a thread while the next is made (hashlib and
    the write release the GIL)."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    hasher = hashlib.sha256()
    if isinstance(content, Path):
        content = read_regular(content)
    with open(path, "wb") as handle:
        if isinstance(content, bytes | bytearray | memoryview):
            hasher.update(content)
            handle.write(content)
            size = len(content)
        else:
            size = _write_blocks(content, hasher, handle)
    os.chmod(path, 0o644)
    return FileEntry(name, f"sha256:{hasher.hexdigest()}", size)


_DONE: Any = object()


def _write_blocks(blocks: Iterable[bytes], hasher: Any, handle: Any) -> int:
    """Hash and write ``blocks`` in a thread as they are made; their total size. An error
    of either side (making a block, hashing or writing it) is raised here."""
    pending: queue.Queue[Any] = queue.Queue(maxsize=4)
    failed: list[BaseException] = []

    def drain() -> None:
        while (block := pending.get()) is not _DONE:
            if not failed:
                try:
                    hasher.update(block)
                    handle.write(block)
                except BaseException as error:  # raised by the caller
                    failed.append(error)

    worker = threading.Thread(target=drain, name="bundle-writer", daemon=True)
    worker.start()
    size = 0
    try:
        for block in blocks:
            if failed:
                break
            pending.put(block)
            size += len(block)
    finally:
        pending.put(_DONE)
        worker.join()
    if failed:
        raise failed[0]
    return size


def read_manifest(root: Path) -> Manifest:
    """The manifest of the bundle ``root``; CorruptArchiveError naming it when it does not
    decode or lists an unsafe path or one path twice."""
    where = str(root / MANIFEST)
    try:
        manifest = msgspec.json.decode(read_regular(root / MANIFEST), type=Manifest)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise CorruptArchiveError(where, f"not a bundle manifest: {error}") from None
    if manifest.schema != MANIFEST_SCHEMA:
        expected = f"schema {manifest.schema!r}, expected {MANIFEST_SCHEMA!r}"
        raise CorruptArchiveError(where, expected)
    seen: set[str] = set()
    for entry in manifest.files:
        parts = PurePosixPath(entry.path).parts
        if not parts or entry.path.startswith("/") or ".." in parts or entry.path == MANIFEST:
            raise CorruptArchiveError(where, f"lists an unsafe path {entry.path!r}")
        if entry.path in seen:
            raise CorruptArchiveError(where, f"lists {entry.path!r} twice")
        seen.add(entry.path)
    return manifest


def verify_files(root: Path | str) -> Manifest:
    """Check every file of the bundle ``root`` against its manifest; returns the manifest.

    Raises DigestMismatchError naming the file whose bytes changed (size or SHA-256),
    CorruptArchiveError naming a file missing, not listed, or not a regular file, or the
    manifest itself when it is damaged; UsageError when ``root`` holds no manifest."""
    return verified_files(Path(root))[0]


def verified_files(root: Path, keep: Collection[str] = ()) -> tuple[Manifest, dict[str, bytes]]:
    """:func:`verify_files`, and the bytes of the files ``keep`` names as they were checked
    (read once: what is checked is what is used)."""
    with checked_files(root, keep) as found:
        return found


@contextmanager
def checked_files(
    root: Path, keep: Collection[str] = ()
) -> Iterator[tuple[Manifest, dict[str, bytes]]]:
    """:func:`verified_files` as a context: the SHA-256 of a large kept file is computed by a
    thread while the body reads its bytes, and checked on leaving, before anything made of
    them is used. A file whose bytes differ raises DigestMismatchError naming it then, in
    place of whatever the body raised on those bytes."""
    manifest = read_manifest(root)
    listed = {entry.path for entry in manifest.files}
    for found in _files_under(root):
        if found not in listed and found != MANIFEST:
            raise CorruptArchiveError(str(root / found), "not listed in manifest.json")
    kept = {}
    pending: list[tuple[Path, FileEntry, _Digest]] = []
    for entry in manifest.files:
        data = _check_file(root, entry, entry.path in keep)
        if isinstance(data, _Digest):
            pending.append((root / entry.path, entry, data))
            data = data.data
        if data is not None:
            kept[entry.path] = data
    try:
        yield manifest, kept
    finally:
        for path, entry, digest in pending:
            _compare(path, entry, len(digest.data), digest.result())


class _Digest:
    """The SHA-256 of ``data``, computed by a thread (hashlib releases the GIL)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._hash: Any = None
        self._thread = threading.Thread(target=self._run, name="bundle-digest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._hash = hashlib.sha256(self.data)

    def result(self) -> Any:
        """The hash object, once computed."""
        self._thread.join()
        return self._hash


_IN_THREAD = 1 << 20
"""Kept files from this size on are hashed by a thread (:func:`checked_files`)."""


def _files_under(root: Path) -> list[str]:
    """Every non-directory under ``root``, relative, ``/``-separated, sorted."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in names:
            found.append(Path(folder, name).relative_to(root).as_posix())
    return sorted(found)


def _check_file(root: Path, entry: FileEntry, keep: bool) -> bytes | _Digest | None:
    """DigestMismatchError / CorruptArchiveError naming ``root/entry.path`` unless it is a
    regular file of the listed size and SHA-256; its bytes when ``keep`` (a large file's
    with its digest still being computed, :class:`_Digest`: compared by the caller)."""
    path = root / entry.path
    if not os.path.lexists(path):
        raise CorruptArchiveError(str(path), "listed in manifest.json but missing")
    if os.path.islink(path):
        raise CorruptArchiveError(str(path), "a symbolic link, not a file of the bundle")
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if not keep:
            digest = hashlib.file_digest(handle, "sha256")
            _compare(path, entry, handle.tell(), digest)
            return None
        data = handle.read()
    if len(data) != entry.bytes or len(data) < _IN_THREAD:
        _compare(path, entry, len(data), hashlib.sha256(data))
        return data
    return _Digest(data)


def _compare(path: Path, entry: FileEntry, size: int, digest: Any) -> None:
    """DigestMismatchError naming ``path`` unless ``size`` and ``digest`` are the entry's."""
    actual = f"sha256:{digest.hexdigest()}"
    if size != entry.bytes or actual != entry.sha256:
        raise DigestMismatchError(
            str(path),
            f"{size} bytes with {actual}, manifest.json lists {entry.bytes} bytes with "
            f"{entry.sha256}",
        )
