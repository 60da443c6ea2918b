"""Build task archives byte by byte for the hostile-archive tests.

An archive is assembled from *entries*: the bytes of one member (header block(s), data and
the zero padding to a 512-byte block). :func:`entry` writes a canonical entry with the packager's
own encoder; :func:`raw_header`, :func:`pax_header` and :func:`gnu_long_name` write hand-crafted
ones (any name bytes, typeflag, numeric field text, PAX records, checksum). :func:`tar` joins
entries and appends the end-of-archive blocks; :func:`compress` wraps the stream in canonical
gzip (the packager's own encoder), zstd, or nothing.

:func:`task_entries` is a minimal valid Harbor task (top directory, ``instruction.md``,
``task.toml``) in canonical order, as a ``{name: entry bytes}`` dict that tests edit before
calling :func:`canonical_tar` (which sorts by name the way the packager does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import zstandard

from casstore.archive.compress import ZSTD_LEVEL, new_encoder
from casstore.archive.tarformat import BLOCK, Member, encode_header, end_of_archive, pad, sort_key
from tests import helpers

__all__ = [
    "INSTRUCTION",
    "MULTI_STEP_TOML",
    "TASK_TOML",
    "TOP",
    "canonical_tar",
    "compress",
    "directory",
    "entry",
    "file",
    "gnu_long_name",
    "multi_step_entries",
    "pax_header",
    "pax_record",
    "raw_header",
    "symlink",
    "tar",
    "task_entries",
]

TOP = "task"
TASK_TOML = helpers.TASK_TOML.encode()  # the minimal task.toml, as member data
MULTI_STEP_TOML = b'[[steps]]\nname = "one"\n\n[[steps]]\nname = "two"\n'
INSTRUCTION = b"Print hello.\n"
USTAR_MAGIC = b"ustar\x0000"


def entry(member: Member, data: bytes = b"") -> bytes:
    """The canonical entry of ``member``: :func:`encode_header`, ``data``, zero padding.

    ``data`` may be shorter than ``member.size`` (a truncation test cuts the stream itself)."""
    return encode_header(member) + data + bytes(pad(len(data)))


def file(name: str, data: bytes = b"", mode: int = 0o644) -> bytes:
    """A canonical regular-file entry."""
    return entry(Member(name, "file", mode, len(data)), data)


def directory(name: str, mode: int = 0o755) -> bytes:
    """A canonical directory entry (``name`` without the trailing slash)."""
    return entry(Member(name, "dir", mode))


def symlink(name: str, target: str) -> bytes:
    """A canonical symbolic-link entry."""
    return entry(Member(name, "symlink", 0o777, 0, target))


def task_entries(
    top: str = TOP, toml: bytes = TASK_TOML, instruction: bytes = INSTRUCTION
) -> dict[str, bytes]:
    """A minimal valid single-step task: ``{name: canonical entry}``."""
    return {
        top: directory(top),
        f"{top}/instruction.md": file(f"{top}/instruction.md", instruction),
        f"{top}/task.toml": file(f"{top}/task.toml", toml),
    }


def multi_step_entries(top: str = TOP, steps: Iterable[str] = ("one", "two")) -> dict[str, bytes]:
    """A valid multi-step task (steps ``one`` and ``two``, no root instruction.md); ``steps``
    selects which step directories are actually present."""
    entries = {top: directory(top), f"{top}/task.toml": file(f"{top}/task.toml", MULTI_STEP_TOML)}
    entries[f"{top}/steps"] = directory(f"{top}/steps")
    for step in steps:
        entries[f"{top}/steps/{step}"] = directory(f"{top}/steps/{step}")
        name = f"{top}/steps/{step}/instruction.md"
        entries[name] = file(name, f"Step {step}.\n".encode())
    return entries


def canonical_tar(entries: Mapping[str, bytes]) -> bytes:
    """:func:`tar` of ``entries`` sorted by name the way the packager orders them."""
    return tar(*(entries[name] for name in sorted(entries, key=sort_key)))


def tar(*entries: bytes, end: bool = True) -> bytes:
    """The entries joined, followed (if ``end``) by the canonical end of archive: two zero
    blocks and zero padding to a 10,240-byte record."""
    body = b"".join(entries)
    return body + end_of_archive(len(body)) if end else body


def raw_header(
    name: bytes | str,
    *,
    typeflag: bytes = b"0",
    size: int = 0,
    mode: int = 0o644,
    linkname: bytes | str = b"",
    prefix: bytes | str = b"",
    mtime: int = 0,
    uid: int = 0,
    gid: int = 0,
    uname: bytes = b"",
    gname: bytes = b"",
    magic: bytes = USTAR_MAGIC,
    fields: Mapping[str, bytes] | None = None,
    checksum: bytes | None = None,
) -> bytes:
    """One hand-made 512-byte ustar header block.

    With the defaults and an ASCII ``name`` of at most 100 bytes this equals the ustar block
    :func:`encode_header` writes (the test suite checks it). ``fields`` overrides the raw text of
    a numeric field (``"mode"``, ``"uid"``, ``"gid"``, ``"size"``, ``"mtime"``, ``"devmajor"``,
    ``"devminor"``), e.g. ``{"size": b"\\xff" * 12}``; ``checksum`` the 8 checksum bytes (by
    default the correct sum, written ``%06o\\0 ``)."""
    raw = {
        "mode": b"%07o\0" % mode,
        "uid": b"%07o\0" % uid,
        "gid": b"%07o\0" % gid,
        "size": b"%011o\0" % size,
        "mtime": b"%011o\0" % mtime,
        "devmajor": b"",
        "devminor": b"",
    } | dict(fields or {})
    block = bytearray(BLOCK)
    block[0:100] = _fit(name, 100)
    block[100:108] = _fit(raw["mode"], 8)
    block[108:116] = _fit(raw["uid"], 8)
    block[116:124] = _fit(raw["gid"], 8)
    block[124:136] = _fit(raw["size"], 12)
    block[136:148] = _fit(raw["mtime"], 12)
    block[148:156] = b" " * 8
    block[156:157] = typeflag
    block[157:257] = _fit(linkname, 100)
    block[257:265] = _fit(magic, 8)
    block[265:297] = _fit(uname, 32)
    block[297:329] = _fit(gname, 32)
    block[329:337] = _fit(raw["devmajor"], 8)
    block[337:345] = _fit(raw["devminor"], 8)
    block[345:500] = _fit(prefix, 155)
    block[148:156] = checksum if checksum is not None else b"%06o\0 " % sum(block)
    return bytes(block)


def pax_record(key: bytes | str, value: bytes | str) -> bytes:
    """One PAX record ``"<length> <key>=<value>\\n"`` with its self-inclusive length."""
    body = b" " + _bytes(key) + b"=" + _bytes(value) + b"\n"
    length = len(body)
    while len(str(length)) + len(body) != length:
        length = len(str(length)) + len(body)
    return str(length).encode() + body


def pax_header(
    records: Iterable[tuple[bytes | str, bytes | str]] | bytes,
    name: bytes | str = "././@PaxHeader",
    typeflag: bytes = b"x",
    size: int | None = None,
) -> bytes:
    """A PAX extended header: its ustar block (typeflag ``x``) then the payload, padded.

    ``records`` is a list of ``(key, value)`` pairs or the raw payload bytes; ``size`` overrides
    the declared payload size (the payload written stays ``records``)."""
    if isinstance(records, bytes):
        payload = records
    else:
        payload = b"".join(pax_record(key, value) for key, value in records)
    declared = len(payload) if size is None else size
    header = raw_header(name, typeflag=typeflag, size=declared, mode=0)
    return header + payload + bytes(pad(len(payload)))


def gnu_long_name(long_name: bytes | str, typeflag: bytes = b"L") -> bytes:
    """A GNU ``././@LongLink`` header (``L``: long name, ``K``: long link target) with its
    NUL-terminated payload; the member it describes must follow."""
    payload = _bytes(long_name) + b"\0"
    header = raw_header("././@LongLink", typeflag=typeflag, size=len(payload))
    return header + payload + bytes(pad(len(payload)))


def compress(data: bytes, compression: str = "gzip") -> bytes:
    """``data`` compressed: ``gzip`` with the packager's encoder (canonical header, same
    deflate blocks), ``zstd`` (level and checksum as the packager), or ``none``."""
    if compression == "none":
        return data
    if compression == "zstd":
        options = {"write_checksum": True, "write_content_size": False}
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL, **options).compress(data)
    out: list[bytes] = []
    encoder = new_encoder("gzip", out.append)
    encoder.feed(data)
    encoder.finish()
    return b"".join(out)


def _bytes(text: bytes | str) -> bytes:
    return text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text


def _fit(value: bytes | str, length: int) -> bytes:
    raw = _bytes(value)[:length]
    return raw + bytes(length - len(raw))
