"""Scoring engine for imported Harbor trials (README, §6 Scoring).

Entry points: :func:`score` (a :class:`RewardTable` → :class:`ScoreReport`),
:func:`summarize` (merged :class:`Partials` → report), the per-metric functions
(:func:`pass_at_k`, :func:`pass_hat_k`, :func:`harbor_metric`, :func:`harbor_pass_at_k`,
:func:`run_metric_script`) and views (:func:`load_views`). The JSON schema of a report is in
:mod:`scoring.report`; the per-attempt rules and statuses in :mod:`scoring._rules`.
"""

from casstore.table.columns import Flag, Kind, RewardTable, harbor_evals_key
from scoring._engine import DEFAULT_GROUP_BY, GROUP_FIELDS, score, summarize
from scoring._errors import MetricScriptError, ScoringError
from scoring._harbor_metrics import BUILTIN_METRICS, harbor_metric
from scoring._harbor_pass_at_k import harbor_pass_at_k
from scoring._harbor_rewards import HarborRewards
from scoring._mean import OutputStats, output_stats
from scoring._metric_script import DEFAULT_METRIC_TIMEOUT, run_metric_script
from scoring._options import MAX_K, MAX_METRIC_TIMEOUT, check_options, k_refused
from scoring._partials import Partials
from scoring._pass_at_k import PassAtK, default_ks, pass_at_k, pass_hat_k
from scoring._rules import STATUS_NAMES, Attempts, Code, Diagnostics, Status, apply_rules
from scoring._stderr import ci95, clt_stderr, cluster_mean_stderr
from scoring._views import Signal, View, evaluate_views, load_views, parse_views
from scoring.report import SCHEMA, ScoreReport

BUILTIN_METRIC_NAMES: tuple[str, ...] = tuple(BUILTIN_METRICS)

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
    "Kind",
    "MetricScriptError",
    "OutputStats",
    "Partials",
    "PassAtK",
    "RewardTable",
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
    "default_ks",
    "evaluate_views",
    "harbor_evals_key",
    "harbor_metric",
    "harbor_pass_at_k",
    "k_refused",
    "load_views",
    "output_stats",
    "parse_views",
    "pass_at_k",
    "pass_hat_k",
    "run_metric_script",
    "score",
    "summarize",
]
