"""The reader: ``verify_archive`` and ``extract_archive`` (README, §3 Verification and extraction).

One streaming pass checks, within ``Limits``: the SHA-256 address, the bounded decompression,
one top-level directory, safe and normalized names without duplicates, nothing below a link or
a file, only directories, files and links, the link rules against the archive's own entries,
the Harbor task layout, and that every header, the order and the padding are exactly what the
packager writes. Extraction writes into a fresh staging directory of the destination
(:mod:`casstore.archive.destination`; no-follow opens relative to directory descriptors, modes
applied by us, no chown) and moves it into place only when every check passed; on failure
nothing is left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from casstore.archive.compress import decode, detect
from casstore.archive.extract import Extractor
from casstore.archive.layout import TaskLayout, check_tree_layout
from casstore.archive.limits import Limits
from casstore.archive.links import Node, check_link
from casstore.archive.summary import ArchiveBytes, ArchiveSummary
from casstore.archive.tarformat import Member, encode_header, sort_key
from casstore.archive.tarstream import ByteStream, RawMember, read_members
from casstore.digest import Digest
from casstore.errors import (
    CheckError,
    CorruptArchiveError,
    DigestMismatchError,
    NotCanonicalError,
    SymlinkError,
    UnsafePathError,
)
from casstore.inputs import open_binary

__all__ = ["VerifyResult", "extract_archive", "verify_archive"]

_NAME_MAX = 255  # bytes in one name component (Linux NAME_MAX): no packed tree holds more
_PATH_MAX = 4096  # a link target must be shorter (Linux PATH_MAX, terminating NUL included)


@dataclass(frozen=True, slots=True)
class VerifyResult(ArchiveSummary):
    """A verified archive: an :class:`ArchiveSummary` and its top-level directory name
    ``top``."""

    top: str

    def to_json(self) -> dict[str, object]:
        """The ``casstore verify --json`` object of a passing archive."""
        return {"ok": True} | self.digests() | {"error": None}


def verify_archive(
    archive: Path, expect: Digest | str | None = None, limits: Limits | None = None
) -> VerifyResult:
    """Verify ``archive`` (a path); ``expect`` is the address it must have.

    Raises a :class:`casstore.errors.CheckError` subclass naming the entry and the rule, or
    :class:`UsageError` if the file cannot be opened, is not a regular file
    (:mod:`casstore.inputs`) or ``expect`` is malformed.
    """
    return _read(Path(archive), _expected(expect), limits or Limits(), None)


def extract_archive(
    archive: Path,
    dest: Path,
    expect: Digest | str | None = None,
    limits: Limits | None = None,
) -> VerifyResult:
    """Verify ``archive`` while extracting it; ``dest`` (missing, its parents made, or an
    empty directory: :class:`~casstore.archive.destination.Destination`) then holds the
    archive's top-level directory. On any error ``dest`` stays as it was and nothing is
    written outside a staging directory that is removed. Raises as :func:`verify_archive`."""
    expected = _expected(expect)
    extractor = Extractor(Path(dest))
    try:
        result = _read(Path(archive), expected, limits or Limits(), extractor)
        extractor.commit()
    except BaseException:
        extractor.abort()
        raise
    return result


def _expected(expect: Digest | str | None) -> Digest | None:
    if expect is None or isinstance(expect, Digest):
        return expect
    return Digest.parse(expect, "sha256")


class _HashingFile:
    """The archive file as read: every byte hashed (the address), counted and bounded."""

    def __init__(self, handle: BinaryIO, limits: Limits) -> None:
        self._handle = handle
        self.bytes = ArchiveBytes(limits)

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.bytes.add(data)
        return data


def _read(
    archive: Path, expect: Digest | None, limits: Limits, extractor: Extractor | None
) -> VerifyResult:
    try:
        return _read_checked(archive, expect, limits, extractor)
    except CheckError as error:
        error.located(str(archive))
        raise


def _read_checked(
    archive: Path, expect: Digest | None, limits: Limits, extractor: Extractor | None
) -> VerifyResult:
    with open_binary(archive, "cannot open archive") as handle:
        compression = detect(handle.read(512))
        handle.seek(0)
        source = _HashingFile(handle, limits)
        stream = ByteStream(decode(compression, source), limits)
        checker = _Checker(limits, extractor)
        for raw in read_members(stream, limits):
            checker.member(raw, stream)
        if source.read(1):
            raise CorruptArchiveError(None, "trailing bytes after the compressed stream")
    address = source.bytes.address()
    if expect is not None and address != expect:
        raise DigestMismatchError(str(archive), f"address is {address}, expected {expect}")
    layout = checker.finish()
    return VerifyResult(
        address=address,
        content_digest=stream.content.digest(),
        entries=checker.entries,
        payload_bytes=checker.payload,
        archive_bytes=source.bytes.size,
        compression=compression,
        top=checker.top,
        layout=layout,
    )


class _Checker:
    """Per-member rules, in an order that reports the security problem before the form."""

    def __init__(self, limits: Limits, extractor: Extractor | None) -> None:
        self._limits = limits
        self._extractor = extractor
        self._tree: dict[tuple[str, ...], Node] = {}
        self._previous: tuple[bytes, ...] = ()
        self._config: bytes | None = None
        self.top = ""
        self.entries = 0
        self.payload = 0

    def member(self, raw: RawMember, stream: ByteStream) -> None:
        member = raw.member
        parts = self._place(member)
        self._count(member)
        if encode_header(member) != raw.header:
            raise NotCanonicalError(member.name, "header differs from the canonical encoding")
        self._tree[parts] = (member.kind, member.linkname)
        data = stream.pieces(member.size, member.name)
        if parts == ("task.toml",) and member.kind == "file":
            self._config = bytes(b"".join(data))
            data = iter([memoryview(self._config)])
        if self._extractor is not None:
            self._extractor.add(member, parts, data)
        else:
            for _ in data:
                pass
        if stream.take(-member.size % 512, member.name).count(0) != -member.size % 512:
            raise NotCanonicalError(member.name, "non-zero padding after file data")

    def _place(self, member: Member) -> tuple[str, ...]:
        name = member.name
        self._limits.check("max_path_bytes", len(name.encode("utf-8")), name)
        _check_name(name)
        if member.kind == "symlink":
            self._check_target(name, member.linkname)
        parts = tuple(name.split("/"))
        if not self.top:
            if len(parts) != 1 or member.kind != "dir":
                raise UnsafePathError(name, "the archive must start with its top-level directory")
            self.top = name
            self._previous = sort_key(name)
            return ()
        if parts[0] != self.top:
            raise UnsafePathError(name, f"entry outside the top-level directory {self.top!r}")
        below = parts[1:]
        if below in self._tree:
            raise UnsafePathError(name, "duplicate entry")
        self._check_parent(name, below)
        key = sort_key(name)
        if key <= self._previous:
            raise NotCanonicalError(name, "entries are not in canonical (depth-first) order")
        self._previous = key
        return below

    def _check_target(self, name: str, target: str) -> None:
        # Checked before the link is written to disk, where the system would refuse it.
        if not target:
            raise SymlinkError(name, "link target is empty")
        if "\0" in target:
            raise UnsafePathError(name, "NUL byte in link target")
        size = len(target.encode("utf-8"))
        self._limits.check("max_path_bytes", size, name)
        if size >= _PATH_MAX:
            raise UnsafePathError(name, f"link target is longer than {_PATH_MAX - 1} bytes")

    def _check_parent(self, name: str, below: tuple[str, ...]) -> None:
        # The deepest archived ancestor: a link or a file there means the name goes through it
        # (e.g. "a/b/c" after the link "a"), whether or not the parent itself was archived.
        depth = len(below) - 1
        while below[:depth] not in self._tree:
            depth -= 1
        ancestor = self._tree[below[:depth]]
        if ancestor[0] == "symlink":
            raise SymlinkError(name, "entry below a symbolic link")
        if ancestor[0] != "dir":
            raise UnsafePathError(name, "entry below a regular file")
        if depth != len(below) - 1:
            raise NotCanonicalError(name, "parent directory is not archived before it")

    def _count(self, member: Member) -> None:
        self.entries += 1
        self._limits.check("max_entries", self.entries, member.name)
        if member.kind == "file":
            self._limits.check("max_file_bytes", member.size, member.name)
            self.payload += member.size
            self._limits.check("max_payload_bytes", self.payload, member.name)
        if member.name.endswith("/task.toml") and member.name.count("/") == 1:
            self._limits.check("max_config_bytes", member.size, member.name)

    def finish(self) -> TaskLayout:
        """Link rules against the archive's own entries, then the Harbor task layout."""
        if not self.top:
            raise UnsafePathError(None, "the archive holds no top-level directory")
        for parts, (kind, target) in self._tree.items():
            if kind == "symlink":
                check_link("/".join((self.top, *parts)), parts, target, self._tree.get)
        kinds = ((parts, node[0]) for parts, node in self._tree.items())
        return check_tree_layout(self.top, self._config, kinds)


def _check_name(name: str) -> None:
    if not name:
        raise UnsafePathError(name, "empty entry name")
    if "\0" in name:
        raise UnsafePathError(name, "NUL byte in entry name")
    if name.startswith("/"):
        raise UnsafePathError(name, "absolute entry name")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise UnsafePathError(name, f"entry name holds a {part or 'empty'!r} component")
        if len(part.encode("utf-8")) > _NAME_MAX:
            raise UnsafePathError(name, f"entry name holds a component over {_NAME_MAX} bytes")
