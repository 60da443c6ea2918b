"""The result of a rescore (:class:`ScoreReport`) and its JSON form.

JSON schema (``casstore rescore --json``; ``ScoreReport.to_json()``), schema id
``casstore.rescore/1``. Numbers are JSON numbers; ``null`` means "not estimable" (nothing
measured, fewer than two clusters), never 0::

    {
      "schema": "casstore.rescore/1",
      "reward_key": "reward",            # the primary output (from the trials' metadata)
      "threshold": 1.0,                  # success: primary >= threshold
      "ks": [1, 2, 4, 5, 8, 10],
      "group_by": ["agent", "model", "dataset"],
      "jobs": ["<job id>", ...],
      "counts": {                        # every trial exactly once
        "attempts": 89,                  # all trials, invalid ones included
        "scored": 68, "partial": 20, "errored": 1, "no_verifier": 0, "invalid": 0,
        "harbor_errors": 21              # attempts with an exception recorded (Harbor's n_errors)
      },
      "resolve_rate": 0.4157,            # successes / valid attempts (null if none)
      "outputs": {                       # primary first, then secondaries (sorted)
        "<output>": {
          "mean": 0.4157 | null,         # mean of emitted values; null when none measured
          "measured": 89,                # attempts that emitted a value
          "attempts": 89,                # valid attempts expecting the output
          "coverage": 1.0 | null,        # measured / attempts
          "stderr": 0.052 | null,        # task-clustered (see scoring._stderr)
          "ci95": [low, high] | null,    # 95%, within the values' range (scoring._interval)
          "ci95_method": "wilson" | "t" | "t_clipped" | null
        }
      },
      "pass_at_k":  {"<k>": {"value": float | null, "eligible_tasks": int,
                             "stderr": float | null, "ci95": [low, high] | null,
                             "ci95_method": "wilson" | "t" | "t_clipped" | null}},
      "pass_hat_k": {"<k>": {...same...}},
      "harbor_metrics": [{"mean": 0.4157303370786517}] | null,   # one dict per --metric
      "harbor_pass_at_k": {"<evals key>": {"<k>": float}} | null, # Harbor's own (k >= 2)
      "harbor_evals": {"<evals key>": {"metrics": [...], "pass_at_k": {...}}} | null,
      "views": {"<name>": {"reducer": "mean", "value": float | null,
                           "signals": [{"metric": str, "output": str, "value": float|null}]}},
      "failure_rollup": {
        "exceptions": {"AgentTimeoutError": 17, ...},  # exception type → trials
        "failure_codes": {"<code>": n, ...},           # import failure code → trials
        "errored_attempts": 21                          # attempts with an exception
      },
      "groups": [{"labels": {"agent": ..., "model": ..., "dataset": ...},  # the group_by
                                                 # fields (also job, source: casstore.sources)
                  "counts": {...}, "resolve_rate": ..., "outputs": {...},
                  "pass_at_k": {...}, "pass_hat_k": {...}}],
      "tasks": [{"task": str, "attempts": int, "successes": int, "counts": {...},
                 "outputs": {"<output>": {"mean", "measured", "attempts", "stderr"}}}],
      "diagnostic_counts": {"<code>": n},
      "diagnostics": [{"code": str, "task": str, "trial": str, "output": str | null,
                       "message": str}]
    }

The ``counts`` object (the run's, each group's, each task's, and ``casstore import``'s, all
built by :func:`breakdown`) holds ``attempts``, one count per status (exclusive: they add up
to ``attempts``; :data:`scoring._defaults.STATUS_MEANINGS` says what each means) and
``harbor_errors``, the attempts with an exception recorded whatever their status, the count
Harbor's job ``result.json`` calls ``n_errors`` (``partial`` + ``errored`` + the ``invalid``
attempts with an exception). ``failure_rollup.errored_attempts`` counts the attempts with an
exception recorded among the valid ones (statuses ``partial`` and ``errored``,
:attr:`ScoreReport.attempts_with_exception`); the key keeps its old name, so the JSON does
not change. Per-task ``stderr`` is the i.i.d. standard error within
the task (``null`` below two values). Diagnostic codes (:data:`scoring._rules.CODE_NAMES`; the
first two are the failure codes of the same names): ``reward_mapping_invalid``,
``verifier_result_missing``, ``primary_missing``, ``primary_boolean``, ``primary_nonfinite``,
``secondary_missing``, ``secondary_boolean``, ``secondary_nonfinite``. Harbor fields are
``null`` in a report built from merged partials alone (:func:`scoring.summarize`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from casstore.table.columns import Flag, RewardTable
from scoring._mean import OutputStats, within_task_stderr
from scoring._partials import Partials
from scoring._pass_at_k import PassAtK
from scoring._rules import STATUS_NAMES, Diagnostics, apply_rules

__all__ = [
    "SCHEMA",
    "Block",
    "GroupReport",
    "ScoreReport",
    "TaskTable",
    "breakdown",
    "count_attempts",
    "status_counts",
]

SCHEMA = "casstore.rescore/1"


def status_counts(status: np.ndarray, harbor_errors: np.ndarray) -> dict[str, int]:
    """:func:`breakdown` over the rows of ``status`` (int[R, 5]) and ``harbor_errors``
    (int[R])."""
    totals = status.sum(axis=0).tolist() if status.size else [0] * len(STATUS_NAMES)
    return breakdown(totals, int(harbor_errors.sum()))


def breakdown(per_status: list[int], harbor_errors: int) -> dict[str, int]:
    """The breakdown of a set of attempts, ``rescore``'s and ``import``'s ``counts``:
    ``{"attempts": Σ, <status>: n, ..., "harbor_errors": n}`` from the attempts per status
    (STATUS_NAMES order) and those with an exception recorded."""
    out = {"attempts": sum(per_status)}
    out.update(zip(STATUS_NAMES, per_status, strict=True))
    out["harbor_errors"] = harbor_errors
    return out


def count_attempts(table: RewardTable) -> dict[str, int]:
    """The :func:`breakdown` of every attempt of ``table`` (what ``casstore import`` reports
    of a job): the statuses the rules give its rows, the rows with an exception recorded."""
    per_status = np.bincount(apply_rules(table).status, minlength=len(STATUS_NAMES))
    errors = int(np.count_nonzero(table.flags & np.uint8(Flag.EXCEPTION)))
    return breakdown(per_status.tolist(), errors)


def _ks_json(values: list[PassAtK]) -> dict[str, Any]:
    return {str(item.k): item.to_json() for item in values}


@dataclass(eq=False)
class Block:
    """Aggregates over a set of tasks (the whole run or one group)."""

    counts: dict[str, int]
    resolve_rate: float | None
    outputs: dict[str, OutputStats]
    pass_at_k: list[PassAtK]
    pass_hat_k: list[PassAtK]

    def to_json(self) -> dict[str, Any]:
        """The block's JSON object (counts, resolve rate, outputs, pass@k, pass^k)."""
        return {
            "counts": self.counts,
            "resolve_rate": self.resolve_rate,
            "outputs": {name: stats.to_json() for name, stats in self.outputs.items()},
            "pass_at_k": _ks_json(self.pass_at_k),
            "pass_hat_k": _ks_json(self.pass_hat_k),
        }


@dataclass(eq=False)
class GroupReport(Block):
    """A :class:`Block` for one combination of the ``group_by`` labels."""

    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The block's JSON object, its labels first."""
        return {"labels": self.labels, **super().to_json()}


@dataclass(eq=False)
class TaskTable:
    """Per-task partial aggregates (``T`` tasks, ``O`` outputs), as arrays.

    ``attempts``/``successes`` int64[T], ``status`` int64[T, 5], ``harbor_errors``
    int64[T], ``expected`` bool[T, O],
    ``measured`` int64[T, O], ``sums``/``sumsq`` float64[T, O].
    """

    names: list[str]
    outputs: list[str]
    attempts: np.ndarray
    successes: np.ndarray
    status: np.ndarray
    harbor_errors: np.ndarray
    expected: np.ndarray
    measured: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray

    def means(self) -> np.ndarray:
        """float64[T, O] per-task means (NaN where nothing was measured)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.measured > 0, self.sums / self.measured, np.nan)

    def to_json(self) -> list[dict[str, Any]]:
        """One JSON object per task (the ``tasks`` of the module docstring), built column by
        column (a loop over the tasks only where some output is not expected)."""
        if not len(self.names):
            return []
        attempts = self.attempts.tolist()
        means = self.means()
        per_output = []
        for o in range(len(self.outputs)):
            stderr = within_task_stderr(self.measured[:, o], self.sums[:, o], self.sumsq[:, o])
            cells = zip(
                _or_none(means[:, o]),
                self.measured[:, o].tolist(),
                attempts,
                _or_none(stderr),
                strict=True,
            )
            per_output.append(list(map(dict, map(zip, repeat(_OUTPUT_KEYS), cells))))
        outputs = list(map(dict, map(zip, repeat(self.outputs), zip(*per_output, strict=True))))
        for t in np.flatnonzero(~self.expected.all(axis=1)).tolist():
            expected = zip(outputs[t].items(), self.expected[t].tolist(), strict=True)
            outputs[t] = {key: value for (key, value), wanted in expected if wanted}
        totals = np.column_stack([self.status.sum(axis=1), self.status, self.harbor_errors])
        counts = list(map(dict, map(zip, repeat(_COUNT_KEYS), totals.tolist())))
        rows = zip(self.names, attempts, self.successes.tolist(), counts, outputs, strict=True)
        return list(map(dict, map(zip, repeat(_TASK_KEYS), rows)))


_OUTPUT_KEYS = ("mean", "measured", "attempts", "stderr")
_COUNT_KEYS = ("attempts", *STATUS_NAMES, "harbor_errors")
_TASK_KEYS = ("task", "attempts", "successes", "counts", "outputs")


def _or_none(values: np.ndarray) -> list[float | None]:
    """``values`` as floats, None where NaN."""
    out = values.astype(object)
    out[np.isnan(values)] = None
    return out.tolist()


@dataclass(eq=False)
class ScoreReport:
    """Everything a rescore computes; :meth:`to_json` is the documented schema."""

    reward_key: str
    threshold: float
    ks: list[int]
    group_by: list[str]
    overall: Block
    groups: list[GroupReport]
    tasks: TaskTable
    partials: Partials
    jobs: list[str] = field(default_factory=list)
    harbor_metrics: list[dict[str, Any]] | None = None
    harbor_pass_at_k: dict[str, dict[int, float]] | None = None
    harbor_evals: dict[str, dict[str, Any]] | None = None
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    diagnostics: Diagnostics | None = None
    table: RewardTable | None = None

    @property
    def counts(self) -> dict[str, int]:
        """The run's attempts per status (``attempts`` first)."""
        return self.overall.counts

    @property
    def outputs(self) -> dict[str, OutputStats]:
        """The run's statistics per output (primary first)."""
        return self.overall.outputs

    @property
    def pass_at_k(self) -> list[PassAtK]:
        """The run's pass@k for every k."""
        return self.overall.pass_at_k

    @property
    def pass_hat_k(self) -> list[PassAtK]:
        """The run's pass^k for every k."""
        return self.overall.pass_hat_k

    @property
    def attempts_with_exception(self) -> int:
        """Attempts with an exception recorded: ``partial`` (reward kept) and ``errored``."""
        return self.counts["partial"] + self.counts["errored"]

    @property
    def failure_rollup(self) -> dict[str, Any]:
        """Trials per exception type and per failure code, and the attempts with an exception
        (under the key ``errored_attempts``, which keeps its old name)."""
        return {
            "exceptions": dict(self.partials.exceptions),
            "failure_codes": dict(self.partials.failures),
            "errored_attempts": self.attempts_with_exception,
        }

    def diagnostic_dicts(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The first ``limit`` diagnostics as JSON objects (none without the table)."""
        if self.diagnostics is None or self.table is None:
            return []
        return self.diagnostics.to_dicts(self.table, limit)

    def to_json(self, diagnostics_limit: int | None = None, tasks: bool = True) -> dict[str, Any]:
        """The JSON object of the module docstring."""
        harbor_pass = (
            None
            if self.harbor_pass_at_k is None
            else {
                key: {str(k): v for k, v in values.items()}
                for key, values in self.harbor_pass_at_k.items()
            }
        )
        evals = None
        if self.harbor_evals is not None:
            evals = {
                key: {
                    "metrics": entry["metrics"],
                    "pass_at_k": {str(k): v for k, v in entry["pass_at_k"].items()},
                }
                for key, entry in self.harbor_evals.items()
            }
        overall = self.overall.to_json()
        return {
            "schema": SCHEMA,
            "reward_key": self.reward_key,
            "threshold": self.threshold,
            "ks": self.ks,
            "group_by": self.group_by,
            "jobs": self.jobs,
            **overall,
            "harbor_metrics": self.harbor_metrics,
            "harbor_pass_at_k": harbor_pass,
            "harbor_evals": evals,
            "views": self.views,
            "failure_rollup": self.failure_rollup,
            "groups": [group.to_json() for group in self.groups],
            "tasks": self.tasks.to_json() if tasks else [],
            "diagnostic_counts": self.diagnostics.counts() if self.diagnostics else {},
            "diagnostics": self.diagnostic_dicts(diagnostics_limit),
        }
