"""The rules of a trial, each written once: its flags, failure code, attempt, agent label, and
the counts of a job's trials.

Every path that needs one (parsing a result.json, packing a chunk of trials, merging chunks,
building a table from saved records, the store's import report) calls these; none keeps its
own copy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from casstore.table.codes import FailureCode
from casstore.table.columns import Flag

__all__ = [
    "LAUNCH_MESSAGES",
    "agent_label",
    "attempt_order",
    "counts",
    "failure_code",
    "flags",
    "launch_codes",
]

_EXCEPTION, _NO_VERIFIER, _INVALID = int(Flag.EXCEPTION), int(Flag.NO_VERIFIER), int(Flag.INVALID)
_INVALID_MAPPING = FailureCode.REWARD_MAPPING_INVALID
_NO_VERIFIER_RESULT = FailureCode.VERIFIER_RESULT_MISSING
_TRIAL_EXCEPTION = FailureCode.TRIAL_EXCEPTION


def flags(valid: bool, has_verifier: bool, exception_type: str | None) -> int:
    """A trial's :class:`~casstore.table.columns.Flag` bits (an int): INVALID when its reward
    mapping is invalid, NO_VERIFIER without a verifier result, EXCEPTION when Harbor recorded
    an exception."""
    return (
        (not valid) * _INVALID
        | (not has_verifier) * _NO_VERIFIER
        | (exception_type is not None) * _EXCEPTION
    )


def failure_code(valid: bool, has_verifier: bool, exception_type: str | None) -> FailureCode | None:
    """A trial's failure code, the first that applies in priority order: an invalid reward
    mapping, a missing verifier result, an exception; None for a clean trial."""
    if not valid:
        return _INVALID_MAPPING
    if not has_verifier:
        return _NO_VERIFIER_RESULT
    if exception_type is not None:
        return _TRIAL_EXCEPTION
    return None


LAUNCH_MESSAGES = {
    FailureCode.LAUNCHER_FAILED: "the launcher says Harbor failed (launcher_result.json)",
    FailureCode.JOB_RESULT_MISSING: "no job result.json and no trial evidence to import",
    FailureCode.CANCELLED: "the job was cancelled (cancelled.json): its trials are aborted",
}
"""The diagnostic message of each job code :func:`launch_codes` gives."""


def launch_codes(
    launcher: Any, cancelled: bool, job_result: bool, imported: bool
) -> list[FailureCode]:
    """The job codes of a job ``casstore run`` launched (``launcher``: its
    launcher_result.json, decoded; None when there is none: no code but ``cancelled``):
    ``cancelled`` when cancelled.json is there, ``launcher_failed`` when the launcher's
    outcome is ``failed``, ``job_result_missing`` when the job has no ``job_result`` and
    nothing was ``imported`` of its trials."""
    found = [FailureCode.CANCELLED] if cancelled else []
    if isinstance(launcher, dict):
        if launcher.get("outcome") == "failed":
            found.append(FailureCode.LAUNCHER_FAILED)
        if not job_result and not imported:
            found.append(FailureCode.JOB_RESULT_MISSING)
    return found


def attempt_order[T: Hashable](
    tasks: Sequence[T], starts: Sequence[Any], names: Sequence[str]
) -> tuple[list[int], list[int], list[tuple[T, int, int]]]:
    """The attempt rule: rows sorted by task, then start (``started_at``, missing: ``""``),
    then trial name (equal rows keep their order); a row's attempt is its index within its
    task in that order.

    Returns ``(order, attempts, segments)``: the row indices in that order, each row's
    attempt (by row) and the ``(task, start, stop)`` ranges of ``order`` holding each task's
    rows, tasks sorted. ``tasks`` may be any sortable keys (e.g. ``(job id, task)`` pairs).
    """
    keys = sorted(zip(tasks, starts, names, range(len(names)), strict=True))  # equal rows: in order
    order = [key[3] for key in keys]
    attempts = [0] * len(names)
    segments: list[tuple[T, int, int]] = []
    previous: Any = None  # (a task is never None)
    attempt = start = 0
    for row, key in enumerate(keys):
        task = key[0]
        if task != previous:
            if previous is not None:
                segments.append((previous, start, row))
            previous, attempt, start = task, 0, row
        else:
            attempt += 1
        attempts[key[3]] = attempt
    if previous is not None:
        segments.append((previous, start, len(order)))
    return order, attempts, segments


def agent_label(name: str, version: str) -> str:
    """The reward table's ``agent`` label: ``"name@version"``."""
    return f"{name}@{version}"


def counts(flag_column: np.ndarray) -> dict[str, int]:
    """``{"trials", "invalid", "exceptions", "no_verifier"}``: the number of trials (rows of
    the uint8 ``flags`` column) and of those with each flag. ``exceptions`` counts trials with
    an exception recorded (the import report calls it ``errored``)."""
    return {
        "trials": len(flag_column),
        "invalid": int(np.count_nonzero(flag_column & _INVALID)),
        "exceptions": int(np.count_nonzero(flag_column & _EXCEPTION)),
        "no_verifier": int(np.count_nonzero(flag_column & _NO_VERIFIER)),
    }
