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
    ``present`` bool[O, m] key in the mapping; ``values`` float64[O, m] coerced values (0.0
    where absent); ``none`` bool[m] rewards are ``None`` (no verifier result); ``group``
    int64[m] index into ``evals_keys``; ``task`` int64[m] task index of the table.
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
        present = np.empty((1 + len(table.keys), rows.size), dtype=bool)
        values = np.empty((1 + len(table.keys), rows.size))
        present[0] = table.primary_kind[rows] != Kind.MISSING
        values[0] = table.primary[rows]
        present[1:] = (table.kinds[rows] != Kind.MISSING).T
        values[1:] = table.values[rows].T
        present &= ~none
        values[~present] = 0.0
        n_models, n_datasets = len(table.models), len(table.datasets)
        combos = (
            table.agent[rows].astype(np.int64) * n_models + table.model[rows]
        ) * n_datasets + table.dataset[rows]
        size = len(table.agents) * n_models * n_datasets
        used = np.flatnonzero(np.bincount(combos, minlength=size)) if rows.size else combos
        labels = {}
        for code in used.tolist():
            rest, dataset = divmod(code, n_datasets)
            agent, model = divmod(rest, n_models)
            labels[code] = evals_key(
                table.agents[agent], table.models[model], table.datasets[dataset]
            )
        names = sorted(set(labels.values()))
        position = {name: i for i, name in enumerate(names)}
        remap = np.zeros(max(size, 1), dtype=np.int64)
        for code, label in labels.items():
            remap[code] = position[label]
        return cls(
            rows=rows,
            names=[table.reward_key, *table.keys],
            present=present,
            values=values,
            none=none,
            group=remap[combos],
            evals_keys=names,
            task=table.task[rows].astype(np.int64),
        )

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def by_group(self) -> list[HarborRewards]:
        """One :class:`HarborRewards` per evals key (order kept within each)."""
        if len(self.evals_keys) == 1:
            return [self]
        order = np.argsort(self.group, kind="stable")
        bounds = np.searchsorted(self.group[order], np.arange(len(self.evals_keys) + 1))
        rows, present, values = self.rows[order], self.present[:, order], self.values[:, order]
        none, task = self.none[order], self.task[order]
        out = []
        for index, key in enumerate(self.evals_keys):
            part = slice(int(bounds[index]), int(bounds[index + 1]))
            out.append(
                HarborRewards(
                    rows=rows[part],
                    names=self.names,
                    present=present[:, part],
                    values=values[:, part],
                    none=none[part],
                    group=np.zeros(part.stop - part.start, np.int64),
                    evals_keys=[key],
                    task=task[part],
                )
            )
        return out

    def select(self, mask: np.ndarray, merge_groups: bool = False) -> HarborRewards:
        """The rewards where ``mask`` holds (order kept); ``merge_groups``: one evals key."""
        group = self.group[mask]
        keys = self.evals_keys
        if merge_groups:
            group = np.zeros(group.size, np.int64)
            keys = ["+".join(self.evals_keys)]
        elif len(keys) > 1:
            (kept,) = np.unique(group).tolist() or [0]
            keys, group = [keys[kept]], np.zeros(group.size, np.int64)
        return HarborRewards(
            rows=self.rows[mask],
            names=self.names,
            present=self.present[:, mask],
            values=self.values[:, mask],
            none=self.none[mask],
            group=group,
            evals_keys=keys,
            task=self.task[mask],
        )

    def column(self, output: int, exact_types: bool = True) -> list[Any]:
        """Harbor's list for one key: the value, or int ``0`` where absent or ``None``.

        With ``exact_types=False`` absent entries are the float ``0.0`` instead: the same
        ``sum`` (adding 0 changes neither the running sum nor its compensation), not the same
        ``min``/``max`` element type.
        """
        values = self.values[output].tolist()
        if exact_types or not self.present[output].any():
            for index in np.flatnonzero(~self.present[output]).tolist():
                values[index] = 0
        return values

    def dicts(self) -> list[dict[str, float] | None]:
        """The reward dicts themselves (for ``metric.py`` scripts): key order primary first."""
        out: list[dict[str, float] | None] = []
        values = self.values.T.tolist()
        present = self.present.T.tolist()
        for row, (none, flags) in enumerate(zip(self.none.tolist(), present, strict=True)):
            if none:
                out.append(None)
            else:
                out.append({name: values[row][o] for o, name in enumerate(self.names) if flags[o]})
        return out


def _integral(values: np.ndarray) -> bool:
    """True when every partial sum of ``values`` is an exactly representable integer."""
    if not values.size:
        return True
    with np.errstate(invalid="ignore"):
        whole = np.all(values == np.rint(values))
    return bool(
        whole
        and not np.any(np.signbit(values) & (values == 0))
        and float(np.abs(values).sum()) < 2.0**52
    )


def harbor_metrics_by_group(name: str, rewards: HarborRewards) -> list[dict[str, Any]]:
    """Harbor's metric ``name`` for every evals key of ``rewards`` (``evals_keys`` order).

    Mean and Sum of a column whose values are all integers (e.g. 0/1 rewards) take a NumPy
    fast path: every partial sum is then an exact integer, so ``np.bincount``'s sequential
    float sum, CPython's compensated ``sum`` and its int arithmetic give the same number.
    Any other column (and Min/Max, whose result type matters) goes through the Python builtin
    on the very list Harbor builds.
    """
    aggregate = BUILTIN_METRICS[name]
    groups = len(rewards.evals_keys)
    group = rewards.group
    sizes = np.bincount(group, minlength=groups)
    carried = (
        np.stack([np.bincount(group, weights=row, minlength=groups) > 0 for row in rewards.present])
        if len(rewards.names)
        else np.zeros((0, groups), bool)
    )  # [O, G]
    fast = name in ("mean", "sum")
    masks: dict[int, np.ndarray] = {}

    def column(g: int, o: int) -> list[Any]:
        if groups == 1:
            return rewards.column(o, exact_types=not fast)
        if g not in masks:
            masks[g] = group == g
        values = rewards.values[o][masks[g]].tolist()
        present = rewards.present[o][masks[g]]
        if not fast or not present.any():
            for index in np.flatnonzero(~present).tolist():
                values[index] = 0
        return values

    totals: dict[int, np.ndarray] = {}
    out = []
    for g in range(groups):
        used = np.flatnonzero(carried[:, g]).tolist()
        result: dict[str, Any] = {}
        single = len(used) <= 1
        columns = (
            [(name, used[0] if used else None)]
            if single
            else sorted((rewards.names[o], o) for o in used)
        )
        for label, o in columns:
            if o is None:
                result[label] = aggregate([0] * int(sizes[g]))
                continue
            if fast:
                if o not in totals:
                    data = rewards.values[o]
                    totals[o] = (
                        np.bincount(group, weights=data, minlength=groups)
                        if _integral(data)
                        else np.full(groups, np.nan)
                    )
                total = totals[o][g]
                if not np.isnan(total):
                    total = float(total)
                    result[label] = total / int(sizes[g]) if name == "mean" else total
                    continue
            result[label] = aggregate(column(g, o))
        out.append(result)
    return out


def harbor_metric(name: str, rewards: HarborRewards) -> dict[str, Any]:
    """Harbor's built-in metric ``name`` (mean, sum, min, max) over all of ``rewards``."""
    if len(rewards.evals_keys) != 1:
        rewards = rewards.select(np.ones(len(rewards), bool), merge_groups=True)
    return harbor_metrics_by_group(name, rewards)[0]


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
    counts = rewards.present.sum(axis=0)
    scored = ~rewards.none
    if np.any(scored & (counts != 1)):
        return {}
    single = rewards.values.sum(axis=0)  # the one present value (absent ones are 0.0)
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
    for part in rewards.by_group():
        if values := harbor_pass_at_k_values(part):
            out[part.evals_keys[0]] = values
    return out
