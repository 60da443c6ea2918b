"""Harbor job trees for tests and benchmarks, written with Harbor 0.20's own models.

``trial_json(...)`` dumps a ``TrialResult`` built with Harbor's models; ``rewards_text``
replaces the verifier result's rewards with raw JSON text (shapes Harbor's model would coerce
or refuse: Booleans, numeric strings, null, NaN literals, duplicate keys). ``make_job`` lays
out a job directory (config.json, lock.json, result.json, trial dirs).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harbor.models.agent.context import AgentContext
from harbor.models.trial.result import (
    AgentInfo,
    ExceptionInfo,
    ModelInfo,
    StepResult,
    TimingInfo,
    TrialResult,
)
from harbor.models.verifier.result import VerifierResult

from casstore.examples.job import local_trial_result

BASE = datetime(2026, 1, 1, tzinfo=UTC)
_SENTINEL = "__casstore_verifier_result__"
_ABSENT = object()


def trial_result(
    task: str,
    trial: str,
    rewards: dict[str, float | int] | object | None = _ABSENT,
    *,
    verifier: bool = True,
    exception: str | None = None,
    started: int = 0,
    model: str | None = "claude-haiku",
    agent: str = "oracle",
    version: str = "1.0",
    source: str | None = "demo-ds",
    tokens: tuple[int | None, int | None, int | None, float | None] | None = (100, 10, 50, 0.25),
    steps: list[StepResult] | None = None,
    job_id: str | None = None,
) -> TrialResult:
    """A Harbor ``TrialResult`` (Harbor's own models; validation applies); ``rewards``
    defaults to ``{"reward": 1.0}``."""
    if rewards is _ABSENT:
        rewards = {"reward": 1.0}
    start = BASE + timedelta(seconds=started)
    end = start + timedelta(seconds=30)
    timing = TimingInfo(started_at=start, finished_at=end)
    context = None
    if tokens is not None and steps is None:
        context = AgentContext(
            n_input_tokens=tokens[0],
            n_cache_tokens=tokens[1],
            n_output_tokens=tokens[2],
            cost_usd=tokens[3],
        )
    return local_trial_result(
        task,
        trial,
        "jobs/j",
        agent,
        model,
        uri=f"file:///jobs/{trial}",
        job_id=job_id,
        source=source,
        agent_info=AgentInfo(
            name=agent,
            version=version,
            model_info=ModelInfo(name=model, provider="anthropic") if model else None,
        ),
        agent_result=context,
        verifier_result=VerifierResult(rewards=rewards) if verifier else None,
        exception_info=ExceptionInfo(
            exception_type=exception,
            exception_message=f"{exception} happened",
            exception_traceback="Traceback ...",
            occurred_at=end,
        )
        if exception
        else None,
        started_at=start,
        finished_at=end,
        environment_setup=timing,
        agent_setup=timing,
        agent_execution=timing,
        verifier=timing if verifier else None,
        step_results=steps,
    )


def trial_json(result: TrialResult, verifier_text: str | object | None = None) -> str:
    """``result`` as Harbor writes it (``model_dump_json(indent=4)``); ``verifier_text``
    (raw JSON, e.g. ``'{"rewards": {"reward": NaN}}'``) replaces ``verifier_result``;
    :data:`ABSENT` removes the key."""
    text = result.model_dump_json(indent=4)
    if verifier_text is None:
        return text
    data = json.loads(text)
    if verifier_text is _ABSENT:
        del data["verifier_result"]
        return json.dumps(data, indent=4)
    data["verifier_result"] = _SENTINEL
    return json.dumps(data, indent=4).replace(f'"{_SENTINEL}"', str(verifier_text))


ABSENT = _ABSENT


def write_trial(job_dir: Path, name: str, text: str | None) -> Path:
    """A trial directory with ``result.json`` (``text``; None: none) and a config.json."""
    trial_dir = job_dir / name
    trial_dir.mkdir(parents=True, exist_ok=True)
    (trial_dir / "config.json").write_text(json.dumps({"trial_name": name, "task": {}}))
    if text is not None:
        (trial_dir / "result.json").write_text(text)
    return trial_dir


def make_job(
    job_dir: Path,
    trials: dict[str, str | None],
    *,
    job_id: str | None = "11111111-2222-3333-4444-555555555555",
    expected: int | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    """A job directory: config.json (job_name), lock.json (``expected`` trials, default the
    number given), result.json (id ``job_id``; None: no job result) and the trials."""
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "config.json").write_text(
        json.dumps(config or {"job_name": job_dir.name, "n_attempts": 1, "datasets": []})
    )
    n = len(trials) if expected is None else expected
    (job_dir / "lock.json").write_text(
        json.dumps({"schema_version": 1, "harbor": {"version": "0.20.0"}, "trials": [{}] * n})
    )
    if job_id is not None:
        (job_dir / "result.json").write_text(
            json.dumps(
                {
                    "id": job_id,
                    "started_at": BASE.isoformat(),
                    "n_total_trials": n,
                    "stats": {"evals": {"oracle__demo-ds": {"metrics": [{"mean": 0.5}]}}},
                }
            )
        )
    for name, text in trials.items():
        write_trial(job_dir, name, text)
    return job_dir
