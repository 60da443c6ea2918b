"""The integer counts of every cell, from the rules' per-row codes, in one pass per word.

Counted per cell (:data:`FIELDS`, then per secondary key ``j`` in table order ``present_j``
and ``measured_j``): attempts per status but ``scored`` (the rest of the cell), successes and
the primary's presence. The rules reduce every row to small codes (:mod:`scoring._rules`); a
lookup table over a row's codes gives all of its count bits at once, packed into words of
fixed-width fields, so one lookup and one reduction per word count every field: a field is
``width`` bits wide, every count of a cell is below ``2 ** width``, and the fields of a sum of
words never carry into each other.

Rows are coded per chunk of secondaries: the first chunk's code is the primary code
(:mod:`scoring._rules`) | ``primary >= threshold`` << 6 | the secondary codes of keys 0..2
(3 bits each from bit 7); each further chunk's code is ``(flags >> 1) & 3`` (no verifier,
invalid) | the codes of the next (up to) 4 keys from bit 2.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from casstore.table.columns import RewardTable
from scoring._cells import CellRows
from scoring._rules import EMITTED_CODE, PRIMARY_TABLES, Attempts, Status

__all__ = ["FIELDS", "CellCounts", "cell_counts"]

FIELDS = ("partial", "errored", "no_verifier", "invalid", "success", "present")
"""The count fields of the primary (the first four are statuses), before the secondaries'."""
_PRIMARY_BITS = 7  # the primary code (6 bits) and primary >= threshold
_FIRST_CHUNK_KEYS = 3  # secondaries in the first chunk's code (7 + 3·3 = 16 bits)
_CHUNK_KEYS = 4  # secondaries per further chunk: 2 flag bits (no verifier, invalid) + 4·3 bits

Lookups = tuple[tuple[tuple[int, ...], tuple[np.ndarray, ...]], ...]
"""Per chunk of secondaries: its keys and one uint64 lookup table per word."""


@dataclass(frozen=True, slots=True)
class CellCounts:
    """Every count field per cell (int64[C] each): ``counts["partial"]``, ...,
    :meth:`present` and :meth:`measured` of secondary ``j`` (table order)."""

    fields: list[np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[FIELDS.index(name)]

    def present(self, j: int) -> np.ndarray:
        """Valid attempts whose mapping carries secondary ``j`` (any kind)."""
        return self.fields[len(FIELDS) + 2 * j]

    def measured(self, j: int) -> np.ndarray:
        """Attempts that emitted a value for secondary ``j``."""
        return self.fields[len(FIELDS) + 2 * j + 1]


def cell_counts(
    rules: Attempts, table: RewardTable, threshold: float, rows: CellRows
) -> CellCounts:
    """Every count field of every cell of ``rows``: one lookup and one reduction per word.

    Rows in segments are summed as uint64; otherwise by ``bincount`` with float64 weights,
    exact because every word and every cell's sum stays below 2**53 (53-bit words)."""
    k = len(table.keys)
    n_fields = len(FIELDS) + 2 * k
    if not len(rows):
        return CellCounts([np.zeros(0, np.int64) for _ in range(n_fields)])
    width = max(int(rows.sizes.max()).bit_length(), 1)
    word_bits = 64 if rows.starts is not None else 53
    per = word_bits // width
    lookups = _lookups(k, width, word_bits, bool(threshold <= 0.0))
    words = _row_words(rules, table, threshold, lookups, -(-n_fields // per))
    reduced = [_reduce(word, rows) for word in words]
    mask = np.uint64((1 << width) - 1)
    return CellCounts(
        [
            ((reduced[f // per] >> np.uint64((f % per) * width)) & mask).astype(np.int64)
            for f in range(n_fields)
        ]
    )


def _row_words(
    rules: Attempts, table: RewardTable, threshold: float, lookups: Lookups, n_words: int
) -> list[np.ndarray | None]:
    """Every row's packed count words (uint64[n] each; None: a word no row sets a bit of)."""
    words: list[np.ndarray | None] = [None] * n_words
    for number, (keys, tables) in enumerate(lookups):
        code = _chunk_code(rules, table, threshold, number, keys)
        for w, lookup in enumerate(tables):
            if lookup.any():
                part = lookup[code]
                words[w] = part if words[w] is None else words[w] + part
    return words


def _chunk_code(
    rules: Attempts, table: RewardTable, threshold: float, number: int, keys: tuple[int, ...]
) -> np.ndarray:
    """Every row's code for chunk ``number`` of the secondaries (see the module docstring)."""
    if number == 0:
        code: NDArray[np.unsignedinteger[Any]] = rules.code.astype(np.uint16 if keys else np.uint8)
        code |= (table.primary >= threshold).view(np.uint8) << np.uint8(6)
        base = _PRIMARY_BITS
    else:
        code = (rules.code >> np.uint8(1)) & np.uint8(3)
        code = code.astype(np.uint16)
        base = 2
    for i, j in enumerate(keys):
        code |= rules.secondary[:, j].astype(np.uint16) << np.uint16(base + 3 * i)
    return code


def _reduce(word: np.ndarray | None, rows: CellRows) -> np.ndarray:
    """uint64[C] the sum of a word over the rows of every cell."""
    if word is None:
        return np.zeros(len(rows), np.uint64)
    if rows.starts is not None:
        return np.add.reduceat(word, rows.starts)
    return rows.sum(word).astype(np.uint64)


@functools.lru_cache(maxsize=64)
def _lookups(k: int, width: int, word_bits: int, zero_succeeds: bool) -> Lookups:
    """Lookup tables from per-row chunk codes to packed count words: field ``f``
    (:data:`FIELDS` then present_j, measured_j) is ``width`` bits wide at bit
    ``(f % per) * width`` of word ``f // per`` (``per = word_bits // width`` fields per
    word)."""
    per = word_bits // width
    n_words = -(-(len(FIELDS) + 2 * k) // per)
    chunks = [tuple(range(min(k, _FIRST_CHUNK_KEYS)))]
    for begin in range(_FIRST_CHUNK_KEYS, k, _CHUNK_KEYS):
        chunks.append(tuple(range(begin, min(k, begin + _CHUNK_KEYS))))
    out = []
    for number, keys in enumerate(chunks):
        base = _PRIMARY_BITS if number == 0 else 2
        code = np.arange(1 << (base + 3 * len(keys)), dtype=np.uint64)
        fields = _chunk_fields(code, base, keys, zero_succeeds)
        words = [np.zeros(code.size, dtype=np.uint64) for _ in range(n_words)]
        for f, bits in fields.items():
            words[f // per] |= bits.astype(np.uint64) << np.uint64((f % per) * width)
        out.append((keys, tuple(words)))
    return tuple(out)


def _chunk_fields(
    code: np.ndarray, base: int, keys: tuple[int, ...], zero_succeeds: bool
) -> dict[int, np.ndarray]:
    """Field number → bool[codes] whether a row of that chunk ``code`` counts in the field
    (the chunk's secondary codes start at bit ``base``; the first chunk's at 7)."""
    fields: dict[int, np.ndarray] = {}
    if base == _PRIMARY_BITS:
        primary = (code & 63).astype(np.intp)
        status = PRIMARY_TABLES["status"][primary]
        valid = status != Status.INVALID
        flags = primary >> 1
        for f, name in enumerate(FIELDS[:4]):
            fields[f] = status == Status[name.upper()]
        ge = (code >> 6) & 1 == 1
        usable = PRIMARY_TABLES["usable"][primary]
        fields[4] = valid & np.where(usable, ge, zero_succeeds)
        fields[5] = PRIMARY_TABLES["present"][primary]
    else:
        flags = (code & 3).astype(np.intp)
    scoreable = (flags & 3) == 0
    valid = (flags & 2) == 0
    for i, j in enumerate(keys):
        secondary = (code >> np.uint64(base + 3 * i)) & 7
        fields[len(FIELDS) + 2 * j] = valid & ((secondary & 3) != 0)
        fields[len(FIELDS) + 2 * j + 1] = scoreable & (secondary == EMITTED_CODE)
    return fields
