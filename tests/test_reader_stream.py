"""The reader's fast paths give the answers of its careful ones.

The reader recognises a canonical header in one step (``HeaderParser``) instead of parsing it
field by field, walks the stream by offset inside chunks that may cut a header, padding or PAX
payload in two, compares names as ``str`` tuples, and runs the file reading and decompression
on threads (``pipeline.Prefetch``). Each test here pins one of those against the rule it stands
for.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.archive import pipeline, read
from casstore.archive.compress import STREAM_BLOCK, decode
from casstore.archive.limits import Limits
from casstore.archive.pipeline import Prefetch
from casstore.archive.read import extract_archive, verify_archive
from casstore.archive.tarformat import (
    BLOCK,
    HeaderParser,
    Member,
    header_bytes,
    header_checksum,
    sort_key,
)
from casstore.errors import CheckError, CorruptArchiveError, LimitError
from tests.archive_builder import (
    INSTRUCTION,
    canonical_tar,
    compress,
    directory,
    file,
    pax_header,
    raw_header,
    symlink,
    tar,
    task_entries,
)
from tests.helpers import snapshot
from tests.test_hostile_archives import CASES, Ctx

ascii_parts = st.text(
    alphabet=st.characters(min_codepoint=1, max_codepoint=127, blacklist_characters="/"),
    min_size=1,
    max_size=30,
)


@st.composite
def members(draw) -> Member:
    """Members whose canonical header is one ustar block (ASCII, at most 100 bytes)."""
    kind = draw(st.sampled_from(["dir", "file", "symlink"]))
    name = "/".join(draw(st.lists(ascii_parts, min_size=1, max_size=4)))[:99]
    size = draw(st.integers(0, 8**11 - 1)) if kind == "file" else 0
    link = draw(ascii_parts) if kind == "symlink" else ""
    return Member(name, kind, draw(st.integers(0, 0o7777)), size, link)


def _header(member: Member) -> bytes:
    return header_bytes(member.name, member.kind, member.mode, member.size, member.linkname)


@settings(max_examples=400, deadline=None)
@given(member=members(), offset=st.integers(0, 3))
def test_header_parser_reads_every_canonical_single_block_header(member, offset):
    buf = bytes(offset * BLOCK) + _header(member) + bytes(BLOCK)
    assert HeaderParser().fields(buf, offset * BLOCK) == (
        member.name,
        member.kind,
        member.mode,
        member.size,
        member.linkname,
    )


@settings(max_examples=1500, deadline=None)
@given(
    member=members(),
    changes=st.lists(st.tuples(st.integers(0, BLOCK - 1), st.integers(0, 255)), min_size=1),
    fix_checksum=st.booleans(),
)
def test_header_parser_accepts_only_canonical_blocks(member, changes, fix_checksum):
    """Whatever bytes change (with the checksum rewritten as the packer writes it, or not),
    a block the fast path accepts is exactly the canonical encoding of what it returns."""
    block = bytearray(_header(member))
    for position, value in changes:
        block[position] = value
    if fix_checksum:
        block[148:156] = b"%06o\0 " % header_checksum(block)
    fields = HeaderParser().fields(bytes(block), 0)
    if fields is not None:
        name, kind, mode, size, link = fields
        assert header_bytes(name, kind, mode, size, link) == bytes(block)


names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"))


@settings(max_examples=500, deadline=None)
@given(a=st.lists(names, min_size=1, max_size=4), b=st.lists(names, min_size=1, max_size=4))
def test_reader_order_is_the_packers_order(a, b):
    """The reader compares components as str; the packer sorts by their UTF-8 bytes."""
    assert (tuple(a) < tuple(b)) == (sort_key("/".join(a)) < sort_key("/".join(b)))


# Bytes of task/instruction.md's ustar header that never vary for it: the NULs after its name
# (a NUL ends the name; anything after it must be NUL too) and after the mode and size digits,
# uid, gid, mtime, the link target, magic, version, user, group, devices and prefix.
_CONSTANT = [*range(20, 100), 107, *range(108, 124), 135, *range(136, 148), *range(157, BLOCK)]


@pytest.mark.parametrize("position", _CONSTANT)
def test_every_constant_header_byte_is_checked(position, tmp_path):
    """One byte changed where the packer always writes the same (and the checksum made right
    again): the reader refuses the archive as not canonical (a prefix field moves the name,
    which the path rules refuse first)."""
    name = "task/instruction.md"
    block = bytearray(header_bytes(name, "file", 0o644, len(INSTRUCTION)))
    block[position] = ord("1") if block[position] != ord("1") else ord("2")
    block[148:156] = b"%06o\0 " % header_checksum(block)
    entries = task_entries()
    entries[name] = bytes(block) + file(name, INSTRUCTION)[BLOCK:]
    archive = tmp_path / "a.tar"
    archive.write_bytes(canonical_tar(entries))
    with pytest.raises(CheckError) as caught:
        verify_archive(archive)
    assert caught.value.kind == ("unsafe_path" if position == 345 else "not_canonical")


# --- chunk boundaries ------------------------------------------------------------------------
# The file is read in STREAM_BLOCK pieces; an uncompressed archive read in pieces that are no
# multiple of 512 bytes has headers, data, padding and PAX payloads cut at every place.


def _boundary_task() -> dict[str, bytes]:
    entries = task_entries()
    entries["task/a.bin"] = file("task/a.bin", random.Random(1).randbytes(5000))
    entries["task/" + "é" * 30] = file("task/" + "é" * 30, b"a PAX name\n")
    entries["task/d"] = directory("task/d")
    for index in range(20):
        entries[f"task/d/{index:02d}"] = file(f"task/d/{index:02d}", bytes([index]) * index * 37)
    return entries


@pytest.mark.parametrize("block", [1, 7, 700, 1536, STREAM_BLOCK])
def test_any_cut_of_the_stream_reads_the_same(block, monkeypatch, tmp_path):
    archive = tmp_path / "a.tar"
    archive.write_bytes(canonical_tar(_boundary_task()))
    expected = verify_archive(archive)
    extract_archive(archive, tmp_path / "expected")
    monkeypatch.setattr(pipeline, "STREAM_BLOCK", block)
    assert verify_archive(archive) == expected
    extract_archive(archive, tmp_path / "dest")
    assert snapshot(tmp_path / "dest") == snapshot(tmp_path / "expected")


@pytest.mark.parametrize("block", [1, 700])
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES if not c.marks])
def test_any_cut_of_a_hostile_stream_fails_the_same(case, block, monkeypatch, tmp_path):
    archive = tmp_path / "archive"
    archive.write_bytes(case.build(Ctx(str(tmp_path / "outside"))))
    with pytest.raises(CheckError) as whole:
        verify_archive(archive, expect=case.expect, limits=case.limits)
    monkeypatch.setattr(pipeline, "STREAM_BLOCK", block)
    with pytest.raises(CheckError) as cut:
        verify_archive(archive, expect=case.expect, limits=case.limits)
    if isinstance(whole.value, LimitError):  # the count it reached depends on the pieces read
        assert isinstance(cut.value, LimitError)
        assert (cut.value.path, cut.value.limit) == (whole.value.path, whole.value.limit)
    else:
        assert str(cut.value) == str(whole.value)


# --- decoders with short reads --------------------------------------------------------------


class _ShortReads:
    """A source whose reads return 1 to 7 bytes at a time."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self._random = random.Random(len(data))

    def read(self, size: int) -> bytes:
        take = min(size, self._random.randint(1, 7))
        piece = self._data[self._pos : self._pos + take]
        self._pos += len(piece)
        return piece


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_decoders_follow_a_stream_read_a_few_bytes_at_a_time(compression):
    data = random.Random(1).randbytes(300_000) + bytes(400_000) + b"end"
    stream = compress(data, compression)
    assert b"".join(decode(compression, _ShortReads(stream))) == data  # type: ignore[arg-type]
    with pytest.raises(CorruptArchiveError) as caught:
        b"".join(decode(compression, _ShortReads(stream + b"garbage")))  # type: ignore[arg-type]
    assert "trailing bytes" in caught.value.rule


# --- stages on threads ---------------------------------------------------------------------


def test_prefetch_yields_in_order_then_raises_where_the_error_was():
    def items():
        yield from range(100)
        raise CorruptArchiveError(None, "broken after 100")

    stage = Prefetch(items(), 4, "casstore-test")
    seen = []
    with pytest.raises(CorruptArchiveError, match="broken after 100"):
        for item in stage:
            seen.append(item)
    stage.close()
    assert seen == list(range(100))


def test_prefetch_close_stops_a_producer_that_is_ahead():
    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    stage = Prefetch(endless(), 2, "casstore-test")
    assert [next(stage) for _ in range(3)] == [0, 1, 2]
    stage.close()
    assert closed.is_set()
    assert not any(thread.name == "casstore-test" for thread in threading.enumerate())


@pytest.mark.parametrize("compression", ["none", "zstd", "gzip"])
def test_a_refused_archive_leaves_no_thread_behind(compression, tmp_path):
    entries = task_entries() | {"task/big": file("task/big", bytes(3 * STREAM_BLOCK))}
    entries["task/bad"] = raw_header("task/bad", typeflag=b"3")  # a device, after 3 MiB
    archive = tmp_path / "a.tar"
    archive.write_bytes(compress(tar(*(entries[n] for n in sorted(entries))), compression))
    with pytest.raises(CheckError):
        verify_archive(archive)
    assert not [t for t in threading.enumerate() if t.name.startswith("casstore-")]


# --- extraction modes --------------------------------------------------------------------------


def test_extracted_modes_do_not_depend_on_the_umask(tmp_path):
    """Files are created with their mode when open() can give it; a umask that would clear
    bits (or a mode beyond 0o777) makes the extractor set it with fchmod."""
    entries = task_entries() | {
        "task/d": directory("task/d", 0o750),
        "task/d/private": file("task/d/private", b"x", 0o600),
        "task/d/open": file("task/d/open", b"x", 0o666),
        "task/d/setuid": file("task/d/setuid", b"x", 0o4755),
        "task/d/none": file("task/d/none", b"x", 0o000),
    }
    archive = tmp_path / "a.tar"
    archive.write_bytes(canonical_tar(entries))
    for umask in (0o022, 0o077, 0o000):
        previous = os.umask(umask)
        try:
            extract_archive(archive, tmp_path / f"dest-{umask:o}")
        finally:
            os.umask(previous)
        tree = snapshot(tmp_path / f"dest-{umask:o}")
        assert tree["task/d"][1] == 0o750
        modes = {name: tree[f"task/d/{name}"][1] for name in ("private", "open", "setuid", "none")}
        assert modes == {"private": 0o600, "open": 0o666, "setuid": 0o4755, "none": 0o000}


def test_task_toml_is_extracted_and_checked(tmp_path):
    archive = tmp_path / "a.tar.zst"
    archive.write_bytes(compress(canonical_tar(task_entries()), "zstd"))
    result = extract_archive(archive, tmp_path / "dest")
    assert result.layout.native_id == "task"
    assert (tmp_path / "dest" / "task" / "task.toml").read_bytes() == task_entries()[
        "task/task.toml"
    ][BLOCK : BLOCK + len((tmp_path / "dest" / "task" / "task.toml").read_bytes())]
    assert Path(tmp_path / "dest" / "task" / "instruction.md").read_bytes() == INSTRUCTION


# --- the sibling shortcut of the name checks -----------------------------------------------
# An entry that follows its sibling with a plain name skips the full name and order checks
# (read._Checker.visit); forgetting the previous entry's parent sends every entry through them.
# Both must agree on any names in any order (dot names, empty or over-long components,
# duplicates, names below a file or a link, parents never archived, links among files).

_PLAIN = ["-", "a", "b", "B", "a b", "é", ".hidden", "x" * 200]  # "-" sorts before "."
_ODD = [".", "..", "", "x" * 256, "é" * 128, "b\0c", "a/x", "c/y"]  # 128 "é": 256 bytes
_NUL = "b\0c"  # only a PAX header can carry it
_TARGETS = ["a", "../z", "/etc", "", "y" * 4096]


@st.composite
def sibling_entries(draw) -> list[tuple[str, bytes]]:
    """(name, entry) of members of ``task/z`` (the task's last directory) in the order drawn:
    plain names and at most two odd ones (more would hide each other behind the first
    error)."""
    lasts = draw(st.lists(st.sampled_from(_PLAIN), max_size=6))
    for odd in draw(st.lists(st.sampled_from(_ODD), max_size=2)):
        lasts.insert(draw(st.integers(0, len(lasts))), odd)
    entries = []
    for last in lasts:
        kind = draw(st.sampled_from(["file", "file", "dir", "symlink"]))
        target = draw(st.sampled_from(_TARGETS)) if kind == "symlink" else ""
        entries.append((f"task/z/{last}", _sibling_entry(f"task/z/{last}", kind, target)))
    return entries


def _sibling_entry(name: str, kind: str, target: str) -> bytes:
    if kind == "dir":
        return directory(name)
    if kind == "symlink":
        return symlink(name, target)
    if name.endswith(_NUL):  # a PAX path record, then a ustar header that names "b"
        ustar = raw_header(name[: name.index("\0")], size=1) + b"1".ljust(BLOCK, b"\0")
        return pax_header([("path", name)]) + ustar
    return file(name, b"1")


def _outcome(archive: Path, limits: Limits, careful: bool) -> object:
    """verify_archive's result, or its error's type and message; ``careful``: with every
    entry sent through the full name and order checks."""
    original = read._Checker._place

    def place(self, *args):
        below = original(self, *args)
        self._parent = None  # no later entry is taken for this one's sibling
        return below

    with pytest.MonkeyPatch.context() as patch:
        if careful:
            patch.setattr(read._Checker, "_place", place)
        try:
            return verify_archive(archive, limits=limits)
        except CheckError as error:
            return type(error), str(error)


def _pairs(*members: tuple[str, Callable[[str], bytes]]) -> list[tuple[str, bytes]]:
    return [(f"task/z/{last}", entry_of(f"task/z/{last}")) for last, entry_of in members]


def _file(name: str) -> bytes:
    return _sibling_entry(name, "file", "")


def _long_link(name: str) -> bytes:
    return symlink(name, "y" * 4096)  # refused as too long, not as dangling


# One case per condition of the shortcut: an odd name right after a plain sibling.
_ODD_AFTER_PLAIN = {
    "duplicate": (_pairs(("a", _file), ("a", _file)), Limits()),
    "out of order": (_pairs(("b", _file), ("a", _file)), Limits()),
    "dot after dash": (_pairs(("-", _file), (".", _file)), Limits()),
    "link target": (_pairs(("a", _file), ("b", _long_link)), Limits()),
    "NUL": (_pairs(("a", _file), (_NUL, _file)), Limits()),
    "path length": (_pairs(("a", _file), ("b" * 20, _file)), Limits(max_path_bytes=24)),
    "UTF-8 length": (_pairs(("a", _file), ("é" * 128, _file)), Limits()),  # 256 bytes
}


@pytest.mark.parametrize(("entries", "limits"), _ODD_AFTER_PLAIN.values(), ids=_ODD_AFTER_PLAIN)
def test_sibling_shortcut_refuses_an_odd_name_after_a_plain_one(entries, limits, tmp_path):
    outcome = _check_sibling_shortcut(entries, limits, tmp_path)
    assert isinstance(outcome, tuple)  # refused (with the careful path's error)


@settings(max_examples=150, deadline=None)
@given(
    entries=sibling_entries(),
    ordered=st.booleans(),
    limits=st.sampled_from([Limits(), Limits(max_path_bytes=24)]),
)
def test_sibling_shortcut_answers_as_the_full_checks(entries, ordered, limits, tmp_path_factory):
    if ordered:  # as the packer sorts them: the shortcut's common case
        entries.sort(key=lambda pair: sort_key(pair[0]))
    _check_sibling_shortcut(entries, limits, tmp_path_factory.mktemp("siblings"))


def _check_sibling_shortcut(entries: list[tuple[str, bytes]], limits: Limits, tmp: Path) -> object:
    """The outcome of verifying the task with ``entries`` in ``task/z``, the same with and
    without the shortcut."""
    base = task_entries() | {"task/z": directory("task/z")}
    stream = tar(*(base[name] for name in sorted(base, key=sort_key)), *(e for _, e in entries))
    archive = tmp / "a.tar"
    archive.write_bytes(stream)
    outcome = _outcome(archive, limits, careful=False)
    assert outcome == _outcome(archive, limits, careful=True)
    return outcome
