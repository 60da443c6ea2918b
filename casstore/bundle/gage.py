"""GAGE-compatible export: a Harbor job as GAGE's External Harness writes its results.

``casstore export JOB --format gage -o DIR`` writes, atomically (as a bundle)::

    DIR/samples.jsonl                  one GAGE sample per task
    DIR/summary.json                   {"schema", "external_harness": {"harbor": {...}}}
    DIR/external_harness/manifest.json schema gage.external_harness.raw_archive.v1

``summary.json``'s ``external_harness.harbor`` object holds the fields of GAGE's Harbor summary
generator, each computed by casstore's rescore of the job (default options):
``sample_count`` (samples: tasks), ``trial_count`` (attempts), ``completed`` / ``failed`` /
``aborted`` / ``skipped`` (:data:`GAGE_STATUS` maps casstore's statuses onto them),
``harbor_resolve_rate`` (the report's ``resolve_rate``), ``harbor_score_mean`` (the mean of
the primary reward), ``external_trial_pass_hat_k`` (``{"pass_hat@1": pass^1}``),
``raw_artifact_paths`` (every trial's result.json, and its trajectory when there is one) and
``failure_rollup`` (counts by status, failure code, exception type and failure domain:
:data:`FAILURE_DOMAIN`). ``report`` is the whole rescore report beside them.

A sample: ``sample_id``/``task_id`` (the task), ``task_type`` ``external_harness.harbor``,
``predict_result`` (per attempt: the primary reward and the trace reference),
``eval_result`` (``harbor_resolve_rate``, ``harbor_score_mean``, ``trial_pass``: each
attempt's success, ``verifier_evidence``: evidence references), ``trial_results`` (each
attempt as a bundle sample, with its GAGE ``status``) and ``artifact_refs``.

The manifest points to the job's raw files (``jobs_dir``, ``job_config``; ``launcher_result``
and ``workdir`` are null: casstore did not launch the job) and lists the files written with
their SHA-256.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from casstore.bundle.files import FileEntry, json_bytes, write_files
from casstore.bundle.lines import sample_lines
from casstore.bundle.samples import Details, Sample, read_samples
from casstore.jsontext import json_text
from scoring import ScoreReport, apply_rules

__all__ = ["FAILURE_DOMAIN", "GAGE_MANIFEST", "GAGE_STATUS", "RAW_ARCHIVE_SCHEMA", "write_gage"]

RAW_ARCHIVE_SCHEMA = "gage.external_harness.raw_archive.v1"
GAGE_MANIFEST = "external_harness/manifest.json"
GAGE_STATUS = {
    "scored": "completed",
    "partial": "completed",
    "errored": "failed",
    "no_verifier": "failed",
    "invalid": "skipped",
}
"""casstore's status of an attempt → GAGE's: a verifier result scored (``partial``: despite an
exception) is completed, an attempt without a usable one failed, a reward mapping Harbor
refuses skipped; casstore never aborts a trial (``aborted`` is 0)."""
FAILURE_DOMAIN = {
    "trial_exception": "agent",
    "verifier_result_missing": "verifier",
    "reward_mapping_invalid": "reward",
}
"""A failure code's domain in the rollup."""


def write_gage(
    dest: Path | str,
    report: ScoreReport,
    details: Sequence[Details],
    job_dir: str | None,
) -> list[FileEntry]:
    """Write the GAGE export of ``report`` (scored from a canonical table, with its
    ``details`` one per row) to ``dest`` (missing or an empty directory); ``job_dir``: the
    Harbor job directory the manifest points to. Returns the files written."""
    table = report.table
    assert table is not None  # a report of scoring.score
    lines = b"".join(sample_lines(table, apply_rules(table), details))
    samples = read_samples(lines, "samples")
    tasks = _tasks(samples, report.threshold)
    summary = _summary(report, samples, tasks)
    encoded = b"".join(msgspec.json.encode(task) + b"\n" for task in tasks)
    files = {"samples.jsonl": encoded, "summary.json": json_text(summary)}
    return write_files(dest, files, lambda entries: _manifest(entries, job_dir))


def _manifest(entries: list[FileEntry], job_dir: str | None) -> tuple[str, bytes]:
    """The ``raw_archive.v1`` manifest."""
    return GAGE_MANIFEST, json_bytes(
        {
            "schema": RAW_ARCHIVE_SCHEMA,
            "jobs_dir": job_dir,
            "job_config": None if job_dir is None else f"{job_dir}/config.json",
            "launcher_result": None,
            "workdir": None,
            "files": [msgspec.to_builtins(entry) for entry in entries],
        }
    )


def _artifacts(sample: Sample) -> list[str]:
    """The raw files of an attempt: its result.json and its trajectory."""
    found = [sample.result_path] if sample.result_path else []
    if sample.trace and not sample.trace.startswith("sha256:"):
        found.append(sample.trace)
    return found


def _tasks(samples: list[Sample], threshold: float) -> list[dict[str, Any]]:
    """One GAGE sample per task, in the order of the tasks' first attempts."""
    by_task: dict[str, list[Sample]] = {}
    for sample in samples:
        by_task.setdefault(sample.task, []).append(sample)
    return [_sample(task, attempts, threshold) for task, attempts in by_task.items()]


def _sample(task: str, attempts: list[Sample], threshold: float) -> dict[str, Any]:
    """The GAGE sample of one task's attempts (module docstring)."""
    valid = [s for s in attempts if s.status != "invalid"]
    values = [s.primary for s in valid if s.primary is not None]
    passed = [s.primary is not None and s.primary >= threshold for s in attempts]
    return {
        "sample_id": task,
        "task_id": task,
        "task_type": "external_harness.harbor",
        "predict_result": [
            {"trial": s.trial, "primary": s.primary, "trace_ref": s.trace} for s in attempts
        ],
        "eval_result": {
            "harbor_resolve_rate": sum(passed) / len(valid) if valid else None,
            "harbor_score_mean": sum(values) / len(values) if values else None,
            "trial_pass": passed,
            "verifier_evidence": [s.evidence for s in attempts],
        },
        "trial_results": [_trial(s) for s in attempts],
        "artifact_refs": [path for s in attempts for path in _artifacts(s)],
    }


def _trial(sample: Sample) -> dict[str, Any]:
    """One attempt as a GAGE trial result: the bundle sample, GAGE's status in ``status``
    and casstore's in ``casstore_status``."""
    data = msgspec.to_builtins(sample)
    data["casstore_status"] = sample.status
    data["status"] = GAGE_STATUS[sample.status]
    return data


def _summary(
    report: ScoreReport, samples: list[Sample], tasks: list[dict[str, Any]]
) -> dict[str, Any]:
    """The GAGE summary (module docstring)."""
    counts = {"completed": 0, "failed": 0, "aborted": 0, "skipped": 0}
    for status, count in report.counts.items():
        if status in GAGE_STATUS:
            counts[GAGE_STATUS[status]] += count
    rollup = report.failure_rollup
    domains: dict[str, int] = {}
    for code, count in rollup["failure_codes"].items():
        domain = FAILURE_DOMAIN.get(code, "harness")
        domains[domain] = domains.get(domain, 0) + count
    hat = next((item.value for item in report.pass_hat_k if item.k == 1), None)
    harbor = {
        "sample_count": len(tasks),
        "trial_count": report.counts["attempts"],
        **counts,
        "harbor_resolve_rate": report.overall.resolve_rate,
        "harbor_score_mean": report.outputs[report.reward_key].mean,
        "external_trial_pass_hat_k": {"pass_hat@1": hat},
        "raw_artifact_paths": [path for s in samples for path in _artifacts(s)],
        "failure_rollup": {
            "status": counts,
            "failure_code": rollup["failure_codes"],
            "exception_type": rollup["exceptions"],
            "failure_domain": domains,
        },
    }
    return {
        "schema": "casstore.gage_export/1",
        "external_harness": {"harbor": harbor},
        "report": report.to_json(),
    }
