"""The canonical header encoding equals CPython tarfile's PAX output for normalized members."""

from __future__ import annotations

import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.archive.tarformat import (
    RECORD,
    Member,
    _encode_general,
    encode_header,
    end_of_archive,
    header_bytes,
    sort_key,
)

_TYPES = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "symlink": tarfile.SYMTYPE}
names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"),
    min_size=1,
    max_size=150,
)


def reference(member: Member) -> bytes:
    info = tarfile.TarInfo(member.name)
    info.type = _TYPES[member.kind]
    info.mode, info.size, info.linkname = member.mode, member.size, member.linkname
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(names, min_size=1, max_size=4),
    kind=st.sampled_from(["dir", "file", "symlink"]),
    mode=st.integers(0, 0o7777),
    size=st.one_of(st.integers(0, 2**20), st.integers(8**11 - 2, 8**11 + 2)),
    link=names,
)
def test_header_equals_tarfile_pax(parts, kind, mode, size, link):
    member = Member(
        "/".join(parts),
        kind,
        mode,
        size if kind == "file" else 0,
        link if kind == "symlink" else "",
    )
    assert encode_header(member) == reference(member)


# Names and link targets of the one-block ustar case (ASCII, at most 100 characters), any
# ASCII character but "/" and NUL, and lengths around the 100-character bound.
ascii_names = st.text(
    alphabet=st.characters(min_codepoint=1, max_codepoint=127, blacklist_characters="/"),
    min_size=1,
    max_size=40,
)


@settings(max_examples=500, deadline=None)
@given(
    parts=st.lists(ascii_names, min_size=1, max_size=4),
    kind=st.sampled_from(["dir", "file", "symlink"]),
    mode=st.integers(0, 0o7777),
    size=st.one_of(st.integers(0, 2**34), st.integers(8**11 - 2, 8**11 - 1)),
    link=st.one_of(ascii_names, st.text(alphabet="\x7f~.", min_size=95, max_size=101)),
)
def test_single_block_headers_equal_tarfile_and_the_general_encoding(parts, kind, mode, size, link):
    name = "/".join(parts)[:101]
    size, link = (size if kind == "file" else 0), (link if kind == "symlink" else "")
    member = Member(name, kind, mode, size, link)
    header = header_bytes(name, kind, mode, size, link)
    assert header == encode_header(member) == reference(member)
    stored = member.header_name
    assert header == _encode_general(stored, kind, mode, size, link)


def test_header_checksum_of_the_largest_ascii_header():
    """The checksum of the one-block case is summed with adler32: the highest byte sum it
    meets (100-character names and targets of DEL, the largest mode and size) stays exact."""
    name, link = "\x7f" * 100, "\x7f" * 100
    member = Member(name, "symlink", 0o7777, 0, link)
    assert header_bytes(name, "symlink", 0o7777, 0, link) == reference(member)
    member = Member(name, "file", 0o7777, 8**11 - 1)
    assert header_bytes(name, "file", 0o7777, 8**11 - 1) == reference(member)


def test_headers_that_share_a_mode_and_size_each_have_their_own_name_and_checksum():
    """The numeric fields of a (mode, size) pair are reused by the next header: each header
    still equals tarfile's, and no more than the bound of pairs is kept."""
    import casstore.archive.tarformat as tarformat

    tarformat._NUMBER_FIELDS.clear()
    for name, kind, link in [("t/a", "file", ""), ("t/bb", "file", ""), ("t/d", "dir", "")]:
        for mode in (0o644, 0o755):
            size = 5 if kind == "file" else 0
            member = Member(name, kind, mode, size, link)
            assert header_bytes(name, kind, mode, size, link) == reference(member)
    for link in ("x", "yy/z"):
        member = Member("t/l", "symlink", 0o777, 0, link)
        assert header_bytes("t/l", "symlink", 0o777, 0, link) == reference(member)
    assert set(tarformat._NUMBER_FIELDS) == {
        (0o644, 5),
        (0o755, 5),
        (0o644, 0),
        (0o755, 0),
        (0o777, 0),
    }
    for size in range(tarformat._NUMBER_FIELDS_KEPT + 10):
        header_bytes("t/f", "file", 0o644, size)
    assert len(tarformat._NUMBER_FIELDS) <= tarformat._NUMBER_FIELDS_KEPT
    assert header_bytes("t/f", "file", 0o600, 7) == reference(Member("t/f", "file", 0o600, 7))


def test_pax_only_when_needed():
    assert len(encode_header(Member("t/" + "a" * 98, "file", 0o644, 1))) == 512
    assert len(encode_header(Member("t/" + "a" * 99, "file", 0o644, 1))) == 3 * 512
    assert len(encode_header(Member("t/é", "file", 0o644, 1))) == 3 * 512


def test_mode_and_size_out_of_range_are_refused():
    with pytest.raises(ValueError):
        encode_header(Member("t", "dir", 0o10000))
    with pytest.raises(ValueError):
        encode_header(Member("t/f", "file", 0o644, -1))
    with pytest.raises(ValueError, match=r"^t/d: mode or size out of range$"):
        header_bytes("t/d", "dir", -1)


def test_depth_first_order_sorts_children_by_name_bytes():
    names_in = ["t/a.txt", "t/a/b", "t/B", "t/a", "t/é", "t/z"]
    assert sorted(names_in, key=sort_key) == ["t/B", "t/a", "t/a/b", "t/a.txt", "t/z", "t/é"]


@pytest.mark.parametrize("offset", [512, 1024, 9216, 10240, 20480 + 512])
def test_end_of_archive_pads_to_a_record(offset):
    tail = end_of_archive(offset)
    assert (offset + len(tail)) % RECORD == 0
    assert len(tail) >= 1024
    assert tail == bytes(len(tail))
