"""Per-attempt rules (README, §6 Scoring): status, emitted primary and secondaries, diagnostics.

Vectorised over a :class:`~casstore.table.columns.RewardTable` of ``n`` rows, ``k`` secondary keys
and ``T`` tasks; no per-row Python loop (diagnostic dicts are only built on demand, one per issue).

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

from casstore.errors import UsageError
from casstore.table.codes import FailureCode
from casstore.table.columns import Flag, Kind, RewardTable

__all__ = [
    "CODE_NAMES",
    "SHARED_CODES",
    "STATUS_NAMES",
    "Attempts",
    "Code",
    "Diagnostics",
    "Status",
    "apply_rules",
    "check_primary_held",
]


class Status(IntEnum):
    """Status of one attempt; see the module docstring."""

    SCORED = 0
    PARTIAL = 1
    ERRORED = 2
    NO_VERIFIER = 3
    INVALID = 4


STATUS_NAMES: tuple[str, ...] = tuple(status.name.lower() for status in Status)


SHARED_CODES = (FailureCode.REWARD_MAPPING_INVALID, FailureCode.VERIFIER_RESULT_MISSING)
"""The failure codes that are also diagnostic codes: :class:`Code`'s first members, by the
same names (checked on import), with the same JSON names (taken from :class:`FailureCode`)."""


class Code(IntEnum):
    """Diagnostic codes; :data:`CODE_NAMES` holds their JSON ``code``. The first are
    :data:`SHARED_CODES`; an int enum, so that the vectorised rules index tables with it."""

    REWARD_MAPPING_INVALID = 0
    VERIFIER_RESULT_MISSING = 1
    PRIMARY_MISSING = 2
    PRIMARY_BOOLEAN = 3
    PRIMARY_NONFINITE = 4
    SECONDARY_MISSING = 5
    SECONDARY_BOOLEAN = 6
    SECONDARY_NONFINITE = 7


def _code_names() -> tuple[str, ...]:
    """Every code's JSON name: the failure code's value for :data:`SHARED_CODES`, the lower-case
    member name for the others. Raises TypeError when Code's first members are not named as
    the shared failure codes."""
    shared = len(SHARED_CODES)
    if [code.name for code in list(Code)[:shared]] != [code.name for code in SHARED_CODES]:
        raise TypeError("Code must start with the members of SHARED_CODES, in order")
    return (*(code.value for code in SHARED_CODES), *(c.name.lower() for c in list(Code)[shared:]))


CODE_NAMES: tuple[str, ...] = _code_names()
"""The JSON ``code`` of every :class:`Code`, by value."""

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
        return {CODE_NAMES[i]: int(c) for i, c in enumerate(found) if c}

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
                    "code": CODE_NAMES[code],
                    "task": table.tasks[table.task[row]],
                    "trial": table.trials[row],
                    "output": name,
                    "message": _MESSAGES[Code(code)].format(output=name or table.reward_key),
                }
            )
        return out


# Per-row codes. The rules depend on a few flag and kind bits only, so every row is reduced
# to one small integer and each rule is a lookup table over it (a gather from a 64-entry
# table instead of masked assignments over all rows):
#
# * primary code (uint8, 6 bits): ``flags & 7`` (bit 0 exception, bit 1 no verifier, bit 2
#   invalid) | primary kind << 3 (2 bits) | ``isfinite(primary)`` << 5;
# * secondary code (uint8 per key, 3 bits): kind | ``isfinite(value)`` << 2.
#
# ``Kind.INTEGER`` is read as NUMBER (the rules do not tell ints from floats: only Harbor's
# Sum/Min/Max do); any other kind outside 0..3 as NONFINITE: present, not a number.
PRIMARY_CODES = 64
_EXCEPTION, _NO_VERIFIER, _INVALID = int(Flag.EXCEPTION), int(Flag.NO_VERIFIER), int(Flag.INVALID)
_FINITE = 32
if _EXCEPTION | _NO_VERIFIER | _INVALID != 7:  # pragma: no cover - the code layout above
    raise ImportError("Flag bits changed: update the per-row codes")
USABLE_MASK, USABLE_CODE = 0b111110, 0b101000  # valid, verifier, NUMBER, finite
EMITTED_CODE = Kind.NUMBER | 4  # a secondary code: NUMBER and finite


_KIND_CODES = np.full(256, Kind.NONFINITE, dtype=np.uint8)
_KIND_CODES[: Kind.INTEGER + 1] = [*range(4), Kind.NUMBER]


def _kind_code(kinds: np.ndarray) -> np.ndarray:
    """Kinds as uint8 0..3 (INTEGER → NUMBER, anything else above 3 → NONFINITE)."""
    codes = kinds.view(np.uint8) if kinds.dtype.itemsize == 1 else kinds.astype(np.uint8)
    if codes.size and int(codes.max()) > 3:
        codes = _KIND_CODES[codes]
    return codes


def _primary_tables() -> dict[str, np.ndarray]:
    code = np.arange(PRIMARY_CODES)
    exception = (code & _EXCEPTION) != 0
    verifier = (code & _NO_VERIFIER) == 0
    valid = (code & _INVALID) == 0
    kind = (code >> 3) & 3
    usable = (code & USABLE_MASK) == USABLE_CODE
    status = np.full(PRIMARY_CODES, Status.SCORED, dtype=np.int8)
    status[~verifier] = Status.NO_VERIFIER
    status[exception] = Status.ERRORED
    status[exception & usable] = Status.PARTIAL
    status[~valid] = Status.INVALID
    diagnostic = np.full(PRIMARY_CODES, Code.PRIMARY_NONFINITE, dtype=np.int8)
    diagnostic[kind == Kind.MISSING] = Code.PRIMARY_MISSING
    diagnostic[kind == Kind.BOOLEAN] = Code.PRIMARY_BOOLEAN
    diagnostic[~verifier] = Code.VERIFIER_RESULT_MISSING
    diagnostic[~valid] = Code.REWARD_MAPPING_INVALID
    return {
        "status": status,
        "usable": usable,
        "present": valid & (kind != Kind.MISSING),
        "diagnostic": diagnostic,
    }


PRIMARY_TABLES = _primary_tables()
# by secondary code (kind | finite << 2): the kind decides (a finite number is not an issue)
SECONDARY_DIAGNOSTIC = np.tile(
    np.array(
        [
            Code.SECONDARY_MISSING,
            Code.SECONDARY_NONFINITE,
            Code.SECONDARY_NONFINITE,
            Code.SECONDARY_BOOLEAN,
        ],
        dtype=np.int8,
    ),
    2,
)


class Attempts:
    """What the rules decide per row (``n`` rows, ``k`` secondaries, ``T`` tasks).

    Held as per-row codes (``code`` uint8[n], ``secondary`` uint8[n, k]; see above); the
    per-row arrays are derived on first use: ``valid`` bool[n] (not invalid); ``status``
    int8[n] (:class:`Status`); ``primary`` float64[n] the emitted primary (0.0 when unusable
    or invalid; mask with ``valid``); ``primary_usable`` bool[n]; per secondary ``j``,
    :meth:`emitted_of` bool[n] (finite, valid) and :meth:`present_of` bool[n] (key present in
    a valid mapping, any kind); ``expected`` bool[T, k] key expected on a task;
    ``diagnostics``.
    """

    def __init__(self, table: RewardTable) -> None:
        self.table = table
        flags = table.flags
        code = flags & np.uint8(7) if flags.dtype == np.uint8 else (flags & 7).astype(np.uint8)
        code |= _kind_code(table.primary_kind) << np.uint8(3)
        code |= np.isfinite(table.primary).view(np.uint8) << np.uint8(5)
        self.code = code
        secondary = _kind_code(table.kinds)
        if secondary.size:
            secondary = secondary | (np.isfinite(table.values).view(np.uint8) << np.uint8(2))
        self.secondary = secondary
        self._cache: dict[str, Any] = {}

    def _get(self, name: str, make: Any) -> Any:
        if name not in self._cache:
            self._cache[name] = make()
        return self._cache[name]

    @property
    def valid(self) -> np.ndarray:
        """bool[n] not invalid."""
        return self._get("valid", lambda: (self.code & _INVALID) == 0)

    @property
    def scoreable(self) -> np.ndarray:
        """bool[n] valid with a verifier result."""
        return self._get("scoreable", lambda: (self.code & (_INVALID | _NO_VERIFIER)) == 0)

    @property
    def status(self) -> np.ndarray:
        """int8[n] :class:`Status` of every row."""
        return self._get("status", lambda: PRIMARY_TABLES["status"][self.code])

    @property
    def primary_usable(self) -> np.ndarray:
        """bool[n] valid, with a verifier result and a finite number as primary."""
        return self._get("usable", lambda: (self.code & USABLE_MASK) == USABLE_CODE)

    @property
    def primary(self) -> np.ndarray:
        """float64[n] the emitted primary (0.0 when unusable or invalid)."""
        return self._get("primary", lambda: np.where(self.primary_usable, self.table.primary, 0.0))

    def emitted_of(self, j: int) -> np.ndarray:
        """bool[n] secondary ``keys[j]`` emitted."""
        return self._get(
            f"emitted{j}", lambda: (self.secondary[:, j] == EMITTED_CODE) & self.scoreable
        )

    def present_of(self, j: int) -> np.ndarray:
        """bool[n] secondary ``keys[j]`` present in a valid mapping."""
        return self._get(
            f"present{j}", lambda: (self.secondary[:, j] & np.uint8(3) != 0) & self.valid
        )

    @property
    def expected(self) -> np.ndarray:
        """bool[T, k] secondary ``keys[j]`` expected on a task (a valid attempt carries it)."""

        def make() -> np.ndarray:
            n_tasks, k = len(self.table.tasks), len(self.table.keys)
            expected = np.zeros((n_tasks, k), dtype=bool)
            for j in range(k):
                expected[self.table.task[self.present_of(j)], j] = True
            return expected

        return self._get("expected", make)

    @expected.setter
    def expected(self, value: np.ndarray) -> None:
        """Set by :meth:`scoring._partials.Partials.from_table`, which counts it anyway."""
        self._cache["expected"] = value

    @property
    def diagnostics(self) -> Diagnostics:
        """The :class:`Diagnostics` of the rows with an issue (built on first use)."""
        return self._get("diagnostics", lambda: _diagnostics(self))


def check_primary_held(table: RewardTable) -> None:
    """The run-wide rule on the reward key: when no attempt of ``table`` holds it (under any
    kind) but some attempt holds another reward key, the key is not the one the verifier
    writes (a typo, another task's key): UsageError naming the keys the attempts hold, rather
    than every attempt scored 0.0. A key missing on some attempts only, or a run holding no
    reward at all (no attempt, no verifier result, empty mappings), is scored by the
    per-attempt rules (0.0 and a diagnostic)."""
    if bool(np.any(table.primary_kind != Kind.MISSING)):
        return
    held = [
        key
        for j, key in enumerate(table.keys)
        if table.kinds.size and bool(np.any(table.kinds[:, j] != Kind.MISSING))
    ]
    if held:
        names = ", ".join(map(repr, sorted(held)))
        raise UsageError(
            "--reward-key",
            f"no attempt holds the reward key {table.reward_key!r}; the attempts hold {names}: "
            "pass one of them as --reward-key (trials imported or exported with a key: import "
            "or export them again with another)",
        )


def apply_rules(table: RewardTable) -> Attempts:
    """Apply the per-attempt rules (README, §6 Scoring) to every row of ``table`` at once."""
    return Attempts(table)


def _diagnostics(rules: Attempts) -> Diagnostics:
    """Codes for the (rare) rows with an issue only: candidates first, then classified."""
    table = rules.table
    rows_parts, output_parts, code_parts = [], [], []
    rows = np.flatnonzero(~rules.primary_usable)
    if rows.size:
        code = PRIMARY_TABLES["diagnostic"][rules.code[rows]]
        output = np.where(code == Code.REWARD_MAPPING_INVALID, -1, 0).astype(np.int32)
        rows_parts.append(rows)
        output_parts.append(output)
        code_parts.append(code)
    scoreable = rules.scoreable
    if len(table.keys):
        expected = rules.expected
        for j in range(len(table.keys)):
            rows = np.flatnonzero(scoreable & ~rules.emitted_of(j))
            rows = rows[expected[table.task[rows], j]]
            if not rows.size:
                continue
            rows_parts.append(rows)
            output_parts.append(np.full(rows.size, 1 + j, dtype=np.int32))
            code_parts.append(SECONDARY_DIAGNOSTIC[rules.secondary[rows, j]])
    if not rows_parts:
        return Diagnostics(np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.int32))
    rows, output, code = (np.concatenate(parts) for parts in (rows_parts, output_parts, code_parts))
    if len(rows_parts) > 1:
        order = np.lexsort((output, rows))
        rows, code, output = rows[order], code[order], output[order]
    return Diagnostics(rows.astype(np.int64), code, output)
