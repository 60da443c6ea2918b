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

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from casstore.archive.compress import STREAM_BLOCK, detect
from casstore.archive.extract import Extractor
from casstore.archive.layout import TaskLayout, check_tree_layout
from casstore.archive.limits import Limits
from casstore.archive.links import Node, check_link
from casstore.archive.pipeline import decoded_blocks
from casstore.archive.summary import ArchiveSummary
from casstore.archive.tarformat import Kind
from casstore.archive.tarstream import Sink, read_members
from casstore.digest import Digest
from casstore.errors import (
    CheckError,
    DigestMismatchError,
    NotCanonicalError,
    SymlinkError,
    UnsafePathError,
)
from casstore.inputs import open_binary

__all__ = ["VerifyResult", "extract_archive", "verify_archive", "verify_blocks"]

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


def verify_blocks(
    blocks: Iterable[bytes],
    where: str,
    expect: Digest | str | None = None,
    limits: Limits | None = None,
) -> VerifyResult:
    """:func:`verify_archive` of an archive given as its bytes ``blocks`` (in order, of any
    sizes), checked as they come (e.g. from the network, written to a file on the way): when
    the last block is in, the archive is verified (blocks given as a sequence are read on
    this thread). Errors name ``where``; one raised by ``blocks`` itself passes through."""
    expected = _expected(expect)
    in_memory = isinstance(blocks, Sequence)  # no read to overlap: no thread for it
    try:
        return _read_blocks(iter(blocks), where, expected, limits or Limits(), None, in_memory)
    except CheckError as error:
        error.located(where)
        raise


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
        blocks = iter(partial(handle.read, STREAM_BLOCK), b"")
        return _read_blocks(blocks, str(archive), expect, limits, extractor)


def _read_blocks(
    blocks: Iterator[bytes],
    where: str,
    expect: Digest | None,
    limits: Limits,
    extractor: Extractor | None,
    in_memory: bool = False,
) -> VerifyResult:
    """The one streaming pass (see the module docstring) over the archive's bytes."""
    head: list[bytes] = []
    have = 0
    while have < _HEAD and (block := next(blocks, None)) is not None:
        head.append(block)
        have += len(block)
    compression = detect(b"".join(head)[:_HEAD])
    checker = _Checker(limits, extractor)
    stream = decoded_blocks(itertools.chain(head, blocks), compression, limits, not in_memory)
    with stream as (chunks, source):
        content = read_members(chunks, limits, checker.visit)
    address = source.address()
    if expect is not None and address != expect:
        raise DigestMismatchError(where, f"address is {address}, expected {expect}")
    layout = checker.finish()
    return VerifyResult(
        address=address,
        content_digest=content,
        entries=checker.entries,
        payload_bytes=checker.payload,
        archive_bytes=source.size,
        compression=compression,
        top=checker.top,
        layout=layout,
    )


_HEAD = 512  # bytes the compression is detected from


_CONFIG = ("task.toml",)


class _Checker:
    """Per-member rules, in an order that reports the security problem before the form."""

    def __init__(self, limits: Limits, extractor: Extractor | None) -> None:
        self._limits = limits
        self._extractor = extractor
        self._tree: dict[tuple[str, ...], Node] = {}
        self._previous: tuple[str, ...] = ()
        # The previous entry's parent (its name and components below the top directory) and
        # last component; None: no entry can be its sibling (none yet, or the top directory).
        self._parent: str | None = None
        self._siblings: tuple[str, ...] = ()
        self._last = ""
        self._config: list[bytes] | None = None
        # Names of at most this many ASCII characters pass the byte-length bounds unmeasured.
        self._short = min(_NAME_MAX, limits.max_path_bytes)
        self._bounds = (limits.max_entries, limits.max_file_bytes, limits.max_payload_bytes)
        self.top = ""
        self.entries = 0
        self.payload = 0

    def visit(
        self, name: str, kind: Kind, mode: int, size: int, linkname: str, canonical: bool
    ) -> Sink | None:
        """Check one member (see :data:`casstore.archive.tarstream.Visit`): its place, then
        the bounds, then its header's form; the sink for its data (None: skip it)."""
        parent, _, last = name.rpartition("/")
        if (  # the next sibling of the previous entry, with a plain name: see _place (a header
            # that is not canonical is refused below, after the bounds, either way)
            parent == self._parent
            and last > self._last
            and kind != "symlink"
            and len(name) <= self._short
            and name.isascii()
            and last[0] != "."
            and "\0" not in last
        ):
            below = self._siblings + (last,)  # noqa: RUF005 - faster than (*a, b)
            self._last = last
        else:
            below = self._place(name, kind, linkname)
        self._previous = below
        self.entries += 1
        max_entries, max_file, max_payload = self._bounds
        if self.entries > max_entries:
            self._limits.check("max_entries", self.entries, name)
        if kind == "file":
            if size > max_file:
                self._limits.check("max_file_bytes", size, name)
            self.payload += size
            if self.payload > max_payload:
                self._limits.check("max_payload_bytes", self.payload, name)
        if below == _CONFIG:
            self._limits.check("max_config_bytes", size, name)
        if not canonical:
            raise NotCanonicalError(name, "header differs from the canonical encoding")
        self._tree[below] = (kind, linkname)
        sink = None
        if self._extractor is not None:
            sink = self._extractor.add(name, kind, mode, below, linkname)
        if below == _CONFIG and kind == "file":
            self._config = []
            return _Collect(self._config, sink)
        return sink

    def _place(self, name: str, kind: Kind, linkname: str) -> tuple[str, ...]:
        """The name's components below the top directory, after the name and order rules.

        It also remembers the entry's parent (``_parent``, ``_siblings``) and last component
        for :meth:`visit`'s shortcut: a later entry with the same parent is a sibling of this
        one, so its parent is an archived directory inside the top one, and when its last
        component sorts after this one's it is in canonical order and no duplicate (every
        earlier entry sorts before this one); only its last component has to be checked."""
        parts = name.split("/")
        if len(name) > self._short or not name.isascii():
            self._limits.check("max_path_bytes", len(name.encode("utf-8")), name)
            _check_name(name)
        elif "" in parts or "." in parts or ".." in parts or "\0" in name:
            _check_name(name)  # raises, naming the first bad component
        if kind == "symlink":
            self._check_target(name, linkname)
        if not self.top:
            if len(parts) != 1 or kind != "dir":
                raise UnsafePathError(name, "the archive must start with its top-level directory")
            self.top = name
            return ()
        if parts[0] != self.top:
            raise UnsafePathError(name, f"entry outside the top-level directory {self.top!r}")
        below = tuple(parts[1:])
        if below in self._tree:
            raise UnsafePathError(name, "duplicate entry")
        parent = self._tree.get(below[:-1])
        if parent is None or parent[0] != "dir":
            self._check_parent(name, below)
        # Components compare as str: for valid UTF-8 (every name is) the order of code points
        # is the order of their UTF-8 bytes, the packer's order (tarformat.sort_key).
        if below <= self._previous:
            raise NotCanonicalError(name, "entries are not in canonical (depth-first) order")
        self._parent, self._siblings, self._last = name.rpartition("/")[0], below[:-1], below[-1]
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

    def finish(self) -> TaskLayout:
        """Link rules against the archive's own entries, then the Harbor task layout."""
        if not self.top:
            raise UnsafePathError(None, "the archive holds no top-level directory")
        for parts, (kind, target) in self._tree.items():
            if kind == "symlink":
                check_link("/".join((self.top, *parts)), parts, target, self._tree.get)
        kinds = ((parts, node[0]) for parts, node in self._tree.items())
        config = None if self._config is None else b"".join(self._config)
        return check_tree_layout(self.top, config, kinds)


class _Collect:
    """The sink of task.toml's data: kept in ``pieces`` (for the layout check), and passed on
    to ``then`` (the extractor's file) when there is one."""

    def __init__(self, pieces: list[bytes], then: Sink | None) -> None:
        self._pieces = pieces
        self._then = then

    def write(self, data: memoryview) -> None:
        self._pieces.append(bytes(data))
        if self._then is not None:
            self._then.write(data)

    def close(self) -> None:
        if self._then is not None:
            self._then.close()


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
