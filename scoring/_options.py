"""The checks of :func:`scoring.score`'s options: one implementation for the engine, the Python
API and ``casstore rescore`` (which parses text only), with the command's messages (options
named as the command spells them) and its exit status (:class:`UsageError`, exit 2).

:func:`check_options` runs them in the command's order, before any trial is scored or any
metric script started.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from numbers import Integral
from pathlib import Path

from casstore.bounds import finite, shown
from casstore.errors import UsageError
from casstore.inputs import open_regular
from scoring._harbor_metrics import BUILTIN_METRICS, is_builtin

__all__ = [
    "MAX_K",
    "MAX_METRIC_TIMEOUT",
    "check_ks",
    "check_metric_script",
    "check_metric_timeout",
    "check_metrics",
    "check_options",
    "check_threshold",
    "k_refused",
]


MAX_K = 1 << 31
"""The largest k of pass@k: the most attempts a task can have (a reward table's attempt
indexes are int32). A fixed bound, not the run's largest attempt count, so that the same
``--k`` serves every run: a k beyond a run's attempts is reported with no eligible task."""
MAX_METRIC_TIMEOUT = 86400.0
"""The longest a metric script may run, in seconds (a day; the operating system's own bound,
a poll timeout in milliseconds in a C int, is ~24.8 days)."""


def k_refused(k: object) -> UsageError:
    """The error for a k out of bounds (the CLI's text of a k too long to be an int comes here
    too)."""
    return UsageError(
        "--k",
        f"every k must be an integer from 1 to {MAX_K} (the most attempts a task can have), "
        f"not {shown(k)}",
    )


def check_ks(ks: Sequence[int]) -> list[int]:
    """The k values of pass@k, sorted and deduplicated; UsageError unless each is an integer
    from 1 to :data:`MAX_K`."""
    for k in ks:
        if not (isinstance(k, Integral) and not isinstance(k, bool) and 1 <= k <= MAX_K):
            raise k_refused(k)
    return sorted({int(k) for k in ks})


def check_threshold(threshold: float) -> None:
    """UsageError unless the success threshold is a finite number."""
    finite("--threshold", threshold)


def check_metric_timeout(timeout: float) -> None:
    """UsageError unless a metric script's timeout is a finite number of seconds > 0 and at
    most :data:`MAX_METRIC_TIMEOUT`."""
    seconds = finite("--metric-timeout", timeout)
    if not 0 < seconds <= MAX_METRIC_TIMEOUT:
        rule = f"must be > 0 and at most {MAX_METRIC_TIMEOUT:g} seconds (a day)"
        raise UsageError("--metric-timeout", f"{rule}, not {shown(timeout)}")


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
