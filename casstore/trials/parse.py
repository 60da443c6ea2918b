"""Parse one trial ``result.json`` into a :class:`TrialRecord`, fast, the way Harbor reads it.

Fast path: a partial typed msgspec decode of only the fields scoring and reporting need
(unknown fields ignored), with ``verifier_result`` kept as raw JSON bytes. Files msgspec
refuses (NaN/Infinity literals, unexpected types in a field we read) go through the standard
library ``json`` and a lenient extraction instead; both paths give the same record.

A file with a lone UTF-16 surrogate in a string (an escape such as ``\\ud800`` without its other
half, or a surrogate's UTF-8 bytes) is unreadable, as it is for Harbor's own loader: a Python
string holding one cannot be encoded to UTF-8 again. Only files holding a backslash and such an
escape (a cheap scan) get the check that tells a lone surrogate from a pair.

Reward validity is decided by Harbor's own model: the raw ``verifier_result`` object is
validated with ``harbor.models.verifier.result.VerifierResult.model_validate_json`` (cached by
its bytes), exactly the validation Harbor's ``TrialResult`` applies to that field. Its output
is the reward mapping we keep. Nothing else of the file (e.g. ``config.environment``, which
changed shape between Harbor versions) can reject a trial.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec
from pydantic import ValidationError

from casstore.trials.records import (
    REWARD_KEY_METADATA,
    StepRecord,
    StoredTrialRecord,
    TrialRecord,
)

__all__ = ["ResultUnreadable", "parse_result", "parse_stored", "rewards_verdict"]

# Kind values (casstore.table.columns.Kind), inlined to keep worker processes light.
MISSING, NUMBER, NONFINITE, BOOLEAN = 0, 1, 2, 3
_INT64 = (-(1 << 63), (1 << 63) - 1)


class ResultUnreadable(Exception):
    """result.json cannot be read as a trial result (message: why, one line)."""


class _Timing(msgspec.Struct, gc=False):
    started_at: str | None = None
    finished_at: str | None = None


class _Exception(msgspec.Struct, gc=False):
    exception_type: str | None = None
    exception_message: str | None = None
    occurred_at: str | None = None


class _ModelInfo(msgspec.Struct, gc=False):
    name: str | None = None
    provider: str | None = None


class _AgentInfo(msgspec.Struct, gc=False):
    name: str | None = None
    version: str | None = None
    model_info: _ModelInfo | None = None


class _Context(msgspec.Struct, gc=False):
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


_ABSENT = msgspec.Raw(b"")


class _Step(msgspec.Struct, gc=False):
    step_name: str = ""
    agent_result: _Context | None = None
    verifier_result: msgspec.Raw = _ABSENT
    exception_info: _Exception | None = None
    agent_execution: _Timing | None = None
    verifier: _Timing | None = None


class _Result(msgspec.Struct, gc=False):
    task_name: str
    trial_name: str
    id: str | None = None
    source: str | None = None
    agent_info: _AgentInfo | None = None
    agent_result: _Context | None = None
    verifier_result: msgspec.Raw = _ABSENT
    exception_info: _Exception | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: _Timing | None = None
    agent_setup: _Timing | None = None
    agent_execution: _Timing | None = None
    verifier: _Timing | None = None
    step_results: list[_Step] | None = None


_DECODER = msgspec.json.Decoder(_Result)
_VERDICTS: dict[bytes, tuple[bool, dict | None, dict[str, int], str | None]] = {}
_VERIFIER_RESULT: Any = None


def _verifier_model() -> Any:
    global _VERIFIER_RESULT
    if _VERIFIER_RESULT is None:
        from harbor.models.verifier.result import VerifierResult

        _VERIFIER_RESULT = VerifierResult
    return _VERIFIER_RESULT


def _number(value: Any) -> float | int:
    """A Harbor-coerced value as we store it: ints kept when they fit in int64, else the
    nearest float (infinity beyond float range)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if _INT64[0] <= value <= _INT64[1]:
            return value
        try:  # beyond msgpack's int64: the nearest float
            return float(value)
        except OverflowError:
            return math.copysign(math.inf, value)
    return float(value)


def rewards_verdict(
    raw: bytes,
) -> tuple[bool, dict[str, float | int] | None, dict[str, int], str | None]:
    """Harbor's verdict on a raw ``verifier_result`` JSON object.

    Returns ``(has_verifier, rewards, kinds, reason)``: ``has_verifier`` False for null/absent
    ``verifier_result`` or ``rewards``; ``reason`` (None when valid) is Harbor's first
    validation error, one line; ``rewards`` is Harbor's coerced mapping (None when invalid or
    missing); ``kinds`` maps each key to its Kind (how the value was written). Cached by bytes.
    """
    cached = _VERDICTS.get(raw)
    if cached is not None:
        return cached
    verdict = _plain_verdict(raw) or _verdict(raw)
    if len(_VERDICTS) < 65536:
        _VERDICTS[raw] = verdict
    return verdict


class _Plain(msgspec.Struct, gc=False):
    rewards: dict[str, int | float] | None = None


_PLAIN = msgspec.json.Decoder(_Plain)


def _plain_verdict(
    raw: bytes,
) -> tuple[bool, dict[str, float | int], dict[str, int], None] | None:
    """The verdict without Harbor's model when every reward is a plain JSON number: an int
    within int64 or a finite float (Harbor's ``dict[str, float | int]`` keeps exactly these
    values, last duplicate winning, extra keys ignored); None for anything else (strings,
    Booleans, null, NaN literals, huge numbers...), which goes to Harbor's model."""
    try:
        rewards = _PLAIN.decode(raw).rewards
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not rewards:  # null or {}: Harbor's model says (null: no verifier, {}: valid)
        return None
    for value in rewards.values():
        if value.__class__ is int:
            if not _INT64[0] <= value <= _INT64[1]:
                return None
        elif value.__class__ is not float or not math.isfinite(value):
            return None
    return True, rewards, dict.fromkeys(rewards, NUMBER), None


def _verdict(raw: bytes) -> tuple[bool, dict[str, float | int] | None, dict[str, int], str | None]:
    stripped = raw.strip()
    if not stripped or stripped == b"null":
        return False, None, {}, None
    try:
        model = _verifier_model().model_validate_json(stripped)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        reason = f"verifier_result{'.' + where if where else ''}: {first['msg']}"
        return True, None, {}, reason
    if model.rewards is None:
        return False, None, {}, None
    written = _written_rewards(stripped)
    rewards: dict[str, float | int] = {}
    kinds: dict[str, int] = {}
    for key, value in model.rewards.items():
        stored = _number(value)
        rewards[key] = stored
        if isinstance(written.get(key), bool):
            kinds[key] = BOOLEAN
        elif isinstance(stored, float) and not math.isfinite(stored):
            kinds[key] = NONFINITE
        else:
            kinds[key] = NUMBER
    return True, rewards, kinds, None


def _written_rewards(raw: bytes) -> dict[str, Any]:
    """The rewards object as written (to tell Booleans apart); last duplicate wins."""
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        data = json.loads(raw)
    rewards = data.get("rewards") if isinstance(data, dict) else None
    return rewards if isinstance(rewards, dict) else {}


def _timing(value: _Timing | None) -> tuple[str | None, str | None] | None:
    return None if value is None else (value.started_at, value.finished_at)


def _totals(
    contexts: list[_Context],
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


def failure_of(record: TrialRecord) -> str | None:
    """The trial's failure code (priority: invalid mapping, missing verifier, exception)."""
    if not record.valid:
        return "reward_mapping_invalid"
    if not record.has_verifier:
        return "verifier_result_missing"
    if record.exception_type is not None:
        return "trial_exception"
    return None


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

    Raises :class:`ResultUnreadable` when the bytes are not a JSON object with string
    ``task_name`` and ``trial_name``, or hold a lone surrogate in a string (Harbor could not
    load it either).
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
    :func:`~casstore.trials.records.encode_stored`); ``result_path`` as given (relative to
    the job directory for the store). Raises :class:`ResultUnreadable` as it does."""
    return StoredTrialRecord(*_fields(data, evidence, evidence_dict, result_path))


def _fields(
    data: bytes, evidence: str | None, evidence_dict: str | None, result_path: str | None
) -> tuple[Any, ...]:
    """The :class:`TrialRecord` fields of ``data`` from ``trial_name`` to ``result_path``, in
    order (see :func:`parse_result`)."""
    # a backslash (92, memchr), then a surrogate escape from the first one (they come late)
    if 92 in data and _SURROGATE_ESCAPE.search(data, data.find(92)) is not None:
        _refuse_lone_surrogates(data)
    try:
        result = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        result = _lenient(data)
    has_verifier, rewards, kinds, reason = rewards_verdict(bytes(result.verifier_result))
    valid = reason is None
    steps = None
    if result.step_results is not None:
        steps = []
        for index, step in enumerate(result.step_results):
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
            if s_reason is not None and valid:
                valid, rewards, kinds = False, None, {}
                reason = f"step_results.{index}.{s_reason}"
    ctx = result.agent_result
    if ctx is not None:
        n_input, n_cache, n_output = ctx.n_input_tokens, ctx.n_cache_tokens, ctx.n_output_tokens
        cost = None if ctx.cost_usd is None else ctx.cost_usd + 0.0
    elif result.step_results:
        contexts = [s.agent_result for s in result.step_results if s.agent_result is not None]
        n_input, n_cache, n_output, cost = _totals(contexts)
    else:
        n_input = n_cache = n_output = cost = None
    info = result.agent_info
    if info is None:
        agent_name = agent_version = ""
        model_info = None
    else:
        agent_name, agent_version, model_info = info.name or "", info.version or "", info.model_info
    if model_info is None:
        model_name = model_provider = None
    else:
        model_name, model_provider = model_info.name, model_info.provider
    exc = result.exception_info
    if exc is None:
        exception_type = exception_message = exception_at = None
    else:
        exception_type = exc.exception_type or ""
        exception_message, exception_at = exc.exception_message, exc.occurred_at
    t = result.environment_setup
    environment_setup = None if t is None else (t.started_at, t.finished_at)
    t = result.agent_setup
    agent_setup = None if t is None else (t.started_at, t.finished_at)
    t = result.agent_execution
    agent_execution = None if t is None else (t.started_at, t.finished_at)
    t = result.verifier
    verifier = None if t is None else (t.started_at, t.finished_at)
    # failure_of(record), inlined
    if not valid:
        failure: str | None = "reward_mapping_invalid"
    elif not has_verifier:
        failure = "verifier_result_missing"
    elif exception_type is not None:
        failure = "trial_exception"
    else:
        failure = None
    # positional: much cheaper than keywords (the field order is checked at import)
    return (
        result.trial_name,
        result.task_name,
        0,
        result.id,
        result.source,
        agent_name,
        agent_version,
        model_name,
        model_provider,
        rewards,
        kinds,
        has_verifier,
        valid,
        reason,
        exception_type,
        exception_message,
        exception_at,
        failure,
        result.started_at,
        result.finished_at,
        environment_setup,
        agent_setup,
        agent_execution,
        verifier,
        n_input,
        n_cache,
        n_output,
        cost,
        steps,
        evidence,
        0 if evidence is None else len(data),
        evidence_dict,
        result_path,
    )


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
)
if (
    TrialRecord.__struct_fields__ != _POSITIONAL
    or StoredTrialRecord.__struct_fields__ != _POSITIONAL[1:]
):  # pragma: no cover - a guard for editors
    raise ImportError("TrialRecord's fields changed: update _fields' positional tuple")


# lone surrogates ----------------------------------------------------------------------------

# An escape of a UTF-16 surrogate (U+D800..U+DFFF), any case: the files that need the check.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# An escaped backslash (consumed, so that ``\\ud800`` is not read as an escape) or a
# surrogate escape, its hex digits captured.
_BACKSLASHES_OR_SURROGATE = re.compile(rb"\\\\|\\u([dD][89a-fA-F][0-9a-fA-F]{2})")
LONE_SURROGATE = "lone surrogate in a string (not valid Unicode)"
ENCODED_SURROGATE = "a surrogate written as UTF-8 bytes (not valid UTF-8)"


def _refuse_lone_surrogates(data: bytes) -> None:
    """Raise :class:`ResultUnreadable` when a JSON string in ``data`` holds a surrogate escape
    that is not half of a pair (a high one, ``\\ud800``..``\\udbff``, immediately followed by a
    low one, ``\\udc00``..``\\udfff``): Harbor's loader refuses such a file, and the string it
    would decode to cannot be encoded to UTF-8. Backslashes appear only inside strings in
    JSON; a file that is not JSON is refused by the decode anyway."""
    pending = -1  # where a high surrogate's escape ended, waiting for its low half
    for match in _BACKSLASHES_OR_SURROGATE.finditer(data):
        digits = match.group(1)
        code = -1 if digits is None else int(digits, 16)
        if pending >= 0:
            if match.start() != pending or not 0xDC00 <= code <= 0xDFFF:
                raise ResultUnreadable(LONE_SURROGATE)
            pending = -1
        elif code >= 0xDC00:
            raise ResultUnreadable(LONE_SURROGATE)
        elif code >= 0:
            pending = match.end()
    if pending >= 0:
        raise ResultUnreadable(LONE_SURROGATE)


# lenient path -------------------------------------------------------------------------------


def _lenient(data: bytes) -> _Result:
    """Standard-library decode (NaN/Infinity literals) with per-field type tolerance."""
    try:  # json.loads(data), in two steps: the text is checked for surrogates
        encoding = json.detect_encoding(data)
        text = data.decode(encoding, "surrogatepass")
        obj = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ResultUnreadable(f"not JSON: {error}") from None
    utf8 = encoding.startswith("utf-8")
    if not utf8 or not text.isascii():
        try:  # surrogates written as bytes (msgspec refused them as not UTF-8)
            encoded = text.encode()
        except UnicodeEncodeError:
            raise ResultUnreadable(ENCODED_SURROGATE) from None
        if not utf8:  # UTF-16/32: the check in _fields saw other bytes
            _refuse_lone_surrogates(encoded)
    if not isinstance(obj, dict):
        raise ResultUnreadable("not a JSON object")
    task_name, trial_name = obj.get("task_name"), obj.get("trial_name")
    if not isinstance(task_name, str) or not isinstance(trial_name, str):
        raise ResultUnreadable("task_name and trial_name must be strings")
    steps = obj.get("step_results")
    return _Result(
        task_name=task_name,
        trial_name=trial_name,
        id=_str(obj.get("id")),
        source=_str(obj.get("source")),
        agent_info=_agent_info(obj.get("agent_info")),
        agent_result=_context(obj.get("agent_result")),
        verifier_result=_raw(obj, "verifier_result"),
        exception_info=_exception(obj.get("exception_info")),
        started_at=_str(obj.get("started_at")),
        finished_at=_str(obj.get("finished_at")),
        environment_setup=_timing_of(obj.get("environment_setup")),
        agent_setup=_timing_of(obj.get("agent_setup")),
        agent_execution=_timing_of(obj.get("agent_execution")),
        verifier=_timing_of(obj.get("verifier")),
        step_results=[_step(s) for s in steps if isinstance(s, dict)]
        if isinstance(steps, list)
        else None,
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    return None


def _raw(obj: dict, key: str) -> msgspec.Raw:
    if key not in obj:
        return _ABSENT
    return msgspec.Raw(json.dumps(obj[key], allow_nan=True).encode())


def _agent_info(value: Any) -> _AgentInfo | None:
    if not isinstance(value, dict):
        return None
    model = value.get("model_info")
    return _AgentInfo(
        name=_str(value.get("name")),
        version=_str(value.get("version")),
        model_info=_ModelInfo(name=_str(model.get("name")), provider=_str(model.get("provider")))
        if isinstance(model, dict)
        else None,
    )


def _context(value: Any) -> _Context | None:
    if not isinstance(value, dict):
        return None
    return _Context(
        n_input_tokens=_int(value.get("n_input_tokens")),
        n_cache_tokens=_int(value.get("n_cache_tokens")),
        n_output_tokens=_int(value.get("n_output_tokens")),
        cost_usd=_float(value.get("cost_usd")),
    )


def _exception(value: Any) -> _Exception | None:
    if not isinstance(value, dict):
        return None
    return _Exception(
        exception_type=_str(value.get("exception_type")) or "",
        exception_message=_str(value.get("exception_message")),
        occurred_at=_str(value.get("occurred_at")),
    )


def _timing_of(value: Any) -> _Timing | None:
    if not isinstance(value, dict):
        return None
    return _Timing(_str(value.get("started_at")), _str(value.get("finished_at")))


def _step(value: dict) -> _Step:
    return _Step(
        step_name=_str(value.get("step_name")) or "",
        agent_result=_context(value.get("agent_result")),
        verifier_result=_raw(value, "verifier_result"),
        exception_info=_exception(value.get("exception_info")),
        agent_execution=_timing_of(value.get("agent_execution")),
        verifier=_timing_of(value.get("verifier")),
    )
