"""Build RewardTables (and Harbor's own TrialResults) from small row specs for scoring tests.

A row is a dict: ``task`` (str), ``rewards`` (a mapping as written in result.json, ``None``
for no verifier result, or ``"invalid"`` for a mapping Harbor rejects), optional
``exception`` (type name), ``agent`` (``name@version``), ``model``, ``dataset``, ``failure``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from casstore.table.columns import Flag, Kind, RewardTable


def _kind_value(value: Any) -> tuple[Kind, float]:
    if isinstance(value, bool):
        return Kind.BOOLEAN, float(value)
    if isinstance(value, str):
        return Kind.NUMBER, float(value)
    number = float(value)
    return Kind.stored(value, Kind.NUMBER if math.isfinite(number) else Kind.NONFINITE), number


def _index(labels: list[str], value: str) -> int:
    if value not in labels:
        labels.append(value)
    return labels.index(value)


def make_table(rows: list[dict[str, Any]], reward_key: str = "reward") -> RewardTable:
    """A RewardTable of ``rows`` in order (secondary keys in order of first appearance)."""
    keys: list[str] = []
    for row in rows:
        if isinstance(row.get("rewards"), dict):
            for key in row["rewards"]:
                if key != reward_key and key not in keys:
                    keys.append(key)
    n, k = len(rows), len(keys)
    tasks: list[str] = []
    labels: dict[str, list[str]] = {
        "agents": [""],
        "models": [""],
        "datasets": [""],
        "exceptions": [""],
        "failures": [""],
    }
    columns: dict[str, np.ndarray] = {
        name: np.zeros(n, np.int32)
        for name in ("task", "attempt", "agent", "model", "dataset", "exception", "failure")
    }
    flags = np.zeros(n, np.uint8)
    primary = np.full(n, np.nan)
    primary_kind = np.zeros(n, np.int8)
    values = np.full((n, k), np.nan)
    kinds = np.zeros((n, k), np.int8)
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        columns["task"][i] = _index(tasks, row["task"])
        columns["attempt"][i] = seen.get(row["task"], 0)
        seen[row["task"]] = columns["attempt"][i] + 1
        for field, plural in (
            ("agent", "agents"),
            ("model", "models"),
            ("dataset", "datasets"),
            ("exception", "exceptions"),
            ("failure", "failures"),
        ):
            default = "agent@1" if field == "agent" else ""
            columns[field][i] = _index(labels[plural], row.get(field) or default)
        if row.get("exception"):
            flags[i] |= Flag.EXCEPTION
        rewards = row.get("rewards")
        if rewards is None:
            flags[i] |= Flag.NO_VERIFIER
            continue
        if rewards == "invalid":
            flags[i] |= Flag.INVALID
            continue
        for key, value in rewards.items():
            kind, number = _kind_value(value)
            if key == reward_key:
                primary_kind[i], primary[i] = kind, number
            else:
                j = keys.index(key)
                kinds[i, j], values[i, j] = kind, number
    table = RewardTable(
        reward_key=reward_key,
        tasks=tasks,
        trials=[row.get("trial") or f"{row['task']}__{i}" for i, row in enumerate(rows)],
        keys=keys,
        flags=flags,
        primary=primary,
        primary_kind=primary_kind,
        values=values,
        kinds=kinds,
        jobs=["job"],
        **columns,
        **labels,
    )
    table.validate()
    return table


def harbor_trials(rows: list[dict[str, Any]]) -> list[Any]:
    """Harbor 0.20 ``TrialResult`` objects for the rows Harbor can load (not ``invalid``).

    Only the fields Harbor's metrics and pass@k read are set; ``verifier_result`` goes through
    Harbor's own model validation, so rewards are coerced exactly as Harbor coerces them.
    """
    from harbor.models.trial.result import AgentInfo, ModelInfo, TrialResult
    from harbor.models.verifier.result import VerifierResult

    trials = []
    for i, row in enumerate(rows):
        rewards = row.get("rewards")
        if rewards == "invalid":
            continue
        name, _, version = (row.get("agent") or "agent@1").partition("@")
        model = row.get("model")
        trials.append(
            TrialResult.model_construct(
                task_name=row["task"],
                trial_name=f"{row['task']}__{i}",
                source=row.get("dataset") or None,
                agent_info=AgentInfo(
                    name=name,
                    version=version or "1",
                    model_info=ModelInfo(name=model, provider=None) if model else None,
                ),
                verifier_result=(
                    None if rewards is None else VerifierResult.model_validate({"rewards": rewards})
                ),
                exception_info=None,
            )
        )
    return trials


def harbor_rewards(trials: list[Any]) -> list[dict[str, Any] | None]:
    """What Harbor's job hands its metrics: ``verifier_result.rewards`` or ``None``."""
    return [t.verifier_result.rewards if t.verifier_result is not None else None for t in trials]


def harbor_groups(trials: list[Any]) -> dict[str, list[Any]]:
    """Trials by Harbor's evals key, as Harbor's ``Job`` groups them for ``stats.evals``."""
    from harbor.models.job.result import JobStats

    groups: dict[str, list[Any]] = {}
    for trial in trials:
        info = trial.agent_info
        model = info.model_info.name if info.model_info else None
        key = JobStats.format_agent_evals_key(info.name, model, trial.source or "adhoc")
        groups.setdefault(key, []).append(trial)
    return groups
