"""Errors of the scoring engine: defined with every other error in :mod:`casstore.errors`."""

from __future__ import annotations

from casstore.errors import MetricScriptError, ScoringError

__all__ = ["MetricScriptError", "ScoringError"]
