"""What packing and reading both know of one archive: its bytes as they pass
(:class:`ArchiveBytes`) and what they add up to (:class:`ArchiveSummary`)."""

from __future__ import annotations

from dataclasses import dataclass

from casstore.archive.compress import Compression
from casstore.archive.layout import TaskLayout
from casstore.archive.limits import Limits
from casstore.digest import Digest, new_hasher

__all__ = ["ArchiveBytes", "ArchiveSummary"]


class ArchiveBytes:
    """An archive's compressed bytes as they are written or read: hashed into its address,
    counted (``size``) and bounded by ``max_archive_bytes`` (:class:`LimitError` beyond)."""

    __slots__ = ("_hasher", "_limits", "size")

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._hasher = new_hasher("sha256")
        self.size = 0

    def add(self, data: bytes | bytearray) -> None:
        """Count, bound and hash the next ``data``."""
        self.size += len(data)
        self._limits.check("max_archive_bytes", self.size, None)
        self._hasher.update(data)

    def address(self) -> Digest:
        """``sha256:`` of the bytes added so far."""
        return self._hasher.digest()


@dataclass(frozen=True, slots=True)
class ArchiveSummary:
    """One archive: ``address`` (``sha256:`` of its compressed bytes), ``content_digest``
    (``blake3:`` of the canonical uncompressed tar), ``entries`` (archive members, top
    directory included), ``payload_bytes`` (sum of file sizes), ``archive_bytes`` (compressed
    size), ``compression`` and ``layout`` (the checked Harbor task layout: native id,
    steps)."""

    address: Digest
    content_digest: Digest
    entries: int
    payload_bytes: int
    archive_bytes: int
    compression: Compression
    layout: TaskLayout

    def digests(self) -> dict[str, object]:
        """``address``, ``content_digest`` and ``entries``: the archive as every ``--json``
        output names it."""
        return {
            "address": str(self.address),
            "content_digest": str(self.content_digest),
            "entries": self.entries,
        }
