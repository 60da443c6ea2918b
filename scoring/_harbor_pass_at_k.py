"""Harbor 0.20's pass@k per evals key (``harbor/utils/pass_at_k.py``), bit for bit.

What Harbor does (``_compute_pass_at_k_for_trials``), per evals key: ``{}`` if any trial with
rewards has a number of keys other than one or a value outside {0, 1}; a trial without rewards
counts as 0; k ∈ {2, 4, 8, …} ∪ {5, 10, …} up to the *smallest* attempt count of the group's
tasks; per task ``1.0`` when ``n − c < k`` else ``1 − Π_{i<k} (n − c − i)/(n − i)`` multiplied
left to right in float64 (identical in NumPy: each quotient of two exactly representable
integers and each product is one correctly rounded IEEE operation, so it is computed once per
distinct ``(n, c)`` pair and gathered); the task values summed with ``sum`` in order of first
appearance (:func:`scoring._exact_sum.float_sum`) and divided by the number of tasks.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from scoring._exact_sum import float_sum
from scoring._harbor_rewards import HarborRewards
from scoring._pass_at_k import default_ks, pair_index

__all__ = ["harbor_pass_at_k"]

TaskCounts = Iterator[tuple[int, np.ndarray, np.ndarray]]
"""Per evals key ``g``: ``(g, n, c)``, trials and successes per task (int64[T_g] each, tasks in
order of first appearance)."""


def harbor_pass_at_k(rewards: HarborRewards) -> dict[str, dict[int, float]]:
    """Harbor's ``compute_pass_at_k_by_evals``: evals key → ``{k: value}``, non-empty only."""
    if not rewards.evals_keys or not rewards.valid.any():
        return {}
    bad, single = _bad_groups(rewards)
    if single is None or bad.all():
        return {}
    counts = _counts_in_task_order if rewards.task_sorted else _counts_in_first_seen_order
    out = {}
    for g, n, c in counts(rewards, single, bad):
        if values := _pass_values(n, c):
            out[rewards.evals_keys[g]] = values
    return out


def _bad_groups(rewards: HarborRewards) -> tuple[np.ndarray, np.ndarray | None]:
    """Evals keys whose pass@k Harbor empties (a mapping without exactly one key, or a value
    outside {0, 1}), and every row's single value (0.0 if none; None when every key is bad)."""
    bad = rewards.not_one_key
    if bad.all():
        return bad, None
    single = rewards.values_of(0)
    for o in range(1, len(rewards.names)):
        single = single + rewards.values_of(o)
    odd = rewards.scored & (single != 0.0) & (single != 1.0)
    keys = len(rewards.evals_keys)
    return bad | (np.bincount(rewards.bins[odd], minlength=keys + 1)[:keys] > 0), single


def _counts_in_task_order(
    rewards: HarborRewards, single: np.ndarray, bad: np.ndarray
) -> TaskCounts:
    """:data:`TaskCounts` of the evals keys not ``bad`` when tasks appear in increasing order
    within every group (first-seen order = task order): one ``bincount`` for all of them."""
    groups = len(rewards.evals_keys)
    tasks = int(rewards.task.max()) + 1
    code = rewards.bins * tasks + rewards.task
    size = (groups + 1) * tasks
    n = np.bincount(code, minlength=size)[: groups * tasks].reshape(groups, tasks)
    sums = np.bincount(code, weights=single, minlength=size)[: groups * tasks]
    c = sums.astype(np.int64).reshape(groups, tasks)
    for g in np.flatnonzero(~bad).tolist():
        used = n[g] > 0
        yield g, n[g][used], c[g][used]


def _counts_in_first_seen_order(
    rewards: HarborRewards, single: np.ndarray, bad: np.ndarray
) -> TaskCounts:
    """:data:`TaskCounts` of the evals keys not ``bad`` (and holding rows), in any row order."""
    held = rewards.bins
    for g in np.flatnonzero(~bad).tolist():
        member = held == g
        task = rewards.task[member]
        if not task.size:
            continue
        _, first_seen, inverse = np.unique(task, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(first_seen, kind="stable")  # tasks by first appearance
        n = np.bincount(inverse)[order]
        c = np.bincount(inverse, weights=single[member]).astype(np.int64)[order]
        yield g, n, c


def _pass_values(n: np.ndarray, c: np.ndarray) -> dict[int, float]:
    """Harbor's pass@k over tasks with ``n`` trials and ``c`` successes (first-seen order)."""
    if not n.size:
        return {}
    ks = [k for k in default_ks(int(n.min())) if k >= 2]  # Harbor starts at k = 2
    if not ks:
        return {}
    un, uc, inverse = pair_index(n, c)
    result = {}
    for k in ks:
        product = np.ones(un.size)
        for i in range(k):
            product = product * ((un - uc - i) / (un - i))
        per_pair = np.where(un - uc < k, 1.0, 1.0 - product)
        result[k] = float_sum(per_pair[inverse]) / n.size
    return result
