"""Harbor parity: what Harbor's ``Job`` records for a run, computed from a RewardTable.

Harbor's metrics (the built-in ones, :mod:`scoring._harbor_metrics`, or ``metric.py`` scripts,
:mod:`scoring._metric_script`) over the whole run and per evals key, and its pass@k per evals
key (:mod:`scoring._harbor_pass_at_k`), all over the rewards Harbor holds
(:mod:`scoring._harbor_rewards`): ``stats.evals[key]`` holds ``{"metrics", "pass_at_k"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from casstore.table.columns import RewardTable
from scoring._harbor_metrics import harbor_metric, harbor_metrics_by_group, is_builtin
from scoring._harbor_pass_at_k import harbor_pass_at_k
from scoring._harbor_rewards import HarborRewards
from scoring._metric_script import run_metric_script

__all__ = ["harbor_parity"]


@np.errstate(over="ignore", invalid="ignore")  # inf/NaN results are Harbor's too
def harbor_parity(
    table: RewardTable, metrics: Sequence[str | Path], timeout: float
) -> tuple[list[dict[str, Any]], dict[str, dict[int, float]], dict[str, dict[str, Any]]]:
    """Harbor's ``metrics`` over the run, its pass@k per evals key, and both per evals key
    (as Harbor's ``Job`` fills ``stats.evals[key]``); a ``metric.py`` runs at most
    ``timeout`` seconds (MetricScriptError)."""
    rewards = HarborRewards.from_table(table)
    overall = _overall(rewards, metrics, timeout)
    pass_at_k = harbor_pass_at_k(rewards)
    keys = rewards.evals_keys
    if len(keys) == 1:
        per_metric = [overall]
    else:
        columns = [_per_evals_key(spec, rewards, timeout) for spec in metrics]
        per_metric = [[column[g] for column in columns] for g in range(len(keys))]
    evals = {
        key: {"metrics": per_metric[g], "pass_at_k": pass_at_k.get(key, {})}
        for g, key in enumerate(keys)
    }
    return overall, pass_at_k, evals


def _overall(
    rewards: HarborRewards, metrics: Sequence[str | Path], timeout: float
) -> list[dict[str, Any]]:
    """Harbor's metrics over all of ``rewards`` taken as one dataset."""
    if not len(rewards):
        return []
    out = []
    for spec in metrics:
        if is_builtin(spec):
            out.append(harbor_metric(spec, rewards))
        else:
            out.append(run_metric_script(spec, rewards.dicts(), timeout))
    return out


def _per_evals_key(
    spec: str | Path, rewards: HarborRewards, timeout: float
) -> list[dict[str, Any]]:
    """One metric for every evals key of ``rewards`` (``evals_keys`` order)."""
    if is_builtin(spec):
        return harbor_metrics_by_group(spec, rewards)
    return [
        run_metric_script(spec, rewards.select(rewards.group == g).dicts(), timeout)
        for g in range(len(rewards.evals_keys))
    ]
