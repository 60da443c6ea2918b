"""Records of imported Harbor trials and jobs (msgspec Structs, msgpack-serializable).

A :class:`TrialRecord` is one attempt: one trial directory's ``result.json`` reduced to what
scoring and reporting need, plus a reference to the raw file kept (zstd-compressed) as
evidence. A :class:`JobRecord` is one Harbor job directory. Both convert to plain builtins
with :func:`to_builtins` (what the store's LMDB index packs) and back with :func:`from_builtins`.

Failure codes (a trial's ``failure``, a job's ``failure_codes``) are
:class:`~casstore.table.codes.FailureCode` (see :mod:`casstore.table.codes`); the other codes
of a job's ``diagnostics`` are :class:`Diagnostic`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import msgspec

from casstore.table.codes import NamedCode
from casstore.table.columns import RewardTable
from casstore.trials.rules import agent_label

__all__ = [
    "MAX_JOB_ID_BYTES",
    "REWARD_KEY_METADATA",
    "Diagnostic",
    "ImportReport",
    "JobRecord",
    "StepRecord",
    "TrialRecord",
    "from_builtins",
    "job_id_problem",
    "label_record",
    "record_reward_key",
    "to_builtins",
]

REWARD_KEY_METADATA = "harbor_primary_reward_key"

MAX_JOB_ID_BYTES = 256
"""The longest job id, in UTF-8 bytes (store keys are ``<job id>/...``; LMDB's hold 511)."""


def job_id_problem(job_id: str) -> str | None:
    """Why ``job_id`` cannot name a job in a store (empty, not valid Unicode text, longer
    than :data:`MAX_JOB_ID_BYTES`), or None."""
    try:
        size = len(job_id.encode())
    except UnicodeEncodeError:
        return "the job id is not valid Unicode text"
    if not size:
        return "the job id is empty"
    if size > MAX_JOB_ID_BYTES:
        return f"the job id is {size} bytes, more than {MAX_JOB_ID_BYTES}"
    return None


class Diagnostic(NamedCode):
    """The codes of a job's diagnostics that are not failure codes (those are
    :class:`~casstore.table.codes.FailureCode`); the value is the JSON name."""

    DUPLICATE_TRIAL_NAME = "duplicate_trial_name"  # a trial name given by two directories
    HARBOR_SCHEMA_DRIFT = "harbor_schema_drift"  # see casstore.trials.drift
    JOB_FILE_UNREADABLE = "job_file_unreadable"  # a job-level file there but not read


Timing = tuple[str | None, str | None]
"""``(started_at, finished_at)`` ISO strings as Harbor wrote them."""


class StepRecord(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One step of a multi-step trial (Harbor's ``StepResult``).

    ``rewards``/``kinds`` as for the trial; ``valid`` False (with ``reason``) when the step's
    reward mapping fails Harbor's ``VerifierResult`` (which makes the whole attempt invalid).
    """

    step_name: str
    rewards: dict[str, float | int] | None = None
    kinds: dict[str, int] = {}
    has_verifier: bool = False
    valid: bool = True
    reason: str | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class TrialRecord(msgspec.Struct, omit_defaults=True, gc=False):
    """One attempt of a task, from a trial's ``result.json``.

    Identity: ``job_id``, ``trial_name``, ``task_name``, ``attempt`` (0-based index within
    its task: the task's trials sorted by ``started_at`` then ``trial_name``), Harbor's
    ``trial_id`` (UUID string) when present.

    Labels: ``source`` (Harbor's dataset/source), ``agent_name``, ``agent_version``,
    ``model_name`` (``agent_info.model_info.name``, as Harbor's evals keys take it: never
    ``config.agent.model_name``),
    ``model_provider``.

    Rewards: ``rewards`` is the mapping exactly as Harbor's ``VerifierResult`` coerces it
    (``true`` → ``1.0``, ``"0.5"`` → ``0.5``, ``NaN`` literal → nan, ints kept), ``None`` when
    the verifier result is missing or the mapping is invalid; ``kinds`` maps each key to a
    :class:`casstore.table.columns.Kind` value (how it was written); ``has_verifier`` False when
    ``verifier_result`` or its ``rewards`` is null/absent; ``valid`` False with ``reason``
    when Harbor's model rejects the mapping (then no reward is kept).

    Errors: ``exception_type``, ``exception_message``, ``exception_at``; ``failure`` is the
    trial's failure code (a :class:`~casstore.table.codes.FailureCode`) or None.

    Timings (``(started_at, finished_at)`` ISO strings): ``started_at``, ``finished_at``,
    ``environment_setup``, ``agent_setup``, ``agent_execution``, ``verifier``.
    Totals (Harbor's ``compute_token_cost_totals``): ``n_input_tokens``, ``n_cache_tokens``,
    ``n_output_tokens``, ``cost_usd``. ``steps``: one :class:`StepRecord` per step of a
    multi-step trial, else None.

    Evidence: ``evidence`` is the key of the raw result.json bytes kept in the store's
    ``evidence`` database (``sha256:<hex>`` of the stored entry, see
    :mod:`casstore.trials.evidence`), ``evidence_bytes`` their size, ``evidence_dict`` the id of
    the zstd dictionary it was compressed with (None: plain zstd); ``result_path`` where it
    was read. ``metadata["harbor_primary_reward_key"]`` is the primary reward key.
    ``trace``: the evidence reference of the trial's ATIF trajectory (``agent/trajectory.json``
    or ``artifacts/trajectory.json``, kept in the same evidence pack; schema 5), None when the
    trial has none (or was imported before schema 5).
    """

    job_id: str
    trial_name: str
    task_name: str
    attempt: int = 0
    trial_id: str | None = None
    source: str | None = None
    agent_name: str = ""
    agent_version: str = ""
    model_name: str | None = None
    model_provider: str | None = None
    rewards: dict[str, float | int] | None = None
    kinds: dict[str, int] = {}
    has_verifier: bool = False
    valid: bool = True
    reason: str | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    exception_at: str | None = None
    failure: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment_setup: Timing | None = None
    agent_setup: Timing | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    steps: list[StepRecord] | None = None
    evidence: str | None = None
    evidence_bytes: int = 0
    evidence_dict: str | None = None
    result_path: str | None = None
    metadata: dict[str, str] = {}
    trace: str | None = None

    @property
    def agent_label(self) -> str:
        """``"name@version"`` (the reward table's ``agent`` label)."""
        return agent_label(self.agent_name, self.agent_version)

    @property
    def reward_key(self) -> str | None:
        """``metadata["harbor_primary_reward_key"]`` or None."""
        return self.metadata.get(REWARD_KEY_METADATA)

    @property
    def job_dir(self) -> str | None:
        """The job directory the trial was read from (``result_path``'s grandparent), or
        None without a ``result_path``."""
        if not self.result_path:
            return None
        return os.path.dirname(os.path.dirname(self.result_path))


class JobRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One imported Harbor job.

    ``job_id`` (Harbor's id of the job, else ``sha256:`` of the directory name and
    config.json: see :mod:`casstore.trials.identity`), ``name`` (default the directory name),
    ``path`` (absolute, at import),
    ``reward_key`` the table was built with, ``harbor_version`` (lock.json), ``started_at``/
    ``finished_at`` (job result.json), ``expected_trials`` (lock.json, result.json or
    config.json; None if unknown) and where it came from (``expected_from``), ``trials``
    (records stored), ``trial_names`` (sorted), ``recorded_metrics`` (Harbor's own
    ``stats.evals[*].metrics`` from result.json), ``agents``/``models``/``datasets`` labels,
    ``dictionary`` (zstd dictionary id or None), ``failure_codes`` (code → count),
    ``diagnostics``, ``imported_at``; ``aliases``: the ids and names of jobs stored before
    under a former id of the job's directory and adopted by it (they still resolve to it, see
    :mod:`casstore.trials.adopt`); ``pack_checksums``: its trial packs carry a CRC-32 each
    (every job written by schema 4; one written before gets them at its next import).
    """

    job_id: str
    name: str
    path: str | None = None
    reward_key: str = "reward"
    harbor_version: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    expected_trials: int | None = None
    expected_from: str | None = None
    trials: int = 0
    trial_names: list[str] = []
    recorded_metrics: dict[str, Any] = {}
    agents: list[str] = []
    models: list[str] = []
    datasets: list[str] = []
    dictionary: str | None = None
    failure_codes: dict[str, int] = {}
    diagnostics: list[dict[str, Any]] = []
    imported_at: str | None = None
    aliases: list[str] = []
    pack_checksums: bool = False


class ImportReport(msgspec.Struct, kw_only=True):
    """What one job's import did: the ``casstore import --json`` object.

    ``job`` (job id), ``name``, ``trials`` (records of the job now stored), ``imported`` (new
    this run), ``counts`` (the breakdown of the job's attempts ``casstore rescore`` prints too:
    :func:`scoring.count_attempts`, filled by :func:`casstore.import_jobs`, a layer above this
    one; empty from ``Jobs(store).import_jobs``), ``failure_codes``, ``diagnostics``; and the
    trials' flag counts, which may overlap (``invalid``, ``exceptions``, ``no_verifier``:
    :func:`casstore.trials.rules.counts`; not in the JSON, whose ``counts`` say it once).
    """

    job: str
    name: str
    trials: int
    imported: int
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    invalid: int
    exceptions: int
    no_verifier: int
    failure_codes: dict[str, int]
    diagnostics: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object (keys: job, trials, imported, counts, failure_codes,
        diagnostics)."""
        data = msgspec.to_builtins(self)
        for flag in ("name", "invalid", "exceptions", "no_verifier"):
            data.pop(flag)
        return data


def label_record(record: JobRecord, table: RewardTable) -> None:
    """Set a job record's ``agents``, ``models`` and ``datasets``: the labels of its reward
    table, without the empty one."""
    record.agents = [a for a in table.agents if a]
    record.models = [m for m in table.models if m]
    record.datasets = [d for d in table.datasets if d]


def record_reward_key(records: Iterable[TrialRecord], reward_key: str) -> None:
    """Set ``metadata["harbor_primary_reward_key"]`` on every record."""
    for r in records:
        if r.metadata.get(REWARD_KEY_METADATA) != reward_key:
            r.metadata = {**r.metadata, REWARD_KEY_METADATA: reward_key}


def to_builtins(record: msgspec.Struct) -> Any:
    """A record as msgpack-able builtins (NaN rewards stay floats)."""
    return msgspec.to_builtins(record)


def from_builtins[T](data: Any, cls: type[T]) -> T:
    """Inverse of :func:`to_builtins` (raises ``msgspec.ValidationError`` on a bad shape)."""
    return msgspec.convert(data, cls, strict=False)
