"""A bundle's ``samples.jsonl``: one JSON object per attempt, and the reward table it gives back.

:func:`sample_lines` writes the rows of a :class:`~casstore.table.columns.RewardTable` (with
scoring's verdict on each, :class:`scoring.Attempts`, and each row's :class:`Details`);
:func:`table_of_samples` reads them back into the table they came from. The round trip is
exact for a *canonical* table (:func:`canonical`): label lists and tasks numbered in order of
first appearance (``""`` at 0 for the labels), ``evals`` stored, secondary keys sorted and each
held by some row. Scoring a table and its canonical form gives the same numbers; only the
order of labels (groups, evals keys, exception names) can differ, so a bundle scores the
canonical table and writes its samples: reopening then gives its summary bit for bit.

One sample (``null`` fields and empty objects are written too: every key is always there)::

    {"job": "<job id>", "trial": "<trial name>", "task": "<task>", "attempt": 0,
     "status": "scored",                     # scored | partial | errored | no_verifier | invalid
     "primary": 1.0,                         # the value scored (0.0 when unusable; null: invalid)
     "rewards": {"reward": 1.0, "style": 2}, # every reward as the table holds it (see below)
     "diagnostics": [{"code": "secondary_missing", "output": "fmt"}],
     "has_exception": false, "has_verifier": true, "valid": true,
     "exception_type": null, "exception_message": null, "failure": null,
     "agent": "name@version", "model": "m" | null, "dataset": "d" | null,
     "harbor_evals_key": "name__m__d",
     "started_at": ..., "finished_at": ..., "environment_setup": [start, end] | null,
     "agent_setup": ..., "agent_execution": ..., "verifier": ...,
     "n_input_tokens": ..., "n_cache_tokens": ..., "n_output_tokens": ..., "cost_usd": ...,
     "evidence": "sha256:<pack>#<i>" | null, "trace": "<trace reference>" | null,
     "result_path": "/abs/trial/result.json" | null}

``rewards`` keeps how each value was written (:class:`~casstore.table.columns.Kind`): a JSON
float is a NUMBER, an integer an INTEGER, ``true``/``false`` a BOOLEAN, ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` NONFINITE; a missing key is absent. A value no such form
holds exactly (a NUMBER that is not finite, a kind outside them) is written
``{"kind": <int>, "value": "<repr>"}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np

from casstore.errors import CorruptArchiveError
from casstore.table.columns import LABEL_COLUMNS, Flag, Kind, RewardTable
from casstore.table.labels import first_seen
from casstore.trials.records import Timing, TrialRecord
from scoring import STATUS_NAMES, Attempts
from scoring._rules import CODE_NAMES

__all__ = [
    "Details",
    "Sample",
    "canonical",
    "details_of",
    "read_samples",
    "sample_lines",
    "table_of_samples",
]


class Details(msgspec.Struct, kw_only=True, gc=False):
    """What a sample says beyond the reward table: the attempt's job, exception message,
    timings, tokens and cost, and where its evidence and trace are."""

    job: str = ""
    exception_message: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: Timing | None = None
    agent_setup: Timing | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    evidence: str | None = None
    trace: str | None = None
    result_path: str | None = None


_DETAIL_FIELDS = Details.__struct_fields__


def details_of(record: TrialRecord) -> Details:
    """The :class:`Details` of a trial record (its ``trace`` when it has one)."""
    return Details(
        job=record.job_id,
        exception_message=record.exception_message,
        started_at=record.started_at,
        finished_at=record.finished_at,
        environment_setup=record.environment_setup,
        agent_setup=record.agent_setup,
        agent_execution=record.agent_execution,
        verifier=record.verifier,
        n_input_tokens=record.n_input_tokens,
        n_cache_tokens=record.n_cache_tokens,
        n_output_tokens=record.n_output_tokens,
        cost_usd=record.cost_usd,
        evidence=record.evidence,
        trace=getattr(record, "trace", None),
        result_path=record.result_path,
    )


class Diagnostic(msgspec.Struct, gc=False):
    """One diagnostic of a sample: its code and the output it is about (None: the attempt)."""

    code: str
    output: str | None


class Sample(msgspec.Struct, kw_only=True, gc=False):
    """One line of ``samples.jsonl`` (the module docstring): the attempt, scoring's verdict
    on it, then its :class:`Details`."""

    job: str = ""
    trial: str
    task: str
    attempt: int
    status: str
    primary: float | None
    rewards: dict[str, Any]
    diagnostics: list[Diagnostic] = []
    has_exception: bool = False
    has_verifier: bool = True
    valid: bool = True
    exception_type: str | None = None
    exception_message: str | None = None
    failure: str | None = None
    agent: str = ""
    model: str | None = None
    dataset: str | None = None
    harbor_evals_key: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: Timing | None = None
    agent_setup: Timing | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    evidence: str | None = None
    trace: str | None = None
    result_path: str | None = None


_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _written(value: float, kind: int) -> Any:
    """A reward value of the table as a sample writes it (the module docstring)."""
    if kind == Kind.NUMBER and math.isfinite(value):
        return value
    if kind == Kind.INTEGER and math.isfinite(value) and value == int(value):
        return int(value)
    if kind == Kind.BOOLEAN and value in (0.0, 1.0):
        return value == 1.0
    if kind == Kind.NONFINITE and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return {"kind": int(kind), "value": repr(value)}


def _read(value: Any, where: str) -> tuple[float, int]:
    """``(value, kind)`` of a reward as a sample writes it; CorruptArchiveError otherwise."""
    cls = value.__class__
    if cls is float:
        return value, Kind.NUMBER
    if cls is bool:
        return float(value), Kind.BOOLEAN
    if cls is int:
        return float(value), Kind.INTEGER
    if cls is str and value in _NONFINITE:
        return _NONFINITE[value], Kind.NONFINITE
    if cls is dict and set(value) == {"kind", "value"} and value["kind"].__class__ is int:
        try:
            return float(value["value"]), value["kind"]
        except (TypeError, ValueError):
            pass
    raise CorruptArchiveError(where, f"not a reward value as a bundle writes one: {value!r}")


def canonical(table: RewardTable) -> RewardTable:
    """``table`` as :func:`table_of_samples` gives it back from its samples (module
    docstring): the same rows in the same order, labels and tasks renumbered by first
    appearance, ``evals`` stored, secondary keys no row holds dropped."""
    order = np.unique(table.task, return_index=True)
    seen = order[0][np.argsort(order[1], kind="stable")]
    remap = np.zeros(max(len(table.tasks), 1), np.int32)
    remap[seen] = np.arange(len(seen), dtype=np.int32)
    columns: dict[str, Any] = {}
    for code, names in LABEL_COLUMNS:
        found = _with_empty(getattr(table, code), getattr(table, names))
        columns[names], columns[code] = first_seen(*found)
    evals, evals_keys = table.harbor_evals()
    present, first = np.unique(evals, return_index=True)
    by_first = present[np.argsort(first, kind="stable")]
    evals_remap = np.zeros(max(len(evals_keys), 1), np.int32)
    evals_remap[by_first] = np.arange(len(by_first), dtype=np.int32)
    held = [j for j in range(len(table.keys)) if np.any(table.kinds[:, j] != Kind.MISSING)]
    return RewardTable(
        reward_key=table.reward_key,
        tasks=[table.tasks[t] for t in seen.tolist()],
        trials=list(table.trials),
        keys=[table.keys[j] for j in held],
        task=remap[table.task] if len(table) else table.task.astype(np.int32),
        attempt=np.asarray(table.attempt, np.int32),
        flags=np.asarray(table.flags, np.uint8),
        primary=np.asarray(table.primary, np.float64),
        primary_kind=np.asarray(table.primary_kind, np.int8),
        values=np.ascontiguousarray(table.values[:, held], np.float64),
        kinds=np.ascontiguousarray(table.kinds[:, held], np.int8),
        jobs=list(table.jobs),
        evals=evals_remap[evals].astype(np.int32) if len(table) else evals.astype(np.int32),
        evals_keys=[evals_keys[e] for e in by_first.tolist()],
        **columns,
    )


def _with_empty(codes: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, names)`` with ``""`` at 0 (prepended when the list lacks it there), as
    :func:`~casstore.table.labels.first_seen` takes them."""
    names = list(names)
    codes = np.asarray(codes, np.int32)
    if names and names[0] == "":
        return codes, names
    return codes + 1, ["", *names]


def sample_lines(
    table: RewardTable, rules: Attempts, details: Sequence[Details] | None
) -> Iterator[bytes]:
    """The ``samples.jsonl`` lines (each ending ``\\n``) of a canonical ``table``, in row
    order, in blocks; ``details`` is one per row (None: only the job ids, when the table
    holds one job)."""
    encoder = msgspec.json.Encoder()
    block = 65_536
    for start in range(0, len(table), block):
        rows = range(start, min(start + block, len(table)))
        yield encoder.encode_lines(list(_samples(table, rules, details, rows)))


def _samples(
    table: RewardTable, rules: Attempts, details: Sequence[Details] | None, rows: range
) -> Iterator[Sample]:
    """The :class:`Sample` of each row of ``rows``."""
    cut = slice(rows.start, rows.stop)
    names = [table.reward_key, *table.keys]
    kinds = np.column_stack([table.primary_kind[cut], table.kinds[cut]]).tolist()
    values = np.column_stack([table.primary[cut], table.values[cut]]).tolist()
    status = rules.status[cut].tolist()
    valid = rules.valid[cut].tolist()
    primary = rules.primary[cut].tolist()
    flags = table.flags[cut].tolist()
    notes = _diagnostics_by_row(rules, names, rows)
    evals_keys = table.evals_keys or []
    columns = zip(
        table.task[cut].tolist(),
        table.attempt[cut].tolist(),
        table.agent[cut].tolist(),
        table.model[cut].tolist(),
        table.dataset[cut].tolist(),
        table.exception[cut].tolist(),
        table.failure[cut].tolist(),
        (table.evals if table.evals is not None else np.zeros(len(table), np.int32))[cut].tolist(),
        strict=True,
    )
    single = table.jobs[0] if len(table.jobs) == 1 else ""
    for i, (task, attempt, agent, model, dataset, exc, failure, evals) in enumerate(columns):
        row = rows.start + i
        extra = msgspec.structs.asdict(details[row]) if details is not None else {"job": single}
        yield Sample(
            trial=table.trials[row],
            task=table.tasks[task],
            attempt=attempt,
            status=STATUS_NAMES[status[i]],
            primary=primary[i] if valid[i] else None,
            rewards={
                name: _written(values[i][j], kinds[i][j])
                for j, name in enumerate(names)
                if kinds[i][j] != Kind.MISSING
            },
            diagnostics=notes.get(row, []),
            has_exception=bool(flags[i] & Flag.EXCEPTION),
            has_verifier=not flags[i] & Flag.NO_VERIFIER,
            valid=not flags[i] & Flag.INVALID,
            exception_type=table.exceptions[exc] or None,
            failure=table.failures[failure] or None,
            agent=table.agents[agent],
            model=table.models[model] or None,
            dataset=table.datasets[dataset] or None,
            harbor_evals_key=evals_keys[evals] if evals_keys else "",
            **extra,
        )


def _diagnostics_by_row(
    rules: Attempts, names: list[str], rows: range
) -> dict[int, list[Diagnostic]]:
    """The diagnostics of the rows in ``rows``, by row."""
    found = rules.diagnostics
    lo, hi = np.searchsorted(found.row, [rows.start, rows.stop])
    out: dict[int, list[Diagnostic]] = {}
    for row, code, output in zip(
        found.row[lo:hi].tolist(),
        found.code[lo:hi].tolist(),
        found.output[lo:hi].tolist(),
        strict=True,
    ):
        out.setdefault(row, []).append(
            Diagnostic(CODE_NAMES[code], names[output] if output >= 0 else None)
        )
    return out


def read_samples(data: bytes, where: str) -> list[Sample]:
    """The samples of ``samples.jsonl`` bytes; CorruptArchiveError naming ``where`` when a
    line is not one."""
    try:
        return msgspec.json.Decoder(Sample).decode_lines(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise CorruptArchiveError(where, f"not a bundle sample: {error}") from None


def table_of_samples(
    samples: Sequence[Sample], reward_key: str, where: str
) -> tuple[RewardTable, list[Details]]:
    """The canonical reward table the ``samples`` were written from (rows in their order)
    and each row's :class:`Details`; CorruptArchiveError naming ``where`` for a reward value
    no bundle writes."""
    n = len(samples)
    tasks, task = _codes([s.task for s in samples], empty=False)
    keys = sorted({key for s in samples for key in s.rewards} - {reward_key})
    primary, primary_kind = _column(samples, reward_key, where)
    values = np.full((n, len(keys)), np.nan)
    kinds = np.zeros((n, len(keys)), np.int8)
    for j, key in enumerate(keys):
        values[:, j], kinds[:, j] = _column(samples, key, where)
    flags = np.zeros(n, np.uint8)
    flags[[s.has_exception for s in samples]] |= np.uint8(Flag.EXCEPTION)
    flags[[not s.has_verifier for s in samples]] |= np.uint8(Flag.NO_VERIFIER)
    flags[[not s.valid for s in samples]] |= np.uint8(Flag.INVALID)
    labels: dict[str, Any] = {}
    for code, names, get in (
        ("agent", "agents", lambda s: s.agent),
        ("model", "models", lambda s: s.model or ""),
        ("dataset", "datasets", lambda s: s.dataset or ""),
        ("exception", "exceptions", lambda s: s.exception_type or ""),
        ("failure", "failures", lambda s: s.failure or ""),
    ):
        labels[names], labels[code] = _codes([get(s) for s in samples], empty=True)
    evals_keys, evals = _codes([s.harbor_evals_key for s in samples], empty=False)
    table = RewardTable(
        reward_key=reward_key,
        tasks=tasks,
        trials=[s.trial for s in samples],
        keys=keys,
        task=task,
        attempt=np.array([s.attempt for s in samples], np.int32),
        flags=flags,
        primary=primary,
        primary_kind=primary_kind,
        values=values,
        kinds=kinds,
        jobs=list(dict.fromkeys(s.job for s in samples)),
        evals=evals,
        evals_keys=evals_keys,
        **labels,
    )
    details = [Details(**{f: getattr(s, f) for f in _DETAIL_FIELDS}) for s in samples]
    return table, details


def _codes(names: list[str], empty: bool) -> tuple[list[str], np.ndarray]:
    """``(labels, int32 codes)``: the distinct ``names`` by first appearance (``""`` at 0 when
    ``empty``)."""
    index: dict[str, int] = {"": 0} if empty else {}
    codes = np.fromiter(
        (index.setdefault(name, len(index)) for name in names), np.int32, count=len(names)
    )
    return list(index), codes


def _column(samples: Sequence[Sample], key: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``(float64 values, int8 kinds)`` of reward ``key`` over the samples (NaN, MISSING
    where absent)."""
    raw = [s.rewards.get(key, _ABSENT) for s in samples]
    values = np.full(len(raw), np.nan)
    kinds = np.zeros(len(raw), np.int8)
    simple = [value.__class__ is float for value in raw]
    if all(simple):
        return np.array(raw, np.float64), np.full(len(raw), Kind.NUMBER, np.int8)
    for i, value in enumerate(raw):
        if value is _ABSENT:
            continue
        values[i], kinds[i] = _read(value, f"{where}:{i + 1}")
    return values, kinds


_ABSENT: Any = object()
