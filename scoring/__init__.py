"""Scoring engine for imported Harbor trials (README, §6 Scoring).

Entry points: :func:`score` (a :class:`RewardTable` → :class:`ScoreReport`),
:func:`summarize` (merged :class:`Partials` → report), the per-metric functions
(:func:`pass_at_k`, :func:`pass_hat_k`, :func:`harbor_metric`, :func:`harbor_pass_at_k`,
:func:`run_metric_script`) and views (:func:`load_views`). The JSON schema of a report is in
:mod:`scoring.report`; the per-attempt rules and statuses in :mod:`scoring._rules`.

Names are loaded on first use (NumPy with the first that needs it), so that importing
``scoring._defaults`` for the command line's option defaults costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from casstore.lazy import load_name

if TYPE_CHECKING:
    from casstore.table.columns import Flag, Kind, RewardTable, harbor_evals_key
    from scoring._bootstrap import PassAtKDifference, pass_at_k_difference
    from scoring._defaults import DEFAULT_GROUP_BY, DEFAULT_METRIC_TIMEOUT, GROUP_FIELDS
    from scoring._engine import score, summarize
    from scoring._errors import MetricScriptError, ScoringError
    from scoring._harbor_metrics import harbor_metric
    from scoring._harbor_pass_at_k import harbor_pass_at_k
    from scoring._harbor_rewards import HarborRewards
    from scoring._interval import Interval, Scale, ci95
    from scoring._mcnemar import McNemar, mcnemar_exact
    from scoring._mean import OutputStats, output_stats
    from scoring._metric_script import run_metric_script
    from scoring._options import MAX_K, MAX_METRIC_TIMEOUT, check_options, k_refused
    from scoring._paired import PairedDifference, paired_difference
    from scoring._partials import Partials
    from scoring._pass_at_k import PassAtK, default_ks, pass_at_k, pass_hat_k
    from scoring._rules import STATUS_NAMES, Attempts, Code, Diagnostics, Status, apply_rules
    from scoring._stderr import clt_stderr, cluster_mean_stderr
    from scoring._views import Signal, View, evaluate_views, load_views, parse_views
    from scoring.report import SCHEMA, ScoreReport, count_attempts

    BUILTIN_METRIC_NAMES: tuple[str, ...]

__all__ = [
    "BUILTIN_METRIC_NAMES",
    "DEFAULT_GROUP_BY",
    "DEFAULT_METRIC_TIMEOUT",
    "GROUP_FIELDS",
    "MAX_K",
    "MAX_METRIC_TIMEOUT",
    "SCHEMA",
    "STATUS_NAMES",
    "Attempts",
    "Code",
    "Diagnostics",
    "Flag",
    "HarborRewards",
    "Interval",
    "Kind",
    "McNemar",
    "MetricScriptError",
    "OutputStats",
    "PairedDifference",
    "Partials",
    "PassAtK",
    "PassAtKDifference",
    "RewardTable",
    "Scale",
    "ScoreReport",
    "ScoringError",
    "Signal",
    "Status",
    "View",
    "apply_rules",
    "check_options",
    "ci95",
    "clt_stderr",
    "cluster_mean_stderr",
    "count_attempts",
    "default_ks",
    "evaluate_views",
    "harbor_evals_key",
    "harbor_metric",
    "harbor_pass_at_k",
    "k_refused",
    "load_views",
    "mcnemar_exact",
    "output_stats",
    "paired_difference",
    "parse_views",
    "pass_at_k",
    "pass_at_k_difference",
    "pass_hat_k",
    "run_metric_script",
    "score",
    "summarize",
]

_HOMES = {
    "Flag": "casstore.table.columns",
    "Kind": "casstore.table.columns",
    "RewardTable": "casstore.table.columns",
    "harbor_evals_key": "casstore.table.columns",
    "DEFAULT_GROUP_BY": "scoring._defaults",
    "DEFAULT_METRIC_TIMEOUT": "scoring._defaults",
    "GROUP_FIELDS": "scoring._defaults",
    "PassAtKDifference": "scoring._bootstrap",
    "pass_at_k_difference": "scoring._bootstrap",
    "McNemar": "scoring._mcnemar",
    "mcnemar_exact": "scoring._mcnemar",
    "PairedDifference": "scoring._paired",
    "paired_difference": "scoring._paired",
    "score": "scoring._engine",
    "summarize": "scoring._engine",
    "MetricScriptError": "scoring._errors",
    "ScoringError": "scoring._errors",
    "BUILTIN_METRICS": "scoring._harbor_metrics",
    "harbor_metric": "scoring._harbor_metrics",
    "harbor_pass_at_k": "scoring._harbor_pass_at_k",
    "HarborRewards": "scoring._harbor_rewards",
    "OutputStats": "scoring._mean",
    "output_stats": "scoring._mean",
    "run_metric_script": "scoring._metric_script",
    "MAX_K": "scoring._options",
    "MAX_METRIC_TIMEOUT": "scoring._options",
    "check_options": "scoring._options",
    "k_refused": "scoring._options",
    "Partials": "scoring._partials",
    "PassAtK": "scoring._pass_at_k",
    "default_ks": "scoring._pass_at_k",
    "pass_at_k": "scoring._pass_at_k",
    "pass_hat_k": "scoring._pass_at_k",
    "STATUS_NAMES": "scoring._rules",
    "Attempts": "scoring._rules",
    "Code": "scoring._rules",
    "Diagnostics": "scoring._rules",
    "Status": "scoring._rules",
    "apply_rules": "scoring._rules",
    "Interval": "scoring._interval",
    "Scale": "scoring._interval",
    "ci95": "scoring._interval",
    "clt_stderr": "scoring._stderr",
    "cluster_mean_stderr": "scoring._stderr",
    "Signal": "scoring._views",
    "View": "scoring._views",
    "evaluate_views": "scoring._views",
    "load_views": "scoring._views",
    "parse_views": "scoring._views",
    "SCHEMA": "scoring.report",
    "ScoreReport": "scoring.report",
    "count_attempts": "scoring.report",
}


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` (or ``BUILTIN_METRICS``), imported from its module on first use;
    ``BUILTIN_METRIC_NAMES`` is the names of ``BUILTIN_METRICS``."""
    if name == "BUILTIN_METRIC_NAMES":
        value = globals()[name] = tuple(__getattr__("BUILTIN_METRICS"))
        return value
    return load_name(globals(), _HOMES, name)


def __dir__() -> list[str]:
    """The public names (``__all__``)."""
    return sorted(__all__)
