"""The checks of :func:`scoring.score`'s options: one implementation for the engine, the Python
API and ``casstore rescore`` (which parses text only), with the command's messages (options
named as the command spells them) and its exit status (:class:`UsageError`, exit 2).

:func:`check_options` runs them in the command's order, before any trial is scored or any
metric script started.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from numbers import Integral
from pathlib import Path

from casstore.errors import UsageError
from casstore.inputs import open_regular
from scoring._harbor_metrics import BUILTIN_METRICS, is_builtin

__all__ = [
    "check_ks",
    "check_metric_script",
    "check_metric_timeout",
    "check_metrics",
    "check_options",
    "check_threshold",
]


def check_ks(ks: Sequence[int]) -> list[int]:
    """The k values of pass@k, sorted and deduplicated; UsageError unless each is an integer
    >= 1."""
    if not all(isinstance(k, Integral) and not isinstance(k, bool) and k >= 1 for k in ks):
        raise UsageError("--k", "every k must be an integer >= 1")
    return sorted({int(k) for k in ks})


def _check_finite(option: str, value: float) -> None:
    if not math.isfinite(value):
        raise UsageError(option, f"must be a finite number, not {value}")


def check_threshold(threshold: float) -> None:
    """UsageError unless the success threshold is a finite number."""
    _check_finite("--threshold", threshold)


def check_metric_timeout(timeout: float) -> None:
    """UsageError unless a metric script's timeout is a finite number of seconds > 0."""
    _check_finite("--metric-timeout", timeout)
    if timeout <= 0:
        raise UsageError("--metric-timeout", f"must be > 0 seconds, not {timeout:g}")


def check_metrics(metrics: Sequence[str | Path]) -> None:
    """UsageError unless each metric is a built-in one (mean, sum, min, max) or the path of an
    existing ``metric.py`` file (a regular file: :func:`check_metric_script`)."""
    names = ", ".join(BUILTIN_METRICS)
    for metric in metrics:
        if is_builtin(metric):
            continue
        path = Path(metric)
        if os.path.lexists(path):
            check_metric_script(path)
        elif "/" in str(metric) or path.suffix == ".py":
            rule = f"no such metric script (--metric is {names} or a metric.py)"
            raise UsageError(str(metric), rule)
        else:
            raise UsageError(str(metric), f"--metric is {names} or a metric.py path")


def check_metric_script(path: Path) -> None:
    """UsageError naming ``path`` unless it is a regular file that can be opened
    (:func:`casstore.inputs.open_regular`; it is run by its path, as Harbor runs it)."""
    os.close(open_regular(path, "cannot read the metric script"))


def check_options(
    *,
    ks: Sequence[int] | None,
    threshold: float,
    metrics: Sequence[str | Path],
    metric_timeout: float,
) -> None:
    """Every check above, in ``casstore rescore``'s order (``ks`` None: the default ks)."""
    if ks is not None:
        check_ks(ks)
    check_threshold(threshold)
    check_metric_timeout(metric_timeout)
    check_metrics(metrics)
