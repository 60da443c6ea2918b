"""The columnar reward table: what job import stores and what the scoring engine reads.

One row per attempt (trial). Rows of one table come from one or more Harbor jobs. Scoring
never re-parses JSON: every rule of README, §6 Scoring can be decided from these columns.

Columns (``n`` rows, ``k`` secondary reward keys):

=================  =============  ===========================================================
``task``           int32[n]       index into ``tasks`` (task names)
``attempt``        int32[n]       0-based attempt index within its task (stable trial order)
``flags``          uint8[n]       bit set of ``Flag`` (exception, no verifier, invalid)
``primary``        float64[n]     the primary reward as Harbor's model coerces it (bool → 0/1,
                                  numeric string → number); NaN when missing
``primary_kind``   int8[n]        ``Kind`` of the primary value as written in result.json
                                  (``INTEGER`` where Harbor's model holds an ``int``)
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

``evals`` int32[n] (optional: tables written before it lack it) indexes ``evals_keys``, each
row's Harbor *evals key* (:func:`harbor_evals_key` of ``agent_info.name``,
``agent_info.model_info.name`` and ``source``), which the labels cannot always give back (an
agent name may hold ``@``); :meth:`RewardTable.harbor_evals` derives it from the labels for
older tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, IntFlag

import numpy as np

from casstore.table.npz import Strings, as_str_array, read_npz, write_npz

__all__ = ["LABEL_COLUMNS", "Flag", "Kind", "RewardTable", "harbor_evals_key"]


def harbor_evals_key(agent_name: str, model_name: str | None, dataset: str | None) -> str:
    """Harbor's ``JobStats.format_agent_evals_key``: ``agent__model__dataset``, or
    ``agent__dataset`` without a model; the dataset is the trial's ``source`` or ``"adhoc"``."""
    source = dataset or "adhoc"
    return f"{agent_name}__{model_name}__{source}" if model_name else f"{agent_name}__{source}"


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
    INTEGER = 4  # a finite NUMBER that Harbor's model holds as an int (a JSON integer)

    @classmethod
    def stored(cls, value: object, kind: int) -> int:
        """The kind a table stores for a coerced ``value`` written as ``kind``: ``INTEGER``
        for a NUMBER that is a Python ``int`` (Harbor's ``dict[str, float | int]`` keeps JSON
        integers as ints: its Sum/Min/Max then return ints), else ``kind``. The value column
        holds ``float(value)``: exact up to ``2**53`` in magnitude."""
        return cls.INTEGER if kind == cls.NUMBER and value.__class__ is int else kind


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
LABEL_COLUMNS: tuple[tuple[str, str], ...] = tuple((c, f"{c}s") for c in _INDEX_COLUMNS)
"""``(code column, label list)`` of every label column: ``("agent", "agents")``, ...,
``("failure", "failures")`` (the optional ``evals``/``evals_keys`` pair aside)."""
_ALL_COLUMNS = {*_STRING_COLUMNS, *_ARRAY_COLUMNS, *_INDEX_COLUMNS, "reward_key"}
_OPTIONAL_COLUMNS = {"evals", "evals_keys"}
_NAME_COLUMNS = (*_STRING_COLUMNS, "evals_keys")  # every list-of-strings column


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
    evals: np.ndarray | None = None
    evals_keys: list[str] | None = None

    def harbor_evals(self) -> tuple[np.ndarray, list[str]]:
        """``(codes int[n], keys)``: each row's Harbor evals key. Stored, or (older tables)
        derived from the labels, taking the agent name as the ``agents`` label up to its
        first ``@`` (exact unless the agent name itself holds ``@``)."""
        if self.evals is not None and self.evals_keys is not None:
            return self.evals, list(self.evals_keys)
        sizes = (len(self.agents), len(self.models), len(self.datasets))
        combos = np.zeros(len(self), dtype=np.int64)
        for size, column in zip(sizes, (self.agent, self.model, self.dataset), strict=True):
            if size > 1:  # a single label adds nothing to the code
                combos = combos * size + column
        keys: dict[str, int] = {}
        remap = np.zeros(max(sizes[0] * sizes[1] * sizes[2], 1), dtype=np.int32)
        for code in np.flatnonzero(np.bincount(combos, minlength=remap.size)).tolist():
            rest, dataset = divmod(code, sizes[2])
            agent, model = divmod(rest, sizes[1])
            name = self.agents[agent].split("@", 1)[0]
            key = harbor_evals_key(name, self.models[model], self.datasets[dataset])
            remap[code] = keys.setdefault(key, len(keys))
        return remap[combos], list(keys)

    def __len__(self) -> int:
        return int(self.task.shape[0])

    def to_bytes(self) -> bytes:
        """Serialize as an uncompressed ``.npz`` (no pickles) whose columns start 64-byte
        aligned (:func:`~casstore.table.npz.write_npz`), so :meth:`from_bytes` maps them
        without copying; the same table always gives the same bytes."""
        arrays = {name: getattr(self, name) for name in _ARRAY_COLUMNS + _INDEX_COLUMNS}
        for name in _STRING_COLUMNS:
            arrays[name] = as_str_array(getattr(self, name))
        arrays["reward_key"] = np.array(self.reward_key, dtype=np.str_)
        if self.evals is not None and self.evals_keys is not None:
            arrays["evals"] = self.evals
            arrays["evals_keys"] = as_str_array(self.evals_keys)
        return write_npz(arrays)

    @classmethod
    def from_bytes(cls, data: bytes) -> RewardTable:
        """Inverse of :meth:`to_bytes`. Raises ``ValueError`` on malformed data.

        Columns are read-only views of ``data`` (no copy) where aligned, else aligned copies;
        the name columns stay views. Every column's CRC-32 is checked
        before use: the numeric ones here, the name columns (:class:`Strings`, the trial names
        being the bulk of the bytes) when first used, or on :meth:`verify`.
        """
        columns = read_npz(
            bytes(data),  # no copy for bytes
            names=_NAME_COLUMNS,
            lazy=("tasks", "trials"),
            required=_ALL_COLUMNS,
            optional=_OPTIONAL_COLUMNS,
        )
        reward_key = str(columns.pop("reward_key"))
        return cls(reward_key=reward_key, **columns)

    def verify(self) -> None:
        """Run the CRC checks still pending (the lazily checked name columns of a table read
        by :meth:`from_bytes`: under a millisecond for 100,000 trial names); raises
        ``ValueError`` on a mismatch."""
        for names in (self.tasks, self.trials):
            if isinstance(names, Strings):
                names.array()

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
        if (self.evals is None) != (self.evals_keys is None):
            raise ValueError("columns evals and evals_keys come together")
        if self.evals is not None and self.evals.shape != (n,):
            raise ValueError(f"column evals has shape {self.evals.shape}, not ({n},)")
        indexed = [("task", "tasks"), *LABEL_COLUMNS]
        if self.evals is not None:
            indexed.append(("evals", "evals_keys"))
        for column, labels in indexed:
            index = getattr(self, column)
            if n and (index.min() < 0 or index.max() >= len(getattr(self, labels))):
                raise ValueError(f"column {column} indexes outside {labels}")
