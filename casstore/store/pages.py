"""The index file's pages checked without LMDB: what fsck reads first.

LMDB keeps no checksum of its pages: a damaged page can decode as a valid but different
B-tree, which LMDB walks without an error, and a damaged free list is only noticed when a
later write reuses live pages. :func:`check_pages` reads ``data.mdb`` as bytes with
py-lmdb's offline verifier (:func:`lmdb.verify.verify`): both meta pages, every page
reachable from the committed roots (each storing its own number, reachable once, its keys in
order, each database's page and entry counts as its record says) and the free list (the free
and the live pages disjoint, covering the file). The file is read while a read transaction
of the index is open, so a writer running meanwhile reuses none of the pages read.
"""

from __future__ import annotations

from casstore.store.environment import page_damage
from casstore.store.index import Index

__all__ = ["check_pages"]


def check_pages(index: Index) -> list[dict[str, str | None]]:
    """The damage the pages of ``index``'s ``data.mdb`` show
    (:func:`casstore.store.environment.page_damage`, run in a read transaction), as fsck
    problems (kind ``corrupt_index``, ref the file): none when the file is sound."""
    data = str(index.path / "data.mdb")
    findings = index.read(lambda _txn: page_damage(index.path))
    return [
        {"kind": "corrupt_index", "ref": data, "path": data, "message": finding}
        for finding in findings
    ]
