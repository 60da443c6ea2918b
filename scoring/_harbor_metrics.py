"""Harbor 0.20's dataset metrics (Mean, Sum, Min, Max), bit for bit, from :class:`HarborRewards`.

What Harbor does (``harbor/metrics/*.py``, ``aggregate_reward_dicts``), per evals key (or over
the whole run): with at most one key over all rewards, the list
``[0 if r is None else next(iter(r.values()), 0)]`` aggregated under the metric's name; with
several keys, for each key in sorted order ``[0 if r is None else r.get(key, 0)]``. Mean is
``sum(values) / len(values)``, Sum ``sum``, Min ``min``, Max ``max`` — Python-level reductions
(CPython 3.12's compensated float ``sum``), reproduced here bit for bit
(:mod:`scoring._exact_sum`); missing values are the int ``0`` exactly as Harbor inserts them.

Integers (:mod:`scoring._harbor_rewards`). Per evals key and output: when every present value
is an int, Sum/Min/Max return ints and Mean divides the exact int total (int / int, correctly
rounded), as Harbor's ``sum`` of ints does; when ints and floats mix, the very list Harbor
builds (ints restored, table order) goes through ``sum``/``min``/``max`` — CPython adds an int
to a float running sum without compensation, so that result depends on the order, and Harbor's
own order is the order its trials finished (a job's ``result.json`` may differ in the last bit
from any re-computation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from scoring._exact_sum import ExactSums, vector_sum
from scoring._harbor_rewards import HarborRewards

__all__ = [
    "BUILTIN_METRICS",
    "harbor_metric",
    "harbor_metrics_by_group",
    "is_builtin",
    "metric_name",
    "python_mean",
]


def python_mean(values: list[Any]) -> float:
    """``sum(values) / len(values)``: Harbor's Mean (and a view's ``mean`` reducer)."""
    return sum(values) / len(values)


BUILTIN_METRICS: dict[str, Callable[[list[Any]], Any]] = {
    "mean": python_mean,
    "sum": sum,
    "min": min,
    "max": max,
}
"""Harbor's built-in metrics by name: each reduces the list of one output's values."""


def is_builtin(spec: str | Path) -> TypeGuard[str]:
    """Whether a ``--metric`` is one of :data:`BUILTIN_METRICS` (else a ``metric.py`` path)."""
    return isinstance(spec, str) and spec in BUILTIN_METRICS


def metric_name(spec: str | Path) -> str:
    """A metric's name in views: the builtin's name, or a script's file stem."""
    return spec if is_builtin(spec) else Path(spec).stem


def harbor_metric(name: str, rewards: HarborRewards) -> dict[str, Any]:
    """Harbor's built-in metric ``name`` (mean, sum, min, max) over all of ``rewards``."""
    return harbor_metrics_by_group(name, rewards, merged=True)[0]


def harbor_metrics_by_group(
    name: str, rewards: HarborRewards, merged: bool = False
) -> list[dict[str, Any]]:
    """Harbor's metric ``name`` for every evals key of ``rewards`` (``evals_keys`` order);
    ``merged``: one result over all of them taken as one dataset.

    Mean and Sum are exact sums rounded once (:meth:`HarborRewards.exact_sums`) or, where that
    form does not apply, vectorised compensated sums (:func:`scoring._exact_sum.vector_sum`);
    Min/Max (whose result type matters) go through the Python builtin on the very list Harbor
    builds.
    """
    aggregate = BUILTIN_METRICS[name]
    if not rewards.evals_keys:
        return []
    sizes, carried = rewards.sizes, rewards.carried
    if merged:
        sizes, carried = sizes.sum(keepdims=True), carried.any(axis=1, keepdims=True)
    return [
        _group_metric(name, aggregate, _Group(rewards, g, merged), int(sizes[g]), carried[:, g])
        for g in range(sizes.size)
    ]


def _group_metric(
    name: str,
    aggregate: Callable[[list[Any]], Any],
    group: _Group,
    size: int,
    carried: np.ndarray,
) -> dict[str, Any]:
    """Harbor's metric ``name`` over the ``size`` rows of one ``group`` whose reward mappings
    carry the outputs where ``carried`` (bool[O]) holds: one entry per output carried (the
    metric's name for a single output or none)."""
    used = np.flatnonzero(carried).tolist()
    columns = (
        [(name, used[0] if used else None)]
        if len(used) <= 1
        else sorted((group.rewards.names[o], o) for o in used)
    )
    result: dict[str, Any] = {}
    for label, o in columns:
        if o is None:
            result[label] = aggregate([0] * size)
        elif name in ("mean", "sum"):
            value = group.total(o)
            result[label] = value / size if name == "mean" else value
        else:
            result[label] = aggregate(group.harbor_list(o))
    return result


@dataclass(frozen=True, slots=True)
class _Group:
    """The rows of evals key ``g`` of ``rewards``, or (``merged``) of all of them."""

    rewards: HarborRewards
    g: int
    merged: bool

    def rows(self) -> np.ndarray:
        """bool[n] the rows of the group."""
        rewards = self.rewards
        if self.merged or len(rewards.evals_keys) == 1:
            return rewards.valid
        return rewards.bins == self.g

    def harbor_list(self, o: int) -> list[Any]:
        """Output ``o``'s values of the group as Harbor holds them (its very list)."""
        return self.rewards.as_harbor(o, self.rows())

    def exact_total(self, exact: ExactSums) -> int:
        """The group's exact total in units of ``2**exact.exponent``."""
        return sum(exact.totals) if self.merged else exact.totals[self.g]

    def total(self, o: int) -> float | int:
        """``sum`` of output ``o``'s values, as Harbor's ``sum`` over its list gives it."""
        rewards = self.rewards
        share = rewards.integer_share(o)
        if share is not None:
            ints, present = (part.sum() if self.merged else part[self.g] for part in share)
            if ints and ints < present:  # ints and floats mixed: order-dependent, as Harbor
                return sum(self.harbor_list(o))
            if ints:
                value = self._int_total(rewards.exact_sums(o))
                return sum(self.harbor_list(o)) if value is None else value
        exact = rewards.exact_sums(o)
        if exact is not None:
            rounded = exact.rounded(self.exact_total(exact))
            if rounded is not None:
                return rounded
        result = vector_sum(rewards.values_of(o)[self.rows()])
        return sum(self.harbor_list(o)) if result is None else result

    def _int_total(self, exact: ExactSums | None) -> int | None:
        """The exact total of a group whose values are all ints, from ``exact`` (None when
        there is none; an exact total of integers is an integer times ``2**exponent``)."""
        if exact is None:
            return None
        total = self.exact_total(exact)
        if exact.exponent >= 0:
            return total << exact.exponent
        return total >> -exact.exponent
