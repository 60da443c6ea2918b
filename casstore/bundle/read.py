"""Reading a bundle back: checked against its manifest, its samples into a reward table.

:func:`is_bundle` tells a bundle directory (``manifest.json`` of the bundle schema beside
``samples.jsonl``) from a Harbor job directory; :func:`open_bundle` verifies every file
(:func:`casstore.bundle.files.verify_files`: a tampered file is an error naming it, nothing is
scored from it) and returns the :class:`Bundle`: its summary, its scoring definition, the
canonical reward table of its samples and each row's details.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from casstore.bundle.files import MANIFEST, MANIFEST_SCHEMA, checked_files
from casstore.bundle.samples import Sample, paused_gc, read_samples
from casstore.bundle.summary import SUMMARY_SCHEMA, Scoring, views_of
from casstore.bundle.table import table_of_samples
from casstore.errors import CorruptArchiveError
from casstore.inputs import read_if_regular
from casstore.table.columns import RewardTable

__all__ = ["SAMPLES", "SUMMARY", "Bundle", "is_bundle", "open_bundle", "read_scoring"]

SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"


def is_bundle(path: Path | str) -> bool:
    """Whether the directory ``path`` holds a casstore bundle (its manifest names the bundle
    schema; a GAGE export or a Harbor job directory is none)."""
    data = read_if_regular(Path(path) / MANIFEST, lambda info: info.st_size < 1 << 24)
    return data is not None and MANIFEST_SCHEMA.encode() in data[:4096]


@dataclass(eq=False)
class Bundle:
    """An opened bundle: ``summary`` (summary.json, decoded), ``scoring`` (its definition),
    ``table`` (the canonical reward table of samples.jsonl), ``job_ids`` (each row's job),
    ``labels`` (each row's job label and source label as written, ``""`` where none was) and
    ``details``: its samples, one per row (they hold their details,
    :data:`~casstore.bundle.samples.DETAIL_FIELDS`), or empty when opened without."""

    root: Path
    summary: dict[str, Any]
    scoring: Scoring
    table: RewardTable
    job_ids: list[str]
    labels: tuple[list[str], list[str]]
    details: list[Sample]


def _summary(root: Path, data: bytes | None) -> dict[str, Any]:
    """summary.json (its checked ``data``), decoded; CorruptArchiveError naming it when it is
    no bundle summary or the manifest does not list it."""
    where = str(root / SUMMARY)
    if data is None:
        raise CorruptArchiveError(where, "not listed in manifest.json: no bundle summary")
    try:
        summary = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise CorruptArchiveError(where, f"not JSON: {error}") from None
    if not isinstance(summary, dict) or summary.get("schema") != SUMMARY_SCHEMA:
        raise CorruptArchiveError(where, f"not a bundle summary (schema {SUMMARY_SCHEMA})")
    return summary


def read_scoring(summary: dict[str, Any], where: str) -> Scoring:
    """The :class:`Scoring` of a decoded summary; CorruptArchiveError naming ``where``."""
    body = summary.get("scoring")
    try:
        if not isinstance(body, dict):
            raise TypeError("no scoring object")
        fields = {name: body[name] for name in _SCORING_FIELDS}
        scoring = msgspec.convert(fields, _ScoringFields)
    except (KeyError, TypeError, msgspec.ValidationError) as error:
        raise CorruptArchiveError(where, f"scoring definition unreadable: {error}") from None
    for metric in scoring.metrics:
        if metric not in _BUILTIN_METRICS and not _BUNDLED_METRIC.fullmatch(metric):
            raise CorruptArchiveError(
                where,
                f"scoring definition names the metric {metric!r}: a bundle names a built-in "
                "metric or its own copy of a script, metrics/<i>/<name>",
            )
    return Scoring(
        reward_key=scoring.reward_key,
        threshold=scoring.threshold,
        ks=scoring.ks,
        group_by=scoring.group_by,
        metrics=scoring.metrics,
        metric_timeout=scoring.metric_timeout,
        views=views_of(scoring.views, where),
    )


_BUILTIN_METRICS = ("mean", "sum", "min", "max")
_BUNDLED_METRIC = re.compile(r"metrics/[0-9]+/(?!\.\.?$)[^/]+")
"""A metric script the bundle holds (:mod:`casstore.bundle.write` copies each there, and the
manifest checks it): never a path outside the bundle, which no manifest would check."""


class _ScoringFields(msgspec.Struct):
    reward_key: str
    threshold: float
    ks: list[int] | None
    group_by: list[str]
    metrics: list[str]
    metric_timeout: float
    views: list[dict[str, Any]]


_SCORING_FIELDS = _ScoringFields.__struct_fields__


def open_bundle(root: Path | str, details: bool = True) -> Bundle:
    """The bundle at ``root``, every file checked (see the module docstring; the samples'
    SHA-256 is computed by a thread while they are decoded, and compared before anything is
    returned); without ``details`` its samples hold only what the table needs (``details``
    then empty).

    Raises DigestMismatchError / CorruptArchiveError naming the file that fails."""
    root = Path(root)
    with checked_files(root, (SUMMARY, SAMPLES)) as (_, kept), paused_gc():
        summary = _summary(root, kept.get(SUMMARY))
        scoring = read_scoring(summary, str(root / SUMMARY))
        where = str(root / SAMPLES)
        if SAMPLES not in kept:
            raise CorruptArchiveError(where, "not listed in manifest.json: no bundle samples")
        samples = read_samples(kept[SAMPLES], where, details)
        table = table_of_samples(samples, scoring.reward_key, where)
    job_ids = list(map(attrgetter("job_id"), samples))
    labels = (list(map(attrgetter("job"), samples)), list(map(attrgetter("source"), samples)))
    return Bundle(root, summary, scoring, table, job_ids, labels, samples if details else [])
