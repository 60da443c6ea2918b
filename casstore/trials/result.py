"""The part of Harbor's trial ``result.json`` (``TrialResult``) the import reads.

:data:`DECODER` decodes it fast: a partial typed msgspec decode of only the fields scoring and
reporting need (unknown fields ignored), with ``verifier_result`` kept as raw JSON bytes. Files
msgspec refuses (NaN/Infinity literals, unexpected types in a field we read) go through the
standard library ``json`` and a lenient extraction instead (:func:`lenient`); both give the
same :class:`Result`.

A file with a lone UTF-16 surrogate in a string (an escape such as ``\\ud800`` without its other
half, or a surrogate's UTF-8 bytes) is unreadable, as it is for Harbor's own loader: a Python
string holding one cannot be encoded to UTF-8 again. Only files holding a backslash and such an
escape (a cheap scan, :data:`SURROGATE_ESCAPE`) get the check that tells a lone surrogate
from a pair (:func:`refuse_lone_surrogates`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

__all__ = [
    "ABSENT",
    "DECODER",
    "SURROGATE_ESCAPE",
    "AgentContext",
    "AgentInfo",
    "ExceptionInfo",
    "ModelInfo",
    "Result",
    "ResultUnreadable",
    "Step",
    "TimingInfo",
    "lenient",
    "refuse_lone_surrogates",
]


class ResultUnreadable(Exception):
    """result.json cannot be read as a trial result (message: why, one line)."""


class TimingInfo(msgspec.Struct, gc=False):
    """Harbor's ``TimingInfo``: when a phase started and finished (ISO strings)."""

    started_at: str | None = None
    finished_at: str | None = None


class ExceptionInfo(msgspec.Struct, gc=False):
    """Harbor's ``ExceptionInfo``: the exception a trial (or step) recorded."""

    exception_type: str | None = None
    exception_message: str | None = None
    occurred_at: str | None = None


class ModelInfo(msgspec.Struct, gc=False):
    """Harbor's ``ModelInfo``: the model an agent ran."""

    name: str | None = None
    provider: str | None = None


class AgentInfo(msgspec.Struct, gc=False):
    """Harbor's ``AgentInfo``: the agent, its version and model."""

    name: str | None = None
    version: str | None = None
    model_info: ModelInfo | None = None


class AgentContext(msgspec.Struct, gc=False):
    """Harbor's ``AgentContext``: the tokens and cost an agent used."""

    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


ABSENT = msgspec.Raw(b"")
"""The raw value of a field absent from the file."""


class Step(msgspec.Struct, gc=False):
    """One of Harbor's ``step_results`` of a multi-step trial."""

    step_name: str = ""
    agent_result: AgentContext | None = None
    verifier_result: msgspec.Raw = ABSENT
    exception_info: ExceptionInfo | None = None
    agent_execution: TimingInfo | None = None
    verifier: TimingInfo | None = None


class Result(msgspec.Struct, gc=False):
    """The fields of Harbor's ``TrialResult`` the import reads (``verifier_result`` raw)."""

    task_name: str
    trial_name: str
    id: str | None = None
    source: str | None = None
    agent_info: AgentInfo | None = None
    agent_result: AgentContext | None = None
    verifier_result: msgspec.Raw = ABSENT
    exception_info: ExceptionInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: TimingInfo | None = None
    agent_setup: TimingInfo | None = None
    agent_execution: TimingInfo | None = None
    verifier: TimingInfo | None = None
    step_results: list[Step] | None = None


DECODER = msgspec.json.Decoder(Result)
"""The fast decoder of a result.json (``msgspec`` errors for what :func:`lenient` reads)."""


# lone surrogates ----------------------------------------------------------------------------

# An escape of a UTF-16 surrogate (U+D800..U+DFFF), any case: the files that need the check.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# An escaped backslash (consumed, so that ``\\ud800`` is not read as an escape) or a
# surrogate escape, its hex digits captured.
_BACKSLASHES_OR_SURROGATE = re.compile(rb"\\\\|\\u([dD][89a-fA-F][0-9a-fA-F]{2})")
LONE_SURROGATE = "lone surrogate in a string (not valid Unicode)"
ENCODED_SURROGATE = "a surrogate written as UTF-8 bytes (not valid UTF-8)"


def refuse_lone_surrogates(data: bytes) -> None:
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


def lenient(data: bytes) -> Result:
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
        if not utf8:  # UTF-16/32: the scan before decoding saw other bytes
            refuse_lone_surrogates(encoded)
    if not isinstance(obj, dict):
        raise ResultUnreadable("not a JSON object")
    task_name, trial_name = obj.get("task_name"), obj.get("trial_name")
    if not isinstance(task_name, str) or not isinstance(trial_name, str):
        raise ResultUnreadable("task_name and trial_name must be strings")
    steps = obj.get("step_results")
    return Result(
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
        return ABSENT
    return msgspec.Raw(json.dumps(obj[key], allow_nan=True).encode())


def _agent_info(value: Any) -> AgentInfo | None:
    if not isinstance(value, dict):
        return None
    model = value.get("model_info")
    return AgentInfo(
        name=_str(value.get("name")),
        version=_str(value.get("version")),
        model_info=ModelInfo(name=_str(model.get("name")), provider=_str(model.get("provider")))
        if isinstance(model, dict)
        else None,
    )


def _context(value: Any) -> AgentContext | None:
    if not isinstance(value, dict):
        return None
    return AgentContext(
        n_input_tokens=_int(value.get("n_input_tokens")),
        n_cache_tokens=_int(value.get("n_cache_tokens")),
        n_output_tokens=_int(value.get("n_output_tokens")),
        cost_usd=_float(value.get("cost_usd")),
    )


def _exception(value: Any) -> ExceptionInfo | None:
    if not isinstance(value, dict):
        return None
    return ExceptionInfo(
        exception_type=_str(value.get("exception_type")) or "",
        exception_message=_str(value.get("exception_message")),
        occurred_at=_str(value.get("occurred_at")),
    )


def _timing_of(value: Any) -> TimingInfo | None:
    if not isinstance(value, dict):
        return None
    return TimingInfo(_str(value.get("started_at")), _str(value.get("finished_at")))


def _step(value: dict) -> Step:
    return Step(
        step_name=_str(value.get("step_name")) or "",
        agent_result=_context(value.get("agent_result")),
        verifier_result=_raw(value, "verifier_result"),
        exception_info=_exception(value.get("exception_info")),
        agent_execution=_timing_of(value.get("agent_execution")),
        verifier=_timing_of(value.get("verifier")),
    )
