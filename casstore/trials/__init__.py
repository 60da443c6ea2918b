"""Harbor job trees and saved trials: import, records, reward tables (SPEC section 4, Trials).

The contract the scoring engine codes against:

* :func:`read_job` ``(path, reward_key="reward") -> ImportedJob``: parse one job directory,
  no store (``job_id``, ``record``, ``trials``, ``table``, ``diagnostics``,
  ``failure_codes``);
* :func:`find_jobs` ``(paths) -> list[Path]``: each path a job directory or a directory of
  job directories (nothing deeper; UsageError for anything else);
* :func:`read_trials_jsonl` ``(path) -> (reward_key, records)`` and
  :func:`write_trials_jsonl` ``(records, path)``: saved trials;
* :func:`table_from_records` ``(records, reward_key) -> RewardTable``;
* in a store: :class:`Jobs` ``(store)``: ``import_jobs``, ``list``, ``get``,
  ``reward_table``, ``trial_records``, ``evidence`` (see :mod:`casstore.trials.store`).
"""

from casstore.trials.jobs import (
    ImportedJob,
    assign_attempts,
    find_jobs,
    read_job,
    table_from_records,
)
from casstore.trials.jobstore import Jobs
from casstore.trials.parse import parse_result
from casstore.trials.records import (
    FAILURE_CODES,
    REWARD_KEY_METADATA,
    ImportReport,
    JobRecord,
    StepRecord,
    TrialRecord,
)
from casstore.trials.saved import read_trials_jsonl, write_trials_jsonl
from casstore.trials.verdict import rewards_verdict

__all__ = [
    "FAILURE_CODES",
    "REWARD_KEY_METADATA",
    "ImportReport",
    "ImportedJob",
    "JobRecord",
    "Jobs",
    "StepRecord",
    "TrialRecord",
    "assign_attempts",
    "find_jobs",
    "parse_result",
    "read_job",
    "read_trials_jsonl",
    "rewards_verdict",
    "table_from_records",
    "write_trials_jsonl",
]
