"""Parse one trial ``result.json`` into a :class:`TrialRecord`, fast, the way Harbor reads it.

The file is decoded as :mod:`casstore.trials.result` reads it (fast, else leniently; a lone
surrogate makes it unreadable), its reward mapping judged by Harbor's own model
(:mod:`casstore.trials.verdict`), its failure code decided by
:func:`~casstore.trials.rules.failure_code`. Nothing else of the file (e.g.
``config.environment``, which changed shape between Harbor versions) can reject a trial.
"""

from __future__ import annotations

import msgspec

from casstore.trials.records import REWARD_KEY_METADATA, StepRecord, TrialRecord
from casstore.trials.result import (
    DECODER,
    SURROGATE_ESCAPE,
    AgentContext,
    Step,
    TimingInfo,
    lenient,
    refuse_lone_surrogates,
)
from casstore.trials.rules import failure_code
from casstore.trials.stored_form import StoredTrialRecord
from casstore.trials.verdict import rewards_verdict

__all__ = ["parse_result", "parse_stored"]


def parse_result(
    data: bytes,
    job_id: str,
    reward_key: str = "reward",
    *,
    evidence: str | None = None,
    evidence_dict: str | None = None,
    result_path: str | None = None,
) -> TrialRecord:
    """One trial ``result.json`` (bytes) → its :class:`TrialRecord` (attempt 0). With
    ``evidence`` (the key of the kept bytes) the record names it, its size
    (``evidence_bytes``: ``len(data)``) and ``evidence_dict``; ``result_path``: where it was
    read.

    Raises :class:`~casstore.trials.result.ResultUnreadable` when the bytes are not a JSON
    object with string ``task_name`` and ``trial_name``, or hold a lone surrogate in a string
    (Harbor could not load it either).
    """
    fields = _fields(data, evidence, evidence_dict, result_path)
    return TrialRecord(job_id, *fields, {REWARD_KEY_METADATA: reward_key})


def parse_stored(
    data: bytes,
    *,
    evidence: str | None = None,
    evidence_dict: str | None = None,
    result_path: str | None = None,
) -> StoredTrialRecord:
    """:func:`parse_result` in the form the store keeps (no job id, no metadata: see
    :func:`~casstore.trials.stored_form.encode_stored`); ``result_path`` as given (relative to
    the job directory for the store). Raises :class:`ResultUnreadable` as it does."""
    return StoredTrialRecord(*_fields(data, evidence, evidence_dict, result_path))


type _Fields = tuple[
    # trial_name, task_name, attempt, trial_id, source
    str, str, int, str | None, str | None,
    # agent_name, agent_version, model_name, model_provider
    str, str, str | None, str | None,
    # rewards, kinds, has_verifier, valid, reason
    dict[str, float | int] | None, dict[str, int], bool, bool, str | None,
    # exception_type, exception_message, exception_at, failure, started_at, finished_at
    str | None, str | None, str | None, str | None, str | None, str | None,
    # environment_setup, agent_setup, agent_execution, verifier
    tuple[str | None, str | None] | None, tuple[str | None, str | None] | None,
    tuple[str | None, str | None] | None, tuple[str | None, str | None] | None,
    # n_input_tokens, n_cache_tokens, n_output_tokens, cost_usd
    int | None, int | None, int | None, float | None,
    # steps, evidence, evidence_bytes, evidence_dict, result_path
    list[StepRecord] | None, str | None, int, str | None, str | None,
]  # fmt: skip
"""The :class:`TrialRecord` fields from ``trial_name`` to ``result_path``, in order."""


def _fields(
    data: bytes, evidence: str | None, evidence_dict: str | None, result_path: str | None
) -> _Fields:
    """The :class:`TrialRecord` fields of ``data`` from ``trial_name`` to ``result_path``, in
    order (see :func:`parse_result`). Written inline: a helper call per file costs."""
    # a backslash (92, memchr), then a surrogate escape from the first one (they come late)
    if 92 in data and SURROGATE_ESCAPE.search(data, data.find(92)) is not None:
        refuse_lone_surrogates(data)
    try:
        result = DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        result = lenient(data)
    has_verifier, rewards, kinds, reason = rewards_verdict(bytes(result.verifier_result))
    steps = None
    if result.step_results is not None:
        steps, step_reason = _steps(result.step_results)
        if step_reason is not None and reason is None:  # the first invalid step's
            rewards, kinds, reason = None, {}, step_reason
    valid = reason is None
    info = result.agent_info
    model = None if info is None else info.model_info
    exc = result.exception_info
    if exc is None:
        exception_type = exception_message = exception_at = None
    else:
        exception_type = exc.exception_type or ""
        exception_message, exception_at = exc.exception_message, exc.occurred_at
    ctx = result.agent_result
    if ctx is None:  # Harbor's totals over the steps (all None without steps)
        n_input, n_cache, n_output, cost = _totals(
            [s.agent_result for s in result.step_results or () if s.agent_result is not None]
        )
    else:
        n_input, n_cache, n_output = ctx.n_input_tokens, ctx.n_cache_tokens, ctx.n_output_tokens
        cost = None if ctx.cost_usd is None else ctx.cost_usd + 0.0
    # positional, a line per group of fields: much cheaper than keywords (the field order is
    # checked at import)
    # fmt: off
    return (
        result.trial_name, result.task_name, 0, result.id, result.source,
        "" if info is None else info.name or "", "" if info is None else info.version or "",
        None if model is None else model.name, None if model is None else model.provider,
        rewards, kinds, has_verifier, valid, reason,
        exception_type, exception_message, exception_at,
        failure_code(valid, has_verifier, exception_type),
        result.started_at, result.finished_at,
        None if (t := result.environment_setup) is None else (t.started_at, t.finished_at),
        None if (t := result.agent_setup) is None else (t.started_at, t.finished_at),
        None if (t := result.agent_execution) is None else (t.started_at, t.finished_at),
        None if (t := result.verifier) is None else (t.started_at, t.finished_at),
        n_input, n_cache, n_output, cost,
        steps, evidence, 0 if evidence is None else len(data), evidence_dict, result_path,
    )
    # fmt: on


def _steps(step_results: list[Step]) -> tuple[list[StepRecord], str | None]:
    """One :class:`StepRecord` per step, and the reason (``step_results.<i>.<why>``) of the
    first step whose reward mapping is invalid (None: none is)."""
    steps = []
    invalid = None
    for index, step in enumerate(step_results):
        s_has, s_rewards, s_kinds, s_reason = rewards_verdict(bytes(step.verifier_result))
        exc = step.exception_info
        ctx = step.agent_result
        steps.append(
            StepRecord(
                step_name=step.step_name,
                rewards=s_rewards,
                kinds=s_kinds,
                has_verifier=s_has,
                valid=s_reason is None,
                reason=s_reason,
                exception_type=exc.exception_type if exc else None,
                exception_message=exc.exception_message if exc else None,
                agent_execution=_timing(step.agent_execution),
                verifier=_timing(step.verifier),
                n_input_tokens=ctx.n_input_tokens if ctx else None,
                n_cache_tokens=ctx.n_cache_tokens if ctx else None,
                n_output_tokens=ctx.n_output_tokens if ctx else None,
                cost_usd=ctx.cost_usd if ctx else None,
            )
        )
        if s_reason is not None and invalid is None:
            invalid = f"step_results.{index}.{s_reason}"
    return steps, invalid


_POSITIONAL = (
    "job_id",
    "trial_name",
    "task_name",
    "attempt",
    "trial_id",
    "source",
    "agent_name",
    "agent_version",
    "model_name",
    "model_provider",
    "rewards",
    "kinds",
    "has_verifier",
    "valid",
    "reason",
    "exception_type",
    "exception_message",
    "exception_at",
    "failure",
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
    "steps",
    "evidence",
    "evidence_bytes",
    "evidence_dict",
    "result_path",
    "metadata",
    "trace",
)
if (
    TrialRecord.__struct_fields__ != _POSITIONAL
    or StoredTrialRecord.__struct_fields__ != _POSITIONAL[1:]
):  # pragma: no cover - a guard for editors
    raise ImportError("TrialRecord's fields changed: update _fields' positional tuple")


def _timing(value: TimingInfo | None) -> tuple[str | None, str | None] | None:
    return None if value is None else (value.started_at, value.finished_at)


def _totals(
    contexts: list[AgentContext],
) -> tuple[int | None, int | None, int | None, float | None]:
    """Harbor's ``TrialResult.compute_token_cost_totals`` over the given contexts."""
    n_input = n_cache = n_output = None
    cost = None
    for ctx in contexts:
        if ctx.n_input_tokens is not None:
            n_input = (n_input or 0) + ctx.n_input_tokens
        if ctx.n_cache_tokens is not None:
            n_cache = (n_cache or 0) + ctx.n_cache_tokens
        if ctx.n_output_tokens is not None:
            n_output = (n_output or 0) + ctx.n_output_tokens
        if ctx.cost_usd is not None:
            cost = (cost or 0.0) + ctx.cost_usd
    return n_input, n_cache, n_output, cost
