"""Agent traces: a trial's ATIF trajectory translated into a list of agent-trace steps.

Import keeps each trial's ATIF trajectory (``agent/trajectory.json`` or
``artifacts/trajectory.json``: :data:`casstore.trials.chunk.TRAJECTORIES`) byte for byte as
evidence, referenced by the record's ``trace``; :func:`translate` turns those bytes into a
:class:`Trace` when it is shown (``casstore show JOB/TRIAL --trace``), so the stored evidence
never depends on this translation.

Each ATIF step becomes one :class:`TraceStep` (AgentKitV2-style), in order, none dropped:

* a step Harbor's own model accepts (``harbor.models.trajectories.Step``) is mapped field by
  field: ``role`` (ATIF ``source``: ``agent`` → ``assistant``, ``user``, ``system``),
  ``content`` (``message``), ``reasoning``, ``tool_calls`` (``{"id", "name", "arguments"}``),
  ``tool_results`` (the observation's results, ``{"call_id", "content"}``), ``tokens``
  (``{"prompt", "completion", "cached"}``), ``cost_usd``, ``timestamp``, ``model``; what has
  no field of its own (``extra``, ``llm_call_count``, ...) under ``metadata``;
* any other step (a shape Harbor's model refuses: a tool call's arguments as a string, an
  unknown field, not an object at all) becomes a minimal step: its ``step_id``, ``role`` and
  ``content`` and ``timestamp`` where they are of the expected type (``role`` ``unknown``
  otherwise), and the whole raw step under ``metadata.raw_atif_step``, Harbor's first
  complaint under ``metadata.atif_error``.

The trajectory's other fields (``schema_version``, ``session_id``, ``agent``,
``final_metrics``, ``notes``, ...) are kept on the :class:`Trace`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from casstore.errors import CorruptArchiveError

__all__ = ["ROLES", "Trace", "TraceStep", "translate"]

ROLES = {"agent": "assistant", "user": "user", "system": "system"}
"""ATIF ``source`` → agent-trace ``role``."""


class TraceStep(msgspec.Struct, omit_defaults=True):
    """One agent-trace step (module docstring); fields at their default are left out of
    the JSON."""

    step_id: int | None = None
    role: str = "unknown"
    content: Any = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = []
    tool_results: list[dict[str, Any]] = []
    tokens: dict[str, int | None] | None = None
    cost_usd: float | None = None
    timestamp: str | None = None
    model: str | None = None
    metadata: dict[str, Any] = {}


class Trace(msgspec.Struct):
    """A translated trajectory: ``format`` (ATIF's ``schema_version``), its ``steps``, how
    many of them Harbor's model accepted (``known_steps``), and ``metadata``: the
    trajectory's other top-level fields."""

    format: str | None
    steps: list[TraceStep]
    known_steps: int
    metadata: dict[str, Any]


def translate(data: bytes, where: str) -> Trace:
    """The :class:`Trace` of ATIF trajectory bytes; CorruptArchiveError naming ``where`` when
    they are not a JSON object with a list of ``steps``."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise CorruptArchiveError(where, f"not an ATIF trajectory (not JSON: {error})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        raise CorruptArchiveError(where, "not an ATIF trajectory (no list of steps)")
    from harbor.models.trajectories.step import Step  # here: pydantic only when shown
    from pydantic import ValidationError

    steps: list[TraceStep] = []
    known = 0
    for item in raw["steps"]:
        try:
            step = Step.model_validate(item)
        except ValidationError as error:
            steps.append(_minimal(item, error))
            continue
        steps.append(_known(step))
        known += 1
    metadata = {key: value for key, value in raw.items() if key not in ("steps", "schema_version")}
    return Trace(raw.get("schema_version"), steps, known, metadata)


def _known(step: Any) -> TraceStep:
    """The trace step of a step Harbor's model accepted."""
    metrics = step.metrics
    results = step.observation.results if step.observation is not None else []
    metadata = {
        name: value
        for name, value in (
            ("extra", step.extra),
            ("llm_call_count", step.llm_call_count),
            ("is_copied_context", step.is_copied_context),
            ("reasoning_effort", step.reasoning_effort),
        )
        if value is not None
    }
    return TraceStep(
        step_id=step.step_id,
        role=ROLES[step.source],
        content=_content(step.message),
        reasoning=step.reasoning_content,
        tool_calls=[
            {"id": call.tool_call_id, "name": call.function_name, "arguments": call.arguments}
            for call in step.tool_calls or []
        ],
        tool_results=[
            {"call_id": result.source_call_id, "content": _content(result.content)}
            for result in results
        ],
        tokens=None
        if metrics is None
        else {
            "prompt": metrics.prompt_tokens,
            "completion": metrics.completion_tokens,
            "cached": metrics.cached_tokens,
        },
        cost_usd=None if metrics is None else metrics.cost_usd,
        timestamp=step.timestamp,
        model=step.model_name,
        metadata=metadata,
    )


def _content(value: Any) -> Any:
    """A message or result content: text as it is, content parts as plain objects."""
    if isinstance(value, list):
        return [part.model_dump(exclude_none=True) for part in value]
    return value


def _minimal(item: Any, error: Exception) -> TraceStep:
    """The minimal step of a step of unknown shape, the raw step kept."""
    body = item if isinstance(item, dict) else {}
    step_id = body.get("step_id")
    source = body.get("source")
    message = body.get("message")
    timestamp = body.get("timestamp")
    errors: list[Any] = getattr(error, "errors", list)()
    first = errors[0] if errors else {}
    complaint = f"{'.'.join(map(str, first.get('loc', ())))}: {first.get('msg', error)}"
    return TraceStep(
        step_id=step_id if type(step_id) is int else None,
        role=ROLES.get(source, "unknown") if isinstance(source, str) else "unknown",
        content=message if isinstance(message, str) else None,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        metadata={"raw_atif_step": item, "atif_error": complaint},
    )
