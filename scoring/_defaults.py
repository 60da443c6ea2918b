"""The defaults of the scoring options, without NumPy: the command line reads them when it
starts (README, "Start-up"), before it knows whether scoring will run at all."""

from __future__ import annotations

__all__ = ["DEFAULT_GROUP_BY", "DEFAULT_METRIC_TIMEOUT", "GROUP_FIELDS"]

GROUP_FIELDS = ("agent", "model", "dataset")
"""The fields trials can be grouped by."""
DEFAULT_GROUP_BY: tuple[str, ...] = GROUP_FIELDS
DEFAULT_METRIC_TIMEOUT = 60.0
"""Seconds a metric.py may run before its process group is killed."""
