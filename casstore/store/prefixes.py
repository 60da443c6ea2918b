"""Digest prefixes looked up in the index (README, "Digests").

A stored digest (a revision, a job id) may be given by a unique prefix of at least
:data:`~casstore.digest.MIN_PREFIX` hex digits (:class:`~casstore.digest.DigestPrefix`). The
keys a prefix matches are found by one cursor range scan per algorithm over the sorted keys of
a database (LMDB's ``set_range`` to the prefix, then the following keys while they start with
it: :meth:`~casstore.store.txn.Txn.keys`), never by a walk of the whole database; every lookup
by prefix uses :func:`matching` and :func:`unique`. Several matches are
:class:`~casstore.errors.AmbiguousPrefixError` listing the first ten (each cut to as few hex
digits as tell them apart) and their count.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from casstore.digest import SHORT_HEX, short
from casstore.errors import AmbiguousPrefixError
from casstore.store.txn import Txn

__all__ = ["matching", "unique"]


def matching(
    txn: Txn, dbs: Iterable[str], starts: Iterable[str], among: Container[str] | None = None
) -> list[tuple[str, str]]:
    """``(db, key)`` of every key of ``dbs`` that begins with one of ``starts`` (and is in
    ``among`` when given), in key order per database: a range scan from each start."""
    starts = list(starts)
    found = []
    for db in dbs:
        for start in starts:
            found += [(db, key) for key in txn.keys(db, start) if among is None or key in among]
    return found


def unique[T](text: str, candidates: list[tuple[T, str]], what: str) -> tuple[T, str] | None:
    """The one of ``candidates`` (``(where, key)`` pairs :func:`matching` found for the
    prefix ``text``); None when there is none. AmbiguousPrefixError naming ``text`` when
    there are several: ``<count> <what> start with it (…)``, ``what`` a plural noun."""
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    keys = sorted(key for _, key in candidates)
    shown = keys[: AmbiguousPrefixError.SHOWN_CANDIDATES]
    raise AmbiguousPrefixError(text, what, _distinct(shown), len(keys))


def _distinct(keys: list[str]) -> list[str]:
    """``keys`` cut short (:func:`~casstore.digest.short`) to the fewest hex digits, from
    :data:`~casstore.digest.SHORT_HEX` on, that still tell them apart."""
    for length in range(SHORT_HEX, 65, 4):
        cut = [short(key, length) for key in keys]
        if len(set(cut)) == len(keys):
            return cut
    return keys
