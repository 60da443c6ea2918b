"""Views: a named reducer (mean, min, max, sum) over declared ``(metric, output)`` signals.

A view file is TOML (``.toml``) or JSON (anything else)::

    # views.toml
    [views.quality]
    reducer = "mean"
    signals = [
      { metric = "harbor_reward", output = "reward" },
      { metric = "harbor_reward", output = "format_ok" },
      { metric = "mean", output = "mean" },
    ]

or ``{"views": {"quality": {"reducer": "mean", "signals": [{"metric": …, "output": …}]}}}``.
A list form ``views = [{name = "quality", reducer = …, signals = […]}]`` (what task revisions
store) is accepted too.

Signals resolve against the run-level report:

* ``metric = "harbor_reward"``: ``output`` is an output of the engine (the primary reward key or
  a secondary key); the value is its mean;
* ``metric = "mean" | "sum" | "min" | "max"`` or a custom script's name (file stem): an entry of
  ``harbor_metrics`` computed in the same run; ``output`` is a key of that metric's dict.

A signal whose value is ``None`` (nothing measured) is skipped; a view with no measured signal
is ``None``. A signal that names no metric/output of the run is an error.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from casstore.inputs import read_regular
from scoring._errors import ScoringError
from scoring._harbor_metrics import BUILTIN_METRICS

__all__ = ["REDUCERS", "Signal", "View", "evaluate_views", "load_views", "parse_views"]

REDUCERS: Mapping[str, Callable[[list[Any]], Any]] = BUILTIN_METRICS
"""A view's reducers: the Python-level reductions of Harbor's metrics (mean, sum, min, max)."""


@dataclass(frozen=True, slots=True)
class Signal:
    """One ``(metric, output)`` a view reduces (see the module docstring)."""

    metric: str
    output: str


@dataclass(frozen=True, slots=True)
class View:
    """A named ``reducer`` (a key of :data:`REDUCERS`) over ``signals``."""

    name: str
    reducer: str
    signals: tuple[Signal, ...]


def _view(name: str, body: Any, where: str) -> View:
    if not isinstance(body, Mapping):
        raise ScoringError(where, f"view {name!r} is not a table")
    reducer = body.get("reducer", "mean")
    if reducer not in REDUCERS:
        raise ScoringError(where, f"view {name!r}: unknown reducer {reducer!r}")
    raw = body.get("signals")
    if not isinstance(raw, list) or not raw:
        raise ScoringError(where, f"view {name!r} declares no signals")
    signals = []
    for signal in raw:
        if not (
            isinstance(signal, Mapping)
            and isinstance(signal.get("metric"), str)
            and isinstance(signal.get("output"), str)
        ):
            raise ScoringError(where, f"view {name!r}: a signal needs string metric and output")
        signals.append(Signal(signal["metric"], signal["output"]))
    return View(name, reducer, tuple(signals))


def parse_views(data: Any, where: str = "views") -> list[View]:
    """Views from a parsed file: ``{"views": {name: {...}}}`` or ``{"views": [{name, ...}]}``."""
    views = data.get("views") if isinstance(data, Mapping) else data
    if isinstance(views, Mapping):
        return [_view(str(name), body, where) for name, body in views.items()]
    if isinstance(views, list):
        out = []
        for body in views:
            name = body.get("name") if isinstance(body, Mapping) else None
            if not isinstance(name, str):
                raise ScoringError(where, "a view in the list has no name")
            out.append(_view(name, body, where))
        return out
    raise ScoringError(where, "no views table")


def load_views(path: Path | str) -> list[View]:
    """Read a TOML (``.toml``) or JSON view file.

    A file that cannot be read (missing, not a regular file: :mod:`casstore.inputs`) is a
    :class:`UsageError`; one that does not parse or declares bad views is a
    :class:`ScoringError`.
    """
    path = Path(path)
    raw = read_regular(path, "cannot read views")
    try:
        text = raw.decode().replace("\r\n", "\n").replace("\r", "\n")  # as read_text
    except UnicodeDecodeError:
        raise ScoringError(str(path), "cannot read views: not UTF-8 text") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError as error:
        raise ScoringError(str(path), f"cannot read views: {error}") from None
    return parse_views(data, str(path))


def evaluate_views(
    views: list[View], lookup: Callable[[Signal], tuple[bool, float | None]]
) -> dict[str, dict[str, Any]]:
    """``{name: {"reducer", "value", "signals": [{"metric", "output", "value"}]}}``.

    ``lookup(signal)`` returns ``(known, value)``; an unknown signal raises ScoringError.
    """
    out = {}
    for view in views:
        rows = []
        values = []
        for signal in view.signals:
            known, value = lookup(signal)
            if not known:
                raise ScoringError(
                    None,
                    f"view {view.name!r}: no output {signal.output!r} of metric "
                    f"{signal.metric!r} in this run",
                )
            rows.append({"metric": signal.metric, "output": signal.output, "value": value})
            if value is not None:
                values.append(float(value))
        value = REDUCERS[view.reducer](values) if values else None
        out[view.name] = {"reducer": view.reducer, "value": value, "signals": rows}
    return out
