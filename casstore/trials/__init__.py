"""Harbor job trees and saved trials: import, records, reward tables (README, §5 Trials and import).

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
  ``reward_table``, ``trial_records``, ``evidence`` (see :mod:`casstore.trials.stored`).

Modules, by verb: :mod:`~casstore.trials.find` (job directories), :mod:`~casstore.trials.files`
(job-level files), :mod:`~casstore.trials.identity` (job ids), :mod:`~casstore.trials.parse`
(one result.json), :mod:`~casstore.trials.rules` (a trial's flags, failure code, attempt,
agent label; counts), :mod:`~casstore.trials.chunk` (one chunk of trial directories),
:mod:`~casstore.trials.workers` (the chunks, in parallel), :mod:`~casstore.trials.merge` (chunks
into a job and its table), :mod:`~casstore.trials.drift` (Harbor schema drift),
:mod:`~casstore.trials.read` (``read_job``), :mod:`~casstore.trials.table` (tables of records),
:mod:`~casstore.trials.evidence`, :mod:`~casstore.trials.records`, :mod:`~casstore.trials.saved`,
:mod:`~casstore.trials.trace` (ATIF trajectories as agent-trace steps);
the store's side: :mod:`~casstore.trials.importing` (the import), :mod:`~casstore.trials.adopt`
(a job stored under a former id), :mod:`~casstore.trials.stream` (a new job written while
parsed), :mod:`~casstore.trials.write` (a parsed job stored), :mod:`~casstore.trials.packs`
(trial packs), :mod:`~casstore.trials.stored` (reads), :mod:`~casstore.trials.stored_evidence`
(evidence reads), :mod:`~casstore.trials.check` (fsck).
"""

from casstore.table.codes import FailureCode
from casstore.trials.find import find_jobs
from casstore.trials.imported import ImportedJob
from casstore.trials.jobstore import Jobs
from casstore.trials.parse import parse_result
from casstore.trials.read import read_job
from casstore.trials.records import (
    REWARD_KEY_METADATA,
    ImportReport,
    JobRecord,
    StepRecord,
    TrialRecord,
)
from casstore.trials.saved import read_trials_jsonl, write_trials_jsonl
from casstore.trials.table import assign_attempts, table_from_records
from casstore.trials.verdict import rewards_verdict

__all__ = [
    "REWARD_KEY_METADATA",
    "FailureCode",
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
