"""What the report page shows, as one JSON-ready object (embedded once in the page).

``{"schema": "casstore.report/1", "runs": [run...], "comparisons": [comparison...]}``:

* a run: ``name`` (the SOURCE), ``jobs``, ``reward_key``, ``threshold``, ``counts``,
  ``resolve_rate``, ``outputs`` (each with ``mean``, ``stderr``, ``ci95``, ``ci95_method``,
  ``measured``, ``attempts``), ``pass_at_k`` and ``pass_hat_k`` (``[k, value, low, high,
  eligible tasks]`` rows), ``failures`` (the failure rollup), ``groups`` (``fields`` and one
  row per group: labels, attempts, mean, interval, pass@1) and ``heatmap``;
* a heatmap: ``tasks`` (names, by decreasing mean), ``columns`` (attempts shown per task),
  ``cells``: base64 of ``uint8[tasks × columns]``, a cell being 0-200 (the attempt's primary
  value scaled to [0, 200]; values outside [0, 1] scaled from the run's range ``low``/``high``),
  or :data:`ERRORED`, :data:`NO_VERIFIER`, :data:`INVALID`, :data:`EMPTY` (no such attempt);
* a comparison: ``a``, ``b`` (run names), ``difference`` and ``mcnemar`` as ``compare --json``
  gives them, ``pass_at_k`` (``[k, eligible, a, b, difference, low, high]`` rows) and
  ``points`` (``[mean A, mean B]`` per task compared, 4 decimals).
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from casstore.comparison.api import Comparison
from casstore.comparison.pairing import Side
from scoring import PassAtK, Status, apply_rules

__all__ = ["EMPTY", "ERRORED", "INVALID", "MAX_COLUMNS", "NO_VERIFIER", "SCHEMA", "payload"]

SCHEMA = "casstore.report/1"
ERRORED, NO_VERIFIER, INVALID, EMPTY = 252, 253, 254, 255
MAX_COLUMNS = 200
"""Attempts shown per task in the heatmap (the rest are counted in ``hidden_attempts``)."""


def payload(runs: list[tuple[str, Side]], comparisons: list[Comparison]) -> dict[str, Any]:
    """The page's data: every run (name, scored side) and every comparison."""
    return {
        "schema": SCHEMA,
        "runs": [_run(name, side) for name, side in runs],
        "comparisons": [_comparison(item) for item in comparisons],
    }


def _k_rows(values: list[PassAtK]) -> list[list[Any]]:
    rows = []
    for item in values:
        interval = item.to_json()["ci95"]
        low, high = interval if isinstance(interval, list) else (None, None)
        rows.append([item.k, item.value, low, high, item.eligible_tasks])
    return rows


def _run(name: str, side: Side) -> dict[str, Any]:
    report = side.report
    out = report.to_json()
    groups = []
    for group in report.groups:
        primary = group.outputs[report.reward_key]
        bounds = primary.interval.bounds() if primary.interval else [None, None]
        first = group.pass_at_k[0].value if group.pass_at_k else None
        labels = [group.labels.get(field) or "—" for field in report.group_by]
        groups.append([*labels, group.counts["attempts"], primary.mean, *bounds, first])
    return {
        "name": name,
        "jobs": out["jobs"],
        "reward_key": report.reward_key,
        "threshold": report.threshold,
        "counts": out["counts"],
        "resolve_rate": out["resolve_rate"],
        "outputs": [{"name": key, **value} for key, value in out["outputs"].items()],
        "pass_at_k": _k_rows(report.pass_at_k),
        "pass_hat_k": _k_rows(report.pass_hat_k),
        "failures": out["failure_rollup"],
        "groups": {"fields": list(report.group_by), "rows": groups},
        "heatmap": _heatmap(side),
    }


def _heatmap(side: Side) -> dict[str, Any]:
    """The task × attempt matrix of the module docstring (tasks by decreasing mean)."""
    table = side.report.table
    names = side.names
    if table is None or not len(names):
        return {"tasks": [], "columns": 0, "cells": "", "low": 0.0, "high": 1.0}
    rules = apply_rules(table)
    status, value = rules.status, rules.primary
    columns = int(min(int(table.attempt.max(initial=-1)) + 1, MAX_COLUMNS))
    usable = (status != Status.INVALID) & (value == value)
    low = float(min(0.0, value[usable].min(initial=0.0)))
    high = float(max(1.0, value[usable].max(initial=1.0)))
    scaled = np.clip(np.rint((value - low) / (high - low) * 200.0), 0, 200).astype(np.uint8)
    cells = np.where(status == Status.ERRORED, ERRORED, scaled)
    cells = np.where(status == Status.NO_VERIFIER, NO_VERIFIER, cells)
    cells = np.where(status == Status.INVALID, INVALID, cells).astype(np.uint8)
    order = _task_order(side, table.tasks)
    row_of = np.full(len(table.tasks), -1, dtype=np.int64)
    row_of[order] = np.arange(order.size)
    matrix = np.full((order.size, max(columns, 1)), EMPTY, dtype=np.uint8)
    shown = table.attempt < columns
    matrix[row_of[table.task[shown]], table.attempt[shown]] = cells[shown]
    return {
        "tasks": [table.tasks[i] for i in order.tolist()],
        "columns": columns,
        "hidden_attempts": int(np.count_nonzero(~shown)),
        "cells": base64.b64encode(matrix.tobytes()).decode("ascii"),
        "low": low,
        "high": high,
    }


def _task_order(side: Side, table_tasks: list[str]) -> np.ndarray:
    """The table's task indices by decreasing mean, then name (tasks without a valid
    attempt last)."""
    mean_of = dict(zip(side.names, np.nan_to_num(side.means, nan=-1.0).tolist(), strict=True))
    keys = [(-mean_of.get(name, -1.0), name) for name in table_tasks]
    return np.array(sorted(range(len(table_tasks)), key=keys.__getitem__), dtype=np.int64)


def _comparison(item: Comparison) -> dict[str, Any]:
    out = item.to_json()
    a, b = item.per_task()
    points = np.round(np.stack([a, b], axis=1), 4).tolist() if a.size else []
    rows = [
        [int(k), v["eligible_tasks"], v["a"], v["b"], v["difference"], *(v["ci95"] or [None] * 2)]
        for k, v in out["pass_at_k"].items()
    ]
    return {
        "a": item.sources[0],
        "b": item.sources[1],
        "difference": out["difference"],
        "mcnemar": out["mcnemar"],
        "only_in_a": len(out["only_in_a"]),
        "only_in_b": len(out["only_in_b"]),
        "pass_at_k": rows,
        "points": points,
    }
