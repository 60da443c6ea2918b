"""The canonical tar encoding: one place that says how a member's header bytes look.

The packager writes, and the reader demands, POSIX ustar headers with mtime 0, uid/gid 0,
empty user, group and device-number fields and the mode's ``0o7777`` bits; a PAX extended
header (named ``././@PaxHeader``) only when a name or link target is longer than 100 characters
or not ASCII, or when a size does not fit 11 octal digits. The bytes equal what CPython's
``tarfile`` writes for the same normalized member in ``PAX_FORMAT`` (tested), so any tar tool
reads them. The stream ends with two zero blocks, padded with zeros to a 10,240-byte record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal
from zlib import adler32

__all__ = [
    "BLOCK",
    "END_OF_ARCHIVE",
    "RECORD",
    "HeaderParser",
    "Kind",
    "Member",
    "encode_header",
    "end_of_archive",
    "header_bytes",
    "header_checksum",
    "pad",
    "sort_key",
]

BLOCK = 512
RECORD = 20 * BLOCK
END_OF_ARCHIVE = bytes(2 * BLOCK)
PAX_NAME = "././@PaxHeader"
MAGIC = b"ustar\x0000"

Kind = Literal["dir", "file", "symlink"]
TYPEFLAG: dict[Kind, bytes] = {"dir": b"5", "file": b"0", "symlink": b"2"}
_MAX_OCTAL_SIZE = 8**11

# The one-block ustar header, as the concatenation of its variable parts and these constants:
# name (0-100), then mode, uid, gid, size, mtime (100-148) formatted from ``_FIELDS``, the
# checksum (148-156), the typeflag (156), linkname (157-257), then ``_TAIL``: magic and version
# (257-265) and the empty user, group, device and prefix fields up to 512.
_FIELDS = b"%07o\0" + b"0000000\0" * 2 + b"%011o\0" + b"00000000000\0"
_TAIL = MAGIC + bytes(BLOCK - 265)
_NULS = bytes(100)
# Sum of the bytes that do not vary (the checksum field read as eight spaces, the tail), minus
# the 1 that an Adler-32 starts its byte sum with (see _ustar_fast).
_FIXED_SUM = 8 * 32 + sum(_TAIL) - 1
# What HeaderParser reads: a block's fields; each mode field the packer writes; bytes 156-512
# of a file's and a directory's header, and their fixed checksum part; the NULs after a name.
_HEADER = struct.Struct("100s48s8s356s")  # name, mode to mtime, checksum, the rest
_MODE_FIELDS: dict[bytes, int] = {}  # every mode field, filled on first use (see _mode)
_UNLINKED_REST = {flag: flag + _NULS + _TAIL for flag in TYPEFLAG.values()}  # no link target
_FILE_REST, _DIR_REST = (_UNLINKED_REST[TYPEFLAG[kind]] for kind in ("file", "dir"))
_FILE_SUM, _DIR_SUM = (_FIXED_SUM + TYPEFLAG[kind][0] for kind in ("file", "dir"))
_PADDINGS = [bytes(n) for n in range(100)]
# What the packer's headers reuse: the numeric fields of recent (mode, size) pairs and their
# byte sum (see _number_fields).
_NUMBER_FIELDS: dict[tuple[int, int], tuple[bytes, int]] = {}
_NUMBER_FIELDS_KEPT = 4096
_NOT_CANONICAL = (-1, 0, 0)


@dataclass(frozen=True, slots=True)
class Member:
    """One archive entry: ``name`` is the slash-separated path below and including the
    top-level directory, without a trailing slash; ``mode`` holds the ``0o7777`` bits;
    ``size`` is the data length in bytes (0 unless ``kind == "file"``); ``linkname`` is a
    symbolic link's target (empty otherwise)."""

    name: str
    kind: Kind
    mode: int
    size: int = 0
    linkname: str = ""

    @property
    def header_name(self) -> str:
        """The name as stored: directories carry one trailing slash."""
        return f"{self.name}/" if self.kind == "dir" else self.name


def sort_key(name: str) -> tuple[bytes, ...]:
    """Depth-first order with each directory's children sorted by name bytes (``tar
    --sort=name``): compare paths component by component as UTF-8 bytes."""
    return tuple(part.encode("utf-8", "surrogateescape") for part in name.split("/"))


def pad(size: int) -> int:
    """Zero bytes that follow ``size`` data bytes to reach a block boundary."""
    return -size % BLOCK


def end_of_archive(offset: int) -> bytes:
    """The two zero blocks plus the zero padding that ends a stream at ``offset`` bytes."""
    total = offset + len(END_OF_ARCHIVE)
    return END_OF_ARCHIVE + bytes(-total % RECORD)


def header_checksum(block: bytes | bytearray | memoryview) -> int:
    """Unsigned sum of a header block's bytes with the checksum field read as spaces."""
    return sum(block[:148]) + 8 * 32 + sum(block[156:512])


def encode_header(member: Member) -> bytes:
    """The header bytes of ``member`` (PAX header block(s) first when needed), a multiple of
    512 bytes. Raises ``ValueError`` on a mode outside ``0o7777`` or a negative size."""
    return header_bytes(member.name, member.kind, member.mode, member.size, member.linkname)


def header_bytes(name: str, kind: Kind, mode: int, size: int = 0, linkname: str = "") -> bytes:
    """:func:`encode_header` of ``Member(name, kind, mode, size, linkname)``, without building
    the member (the packager calls it once per entry)."""
    header_name = f"{name}/" if kind == "dir" else name
    if (
        len(header_name) <= 100
        and len(linkname) <= 100
        and header_name.isascii()
        and linkname.isascii()
        and 0 <= mode <= 0o7777
        and 0 <= size < _MAX_OCTAL_SIZE
    ):
        name_bytes, link_bytes = header_name.encode("ascii"), linkname.encode("ascii")
        return _ustar_fast(name_bytes, mode, size, TYPEFLAG[kind], link_bytes)
    if not 0 <= mode <= 0o7777 or size < 0:
        raise ValueError(f"{name}: mode or size out of range")
    return _encode_general(header_name, kind, mode, size, linkname)


def _ustar_fast(name: bytes, mode: int, size: int, typeflag: bytes, link: bytes) -> bytes:
    """The single ustar block for an ASCII ``name`` and ``link`` of at most 100 bytes, an
    in-range ``mode`` and a ``size`` below 8**11: the same bytes as :func:`_ustar_block`.

    The checksum is the fixed part's sum, the numeric fields' (:func:`_number_fields`) and the
    sum of the name and link bytes, taken with ``zlib.adler32``: its low 16 bits are 1 + the
    byte sum modulo 65,521, and here the sum is exact because it stays below 2 x 100 x 127 <
    65,520 (ASCII name and linkname of at most 100 bytes).
    """
    try:
        fields, fields_sum = _NUMBER_FIELDS[mode, size]
    except KeyError:
        fields, fields_sum = _number_fields(mode, size)
    if link:
        variable = adler32(link, adler32(name)) & 0xFFFF
        rest = b"".join((typeflag, link, _NULS[len(link) :], _TAIL))
    else:  # a file or a directory: the rest of the block is a constant
        variable, rest = adler32(name) & 0xFFFF, _UNLINKED_REST[typeflag]
    checksum = b"%06o\0 " % (variable + fields_sum + _FIXED_SUM + typeflag[0])
    return b"".join((name, _NULS[len(name) :], fields, checksum, rest))


def _number_fields(mode: int, size: int) -> tuple[bytes, int]:
    """The 48 bytes from mode to mtime of a header and their byte sum, kept in
    ``_NUMBER_FIELDS`` (a tree's files share few modes and sizes; emptied when it holds
    ``_NUMBER_FIELDS_KEPT`` pairs, so a long-lived process keeps at most that many)."""
    fields = _FIELDS % (mode, size)
    if len(_NUMBER_FIELDS) >= _NUMBER_FIELDS_KEPT:
        _NUMBER_FIELDS.clear()
    known = _NUMBER_FIELDS[mode, size] = fields, sum(fields)
    return known


class HeaderParser:
    """The reader's fast path through canonical headers: :meth:`fields` recognises a header
    block that is exactly what :func:`encode_header` writes as one ustar block (an ASCII name
    and link target of at most 100 bytes, a size below 8**11). It keeps the numeric fields and
    checksums it has seen (few distinct values per archive), so one parser serves one archive.
    """

    __slots__ = ("_checksums", "_known", "_last", "_numbers")

    def __init__(self) -> None:
        self._numbers: dict[bytes, tuple[int, int, int]] = {}
        self._checksums: dict[bytes, int] = {}
        self._last = b""
        self._known = _NOT_CANONICAL

    def fields(self, buf: bytes, pos: int) -> tuple[str, Kind, int, int, str] | None:
        """``(name, kind, mode, size, linkname)`` of the member whose header is the 512 bytes
        of ``buf`` at ``pos``, when they are its canonical one-block encoding; None for any
        other block (a PAX header, a damaged or merely non-canonical one, the end of the
        archive), which the reader then parses field by field.

        Recognising the canonical bytes is enough: a block equal to its canonical encoding has
        a valid checksum, octal fields, a known typeflag and no prefix, so the field-by-field
        parse would find the same member and the same bytes when encoding it again.
        """
        name, numbers, checksum, rest = _HEADER.unpack_from(buf, pos)
        if numbers == self._last:  # as often as not, the previous header's mode and size
            mode, size, numbers_sum = self._known
        else:
            try:
                known = self._numbers[numbers]
            except KeyError:
                known = self._numbers.setdefault(numbers, _numbers(numbers))
            self._last, self._known = numbers, known
            mode, size, numbers_sum = known
        name, _, padding = name.partition(b"\0")
        if mode < 0 or padding != _PADDINGS[len(padding)]:  # a NUL ends the name, then NULs
            return None
        kind: Kind
        if rest == _FILE_REST:
            kind, base = "file", _FILE_SUM
        elif rest == _DIR_REST and not size and name[-1:] == b"/":
            kind, base = "dir", _DIR_SUM
        else:
            return self._linked(name, mode, size, numbers_sum, checksum, rest)
        try:  # one block holds only ASCII names: any other is written with a PAX header
            text = name.decode("ascii")
            stored = self._checksums[checksum]
        except UnicodeDecodeError:
            return None
        except KeyError:
            stored = self._checksum(checksum)
        if stored != (adler32(name) & 0xFFFF) + numbers_sum + base:
            return None
        return text[:-1] if kind == "dir" else text, kind, mode, size, ""

    def _checksum(self, field: bytes) -> int:
        try:
            return self._checksums[field]
        except KeyError:
            return self._checksums.setdefault(field, _checksum(field))

    def _linked(
        self, name: bytes, mode: int, size: int, numbers_sum: int, checksum: bytes, rest: bytes
    ) -> tuple[str, Kind, int, int, str] | None:
        """:meth:`fields` for a symbolic link (any other typeflag, or a link target on a file
        or directory, is not canonical)."""
        typeflag, link, tail = rest[0], _unpadded(rest[1:101]), rest[101:]
        if typeflag != TYPEFLAG["symlink"][0] or link is None or tail != _TAIL or size:
            return None
        # Adler-32's low 16 bits are 1 + the byte sum: exact, as 200 bytes sum below 65,521.
        total = adler32(link, adler32(name)) & 0xFFFF
        if self._checksum(checksum) != total + numbers_sum + _FIXED_SUM + typeflag:
            return None
        try:
            return name.decode("ascii"), "symlink", mode, size, link.decode("ascii")
        except UnicodeDecodeError:
            return None


def _unpadded(field: bytes) -> bytes | None:
    """The text of a NUL-padded field; None when a NUL is followed by anything else."""
    end = field.find(0)
    if end < 0:
        return field
    return field[:end] if field.count(0, end) == len(field) - end else None


def _checksum(field: bytes) -> int:
    """The value of a checksum field written as the packer writes it; -1 (no sum) otherwise."""
    try:
        value = int(field[:6], 8)
    except ValueError:
        return -1
    return value if field == b"%06o\0 " % value else -1


def _mode(field: bytes) -> int | None:
    """The mode of a mode field as the packer writes it; None for any other bytes. (The
    table of the 4,096 fields is built by the first reader, not by every import.)"""
    if not _MODE_FIELDS:
        _MODE_FIELDS.update({b"%07o\0" % mode: mode for mode in range(0o10000)})
    return _MODE_FIELDS.get(field)


def _numbers(fields: bytes) -> tuple[int, int, int]:
    """(mode, size, byte sum) of the 48 bytes from mode to mtime when they are canonical;
    a mode of -1 otherwise."""
    mode = _mode(fields[:8])
    try:
        size = int(fields[24:35], 8)
    except ValueError:
        return _NOT_CANONICAL
    if mode is None or size < 0 or fields != _FIELDS % (mode, size):  # int() takes "-1"
        return _NOT_CANONICAL
    return mode, size, sum(fields)


def _encode_general(name: str, kind: Kind, mode: int, size: int, linkname: str) -> bytes:
    """Any header: PAX records for a long or non-ASCII name or link target, or a huge size."""
    records: list[tuple[str, str]] = []
    if _needs_pax(name, 100):
        records.append(("path", name))
    if _needs_pax(linkname, 100):
        records.append(("linkpath", linkname))
    if size >= _MAX_OCTAL_SIZE:
        records.append(("size", str(size)))
        size = 0
    ustar = _ustar_block(name, mode, size, TYPEFLAG[kind], linkname)
    return _pax_blocks(records) + ustar if records else ustar


def _needs_pax(text: str, length: int) -> bool:
    return len(text) > length or not text.isascii()


def _pax_blocks(records: list[tuple[str, str]]) -> bytes:
    payload = b"".join(_pax_record(key, value) for key, value in records)
    header = _ustar_block(PAX_NAME, 0, len(payload), b"x", "")
    return header + payload + bytes(pad(len(payload)))


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode("utf-8", "surrogateescape")
    length = len(body)
    while len(str(length)) + len(body) != length:
        length = len(str(length)) + len(body)
    return str(length).encode("ascii") + body


def _ustar_block(name: str, mode: int, size: int, typeflag: bytes, linkname: str) -> bytes:
    block = bytearray(BLOCK)
    block[0:100] = _field(name, 100)
    block[100:108] = b"%07o\0" % mode
    block[108:116] = b"0000000\0"
    block[116:124] = b"0000000\0"
    block[124:136] = b"%011o\0" % size
    block[136:148] = b"00000000000\0"
    block[156:157] = typeflag
    block[157:257] = _field(linkname, 100)
    block[257:265] = MAGIC
    block[148:156] = b"%06o\0 " % header_checksum(block)
    return bytes(block)


def _field(text: str, length: int) -> bytes:
    raw = text.encode("ascii", "replace")[:length]
    return raw + bytes(length - len(raw))
