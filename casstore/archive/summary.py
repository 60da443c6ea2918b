"""What packing and reading both tell about one archive: :class:`ArchiveSummary`."""

from __future__ import annotations

from dataclasses import dataclass

from casstore.archive.compress import Compression
from casstore.archive.layout import TaskLayout
from casstore.digest import Digest

__all__ = ["ArchiveSummary"]


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
