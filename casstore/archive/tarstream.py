"""Parsing the uncompressed tar stream into members, with our own header checks.

Only what the packager writes is accepted: ustar headers with a valid checksum, at most one PAX
header (``path``, ``linkpath``, ``size``) before a member, directories, regular files and
symbolic links. Everything else raises a typed error naming the entry. ``tarfile`` is never
used here: its extraction filters are bypassable on Python 3.12.1 (CVE-2025-4517).

The stream arrives in chunks of at most ``STREAM_BLOCK`` bytes; headers and data are read by
offset inside the chunk at hand (bytes are joined only where a header or padding straddles two
chunks). A header that is exactly its canonical encoding is recognised in one step
(:class:`casstore.archive.tarformat.HeaderParser`); any other is parsed field by field, so that
a damaged or hostile header gets the error that names its fault.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from casstore.archive.limits import Limits
from casstore.archive.tarformat import (
    BLOCK,
    RECORD,
    HeaderParser,
    Kind,
    Member,
    encode_header,
    header_checksum,
    pad,
)
from casstore.digest import Digest, new_hasher
from casstore.errors import (
    CorruptArchiveError,
    EntryTypeError,
    NotCanonicalError,
    UnsafePathError,
)

__all__ = ["Sink", "Visit", "read_members"]

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


class Sink(Protocol):
    """Where a member's data goes: ``write`` each piece in order, then ``close`` (also when
    reading the data failed)."""

    def write(self, data: memoryview, /) -> object: ...

    def close(self) -> None: ...


Fields = Callable[[bytes, int], tuple[str, Kind, int, int, str] | None]
Visit = Callable[[str, Kind, int, int, str, bool], Sink | None]
"""``visit(name, kind, mode, size, linkname, canonical)`` checks one member (``canonical``:
its header bytes are exactly the packager's) and returns the sink for its data, or None to
skip the data."""


def read_members(chunks: Iterator[bytes], limits: Limits, visit: Visit) -> Digest:
    """Walk the tar stream ``chunks`` to its end, calling ``visit`` for every member in order
    and passing its data to the returned sink; returns the stream's content digest (BLAKE3).

    The stream is bounded by ``limits.max_expanded_bytes``; after the end-of-archive blocks only
    zero padding to a record may follow, then nothing.
    """
    stream = _Stream(chunks, limits)
    stream.walk(visit)
    return stream.content.digest()


class _Stream:
    """The stream over its chunks: ``buf`` the chunk at hand, ``pos`` the offset in it,
    ``base`` the stream offset of ``buf[0]``; every chunk is counted, bounded and hashed."""

    __slots__ = ("_chunks", "_limit", "_limits", "base", "buf", "content", "pos", "received")

    def __init__(self, chunks: Iterator[bytes], limits: Limits) -> None:
        self._chunks = chunks
        self._limits = limits
        self._limit = limits.max_expanded_bytes
        self.buf = b""
        self.pos = 0
        self.base = 0
        self.received = 0
        self.content = new_hasher("blake3")

    def walk(self, visit: Visit) -> None:
        """Every member up to the end-of-archive blocks (see :func:`read_members`)."""
        fields = HeaderParser().fields
        while True:
            self._run(fields, visit)
            if not self._member(fields, visit):
                return

    def _run(self, fields: Fields, visit: Visit) -> None:
        """The members that lie whole in the chunk at hand, header and data, as long as their
        headers are canonical single blocks: the hot loop, on local variables."""
        buf, pos = self.buf, self.pos
        last = len(buf) - BLOCK
        try:
            while pos <= last:
                member = fields(buf, pos)
                if member is None:
                    return
                size = member[3]
                stop = pos + BLOCK + size
                padded = stop + (-size % BLOCK)
                if padded > len(buf):
                    return  # the data goes on in the next chunk: _member reads it
                sink = visit(*member, True)
                if sink is not None:
                    self.pos = pos + BLOCK
                    self._data(member[0], size, sink)  # all in this chunk: buf stays
                    pos = self.pos
                elif padded != stop and buf.count(0, stop, padded) != padded - stop:
                    raise NotCanonicalError(member[0], "non-zero padding after file data")
                else:
                    pos = padded
        finally:
            self.pos = pos

    def _member(self, fields: Fields, visit: Visit) -> bool:
        """One member read the general way (its header may be cut by the chunk's end, or not
        be one canonical block; its data may go on in later chunks); False after the end."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos >= BLOCK:
            self.pos = pos + BLOCK
            block = buf[pos : pos + BLOCK]
        else:
            block = self.take(BLOCK, None)
        member = fields(block, 0)
        if member is not None:
            sink = visit(*member, True)
        elif block == _ZERO:
            self._end()
            return False
        else:
            parsed = _read_member(self, block, self._limits)
            sink = visit(*parsed)
            member = parsed[:5]
        self._data(member[0], member[3], sink)
        return True

    def _data(self, name: str, size: int, sink: Sink | None) -> None:
        """A member's ``size`` bytes of data to ``sink`` (None: skipped), then its padding."""
        left = size
        try:
            while left:
                if self.pos == len(self.buf):
                    if not self._fill(name):
                        raise CorruptArchiveError(name, "archive is truncated (file data)")
                    continue
                take = min(left, len(self.buf) - self.pos)
                if sink is not None:
                    sink.write(memoryview(self.buf)[self.pos : self.pos + take])
                self.pos += take
                left -= take
        finally:
            if sink is not None:
                sink.close()
        padding = pad(size)
        if padding and self.take(padding, name).count(0) != padding:
            raise NotCanonicalError(name, "non-zero padding after file data")

    def _fill(self, entry: str | None) -> bool:
        """Move to the next chunk (the one at hand must be used up); False at the end."""
        chunk = next(self._chunks, None)
        if chunk is None:
            return False
        self.received += len(chunk)
        if self.received > self._limit:
            self._limits.check("max_expanded_bytes", self.received, entry)
        self.content.update(chunk)
        self.base += len(self.buf)
        self.buf, self.pos = chunk, 0
        return True

    def take(self, size: int, what: str | None) -> bytes:
        """Exactly ``size`` bytes; :class:`CorruptArchiveError` if the stream ends first.
        ``what`` is the entry being read (None while looking for a header)."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos >= size:
            self.pos = pos + size
            return buf[pos : pos + size]
        pieces, have = [buf[pos:]], len(buf) - pos
        self.pos = len(buf)
        while have < size:
            if not self._fill(None):
                rule = "archive is truncated" if what else "archive is truncated (header expected)"
                raise CorruptArchiveError(what, rule)
            piece = self.buf[: size - have]
            self.pos = len(piece)
            pieces.append(piece)
            have += len(piece)
        return b"".join(pieces)

    def _end(self) -> None:
        """After a zero block: a second one, then only zero padding to a record, then nothing."""
        if self.take(BLOCK, None) != _ZERO:
            raise NotCanonicalError(None, "a lone zero block inside the archive")
        expected = -(self.base + self.pos) % RECORD
        pieces = [self.buf[self.pos :]]
        have = len(pieces[0])
        self.pos = len(self.buf)
        while have <= expected and self._fill(None):
            pieces.append(self.buf)
            have += len(self.buf)
            self.pos = len(self.buf)
        rest = b"".join(pieces)
        if rest.count(0) != len(rest[:expected]) or len(rest) > expected:
            raise CorruptArchiveError(None, "trailing data after the end-of-archive blocks")
        if len(rest) < expected:
            raise NotCanonicalError(None, "end of archive is not padded to a 10,240-byte record")


def _read_member(
    stream: _Stream, block: bytes, limits: Limits
) -> tuple[str, Kind, int, int, str, bool]:
    """A member whose header is not one canonical block, parsed field by field: its fields
    and whether its header bytes (PAX blocks included) are the canonical encoding."""
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
    member = _member(fields, pax)
    canonical = encode_header(member) == header
    return member.name, member.kind, member.mode, member.size, member.linkname, canonical


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
