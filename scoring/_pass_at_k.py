"""pass@k and pass^k: unbiased estimators over tasks with ragged attempt counts.

For a task with ``n`` attempts of which ``c`` succeed (primary >= threshold):

* pass@k  = 1 − C(n−c, k) / C(n, k)   (Chen et al. 2021, "Evaluating Large Language Models
  Trained on Code", eq. 1: the probability that at least one of k draws without replacement
  succeeds);
* pass^k  = C(c, k) / C(n, k)         (all k draws succeed; Yao et al. 2024, τ-bench).

Both ratios are evaluated as cumulative products ``Π_{j<k} (a − j) / (n − j)`` with
``a = n − c`` (pass@k) or ``a = c`` (pass^k): every factor is in [0, 1], so nothing overflows
(no factorials), a zero factor makes the product exactly 0 (pass@k exactly 1 when
``n − c < k``; pass^k exactly 0 when ``c < k``) and ``c = 0`` gives factors of exactly 1
(pass@k exactly 0).

A task is *eligible* for k when ``n >= k``; ineligible tasks are left out of the average (never
counted as 1.0) and the number of eligible tasks is reported with every value. The default k
set is 1, 2, 4, 8, … and 5, 10, 15, … up to the largest attempt count. Shapes: ``n`` and ``c``
are int64[T]; each k yields a float64[m_k] of per-task values (eligible tasks only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scoring._interval import Scale, ci95
from scoring._stderr import clt_stderr

__all__ = [
    "PassAtK",
    "default_ks",
    "pass_at_k",
    "pass_at_k_and_hat",
    "pass_hat_k",
    "per_task_products",
]


def default_ks(max_attempts: int) -> list[int]:
    """1, 2, 4, 8, … together with 5, 10, 15, … up to ``max_attempts`` (sorted)."""
    ks: set[int] = set()
    k = 1
    while k <= max_attempts:
        ks.add(k)
        k *= 2
    ks.update(range(5, max_attempts + 1, 5))
    return sorted(ks)


@dataclass(frozen=True, slots=True)
class PassAtK:
    """One k: mean of per-task values over the eligible tasks (``value`` None when none)."""

    k: int
    value: float | None
    eligible_tasks: int
    stderr: float | None
    binary: bool = False  # every eligible task's value is 0 or 1

    def to_json(self) -> dict[str, object]:
        """The k's JSON object, with its 95% interval (:func:`scoring._interval.ci95`: Wilson
        when every per-task value is 0 or 1, else t with ``m − 1`` degrees of freedom, clipped
        to [0, 1])."""
        scale = Scale.BINARY if self.binary else Scale.UNIT
        m = self.eligible_tasks
        interval = ci95(self.value, self.stderr, scale, m, m)
        return {
            "value": self.value,
            "eligible_tasks": m,
            "stderr": self.stderr,
            "ci95": None if interval is None else interval.bounds(),
            "ci95_method": None if interval is None else interval.method,
        }


def pair_index(n: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ``(n, a)`` pairs (by decreasing ``n``) and every task's pair index."""
    base = int(max(int(n.max()), int(a.max()))) + 1
    code = (int(n.max()) - n) * base + a  # decreasing n first
    if base * base <= 4 * n.size + 65536:
        occupied = np.bincount(code, minlength=base * base) > 0
        pairs = np.flatnonzero(occupied)
        inverse = (np.cumsum(occupied) - 1)[code]
    else:
        pairs, inverse = np.unique(code, return_inverse=True)
        inverse = inverse.reshape(-1)
    rest, pair_a = np.divmod(pairs, base)
    return int(n.max()) - rest, pair_a, inverse


def per_task_products(n: np.ndarray, a: np.ndarray, ks: list[int]) -> dict[int, np.ndarray]:
    """``{k: Π_{j<k} max(a − j, 0) / (n − j)}`` for the tasks with ``n >= k``.

    Tasks come out in the order of a stable sort by decreasing ``n`` (so the eligible tasks of
    every k are a prefix; no sort when every task has the same ``n``). The products depend on
    ``(n, a)`` only, so they are computed once per distinct pair (the same IEEE operations in
    the same order, hence the same bits) and gathered: ``Σ_pairs min(n, max k)``
    multiplications.
    """
    n = np.asarray(n, dtype=np.int64)
    a = np.asarray(a, dtype=np.int64)
    wanted = sorted({k for k in ks if k >= 1})
    out: dict[int, np.ndarray] = {k: np.zeros(0) for k in wanted}
    if not wanted or not n.size:
        return out
    if n.min() == n.max():  # equal attempt counts: already "sorted"
        descending, a_sorted = n, a
    else:
        order = np.argsort(-n, kind="stable")
        descending, a_sorted = n[order], a[order]
    # max(a − j, 0) is the same for every a <= 0: clipping keeps the pairs few and the bits
    pair_n, pair_a, inverse = pair_index(descending, np.maximum(a_sorted, 0))
    ns, As = pair_n.astype(np.float64), pair_a.astype(np.float64)
    # number of tasks (pairs) with n > j, for j = 0 .. max k − 1; no task is eligible for a k
    # beyond the largest n (left empty): the work follows the attempts, never a k up to 2**31
    top = min(wanted[-1], int(descending.max()))
    active = np.searchsorted(-descending, -np.arange(top), side="left")
    pair_active = np.searchsorted(-pair_n, -np.arange(top), side="left")
    product = np.ones(ns.size)
    for j in range(top):
        m, p = int(active[j]), int(pair_active[j])
        if m == 0:
            break
        product[:p] *= np.maximum(As[:p] - j, 0.0) / (ns[:p] - j)
        if j + 1 in out:
            out[j + 1] = product[inverse[:m]]
    return out


def _pair_counts(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ``(n, c)`` pairs (by decreasing ``n``) and how many tasks have each."""
    pair_n, pair_c, inverse = pair_index(n, c)
    return pair_n, pair_c, np.bincount(inverse, minlength=pair_n.size)


def _weighted_summary(k: int, values: np.ndarray, counts: np.ndarray) -> PassAtK:
    """Mean and CLT standard error of per-task values given once per pair with its task
    ``counts``: ``Σ counts·v / m`` (summed exactly over the few pairs, ``math.fsum``) and
    :func:`scoring._stderr.clt_stderr`."""
    m = int(counts.sum())
    if not m:
        return PassAtK(k, None, 0, None)
    mean = math.fsum((counts * values).tolist()) / m
    held = values[counts > 0]
    binary = bool(np.all((held == 0.0) | (held == 1.0)))
    return PassAtK(k, mean, m, clt_stderr(values, counts, mean), binary)


def pass_at_k_and_hat(
    n: np.ndarray, c: np.ndarray, ks: list[int]
) -> tuple[list[PassAtK], list[PassAtK]]:
    """pass@k and pass^k for each k over tasks with ``n`` attempts and ``c`` successes (int
    arrays [T]). Per-task values depend on ``(n, c)`` only, so both are computed once per
    distinct pair and averaged with the pair's task count: O(T) for one ``bincount``, then
    O(pairs · k)."""
    n = np.asarray(n, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    if not n.size:
        empty = [PassAtK(k, None, 0, None) for k in ks]
        return empty, list(empty)
    pair_n, pair_c, counts = _pair_counts(n, np.clip(c, 0, n))
    # one value per pair: the pairs are already by decreasing n, so each k's eligible pairs
    # are the prefix that per_task_products returns
    failures = per_task_products(pair_n, pair_n - pair_c, ks)
    all_succeed = per_task_products(pair_n, pair_c, ks)
    at_k, hat_k = [], []
    for k in ks:
        if k < 1:
            at_k.append(PassAtK(k, None, 0, None))
            hat_k.append(PassAtK(k, None, 0, None))
            continue
        eligible = counts[: failures[k].size]
        at_k.append(_weighted_summary(k, 1.0 - failures[k], eligible))
        hat_k.append(_weighted_summary(k, all_succeed[k], eligible))
    return at_k, hat_k


def pass_at_k(n: np.ndarray, c: np.ndarray, ks: list[int]) -> list[PassAtK]:
    """pass@k for each k over tasks with ``n`` attempts and ``c`` successes (int arrays [T])."""
    return pass_at_k_and_hat(n, c, ks)[0]


def pass_hat_k(n: np.ndarray, c: np.ndarray, ks: list[int]) -> list[PassAtK]:
    """pass^k for each k over tasks with ``n`` attempts and ``c`` successes (int arrays [T])."""
    return pass_at_k_and_hat(n, c, ks)[1]
