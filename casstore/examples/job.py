"""An example Harbor job tree, written with Harbor's own models (for the demo and the tests).

``write_example_job`` lays out what ``harbor run`` leaves behind: the job's ``config.json``
(Harbor's ``JobConfig``), its ``result.json`` (Harbor's ``JobResult`` with the metric Harbor's
own ``Mean`` computes) and one directory per trial with ``result.json`` (Harbor's
``TrialResult``) and ``verifier/reward.txt``. The outcomes are drawn from a seeded generator,
so the same arguments give the same files; they include what real jobs hold: failures, an
agent timeout that still has a reward, a trial without a verifier result, and a task with a
secondary reward key.

``local_trial_result`` is the ``TrialResult`` of one trial of a local task, which the tests'
and the benchmarks' job builders use too.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harbor.models.trial.result import TrialResult

__all__ = ["local_trial_result", "write_example_job"]

_START = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
_AGENT, _VERSION, _MODEL = "terminus-2", "2.0.0", "claude-haiku-4-5"
_SOURCE = "casstore-demo"


def write_example_job(
    dest: Path,
    tasks: Sequence[str],
    attempts: int = 5,
    seed: int = 7,
    name: str = "demo-job",
) -> Path:
    """Write the job ``dest/name`` with ``attempts`` trials per task name in ``tasks``.

    Returns the job directory. Trial ``i`` of task ``t`` is ``<t>__<i>``; rewards are 0 or 1
    (success chance differs per task); the first task also reports a ``style`` reward.
    """
    from harbor.metrics.mean import Mean
    from harbor.models.job.config import JobConfig
    from harbor.models.job.result import AgentDatasetStats, JobResult, JobStats

    job = dest / name
    job.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    results: list[TrialResult] = []
    for index, task in enumerate(tasks):
        chance = 0.8 - 0.25 * index
        for attempt in range(attempts):
            outcome = _outcome(rng, chance, first_task=index == 0, slot=(index, attempt))
            result = _trial(task, f"{task}__{attempt}", outcome, len(results))
            _write_trial(job / result.trial_name, result)
            results.append(result)
    config = JobConfig(job_name=name, n_attempts=attempts)
    (job / "config.json").write_text(config.model_dump_json(indent=4))
    rewards = [r.verifier_result.rewards if r.verifier_result else None for r in results]
    errors = sum(r.exception_info is not None for r in results)
    evals = AgentDatasetStats(
        n_trials=len(results), n_errors=errors, metrics=[Mean().compute(rewards)]
    )
    summary = JobResult(
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"casstore-demo/{name}/{seed}"),
        started_at=_START,
        finished_at=_START + timedelta(minutes=len(results)),
        n_total_trials=len(results),
        stats=JobStats(
            n_completed_trials=len(results),
            n_errored_trials=errors,
            evals={JobStats.format_agent_evals_key(_AGENT, _MODEL, _SOURCE): evals},
        ),
    )
    (job / "result.json").write_text(summary.model_dump_json(indent=4))
    return job


def local_trial_result(
    task: str,
    trial: str,
    trials_dir: str,
    agent: str,
    model_name: str | None,
    *,
    uri: str | None = None,
    checksum: str = "0" * 64,
    job_id: str | None = None,
    **fields: Any,
) -> TrialResult:
    """Harbor's ``TrialResult`` of trial ``trial`` of the local task ``tasks/<task>``, run by
    the agent ``agent`` (model ``model_name``) in the folder ``trials_dir``, its URI
    ``file:///<trials_dir>/<trial>`` unless ``uri`` is given. ``fields`` are the result's other
    fields (``source``, ``agent_info``, ``verifier_result``, timings...); Harbor validates all.
    """
    from harbor.models.task.id import LocalTaskId
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
    from harbor.models.trial.result import TrialResult

    return TrialResult(
        task_name=task,
        trial_name=trial,
        trial_uri=uri or f"file:///{trials_dir}/{trial}",
        task_id=LocalTaskId(path=Path(f"tasks/{task}")),
        task_checksum=checksum,
        config=TrialConfig(
            task=TaskConfig(path=Path(f"tasks/{task}")),
            trial_name=trial,
            trials_dir=Path(trials_dir),
            agent=AgentConfig(name=agent, model_name=model_name),
            job_id=job_id,
        ),
        **fields,
    )


def _outcome(rng: random.Random, chance: float, first_task: bool, slot: tuple[int, int]) -> dict:
    rewards = {"reward": 1.0 if rng.random() < chance else 0.0}
    if first_task:
        rewards["style"] = round(rng.uniform(0.5, 1.0), 2)
    if slot == (2, 1):
        return {"rewards": None, "exception": "NonZeroAgentExitCodeError"}
    return {"rewards": rewards, "exception": "AgentTimeoutError" if slot == (1, 2) else None}


def _trial(task: str, trial: str, outcome: dict, position: int) -> TrialResult:
    from harbor.models.agent.context import AgentContext
    from harbor.models.trial.result import AgentInfo, ExceptionInfo, ModelInfo, TimingInfo
    from harbor.models.verifier.result import VerifierResult

    start = _START + timedelta(minutes=position)
    end = start + timedelta(seconds=50)
    rewards, exception = outcome["rewards"], outcome["exception"]
    return local_trial_result(
        task,
        trial,
        "jobs/demo-job",
        _AGENT,
        f"anthropic/{_MODEL}",
        source=_SOURCE,
        agent_info=AgentInfo(
            name=_AGENT, version=_VERSION, model_info=ModelInfo(name=_MODEL, provider="anthropic")
        ),
        agent_result=AgentContext(n_input_tokens=12000, n_output_tokens=900, cost_usd=0.02),
        verifier_result=VerifierResult(rewards=rewards) if rewards is not None else None,
        exception_info=ExceptionInfo(
            exception_type=exception,
            exception_message=f"{exception} in {trial}",
            exception_traceback="Traceback (most recent call last): ...",
            occurred_at=end,
        )
        if exception
        else None,
        started_at=start,
        finished_at=end,
        agent_execution=TimingInfo(started_at=start, finished_at=end),
    )


def _write_trial(directory: Path, result: TrialResult) -> None:
    (directory / "verifier").mkdir(parents=True, exist_ok=True)
    (directory / "result.json").write_text(result.model_dump_json(indent=4))
    (directory / "config.json").write_text(result.config.model_dump_json(indent=4))
    rewards = result.verifier_result.rewards if result.verifier_result else None
    if rewards is not None:
        (directory / "verifier" / "reward.txt").write_text(f"{rewards['reward']}\n")
