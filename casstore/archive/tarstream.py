"""Parsing the uncompressed tar stream into members, with our own header checks.

Only what the packager writes is accepted: ustar headers with a valid checksum, at most one PAX
header (``path``, ``linkpath``, ``size``) before a member, directories, regular files and
symbolic links. Everything else raises a typed error naming the entry. ``tarfile`` is never
used here: its extraction filters are bypassable on Python 3.12.1 (CVE-2025-4517).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from casstore.archive.limits import Limits
from casstore.archive.tarformat import BLOCK, RECORD, Kind, Member, header_checksum, pad
from casstore.digest import new_hasher
from casstore.errors import (
    CorruptArchiveError,
    EntryTypeError,
    NotCanonicalError,
    UnsafePathError,
)

__all__ = ["ByteStream", "RawMember", "read_members"]

_ZERO = bytes(BLOCK)
_TYPES: dict[bytes, Kind] = {b"5": "dir", b"0": "file", b"\0": "file", b"2": "symlink"}
_REFUSED = {
    b"1": "hard link",
    b"3": "character device",
    b"4": "block device",
    b"6": "FIFO",
    b"7": "contiguous file",
    b"S": "GNU sparse file",
    b"L": "GNU long-name header",
    b"K": "GNU long-link header",
    b"g": "PAX global header",
    b"V": "volume header",
    b"M": "multi-volume continuation",
    b"D": "GNU dump directory",
}
_PAX_KEYS = {"path", "linkpath", "size"}


class ByteStream:
    """The uncompressed stream over an iterator of chunks: exact reads, bounded by
    ``limits.max_expanded_bytes``, hashed with BLAKE3 (``content``, the content digest)."""

    def __init__(self, chunks: Iterator[bytes], limits: Limits) -> None:
        self._chunks = chunks
        self._limits = limits
        self._buffer = b""
        self._pos = 0
        self.offset = 0  # bytes consumed
        self.received = 0  # bytes decoded
        self.content = new_hasher("blake3")

    def _fill(self, entry: str | None = None) -> bool:
        chunk = next(self._chunks, None)
        if chunk is None:
            return False
        self.received += len(chunk)
        self._limits.check("max_expanded_bytes", self.received, entry)
        self.content.update(chunk)
        self._buffer = self._buffer[self._pos :] + chunk
        self._pos = 0
        return True

    def take(self, size: int, what: str | None) -> bytes:
        """Exactly ``size`` bytes; :class:`CorruptArchiveError` if the stream ends first.
        ``what`` is the entry being read (None while looking for a header)."""
        while len(self._buffer) - self._pos < size:
            if not self._fill():
                rule = "archive is truncated" if what else "archive is truncated (header expected)"
                raise CorruptArchiveError(what, rule)
        data = self._buffer[self._pos : self._pos + size]
        self._pos += size
        self.offset += size
        return data

    def pieces(self, size: int, what: str) -> Iterator[memoryview]:
        """``size`` bytes as successive views, without joining them."""
        while size:
            if self._pos == len(self._buffer):
                self._buffer, self._pos = b"", 0
                if not self._fill(what):
                    raise CorruptArchiveError(what, "archive is truncated (file data)")
            take = min(size, len(self._buffer) - self._pos)
            yield memoryview(self._buffer)[self._pos : self._pos + take]
            self._pos += take
            self.offset += take
            size -= take

    def expect_end(self) -> None:
        """After the end-of-archive blocks: only zero padding to a record, then nothing."""
        expected = -self.offset % RECORD
        while len(self._buffer) - self._pos < expected + 1 and self._fill():
            pass
        rest = self._buffer[self._pos :]
        if rest.count(0) != len(rest[:expected]) or len(rest) > expected:
            raise CorruptArchiveError(None, "trailing data after the end-of-archive blocks")
        if len(rest) < expected:
            raise NotCanonicalError(None, "end of archive is not padded to a 10,240-byte record")


@dataclass(frozen=True, slots=True)
class RawMember:
    """A parsed member: ``member`` as the packager would describe it, and ``header`` the
    exact bytes read for it (PAX blocks included), to compare with the canonical encoding."""

    member: Member
    header: bytes


def read_members(stream: ByteStream, limits: Limits) -> Iterator[RawMember]:
    """Yield every member of ``stream``; the caller must consume a file's data (``size``
    bytes, then its padding) before asking for the next member. Stops after the end blocks."""
    while True:
        block = stream.take(BLOCK, None)
        if block == _ZERO:
            if stream.take(BLOCK, None) != _ZERO:
                raise NotCanonicalError(None, "a lone zero block inside the archive")
            stream.expect_end()
            return
        yield _read_member(stream, block, limits)


def _read_member(stream: ByteStream, block: bytes, limits: Limits) -> RawMember:
    fields = _parse_block(block)
    pax: dict[str, str] = {}
    header = block
    if fields["type"] == b"x":
        limits.check("max_metadata_bytes", fields["size"], fields["name"] or None)
        payload = stream.take(fields["size"] + pad(fields["size"]), "PAX header")
        pax = _parse_pax(payload[: fields["size"]], fields["name"])
        block = stream.take(BLOCK, "PAX header")
        if block == _ZERO:
            raise CorruptArchiveError(None, "PAX header is not followed by a member")
        header += payload + block
        fields = _parse_block(block)
        if fields["type"] == b"x":
            raise NotCanonicalError(fields["name"], "two PAX headers for one member")
    return RawMember(_member(fields, pax), header)


def _parse_block(block: bytes) -> dict:
    name = _cstring(block[0:100])
    stored = _octal(block[148:156], "header checksum", name or None)
    if stored != header_checksum(block):
        raise CorruptArchiveError(name or None, "header checksum mismatch")
    prefix = _cstring(block[345:500])
    return {
        "name": f"{prefix}/{name}" if prefix else name,
        "mode": _octal(block[100:108], "mode", name),
        "size": _octal(block[124:136], "size", name),
        "type": block[156:157],
        "linkname": _cstring(block[157:257]),
        "raw_name": block[0:100],
    }


def _cstring(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _octal(field: bytes, what: str, name: str | None) -> int:
    if field[:1] and field[0] & 0x80:
        raise CorruptArchiveError(name, f"{what} uses base-256 (negative or oversized) encoding")
    digits = field.rstrip(b"\0 ").lstrip(b" ")
    if not digits or any(c not in b"01234567" for c in digits):
        raise CorruptArchiveError(name, f"{what} field is not an octal number")
    return int(digits, 8)


def _parse_pax(payload: bytes, name: str) -> dict[str, str]:
    records: dict[str, str] = {}
    position = 0
    while position < len(payload):
        space = payload.find(b" ", position)
        length_text = payload[position:space] if space > 0 else b""
        if not length_text.isdigit() or length_text.startswith(b"0"):
            raise CorruptArchiveError(name, "malformed PAX record length")
        end = position + int(length_text)
        record = payload[space + 1 : end]
        if end > len(payload) or not record.endswith(b"\n") or b"=" not in record:
            raise CorruptArchiveError(name, "malformed or zero-length PAX record")
        key, _, value = record[:-1].partition(b"=")
        _pax_key(key.decode("utf-8", "surrogateescape"), name, records)
        records[key.decode()] = _decode(value, name)
        position = end
    return records


def _pax_key(key: str, name: str, seen: dict[str, str]) -> None:
    if key.startswith("GNU.sparse"):
        raise EntryTypeError(name, "GNU sparse files are not allowed")
    if key not in _PAX_KEYS:
        raise NotCanonicalError(name, f"PAX record {key!r} is never written by the packager")
    if key in seen:
        raise NotCanonicalError(name, f"PAX record {key!r} repeated")


def _decode(raw: bytes, name: str | None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnsafePathError(name, "name is not valid UTF-8") from error


def _member(fields: dict, pax: dict[str, str]) -> Member:
    raw_name = pax.get("path", fields["name"])
    name = _decode(raw_name.encode("utf-8", "surrogateescape"), raw_name)
    kind = _TYPES.get(fields["type"])
    if kind is None:
        refused = _REFUSED.get(fields["type"], f"unknown entry type {fields['type']!r}")
        raise EntryTypeError(name, f"{refused} entries are not allowed")
    size = _pax_size(pax["size"], name) if "size" in pax else fields["size"]
    linkname = pax.get("linkpath", fields["linkname"])
    linkname = _decode(linkname.encode("utf-8", "surrogateescape"), name)
    if kind != "file" and size:
        raise NotCanonicalError(name, "a directory or link entry carries data")
    if kind != "symlink" and linkname:
        raise NotCanonicalError(name, "only a symbolic link entry carries a link target")
    stripped = name[:-1] if kind == "dir" and name.endswith("/") else name
    return Member(stripped, kind, fields["mode"] & 0o7777, size, linkname)


def _pax_size(text: str, name: str) -> int:
    # ASCII digits only (str.isdigit also accepts "²", which int() refuses), and few enough
    # for int() (it refuses more than 4,300 digits); 20 digits already exceed any file limit.
    if not (text.isascii() and text.isdigit()):
        raise CorruptArchiveError(name, "PAX size record is not a decimal number")
    if len(text) > 20:
        raise CorruptArchiveError(name, "PAX size record is out of range")
    return int(text)
