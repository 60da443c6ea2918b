"""The canonical header encoding equals CPython tarfile's PAX output for normalized members."""

from __future__ import annotations

import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.tarformat import RECORD, Member, encode_header, end_of_archive, sort_key

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


def test_pax_only_when_needed():
    assert len(encode_header(Member("t/" + "a" * 98, "file", 0o644, 1))) == 512
    assert len(encode_header(Member("t/" + "a" * 99, "file", 0o644, 1))) == 3 * 512
    assert len(encode_header(Member("t/é", "file", 0o644, 1))) == 3 * 512


def test_mode_and_size_out_of_range_are_refused():
    with pytest.raises(ValueError):
        encode_header(Member("t", "dir", 0o10000))
    with pytest.raises(ValueError):
        encode_header(Member("t/f", "file", 0o644, -1))


def test_depth_first_order_sorts_children_by_name_bytes():
    names_in = ["t/a.txt", "t/a/b", "t/B", "t/a", "t/é", "t/z"]
    assert sorted(names_in, key=sort_key) == ["t/B", "t/a", "t/a/b", "t/a.txt", "t/z", "t/é"]


@pytest.mark.parametrize("offset", [512, 1024, 9216, 10240, 20480 + 512])
def test_end_of_archive_pads_to_a_record(offset):
    tail = end_of_archive(offset)
    assert (offset + len(tail)) % RECORD == 0
    assert len(tail) >= 1024
    assert tail == bytes(len(tail))
