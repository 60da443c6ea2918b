"""The columnar reward table: what job import stores and what the scoring engine reads.

One row per attempt (trial). Rows of one table come from one or more Harbor jobs. Scoring
never re-parses JSON: every rule of SPEC section 5 can be decided from these columns.

Columns (``n`` rows, ``k`` secondary reward keys):

=================  =============  ===========================================================
``task``           int32[n]       index into ``tasks`` (task names)
``attempt``        int32[n]       0-based attempt index within its task (stable trial order)
``flags``          uint8[n]       bit set of ``Flag`` (exception, no verifier, invalid)
``primary``        float64[n]     the primary reward as Harbor's model coerces it (bool → 0/1,
                                  numeric string → number); NaN when missing
``primary_kind``   int8[n]        ``Kind`` of the primary value as written in result.json
``values``         float64[n, k]  secondary rewards, same coercion; NaN when missing
``kinds``          int8[n, k]     ``Kind`` of each secondary value
``agent``          int32[n]       index into ``agents`` (``"name@version"``)
``model``          int32[n]       index into ``models`` (``""`` when unknown)
``dataset``        int32[n]       index into ``datasets`` (Harbor's ``source``; ``""`` unknown)
``exception``      int32[n]       index into ``exceptions`` (``""`` = none)
``failure``        int32[n]       index into ``failures`` (failure code; ``""`` = none)
=================  =============  ===========================================================

plus ``trials`` (the trial names, ``n`` strings), ``keys`` (the ``k`` secondary key names),
``reward_key`` (the primary key every row agrees on) and ``jobs`` (job ids it was built from).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag

import numpy as np

__all__ = ["Flag", "Kind", "RewardTable"]


class Flag(IntFlag):
    """Per-attempt facts, combinable."""

    EXCEPTION = 1  # Harbor recorded exception_info
    NO_VERIFIER = 2  # verifier_result is null or absent (or rewards null)
    INVALID = 4  # the reward mapping is invalid for Harbor's VerifierResult: skip the attempt


class Kind(IntEnum):
    """How one reward value was written in result.json."""

    MISSING = 0  # key absent
    NUMBER = 1  # finite number (numeric strings coerced by Harbor included)
    NONFINITE = 2  # NaN or infinity literal
    BOOLEAN = 3  # JSON true/false (Harbor coerces to 1/0)


_STRING_COLUMNS = (
    "tasks",
    "trials",
    "keys",
    "agents",
    "models",
    "datasets",
    "exceptions",
    "failures",
    "jobs",
)
_ARRAY_COLUMNS = ("task", "attempt", "flags", "primary", "primary_kind", "values", "kinds")
_INDEX_COLUMNS = ("agent", "model", "dataset", "exception", "failure")


@dataclass(eq=False)
class RewardTable:
    """Columnar reward table; see the module docstring for every column's meaning."""

    reward_key: str
    tasks: list[str]
    trials: list[str]
    keys: list[str]
    task: np.ndarray
    attempt: np.ndarray
    flags: np.ndarray
    primary: np.ndarray
    primary_kind: np.ndarray
    values: np.ndarray
    kinds: np.ndarray
    agent: np.ndarray
    model: np.ndarray
    dataset: np.ndarray
    exception: np.ndarray
    failure: np.ndarray
    agents: list[str] = field(default_factory=lambda: [""])
    models: list[str] = field(default_factory=lambda: [""])
    datasets: list[str] = field(default_factory=lambda: [""])
    exceptions: list[str] = field(default_factory=lambda: [""])
    failures: list[str] = field(default_factory=lambda: [""])
    jobs: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.task.shape[0])

    def to_bytes(self) -> bytes:
        """Serialize as an uncompressed ``.npz`` (no pickles)."""
        arrays = {name: getattr(self, name) for name in _ARRAY_COLUMNS + _INDEX_COLUMNS}
        for name in _STRING_COLUMNS:
            arrays[name] = np.array(getattr(self, name), dtype=np.str_)
        arrays["reward_key"] = np.array(self.reward_key, dtype=np.str_)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> RewardTable:
        """Inverse of :meth:`to_bytes`. Raises ``ValueError`` on malformed data."""
        with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
            columns = {name: loaded[name] for name in loaded.files}
        strings = {name: columns.pop(name).tolist() for name in _STRING_COLUMNS}
        reward_key = str(columns.pop("reward_key"))
        return cls(reward_key=reward_key, **strings, **columns)

    def validate(self) -> None:
        """Check shapes and index ranges; raises ``ValueError`` naming the column."""
        n, k = len(self), len(self.keys)
        for name in _ARRAY_COLUMNS[:5] + _INDEX_COLUMNS:
            if getattr(self, name).shape != (n,):
                raise ValueError(f"column {name} has shape {getattr(self, name).shape}, not ({n},)")
        for name in ("values", "kinds"):
            if getattr(self, name).shape != (n, k):
                raise ValueError(f"column {name} has shape {getattr(self, name).shape}")
        if len(self.trials) != n:
            raise ValueError("trials and rows differ in length")
        for column, labels in (("task", "tasks"), *((c, f"{c}s") for c in _INDEX_COLUMNS)):
            index = getattr(self, column)
            if n and (index.min() < 0 or index.max() >= len(getattr(self, labels))):
                raise ValueError(f"column {column} indexes outside {labels}")
