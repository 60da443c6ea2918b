"""Which bytes of an LMDB 0.9 ``data.mdb`` (64 bits, little endian) LMDB reads: the damage
tests flip bytes and need to know whether a flip could change anything.

:func:`live_ranges` walks the file as LMDB does, from the meta page of the larger
transaction id: the free-page tree, the main tree and every named database's tree. Live
bytes: both meta pages' header, magic and version (LMDB checks both when it opens the file)
and transaction id, and the whole meta record of the page in use; of a branch or leaf page,
its header and node pointers (up to ``lower``) and its nodes (from ``upper`` on); of an
overflow value, its pages up to the value's last byte. Dead: free pages, pages past the last
one in use, the gap between ``lower`` and ``upper``, the tail of an overflow value's last page.
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["is_live", "live_ranges", "main_root"]

P_BRANCH, P_LEAF, P_OVERFLOW = 0x01, 0x02, 0x04
F_BIGDATA, F_SUBDATA = 0x01, 0x02
_HEADER = struct.Struct("<QHHHH")  # pgno, pad, flags, lower, upper (overflow: pages)
_NODE = struct.Struct("<HHHH")  # lo, hi, flags, key size
_DB = struct.Struct("<IHHQQQQQ")  # pad, flags, depth, branch, leaf, overflow pages, entries, root
_META = 16  # the meta record after the page header: magic, version, address, map size, dbs...
_TXNID = 144  # offset of mm_txnid in a meta page (after mm_last_pg)


def live_ranges(data: Path) -> list[tuple[int, int]]:
    """The ``[start, end)`` byte ranges of ``data`` that LMDB reads, sorted."""
    raw = data.read_bytes()
    page, current, free, main = _current(raw)
    ranges = [(n * page, n * page + 24) for n in (0, 1)]  # header, magic, version
    ranges += [(n * page + _TXNID, n * page + _TXNID + 8) for n in (0, 1)]
    ranges.append((current * page + _META, current * page + _TXNID + 8))
    named: list[tuple[int, ...]] = []
    for root in (free[7], main[7]):
        ranges += _tree(raw, page, root, named if root == main[7] else None)
    for db in named:
        ranges += _tree(raw, page, db[7], None)
    return sorted(ranges)


def _current(raw: bytes) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """``(page size, meta page in use, free-page tree record, main tree record)``."""
    page = struct.unpack_from("<I", raw, _META + 24)[0]  # the free-page tree's md_pad: psize
    metas = [struct.unpack_from("<Q", raw, n * page + _TXNID)[0] for n in (0, 1)]
    current = 0 if metas[0] >= metas[1] else 1
    meta = current * page + _META + 24  # mm_dbs: the free-page tree, then the main tree
    free, main = (_DB.unpack_from(raw, meta + 48 * n) for n in (0, 1))
    return page, current, free, main


def main_root(data: Path) -> tuple[int, int]:
    """``(offset, size)`` of the root page of ``data``'s main tree (the page holding the
    records of the named databases, while they fit one page)."""
    page, _, _, main = _current(data.read_bytes())
    return main[7] * page, page


def _tree(raw: bytes, page: int, root: int, named: list[tuple[int, ...]] | None) -> list:
    """The live ranges of the tree at ``root`` (``named``: collect its sub-databases)."""
    ranges: list[tuple[int, int]] = []
    stack = [] if root == (1 << 64) - 1 else [root]
    while stack:
        start = stack.pop() * page
        _, _, flags, lower, upper = _HEADER.unpack_from(raw, start)
        ranges += [(start, start + lower), (start + upper, start + page)]
        for i in range((lower - 16) // 2):
            node = start + struct.unpack_from("<H", raw, start + 16 + 2 * i)[0]
            lo, hi, node_flags, key_size = _NODE.unpack_from(raw, node)
            if flags & P_BRANCH:
                stack.append(lo | hi << 16 | node_flags << 32)
                continue
            value = node + 8 + key_size
            if node_flags & F_BIGDATA:
                first = struct.unpack_from("<Q", raw, value)[0] * page
                ranges.append((first, first + 16 + (lo | hi << 16)))
            elif node_flags & F_SUBDATA and named is not None:
                named.append(_DB.unpack_from(raw, value))
    return ranges


def is_live(ranges: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``[start, end)`` meets a live range."""
    return any(a < end and start < b for a, b in ranges)
