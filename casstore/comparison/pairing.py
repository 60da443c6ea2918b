"""The two sides of a comparison: per-task means of each run, matched by task name.

A side is a scored reward table (:func:`scoring.score`): per task its valid attempts
(``invalid`` ones are no attempts, as everywhere in scoring), successes, and the mean of its
primary values (scoring's rules: a missing or unusable primary counts 0.0). Tasks are matched
by name; a task in one run only, or without a valid attempt in one of them, is listed and
left out of every statistic, never silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from casstore.table.columns import RewardTable
from scoring import Scale, ScoreReport, score

__all__ = ["Pairing", "Side", "pair", "side_of"]


@dataclass(eq=False)
class Side:
    """One run: its report and per-task arrays (``T`` tasks, scoring's task order)."""

    report: ScoreReport
    names: list[str]
    attempts: np.ndarray  # int64[T] valid attempts
    successes: np.ndarray  # int64[T]
    means: np.ndarray  # float64[T] mean primary value (NaN without a valid attempt)
    scale: Scale


def side_of(
    table: RewardTable,
    threshold: float = 1.0,
    reward_key: str | None = None,
    *,
    group_by: Sequence[str] = (),
    ks: Sequence[int] | None = (1,),
) -> Side:
    """Score ``table`` (no Harbor parity; ``reward_key``, when given, must be the table's:
    :func:`scoring.score`; by default no groups and pass@1 only) and keep its per-task
    arrays."""
    report = score(
        table, reward_key=reward_key, threshold=threshold, group_by=group_by, ks=ks, harbor=False
    )
    tasks = report.tasks
    means = tasks.means()[:, 0] if len(tasks.names) else np.zeros(0)
    scale = Scale(int(report.partials.scales[0])) if report.partials is not None else Scale.BINARY
    return Side(report, list(tasks.names), tasks.attempts, tasks.successes, means, scale)


@dataclass(eq=False)
class Pairing:
    """The tasks both sides share (index arrays into each side), and those left out."""

    names: list[str]
    index_a: np.ndarray
    index_b: np.ndarray
    only_in_a: list[str]
    only_in_b: list[str]
    no_valid_attempt: list[str]  # in both runs, without a valid attempt in one of them


def pair(a: Side, b: Side) -> Pairing:
    """Match the tasks of ``a`` and ``b`` by name (sorted)."""
    position_b = {name: i for i, name in enumerate(b.names)}
    common = sorted(name for name in a.names if name in position_b)
    position_a = {name: i for i, name in enumerate(a.names)}
    index_a = np.array([position_a[name] for name in common], dtype=np.int64)
    index_b = np.array([position_b[name] for name in common], dtype=np.int64)
    usable = (a.attempts[index_a] > 0) & (b.attempts[index_b] > 0)
    kept = np.flatnonzero(usable).tolist()
    return Pairing(
        names=[common[i] for i in kept],
        index_a=index_a[usable],
        index_b=index_b[usable],
        only_in_a=sorted(set(position_a) - set(position_b)),
        only_in_b=sorted(set(position_b) - set(position_a)),
        no_valid_attempt=[common[i] for i in np.flatnonzero(~usable).tolist()],
    )
