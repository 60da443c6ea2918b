"""Per-attempt rules (SPEC section 5): status, emitted primary, emitted secondaries, diagnostics.

Vectorised over a :class:`~scoring.table.RewardTable` of ``n`` rows, ``k`` secondary keys and
``T`` tasks; no per-row Python loop (diagnostic dicts are only built on demand, one per issue).

Statuses (exactly one per attempt):

===============  ==========================================================================
``scored``       no exception recorded and a verifier result present. The primary is emitted
                 (its value, or 0.0 with a diagnostic when it is missing, Boolean or
                 non-finite).
``partial``      an exception was recorded but the primary is usable (a finite number): the
                 reward is kept unchanged, the attempt counts in the failure rollup.
``errored``      an exception was recorded and the primary is unusable (no verifier result,
                 or primary missing / Boolean / non-finite): primary emitted as 0.0.
``no_verifier``  no exception, but no verifier result (or ``rewards: null``): primary 0.0.
``invalid``      the reward mapping fails Harbor's ``TrialResult`` validation
                 (``Flag.INVALID``): skipped whole, nothing emitted, not an attempt for
                 coverage, means or pass@k.
===============  ==========================================================================

"Unscored" semantics: only ``invalid`` attempts are unscored. Every other attempt emits a
primary value (0.0 when unusable) so it counts as a measured failure, never as a gap. A
secondary key is *expected* on a task when some valid attempt of that task carries it (any
kind); on such a task an attempt with a verifier result but without a finite value for the
key is an unmeasured gap: it lowers coverage, not the mean. Attempts without a verifier result
get one ``verifier_result_missing`` diagnostic, not one per expected secondary.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from scoring.table import Flag, Kind, RewardTable

__all__ = ["STATUS_NAMES", "Attempts", "Code", "Diagnostics", "Status", "apply_rules"]


class Status(IntEnum):
    """Status of one attempt; see the module docstring."""

    SCORED = 0
    PARTIAL = 1
    ERRORED = 2
    NO_VERIFIER = 3
    INVALID = 4


STATUS_NAMES: tuple[str, ...] = tuple(status.name.lower() for status in Status)


class Code(IntEnum):
    """Diagnostic codes (their lower-case names are the JSON ``code``)."""

    REWARD_MAPPING_INVALID = 0
    VERIFIER_RESULT_MISSING = 1
    PRIMARY_MISSING = 2
    PRIMARY_BOOLEAN = 3
    PRIMARY_NONFINITE = 4
    SECONDARY_MISSING = 5
    SECONDARY_BOOLEAN = 6
    SECONDARY_NONFINITE = 7


_MESSAGES = {
    Code.REWARD_MAPPING_INVALID: "reward mapping is not valid for Harbor's TrialResult "
    "(null, non-numeric string or object): attempt skipped, no reward kept",
    Code.VERIFIER_RESULT_MISSING: "no verifier result: primary {output!r} scored 0.0",
    Code.PRIMARY_MISSING: "primary reward {output!r} is missing: scored 0.0",
    Code.PRIMARY_BOOLEAN: "primary reward {output!r} is a Boolean: scored 0.0",
    Code.PRIMARY_NONFINITE: "primary reward {output!r} is not finite: scored 0.0",
    Code.SECONDARY_MISSING: "secondary reward {output!r} is missing: not measured",
    Code.SECONDARY_BOOLEAN: "secondary reward {output!r} is a Boolean: not measured",
    Code.SECONDARY_NONFINITE: "secondary reward {output!r} is not finite: not measured",
}


@dataclass(eq=False)
class Diagnostics:
    """Columnar diagnostics (``m`` entries), sorted by row then output.

    ``row`` int64[m] (table row), ``code`` int8[m] (:class:`Code`), ``output`` int32[m]
    (-1: the whole attempt (invalid mapping), 0: the primary, ``1 + j``: secondary ``keys[j]``).
    """

    row: np.ndarray
    code: np.ndarray
    output: np.ndarray

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def counts(self) -> dict[str, int]:
        """Number of diagnostics per code name (codes that occur only)."""
        found = np.bincount(self.code.astype(np.int64), minlength=len(Code))
        return {Code(i).name.lower(): int(c) for i, c in enumerate(found) if c}

    def to_dicts(self, table: RewardTable, limit: int | None = None) -> list[dict[str, Any]]:
        """``[{"code", "task", "trial", "output", "message"}, ...]`` (first ``limit``)."""
        names = [table.reward_key, *table.keys]
        end = len(self) if limit is None else min(limit, len(self))
        out = []
        for row, code, output in zip(
            self.row[:end].tolist(),
            self.code[:end].tolist(),
            self.output[:end].tolist(),
            strict=True,
        ):
            name = names[output] if output >= 0 else None
            out.append(
                {
                    "code": Code(code).name.lower(),
                    "task": table.tasks[table.task[row]],
                    "trial": table.trials[row],
                    "output": name,
                    "message": _MESSAGES[Code(code)].format(output=name or table.reward_key),
                }
            )
        return out


@dataclass(eq=False)
class Attempts:
    """What the rules decide per row (``n`` rows, ``k`` secondaries, ``T`` tasks).

    ``valid`` bool[n] (not invalid); ``status`` int8[n] (:class:`Status`); ``primary``
    float64[n] the emitted primary (0.0 when unusable or invalid; mask with ``valid``);
    ``primary_usable`` bool[n]; ``emitted`` bool[n, k] secondaries emitted (finite, valid);
    ``present`` bool[n, k] key present in a valid mapping (any kind); ``expected`` bool[T, k]
    key expected on a task; ``diagnostics``.
    """

    valid: np.ndarray
    status: np.ndarray
    primary: np.ndarray
    primary_usable: np.ndarray
    emitted: np.ndarray
    present: np.ndarray
    expected: np.ndarray
    diagnostics: Diagnostics


def apply_rules(table: RewardTable) -> Attempts:
    """Apply SPEC section 5's per-attempt rules to every row of ``table`` at once."""
    n, k, n_tasks = len(table), len(table.keys), len(table.tasks)
    flags = table.flags
    invalid = (flags & Flag.INVALID) != 0
    valid = ~invalid
    exception = (flags & Flag.EXCEPTION) != 0
    verifier = (flags & Flag.NO_VERIFIER) == 0
    primary_usable = valid & verifier & (table.primary_kind == Kind.NUMBER)
    primary_usable &= np.isfinite(table.primary)
    primary = np.where(primary_usable, table.primary, 0.0)

    status = np.full(n, Status.SCORED, dtype=np.int8)
    status[~verifier] = Status.NO_VERIFIER
    status[exception] = Status.ERRORED
    status[exception & primary_usable] = Status.PARTIAL
    status[invalid] = Status.INVALID

    kinds = table.kinds
    present = (kinds != Kind.MISSING) & valid[:, None]
    emitted = present & (kinds == Kind.NUMBER) & verifier[:, None]
    emitted &= np.isfinite(table.values)
    expected = np.zeros((n_tasks, k), dtype=bool)
    for j in range(k):
        expected[:, j] = np.bincount(table.task, weights=present[:, j], minlength=n_tasks) > 0

    diagnostics = _diagnostics(table, valid, verifier, primary_usable, emitted, expected)
    return Attempts(valid, status, primary, primary_usable, emitted, present, expected, diagnostics)


def _diagnostics(
    table: RewardTable,
    valid: np.ndarray,
    verifier: np.ndarray,
    primary_usable: np.ndarray,
    emitted: np.ndarray,
    expected: np.ndarray,
) -> Diagnostics:
    """Codes for the (rare) rows with an issue only: candidates first, then classified."""
    rows_parts, output_parts, code_parts = [], [], []
    rows = np.flatnonzero(~primary_usable)
    if rows.size:
        kind = table.primary_kind[rows]
        code = np.full(rows.size, Code.PRIMARY_NONFINITE, dtype=np.int8)
        code[kind == Kind.MISSING] = Code.PRIMARY_MISSING
        code[kind == Kind.BOOLEAN] = Code.PRIMARY_BOOLEAN
        code[~verifier[rows]] = Code.VERIFIER_RESULT_MISSING
        code[~valid[rows]] = Code.REWARD_MAPPING_INVALID
        output = np.where(code == Code.REWARD_MAPPING_INVALID, -1, 0).astype(np.int32)
        rows_parts.append(rows)
        output_parts.append(output)
        code_parts.append(code)
    scoreable = valid & verifier
    for j in range(len(table.keys)):
        rows = np.flatnonzero(scoreable & ~emitted[:, j])
        rows = rows[expected[table.task[rows], j]]
        if not rows.size:
            continue
        kind = table.kinds[rows, j]
        code = np.full(rows.size, Code.SECONDARY_NONFINITE, dtype=np.int8)
        code[kind == Kind.MISSING] = Code.SECONDARY_MISSING
        code[kind == Kind.BOOLEAN] = Code.SECONDARY_BOOLEAN
        rows_parts.append(rows)
        output_parts.append(np.full(rows.size, 1 + j, dtype=np.int32))
        code_parts.append(code)
    if not rows_parts:
        return Diagnostics(np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.int32))
    rows, output, code = (np.concatenate(parts) for parts in (rows_parts, output_parts, code_parts))
    order = np.lexsort((output, rows))
    return Diagnostics(rows[order].astype(np.int64), code[order], output[order])
