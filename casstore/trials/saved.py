"""Saved trials: ``trials.jsonl``, one JSON object per trial (a :class:`TrialRecord`).

Every object carries ``metadata["harbor_primary_reward_key"]``; a file where it is missing or
differs between trials is refused with the command that rebuilds it from the job directory::

    casstore export JOB_DIR -o FILE --reward-key KEY

Non-finite rewards (NaN, infinity; Kind NONFINITE) are written as the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` (JSON has no literal for them; Harbor's model coerces these
strings to the same floats) and read back as floats.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from casstore.errors import RewardKeyError, UsageError, missing_folder
from casstore.inputs import read_regular
from casstore.table.columns import Kind
from casstore.trials.records import REWARD_KEY_METADATA, TrialRecord, job_id_problem

__all__ = ["check_output", "read_trials_jsonl", "rebuild_hint", "write_trials_jsonl"]

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _encode_value(value: float | int) -> float | int | str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _rewards_out(rewards: dict[str, float | int] | None) -> dict[str, Any] | None:
    return None if rewards is None else {k: _encode_value(v) for k, v in rewards.items()}


def _rewards_in(rewards: Any) -> Any:
    if not isinstance(rewards, dict):
        return rewards
    return {k: _NONFINITE.get(v, v) if isinstance(v, str) else v for k, v in rewards.items()}


def write_trials_jsonl(records: Iterable[TrialRecord], path: Path | str) -> int:
    """Write ``records`` to ``path`` (one JSON object per line, atomically: a temporary file
    renamed; the temporary file never survives a failure); returns the number written. Raises
    :class:`UsageError` when ``path`` is a directory or its folder does not exist
    (:func:`check_output`), :class:`RewardKeyError` when a record lacks the reward-key
    metadata or records disagree on it."""
    path = Path(path)
    encoder = msgspec.json.Encoder()
    lines = []
    keys = set()
    for record in records:
        data = msgspec.to_builtins(record)
        data["rewards"] = _rewards_out(record.rewards)
        for step in data.get("steps") or []:
            step["rewards"] = _rewards_out(_rewards_in(step.get("rewards")))
        keys.add(record.metadata.get(REWARD_KEY_METADATA))
        lines.append(encoder.encode(data))
    if None in keys or len(keys) > 1:
        raise RewardKeyError(str(path), "records disagree on or lack the primary reward key")
    check_output(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for line in lines:
                handle.write(line + b"\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:  # never left behind (after the rename it no longer exists)
        Path(tmp).unlink(missing_ok=True)
    return len(lines)


def check_output(path: Path | str) -> Path:
    """``path`` as given; :class:`UsageError` naming it when a saved-trials file cannot be
    written there (a directory, a missing folder), before any work is done."""
    path = Path(path)
    absolute = Path(os.path.abspath(path))
    if absolute.is_dir():
        raise UsageError(str(path), "output is a directory; name the file")
    if not absolute.parent.is_dir():
        raise UsageError(str(path), missing_folder(path))
    return path


def rebuild_hint(job_dir: str | None, reward_key: str | None) -> str:
    """The one command that rebuilds a trials file from its job directory."""
    return (
        f"rebuild it from the job directory: casstore export {job_dir or 'JOB_DIR'} "
        f"-o FILE --reward-key {reward_key or 'KEY'}"
    )


def read_trials_jsonl(path: Path | str) -> tuple[str, list[TrialRecord]]:
    """``(reward key, records)`` of a saved-trials file (blank lines ignored).

    Raises :class:`UsageError` when the file cannot be read or is not a regular file
    (:mod:`casstore.inputs`), :class:`RewardKeyError` (exit 1)
    when a line is not a trial object, when a trial has no
    ``metadata["harbor_primary_reward_key"]``, when trials disagree on it, or when the file
    holds no trial; its message names the line and the rebuild command.
    """
    path = Path(path)
    text = read_regular(path, "cannot read")
    records: list[TrialRecord] = []
    reward_key: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = msgspec.json.decode(line)
            if not isinstance(data, dict):
                raise msgspec.ValidationError("not a JSON object")
            data["rewards"] = _rewards_in(data.get("rewards"))
            for step in data.get("steps") or []:
                if isinstance(step, dict):
                    step["rewards"] = _rewards_in(step.get("rewards"))
            record = msgspec.convert(data, TrialRecord, strict=False)
            _check_kinds(record)
            problem = job_id_problem(record.job_id)
            if problem is not None:
                raise msgspec.ValidationError(problem)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise RewardKeyError(
                f"{path}:{number}", f"not a saved trial ({error}); {rebuild_hint(None, None)}"
            ) from None
        job_dir = record.job_dir
        key = record.metadata.get(REWARD_KEY_METADATA)
        if not key:
            raise RewardKeyError(
                f"{path}:{number}",
                f"trial {record.trial_name!r} has no metadata[{REWARD_KEY_METADATA!r}]; "
                + rebuild_hint(job_dir, reward_key),
            )
        if reward_key is None:
            reward_key = key
        elif key != reward_key:
            raise RewardKeyError(
                f"{path}:{number}",
                f"trial {record.trial_name!r} has reward key {key!r}, earlier trials "
                f"{reward_key!r}; " + rebuild_hint(job_dir, reward_key),
            )
        records.append(record)
    if reward_key is None:
        raise RewardKeyError(str(path), "no saved trial in the file; " + rebuild_hint(None, None))
    return reward_key, records


def _check_kinds(record: TrialRecord) -> None:
    """Raise ``msgspec.ValidationError`` when a reward kind is not one a trial record holds
    (:class:`casstore.table.columns.Kind` MISSING..BOOLEAN)."""
    for key, kind in record.kinds.items():
        if not 0 <= kind <= Kind.BOOLEAN:
            raise msgspec.ValidationError(f"kinds[{key!r}] is {kind}, not a reward kind 0-3")
