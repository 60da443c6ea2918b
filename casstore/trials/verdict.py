"""Harbor's verdict on a trial's ``verifier_result``: is there one, is its reward mapping valid,
and what are the rewards and how was each written.

Reward validity is decided by Harbor's own model: the raw ``verifier_result`` object is
validated with ``harbor.models.verifier.result.VerifierResult.model_validate_json`` (cached by
its bytes), exactly the validation Harbor's ``TrialResult`` applies to that field. Its output
is the reward mapping we keep. A mapping of plain JSON numbers skips the model (the same
verdict, cheaper).
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
from pydantic import ValidationError

from casstore.table.columns import Kind

__all__ = ["rewards_verdict"]

# plain ints (the kinds dicts a record holds are msgpack-encoded per trial)
_NUMBER, _NONFINITE, _BOOLEAN = int(Kind.NUMBER), int(Kind.NONFINITE), int(Kind.BOOLEAN)
_INT64 = (-(1 << 63), (1 << 63) - 1)
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
    return True, rewards, dict.fromkeys(rewards, _NUMBER), None


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
            kinds[key] = _BOOLEAN
        elif isinstance(stored, float) and not math.isfinite(stored):
            kinds[key] = _NONFINITE
        else:
            kinds[key] = _NUMBER
    return True, rewards, kinds, None


def _written_rewards(raw: bytes) -> dict[str, Any]:
    """The rewards object as written (to tell Booleans apart); last duplicate wins."""
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        data = json.loads(raw)
    rewards = data.get("rewards") if isinstance(data, dict) else None
    return rewards if isinstance(rewards, dict) else {}
