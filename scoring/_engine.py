"""The scoring engine: ``score(table) -> ScoreReport`` and ``summarize(partials)``.

Pipeline (``n`` rows, ``C`` cells, ``T`` tasks, ``O`` outputs), all NumPy:

1. :func:`scoring._rules.apply_rules` — status, emitted values and diagnostics per row;
2. :meth:`scoring._partials.Partials.from_table` — ``bincount`` of the rows into cells
   (task × agent × model × dataset);
3. :func:`summarize` — cells are sorted by task, so ``np.add.reduceat`` gives per-task arrays;
   for groups the cells are sorted by (group, task) and reduced the same way; each set of tasks
   becomes a :class:`scoring.report.Block` (counts, means with clustered errors, pass@k,
   pass^k);
4. Harbor parity (:mod:`scoring._harbor_parity`: Harbor's metrics, custom ``metric.py``
   scripts and pass@k) and views (:mod:`scoring._views`) on top.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from casstore.table.columns import RewardTable
from scoring._cells import Origins
from scoring._defaults import DEFAULT_GROUP_BY, DEFAULT_METRIC_TIMEOUT, GROUP_FIELDS, ORIGIN_FIELDS
from scoring._errors import ScoringError
from scoring._harbor_metrics import metric_name
from scoring._harbor_parity import harbor_parity
from scoring._interval import Scale
from scoring._mean import output_stats
from scoring._options import check_ks, check_options
from scoring._partials import CELL_FIELDS, Partials
from scoring._pass_at_k import default_ks, pass_at_k_and_hat
from scoring._rules import apply_rules, check_primary_held
from scoring._views import Signal, View, evaluate_views, load_views
from scoring.report import Block, GroupReport, ScoreReport, TaskTable, status_counts

__all__ = ["DEFAULT_GROUP_BY", "GROUP_FIELDS", "score", "summarize"]


def _check_group_by(group_by: Sequence[str]) -> list[str]:
    fields = [name for name in group_by if name]
    for name in fields:
        if name not in GROUP_FIELDS:
            choices = ", ".join(GROUP_FIELDS)
            raise ScoringError(None, f"cannot group by {name!r} (choose from {choices})")
    return fields


def _origins(table: RewardTable, fields: list[str], origins: Origins | None) -> Origins:
    """The ``origins`` of the rows for the origin fields among ``fields`` (job, source), only
    those (the others do not split cells). A table of one job needs none for ``job``: its
    id labels every row. ScoringError for a field neither given nor so known."""
    chosen: dict[str, tuple[np.ndarray, Sequence[str]]] = {}
    for name in fields:
        if name not in ORIGIN_FIELDS:
            continue
        given = (origins or {}).get(name)
        if given is None and name == "job" and len(table.jobs) == 1:
            given = (np.zeros(len(table), np.int32), list(table.jobs))
        if given is None:
            rule = f"the {name} of each trial is not known here (casstore.rescore gives it)"
            raise ScoringError(None, f"cannot group by {name!r}: {rule}")
        codes, labels = given
        if codes.shape != (len(table),) or (
            codes.size and not 0 <= codes.min() <= codes.max() < len(labels)
        ):
            raise ScoringError(
                None, f"{name} labels: expected {len(table)} codes into {len(labels)} labels"
            )
        chosen[name] = given
    return chosen


def _reduce(arrays: list[np.ndarray], starts: np.ndarray) -> list[np.ndarray]:
    if not starts.size:
        return [np.zeros((0, *a.shape[1:]), dtype=a.dtype) for a in arrays]
    if arrays and starts.size == arrays[0].shape[0]:  # one row per segment: nothing to add
        return arrays
    return [np.add.reduceat(a, starts, axis=0) for a in arrays]


def _stable_order(key: np.ndarray, size: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for ``0 <= key < size``; a counting sort when
    ``size`` is small."""
    if size > 64:
        return np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=size)
    if np.count_nonzero(counts) == 1:
        return np.arange(key.size)
    return np.concatenate([np.flatnonzero(key == value) for value in np.flatnonzero(counts)])


def _block(
    attempts: np.ndarray,
    successes: np.ndarray,
    status: np.ndarray,
    harbor_errors: np.ndarray,
    measured: np.ndarray,
    sums: np.ndarray,
    expected: np.ndarray,
    outputs: list[str],
    ks: list[int],
    scales: np.ndarray,
) -> dict[str, Any]:
    total = int(attempts.sum())
    at_k, hat_k = pass_at_k_and_hat(attempts, successes, ks)
    stats = {
        name: output_stats(
            attempts * expected[:, o], measured[:, o], sums[:, o], Scale(int(scales[o]))
        )
        for o, name in enumerate(outputs)
    }
    return {
        "counts": status_counts(status, harbor_errors),
        "resolve_rate": float(successes.sum()) / total if total else None,
        "outputs": stats,
        "pass_at_k": at_k,
        "pass_hat_k": hat_k,
    }


def _quiet[T](function: Callable[[], T]) -> T:
    """``function()`` with overflow and invalid-value warnings off (NumPy's error state is
    per thread: a pool thread does not inherit the caller's)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return function()


def summarize(
    partials: Partials,
    ks: Sequence[int] | None = None,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    pool: Executor | None = None,
) -> ScoreReport:
    """A report from partial aggregates alone (no diagnostics, Harbor parity or views);
    ``pool`` (optional) computes the per-group blocks while this thread does the rest."""
    group_fields = _check_group_by(group_by)
    cell = partials.cell
    outputs = partials.outputs
    task_of = cell[:, 0].astype(np.int64)
    per_cell = [
        partials.attempts,
        partials.successes,
        partials.status,
        partials.present,
        partials.measured,
        partials.sums,
        partials.sumsq,
        partials.harbor_errors,
    ]
    starts = np.flatnonzero(np.r_[True, task_of[1:] != task_of[:-1]]) if task_of.size else task_of
    attempts, successes, status, present, measured, sums, sumsq, errors = _reduce(per_cell, starts)
    expected = present > 0
    expected[:, 0] = True
    ks = check_ks(ks) if ks is not None else default_ks(int(attempts.max()) if attempts.size else 0)
    group_args = (partials, group_fields, per_cell, task_of, expected, outputs, ks)
    pending = pool.submit(_quiet, lambda: _groups(*group_args)) if pool is not None else None
    totals = (attempts, successes, status, errors, measured, sums)
    overall = Block(**_block(*totals, expected, outputs, ks, partials.scales))
    tasks = TaskTable(
        names=partials.labels["task"],
        outputs=outputs,
        attempts=attempts,
        successes=successes,
        status=status,
        harbor_errors=errors,
        expected=expected,
        measured=measured,
        sums=sums,
        sumsq=sumsq,
    )
    groups = pending.result() if pending is not None else _groups(*group_args)
    return ScoreReport(
        reward_key=partials.reward_key,
        threshold=partials.threshold,
        ks=ks,
        group_by=group_fields,
        overall=overall,
        groups=groups,
        tasks=tasks,
        partials=partials,
    )


def _groups(
    partials: Partials,
    fields: list[str],
    per_cell: list[np.ndarray],
    task_of: np.ndarray,
    expected: np.ndarray,
    outputs: list[str],
    ks: list[int],
) -> list[GroupReport]:
    if not fields or not task_of.size:
        return []
    columns = [CELL_FIELDS.index(name) for name in fields]
    key = np.zeros(task_of.size, dtype=np.int64)
    size = 1
    for column in columns:
        width = max(len(partials.labels[CELL_FIELDS[column]]), 1)
        key = key * width + partials.cell[:, column]
        size *= width
    # cells are sorted by task: a stable sort by key is the (key, task) order
    order = _stable_order(key, size)
    key, task_sorted = key[order], task_of[order]
    boundary = np.r_[True, (key[1:] != key[:-1]) | (task_sorted[1:] != task_sorted[:-1])]
    starts = np.flatnonzero(boundary)
    pairs = _reduce([array[order] for array in per_cell], starts)
    pair_key, pair_task = key[starts], task_sorted[starts]
    group_starts = np.flatnonzero(np.r_[True, pair_key[1:] != pair_key[:-1]])
    group_ends = np.r_[group_starts[1:], pair_key.size]
    groups = []
    for begin, end in zip(group_starts.tolist(), group_ends.tolist(), strict=True):
        attempts, successes, status, _, measured, sums, _, errors = (a[begin:end] for a in pairs)
        first_cell = partials.cell[order[starts[begin]]]
        labels = {
            CELL_FIELDS[column]: partials.labels[CELL_FIELDS[column]][first_cell[column]]
            for column in columns
        }
        block = _block(
            attempts,
            successes,
            status,
            errors,
            measured,
            sums,
            expected[pair_task[begin:end]],
            outputs,
            ks,
            partials.scales,
        )
        groups.append(GroupReport(**block, labels=labels))
    return groups


def score(
    table: RewardTable,
    *,
    reward_key: str | None = None,
    ks: Sequence[int] | None = None,
    threshold: float = 1.0,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    metrics: Sequence[str | Path] = ("mean",),
    views: Sequence[View] | Path | str | None = None,
    metric_timeout: float = DEFAULT_METRIC_TIMEOUT,
    harbor: bool = True,
    origins: Origins | None = None,
) -> ScoreReport:
    """Score every trial of ``table``.

    ``reward_key`` (optional) must match the table's; ``ks`` (integers >= 1) defaults to 1, 2,
    4, 8, … and 5, 10, … up to the largest attempt count; ``threshold`` (finite) decides
    success (primary >= it); ``group_by`` ⊆ (agent, model, dataset, job, source), job and
    source labelled by ``origins`` (``{field: (codes int32[n], labels)}``; ``job`` of a table of
    one job: its id when not given); ``metrics`` are Harbor
    metrics (``mean``, ``sum``, ``min``, ``max``) or paths of existing ``metric.py`` scripts,
    each run at most ``metric_timeout`` seconds (> 0); ``views`` a list of
    :class:`~scoring._views.View` or a view file. ``harbor=False`` skips the parity outputs.
    A bad option is :class:`UsageError` (:mod:`scoring._options`), raised before any work; so
    is a reward key no attempt holds when the attempts hold others
    (:func:`scoring._rules.check_primary_held`).
    """
    if reward_key is not None and reward_key != table.reward_key:
        raise ScoringError(
            None,
            f"trials were imported with reward key {table.reward_key!r}, not {reward_key!r} "
            "(re-import them with that key)",
        )
    if isinstance(views, str | Path):
        views = load_views(views)
    chosen = _origins(table, _check_group_by(group_by), origins)  # before a metric script starts
    check_options(ks=ks, threshold=threshold, metrics=metrics, metric_timeout=metric_timeout)
    check_primary_held(table)
    with ThreadPoolExecutor(3, thread_name_prefix="casstore-score") as pool:
        # the parity outputs, the diagnostics and the per-group blocks only read what they
        # are given: on other threads, NumPy's loops (which release the GIL) overlap
        parity = pool.submit(harbor_parity, table, metrics, metric_timeout) if harbor else None
        with np.errstate(over="ignore", invalid="ignore"):  # huge rewards: inf, not warnings
            rules = apply_rules(table)
            partials = Partials.from_table(table, rules, threshold, chosen)
            diagnostics = pool.submit(_quiet, lambda: rules.diagnostics)
            report = summarize(partials, ks=ks, group_by=group_by, pool=pool)
        report.diagnostics = diagnostics.result()
        if parity is not None:
            report.harbor_metrics, report.harbor_pass_at_k, report.harbor_evals = parity.result()
    report.jobs = list(table.jobs)
    report.table = table
    if views:
        report.views = evaluate_views(list(views), _lookup(report, metrics))
    return report


def _lookup(
    report: ScoreReport, metrics: Sequence[str | Path]
) -> Callable[[Signal], tuple[bool, float | None]]:
    names = [metric_name(spec) for spec in metrics]

    def lookup(signal: Signal) -> tuple[bool, float | None]:
        if signal.metric == "harbor_reward":
            stats = report.outputs.get(signal.output)
            return (stats is not None, stats.mean if stats else None)
        for name, values in zip(names, report.harbor_metrics or [], strict=False):
            if name == signal.metric and signal.output in values:
                value = values[signal.output]
                return True, float(value) if isinstance(value, int | float) else None
        return False, None

    return lookup
