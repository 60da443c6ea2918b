"""The lines of ``samples.jsonl``: the rows of a canonical reward table as samples.

:func:`sample_lines` turns the rows of a :class:`~casstore.table.columns.RewardTable` (with
scoring's verdict on each, :class:`scoring.Attempts`, and each row's details) into
:class:`~casstore.bundle.samples.Sample` lines, a block of rows at a time, column by column:
the per-row work is one struct and one dict of rewards (a million attempts in about a
second); only the rewards that are not finite JSON floats are converted one by one
(:func:`~casstore.bundle.samples.written`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat, starmap
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from casstore.bundle.samples import (
    DETAIL_FIELDS,
    SAMPLE_FIELDS,
    Diagnostic,
    Sample,
    paused_gc,
    written,
)
from casstore.table.columns import Flag, Kind, RewardTable
from scoring import STATUS_NAMES, Attempts
from scoring._rules import CODE_NAMES

__all__ = ["BLOCK", "sample_lines"]

BLOCK = 65_536
"""Rows encoded at a time."""

_ABSENT: Any = object()


type Origins = Mapping[str, tuple[np.ndarray, list[str]]]
"""Each row's origin labels (:class:`casstore.sources.Loaded`'s ``origins``)."""


def sample_lines(
    table: RewardTable,
    rules: Attempts,
    details: Sequence[Any] | None,
    origins: Origins | None = None,
) -> Iterator[bytes]:
    """Blocks of ``samples.jsonl`` lines (each line ending ``\\n``) of a canonical ``table``,
    in row order; ``details``: one object per row with the fields of
    :data:`~casstore.bundle.samples.DETAIL_FIELDS` (a trial record, or a sample read back), or None
    (the job id only, when the table holds one job); ``origins``: each row's ``job`` and
    ``source`` labels, written beside it (None: none written)."""
    encoder = msgspec.json.Encoder()
    for start in range(0, len(table), BLOCK):
        rows = slice(start, min(start + BLOCK, len(table)))
        with paused_gc():
            lines = encoder.encode_lines(_samples(table, rules, details, rows, origins or {}))
        yield lines


def _samples(
    table: RewardTable,
    rules: Attempts,
    details: Sequence[Any] | None,
    rows: slice,
    origins: Origins,
) -> list[Sample]:
    """The :class:`Sample` of each row of ``rows``, built column by column."""
    n = rows.stop - rows.start
    columns: dict[str, list[Any]] = {
        "trial": list(table.trials[rows]),
        "task": _labels(table.tasks, table.task[rows], empty=False),
        "attempt": table.attempt[rows].tolist(),
        "status": np.array(STATUS_NAMES, object)[rules.status[rows]].tolist(),
        "primary": _primary(rules, rows),
        "rewards": _rewards(table, rows),
        "diagnostics": _diagnostics(rules, [table.reward_key, *table.keys], rows, n),
        "has_exception": ((table.flags[rows] & Flag.EXCEPTION) != 0).tolist(),
        "has_verifier": ((table.flags[rows] & Flag.NO_VERIFIER) == 0).tolist(),
        "valid": ((table.flags[rows] & Flag.INVALID) == 0).tolist(),
        "exception_type": _labels(table.exceptions, table.exception[rows]),
        "failure": _labels(table.failures, table.failure[rows]),
        "agent": _labels(table.agents, table.agent[rows], empty=False),
        "model": _labels(table.models, table.model[rows]),
        "dataset": _labels(table.datasets, table.dataset[rows]),
    }
    columns["harbor_evals_key"] = (
        _labels(table.evals_keys, table.evals[rows], empty=False)
        if table.evals is not None and table.evals_keys is not None
        else [""] * n
    )
    if details is not None:
        chosen = details[rows]
        for name in DETAIL_FIELDS:
            columns[name] = list(map(attrgetter(name), chosen))
    else:
        columns["job_id"] = [table.jobs[0] if len(table.jobs) == 1 else ""] * n
    for name in ("job", "source"):
        codes, labels = origins.get(name, (None, []))
        columns[name] = [""] * n if codes is None else _labels(labels, codes[rows], empty=False)
    default = [None] * n
    return list(
        starmap(Sample, zip(*(columns.get(f, default) for f in SAMPLE_FIELDS), strict=True))
    )


def _labels(names: Sequence[str], codes: np.ndarray, empty: bool = True) -> list[Any]:
    """The label of each code (``""`` as None when ``empty``)."""
    labels = np.array([None if empty and not name else name for name in names] or [None], object)
    return labels[codes].tolist()


def _primary(rules: Attempts, rows: slice) -> list[float | None]:
    """The primary value scored per row, None for an invalid attempt."""
    values = rules.primary[rows].astype(object)
    values[~rules.valid[rows]] = None
    return values.tolist()


def _rewards(table: RewardTable, rows: slice) -> list[dict[str, Any]]:
    """Every reward of each row as a sample writes it (missing keys left out)."""
    names = [table.reward_key, *table.keys]
    values = np.column_stack([table.primary[rows], table.values[rows]])
    kinds = np.column_stack([table.primary_kind[rows], table.kinds[rows]])
    cells = values.tolist()
    special = (kinds != Kind.NUMBER) | ~np.isfinite(values)
    rows_at, keys_at = np.nonzero(special)
    at = zip(rows_at.tolist(), keys_at.tolist(), kinds[special].tolist(), strict=True)
    for row, j, kind in at:
        cells[row][j] = _ABSENT if kind == Kind.MISSING else written(cells[row][j], kind)
    out = list(map(dict, map(zip, repeat(names), cells)))
    for row in np.flatnonzero((kinds == Kind.MISSING).any(axis=1)).tolist():
        out[row] = {key: value for key, value in out[row].items() if value is not _ABSENT}
    return out


def _diagnostics(rules: Attempts, names: list[str], rows: slice, n: int) -> list[Any]:
    """The diagnostics of each row (an empty list where there are none)."""
    found = rules.diagnostics
    lo, hi = np.searchsorted(found.row, [rows.start, rows.stop])
    none: list[Diagnostic] = []
    out: list[Any] = [none] * n
    for row, code, output in zip(
        (found.row[lo:hi] - rows.start).tolist(),
        found.code[lo:hi].tolist(),
        found.output[lo:hi].tolist(),
        strict=True,
    ):
        if out[row] is none:
            out[row] = []
        out[row].append(Diagnostic(CODE_NAMES[code], names[output] if output >= 0 else None))
    return out
