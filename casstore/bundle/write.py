"""Writing a bundle: the samples, the summary and the manifest of one scored run.

:func:`write_bundle` takes what a rescore (or, once it exists, a run) has: the
:class:`~scoring.ScoreReport` of a canonical reward table
(:func:`casstore.bundle.table.canonical`), each row's details
(:data:`~casstore.bundle.samples.Details`: its trial record, or its sample), the
:class:`~casstore.bundle.summary.Scoring` definition used, and where the trials came
from. It writes, atomically (:func:`casstore.bundle.files.write_files`): ``samples.jsonl``,
``summary.json``, any ``metric.py`` under ``metrics/<i>/``, and ``manifest.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from casstore.bundle.files import Content, FileEntry, write_files
from casstore.bundle.lines import Origins, sample_lines
from casstore.bundle.read import SAMPLES, SUMMARY
from casstore.bundle.samples import Details
from casstore.bundle.summary import SUMMARY_SCHEMA, Scoring, provenance, scoring_json
from casstore.errors import UsageError
from casstore.jsontext import json_text
from scoring import ScoreReport
from scoring._harbor_metrics import is_builtin

__all__ = ["write_bundle"]


def write_bundle(
    dest: Path | str,
    report: ScoreReport,
    scoring: Scoring,
    *,
    details: Sequence[Details] | None = None,
    sources: Sequence[str] = (),
    origins: Origins | None = None,
    taskset: dict[str, Any] | None = None,
) -> list[FileEntry]:
    """Write the bundle of ``report`` to ``dest`` (missing or an empty directory; nothing is
    left there on failure) and return the entries of its manifest.

    ``report`` must carry its table (what :func:`scoring.score` returns), a canonical one;
    ``details`` one per row (None: the job ids only); ``scoring`` the definition it was
    scored with (a metric given as a path is copied into the bundle); ``taskset``: the
    ``{"ref", "tasks"}`` the trials were checked against; ``origins``: each row's ``job`` and
    ``source`` labels (:class:`casstore.sources.Loaded`'s), kept in its sample so that a
    rescore of the bundle groups its rows as they were. UsageError for a report without
    its table, or details not one per row."""
    table = report.table
    if table is None:
        raise UsageError(str(dest), "the report holds no reward table to write samples of")
    if details is not None and len(details) != len(table):
        raise UsageError(str(dest), f"{len(details)} details for {len(table)} attempts")
    from scoring import apply_rules

    rules = apply_rules(table)
    copies, definition = _metric_copies(scoring)
    files: dict[str, Content | Callable[[Mapping[str, FileEntry]], Content]] = {
        SAMPLES: sample_lines(table, rules, details, origins),
        **copies,
    }

    def summary(written: Mapping[str, FileEntry]) -> bytes:
        origin = provenance(
            list(report.jobs), list(sources), len(table), written[SAMPLES].sha256, taskset
        )
        return json_text(
            {
                "schema": SUMMARY_SCHEMA,
                "scoring": scoring_json(definition),
                "provenance": origin,
                "report": report.to_json(),
            }
        )

    files[SUMMARY] = summary
    return write_files(dest, files)


def _metric_copies(scoring: Scoring) -> tuple[dict[str, Content], Scoring]:
    """The ``metrics/<i>/<name>`` copies of the metric scripts and the definition naming
    them (builtins as they are)."""
    copies: dict[str, Content] = {}
    names = []
    for i, metric in enumerate(scoring.metrics):
        if is_builtin(metric):
            names.append(str(metric))
            continue
        name = f"metrics/{i}/{Path(metric).name}"
        copies[name] = Path(metric)
        names.append(name)
    return copies, replace(scoring, metrics=names)
