"""Errors of the scoring engine (one-line messages; the CLI prints them and exits 1)."""

from __future__ import annotations

from casstore.errors import CasstoreError

__all__ = ["MetricScriptError", "ScoringError"]


class ScoringError(CasstoreError):
    """Trials cannot be scored as asked: mixed reward keys, a taskset mismatch, a bad view."""

    kind = "scoring"
    exit_code = 1


class MetricScriptError(ScoringError):
    """A custom ``metric.py`` failed, hung past its timeout or wrote no JSON object."""

    kind = "metric_script"
