"""Label renumbering: the one way label codes move from one list of labels to another.

A label column holds int32 codes into a list of labels (``""``, "none", at 0). Merging
chunks of one import, building a job's table and concatenating tables all move codes from
their own list into a merged one (:func:`renumber`); a job's table numbers its labels in order
of first appearance (:func:`first_seen`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["first_seen", "positions", "renumber", "union"]


def union(lists: Iterable[Sequence[str]], first: str | None = "") -> list[str]:
    """The labels of ``lists`` in order of first appearance, each once, ``first`` (if not
    None) at 0."""
    out: list[str] = [] if first is None else [first]
    seen = set(out)
    for names in lists:
        for name in names:
            if name not in seen:
                seen.add(name)
                out.append(name)
    return out


def positions(labels: Sequence[str]) -> dict[str, int]:
    """``{label: index}`` of a list of distinct labels."""
    return {label: i for i, label in enumerate(labels)}


def renumber(codes: np.ndarray, names: Sequence[str], position: dict[str, int]) -> np.ndarray:
    """int32 ``codes`` (indices into ``names``) as indices into a merged list (``position``:
    label → its index there; every one of ``names`` must be in it)."""
    remap = np.array([position[name] for name in names], dtype=np.int32)
    return remap[codes] if len(codes) else remap[:0]


def first_seen(codes: np.ndarray, labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """``codes`` (into ``labels``, "" at 0) renumbered: "" stays 0, the others in order of
    first appearance; returns the labels that appear, in that order, and the new codes."""
    if not len(codes):
        return [""], codes.astype(np.int32)
    present, first = np.unique(codes, return_index=True)
    seen = present[np.argsort(first, kind="stable")]
    seen = seen[seen != 0]
    remap = np.zeros(len(labels), np.int32)
    remap[seen] = np.arange(1, len(seen) + 1, dtype=np.int32)
    return [""] + [labels[c] for c in seen.tolist()], remap[codes]
