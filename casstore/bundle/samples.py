"""A bundle's ``samples.jsonl``: one JSON object per attempt (:class:`Sample`).

Written by :mod:`casstore.bundle.lines` from the rows of a reward table, read back into it by
:mod:`casstore.bundle.table`. One sample (fields at their default are left out: no ``null``,
``false`` flag or empty list is written; ``has_verifier`` and ``valid`` default to true)::

    {"trial": "<trial name>", "task": "<task>", "attempt": 0,
     "status": "scored",                     # scored | partial | errored | no_verifier | invalid
     "primary": 1.0,                         # the value scored (0.0 when unusable; null: invalid)
     "rewards": {"reward": 1.0, "style": 2}, # every reward as the table holds it (see below)
     "job_id": "<job id>", "job": "<job label>", "source": "<source as given>",
     "diagnostics": [{"code": "secondary_missing", "output": "fmt"}],
     "has_exception": false, "has_verifier": true, "valid": true,
     "exception_type": ..., "exception_message": ..., "failure": "<failure code>",
     "agent": "name@version", "model": "m", "dataset": "d",
     "harbor_evals_key": "name__m__d",
     "started_at": ..., "finished_at": ..., "environment_setup": [start, end],
     "agent_setup": ..., "agent_execution": ..., "verifier": ...,
     "n_input_tokens": ..., "n_cache_tokens": ..., "n_output_tokens": ..., "cost_usd": ...,
     "evidence": "sha256:<pack>#<i>", "trace": "<trace reference>",
     "result_path": "/abs/trial/result.json"}

``job`` and ``source`` are the labels ``--group-by job,source`` gave the row when the bundle was
written (:mod:`casstore.origins`; absent in older bundles, and ``job`` when the rows were not
known by job): reading the bundle gives them back, so its groups come back as they were.

``rewards`` keeps how each value was written (:class:`~casstore.table.columns.Kind`): a JSON
float is a NUMBER, an integer an INTEGER, ``true``/``false`` a BOOLEAN, ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` NONFINITE; a missing key is absent. A value no such form
holds exactly (a NUMBER that is not finite, a kind outside them) is written
``{"kind": <int>, "value": "<repr>"}``.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import msgspec

from casstore.errors import CorruptArchiveError
from casstore.table.columns import Kind
from casstore.trials.records import Timing, TrialRecord

__all__ = [
    "DETAIL_FIELDS",
    "SAMPLE_FIELDS",
    "Details",
    "Diagnostic",
    "Sample",
    "paused_gc",
    "read_samples",
    "read_value",
    "written",
]


class Diagnostic(msgspec.Struct, gc=False):
    """One diagnostic of a sample: its code and the output it is about (None: the attempt)."""

    code: str
    output: str | None


AttemptIndex = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
"""An attempt index: the reward table holds them as int32, and import numbers them from 0."""


class Sample(msgspec.Struct, omit_defaults=True, gc=False):
    """One line of ``samples.jsonl`` (the module docstring): the attempt, scoring's verdict
    on it, then its details (:data:`DETAIL_FIELDS`)."""

    trial: str
    task: str
    attempt: AttemptIndex
    status: str
    primary: float | None
    rewards: dict[str, Any]
    job_id: str = ""
    job: str = ""
    source: str = ""
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


SAMPLE_FIELDS = Sample.__struct_fields__
DETAIL_FIELDS = (
    "job_id",
    "exception_message",
    "started_at",
    "finished_at",
    "environment_setup",
    "agent_setup",
    "agent_execution",
    "verifier",
    "n_input_tokens",
    "n_cache_tokens",
    "n_output_tokens",
    "cost_usd",
    "evidence",
    "trace",
    "result_path",
)
"""What a sample says beyond the reward table (the attempt's job, exception message,
timings, tokens and cost, where its evidence and trace are): fields of a trial record and of
a sample alike, so either gives a sample its details (:data:`Details`)."""

type Details = TrialRecord | Sample
"""The details of one row: the trial record it was read from, or the sample read back."""

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def written(value: float, kind: int) -> Any:
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


def read_value(value: Any, where: str) -> tuple[float, int]:
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


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused (as it was after): building or decoding a million
    samples makes millions of objects without cycles, and each collection it would trigger
    walks them all (about 15% of the time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _table_part() -> Any:
    """The type of a sample's fields the reward table needs (the details skipped unread)."""
    spec: list[tuple[Any, ...]] = []
    for f in msgspec.structs.fields(Sample):
        if f.name in DETAIL_FIELDS and f.name != "job_id":
            continue
        if f.default_factory is not msgspec.NODEFAULT:
            spec.append((f.name, f.type, msgspec.field(default_factory=f.default_factory)))
        elif f.default is not msgspec.NODEFAULT:
            spec.append((f.name, f.type, f.default))
        else:
            spec.append((f.name, f.type))
    return msgspec.defstruct("TableSample", spec, kw_only=True, gc=False)


_DECODERS = {True: msgspec.json.Decoder(Sample), False: msgspec.json.Decoder(_table_part())}


def read_samples(data: bytes, where: str, details: bool = True) -> list[Any]:
    r"""The samples of ``samples.jsonl`` bytes: :class:`Sample`\ s, or without ``details``
    only the fields the reward table needs (the details skipped: a third less work);
    CorruptArchiveError naming ``where`` when a line is not a sample."""
    try:
        return _DECODERS[details].decode_lines(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise CorruptArchiveError(where, f"not a bundle sample: {error}") from None
