"""A bundle's ``summary.json``: the rescore report, the scoring definition and provenance.

::

    {"schema": "casstore.bundle/1",
     "scoring": {"reward_key": "reward", "threshold": 1.0, "ks": null | [1, 2],
                 "group_by": ["agent", "model", "dataset"],
                 "metrics": ["mean", "metrics/1/metric.py"], "metric_timeout": 60.0,
                 "views": [{"name", "reducer", "signals": [{"metric", "output"}]}],
                 "digest": "sha256:<hex>"},
     "provenance": {"casstore_version", "harbor_version", "python_version", "created",
                    "jobs": [...], "sources": [...], "samples": n,
                    "samples_sha256": "sha256:<hex>",
                    "taskset": null | {"ref": "default/suite",
                                       "tasks": [{"task", "revision", "address"}]}},
     "report": {...}}                       # the rescore --json object (scoring.report)

``scoring`` says how the samples were scored: rescoring the bundle without options scores them
so again (``ks`` null: the default k of the attempts; a ``metric.py`` is copied into the bundle,
``metrics/<i>/<name>``, and named by that path). Its ``digest`` is the SHA-256 of its other
fields as compact JSON with sorted keys. ``report`` and ``scoring`` are recomputed from
``samples.jsonl`` by a rescore of the bundle, bit for bit; ``provenance`` is written anew by
each bundle (versions, time, sources, the taskset given).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import msgspec

from casstore.digest import Digest
from scoring import View

__all__ = [
    "SUMMARY_SCHEMA",
    "Scoring",
    "provenance",
    "scoring_json",
    "taskset_pins",
    "views_json",
    "views_of",
]

SUMMARY_SCHEMA = "casstore.bundle/1"


@dataclass(frozen=True)
class Scoring:
    """How samples are scored: what ``casstore rescore`` and :func:`scoring.score` take."""

    reward_key: str
    threshold: float = 1.0
    ks: list[int] | None = None
    group_by: list[str] = field(default_factory=lambda: ["agent", "model", "dataset"])
    metrics: list[str] = field(default_factory=lambda: ["mean"])
    metric_timeout: float = 60.0
    views: list[View] = field(default_factory=list)

    def options(self, root: Path | None = None) -> dict[str, Any]:
        """The keyword arguments of :func:`casstore.rescore` (a metric path taken relative
        to the bundle ``root``)."""
        metrics: list[str | Path] = [
            m if root is None or m in _BUILTINS else root / m for m in self.metrics
        ]
        return {
            "reward_key": self.reward_key,
            "threshold": self.threshold,
            "ks": self.ks,
            "group_by": list(self.group_by),
            "metrics": metrics,
            "metric_timeout": self.metric_timeout,
            "views": list(self.views),
        }


_BUILTINS = ("mean", "sum", "min", "max")


def views_json(views: list[View]) -> list[dict[str, Any]]:
    """Views as JSON objects (the list form :func:`scoring.parse_views` reads)."""
    return [
        {
            "name": view.name,
            "reducer": view.reducer,
            "signals": [{"metric": s.metric, "output": s.output} for s in view.signals],
        }
        for view in views
    ]


def views_of(data: Any, where: str) -> list[View]:
    """Views from their JSON objects (:func:`views_json`); ScoringError naming ``where``."""
    from scoring import parse_views

    return parse_views(data, where) if data else []


def scoring_json(definition: Scoring) -> dict[str, Any]:
    """The ``scoring`` object of a summary, its ``digest`` last."""
    body = {
        "reward_key": definition.reward_key,
        "threshold": definition.threshold,
        "ks": definition.ks,
        "group_by": list(definition.group_by),
        "metrics": list(definition.metrics),
        "metric_timeout": definition.metric_timeout,
        "views": views_json(definition.views),
    }
    canonical = msgspec.json.encode(body, order="sorted")
    return {**body, "digest": str(Digest.of(canonical))}


def _installed(name: str) -> str | None:
    """The installed version of distribution ``name`` (its metadata; nothing imported)."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def provenance(
    jobs: list[str],
    sources: list[str],
    samples: int,
    samples_sha256: str,
    taskset: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``provenance`` object of a summary, its time now (UTC)."""
    return {
        "casstore_version": _installed("casstore"),
        "harbor_version": _installed("harbor"),
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "created": datetime.now(UTC).isoformat(),
        "jobs": jobs,
        "sources": sources,
        "samples": samples,
        "samples_sha256": samples_sha256,
        "taskset": taskset,
    }


def taskset_pins(ref: str, items: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """The ``taskset`` of a provenance: the reference given and each pinned task's key,
    revision digest and archive address (``items``: :func:`casstore.sources.check_taskset`'s
    ``(task key, TaskRevision)`` pairs)."""
    return {
        "ref": ref,
        "tasks": [
            {"task": key, "revision": revision.digest, "address": revision.address}
            for key, revision in items
        ],
    }
