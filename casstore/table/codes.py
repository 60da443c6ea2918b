"""Failure codes: why an attempt (or a job's import) is not a clean scored trial.

One code per trial at most, in the priority order below (the first that applies); the job
codes are counted once per job. The import decides them (:mod:`casstore.trials.rules`), the
reward table's ``failure`` column carries a trial's code, and the scoring engine rolls them up
(``failure_rollup.failure_codes``); member order is the order every report lists them in.

==============================  =========================================================
``reward_mapping_invalid``      the reward mapping fails Harbor's ``VerifierResult`` (null,
                                non-numeric string, list, object, ...): not scoreable
``verifier_result_missing``     ``verifier_result`` (or its ``rewards``) is null or absent
``trial_exception``             Harbor recorded ``exception_info`` (the reward may survive)
``result_unreadable``           a trial directory whose result.json is missing or cannot be
                                parsed (as for Harbor's loader: not a JSON object, no string
                                task_name/trial_name, a lone surrogate in a string):
                                counted, never a record or a table row
``job_result_missing_partial``  (job) the job-level result.json is missing or unreadable
                                but trial files were imported
``trial_count_mismatch``        (job) trials found differ from what lock.json/result.json/
                                config.json expected
``launcher_failed``             (job) ``casstore run``'s launcher says Harbor failed
                                (``launcher_result.json``: outcome ``failed``)
``job_result_missing``          (job) a job ``casstore run`` launched has no job result.json
                                and no trial evidence to import
``cancelled``                   (job) ``casstore run`` cancelled the job (``cancelled.json``):
                                its trials are aborted evidence
==============================  =========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = ["FailureCode", "NamedCode", "ordered_counts"]


class NamedCode(StrEnum):
    """A code whose value is its JSON name, and which reads as that name everywhere: ``str``,
    f-strings, JSON and ``repr`` (a report's dict of codes prints as it did with plain
    strings). The base of :class:`FailureCode` and of the import's diagnostic codes."""

    def __repr__(self) -> str:
        return repr(self.value)


class FailureCode(NamedCode):
    """A failure code (see the module docstring); its value is the JSON name."""

    REWARD_MAPPING_INVALID = "reward_mapping_invalid"
    VERIFIER_RESULT_MISSING = "verifier_result_missing"
    TRIAL_EXCEPTION = "trial_exception"
    RESULT_UNREADABLE = "result_unreadable"
    JOB_RESULT_MISSING_PARTIAL = "job_result_missing_partial"
    TRIAL_COUNT_MISMATCH = "trial_count_mismatch"
    LAUNCHER_FAILED = "launcher_failed"
    JOB_RESULT_MISSING = "job_result_missing"
    CANCELLED = "cancelled"


def ordered_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` (code → number) with the codes that occur, in :class:`FailureCode` order,
    as plain strings."""
    return {code.value: counts[code] for code in FailureCode if counts.get(code)}
