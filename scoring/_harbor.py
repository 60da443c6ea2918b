"""Harbor parity: Harbor 0.20's dataset metrics and pass@k, bit for bit, from a RewardTable.

What Harbor does (``harbor/job.py``, ``harbor/metrics/*.py``, ``harbor/utils/pass_at_k.py``):

* trials are grouped by *evals key* ``agent__model__dataset`` (``agent__dataset`` without a
  model; dataset = the trial's ``source`` or ``"adhoc"``), keeping trial order;
* each trial contributes ``verifier_result.rewards`` (a dict as its pydantic model coerced it)
  or ``None`` without a verifier result; a result Harbor cannot validate (``Flag.INVALID``) is
  not loaded at all, so it is left out here too;
* Mean/Sum/Min/Max (``aggregate_reward_dicts``): with at most one key over all rewards, the
  list ``[0 if r is None else next(iter(r.values()), 0)]`` aggregated under the metric's name;
  with several keys, for each key in sorted order ``[0 if r is None else r.get(key, 0)]``.
  Mean is ``sum(values) / len(values)``, Sum ``sum``, Min ``min``, Max ``max`` — Python-level
  reductions (CPython 3.12's compensated float ``sum``), reproduced here by applying the very
  same builtins to the same lists in the same order (the table's row order is Harbor's trial
  order); missing values are the int ``0`` exactly as Harbor inserts them;
* pass@k (``_compute_pass_at_k_for_trials``): per evals key, ``{}`` if any trial with rewards
  has a number of keys other than one or a value outside {0, 1}; a trial without rewards counts
  as 0; k ∈ {2, 4, 8, …} ∪ {5, 10, …} up to the *smallest* attempt count of the group's tasks;
  per task ``1.0`` when ``n − c < k`` else ``1 − Π_{i<k} (n − c − i)/(n − i)`` multiplied
  left to right in float64 (identical in NumPy: each quotient of two exactly representable
  integers and each product is one correctly rounded IEEE operation); the task values summed
  with ``sum`` in order of first appearance and divided by the number of tasks.

Limit: the table stores rewards as float64, so a reward written as a JSON integer (which
Harbor keeps as ``int``) is a float here. Values are equal (``==``); in the rare case where
CPython's ``sum`` would add an int without compensation a float sum can differ in the last
bit, and Min/Max may return ``1.0`` where Harbor returns ``1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring.table import Flag, Kind, RewardTable

__all__ = [
    "BUILTIN_METRICS",
    "HarborRewards",
    "evals_key",
    "harbor_metric",
    "harbor_pass_at_k",
    "harbor_pass_at_k_values",
]


def _mean(values: list[Any]) -> float:
    return sum(values) / len(values)


BUILTIN_METRICS = {"mean": _mean, "sum": sum, "min": min, "max": max}


def evals_key(agent: str, model: str, dataset: str) -> str:
    """Harbor's ``JobStats.format_agent_evals_key`` from table labels (``name@version``)."""
    name = agent.rsplit("@", 1)[0] if "@" in agent else agent
    source = dataset or "adhoc"
    return f"{name}__{model}__{source}" if model else f"{name}__{source}"


@dataclass(eq=False)
class HarborRewards:
    """The rewards Harbor would hold: valid rows of a table, in table order.

    ``rows`` int64[m] table rows; ``names`` the ``O`` reward names (primary first);
    ``present`` bool[m, O] key in the mapping; ``values`` float64[m, O] coerced values;
    ``none`` bool[m] rewards are ``None`` (no verifier result); ``group`` int64[m] index into
    ``evals_keys``; ``task`` int64[m] task index of the table.
    """

    rows: np.ndarray
    names: list[str]
    present: np.ndarray
    values: np.ndarray
    none: np.ndarray
    group: np.ndarray
    evals_keys: list[str]
    task: np.ndarray

    @classmethod
    def from_table(cls, table: RewardTable) -> HarborRewards:
        rows = np.flatnonzero((table.flags & Flag.INVALID) == 0)
        none = (table.flags[rows] & Flag.NO_VERIFIER) != 0
        present = np.empty((rows.size, 1 + len(table.keys)), dtype=bool)
        values = np.empty((rows.size, 1 + len(table.keys)))
        present[:, 0] = table.primary_kind[rows] != Kind.MISSING
        values[:, 0] = table.primary[rows]
        present[:, 1:] = table.kinds[rows] != Kind.MISSING
        values[:, 1:] = table.values[rows]
        present &= ~none[:, None]
        labels = {}
        combos = (table.agent[rows].astype(np.int64) * len(table.models) + table.model[rows]) * len(
            table.datasets
        ) + table.dataset[rows]
        unique, inverse = np.unique(combos, return_inverse=True)
        for code in unique.tolist():
            rest, dataset = divmod(code, len(table.datasets))
            agent, model = divmod(rest, len(table.models))
            labels[code] = evals_key(
                table.agents[agent], table.models[model], table.datasets[dataset]
            )
        names = sorted(set(labels.values()))
        position = {name: i for i, name in enumerate(names)}
        remap = np.array([position[labels[code]] for code in unique.tolist()], dtype=np.int64)
        group = remap[inverse.reshape(-1)] if rows.size else np.zeros(0, np.int64)
        return cls(
            rows=rows,
            names=[table.reward_key, *table.keys],
            present=present,
            values=values,
            none=none,
            group=group,
            evals_keys=names,
            task=table.task[rows].astype(np.int64),
        )

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def subset(self, group: int) -> HarborRewards:
        """The rewards of one evals key (``evals_keys[group]``), order kept."""
        pick = np.flatnonzero(self.group == group)
        return HarborRewards(
            rows=self.rows[pick],
            names=self.names,
            present=self.present[pick],
            values=self.values[pick],
            none=self.none[pick],
            group=self.group[pick],
            evals_keys=[self.evals_keys[group]],
            task=self.task[pick],
        )

    def column(self, output: int) -> list[Any]:
        """Harbor's list for one key: the value, or int ``0`` where absent or ``None``."""
        values = self.values[:, output].tolist()
        for index in np.flatnonzero(~self.present[:, output]).tolist():
            values[index] = 0
        return values

    def dicts(self) -> list[dict[str, float] | None]:
        """The reward dicts themselves (for ``metric.py`` scripts): key order primary first."""
        out: list[dict[str, float] | None] = []
        values = self.values.tolist()
        present = self.present.tolist()
        for row, (none, flags) in enumerate(zip(self.none.tolist(), present, strict=True)):
            if none:
                out.append(None)
            else:
                out.append({name: values[row][o] for o, name in enumerate(self.names) if flags[o]})
        return out


def harbor_metric(name: str, rewards: HarborRewards) -> dict[str, Any]:
    """Harbor's built-in metric ``name`` (mean, sum, min, max) over ``rewards``."""
    aggregate = BUILTIN_METRICS[name]
    used = np.flatnonzero(rewards.present.any(axis=0)).tolist()
    if len(used) <= 1:
        values = rewards.column(used[0]) if used else [0] * len(rewards)
        return {name: aggregate(values)}
    by_name = sorted((rewards.names[o], o) for o in used)
    return {key: aggregate(rewards.column(o)) for key, o in by_name}


def _eligible_ks(max_k: int) -> list[int]:
    ks = set(range(5, max_k + 1, 5))
    k = 2
    while k <= max_k:
        ks.add(k)
        k *= 2
    return sorted(ks)


def harbor_pass_at_k_values(rewards: HarborRewards) -> dict[int, float]:
    """Harbor's ``_compute_pass_at_k_for_trials`` on one evals key's rewards."""
    if not len(rewards):
        return {}
    counts = rewards.present.sum(axis=1)
    scored = ~rewards.none
    if np.any(scored & (counts != 1)):
        return {}
    single = rewards.values[np.arange(len(rewards)), rewards.present.argmax(axis=1)]
    single = np.where(scored, single, 0.0)
    if not np.all((single == 0.0) | (single == 1.0)):
        return {}
    _, first_seen, inverse = np.unique(rewards.task, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first_seen, kind="stable")  # tasks by first appearance
    n = np.bincount(inverse)[order]
    c = np.bincount(inverse, weights=single).astype(np.int64)[order]
    result = {}
    for k in _eligible_ks(int(n.min())):
        product = np.ones(n.size)
        for i in range(k):
            product = product * ((n - c - i) / (n - i))
        per_task = np.where(n - c < k, 1.0, 1.0 - product)
        result[k] = sum(per_task.tolist()) / n.size
    return result


def harbor_pass_at_k(rewards: HarborRewards) -> dict[str, dict[int, float]]:
    """Harbor's ``compute_pass_at_k_by_evals``: evals key → ``{k: value}``, non-empty only."""
    out = {}
    for index, key in enumerate(rewards.evals_keys):
        part = rewards if len(rewards.evals_keys) == 1 else rewards.subset(index)
        if values := harbor_pass_at_k_values(part):
            out[key] = values
    return out
