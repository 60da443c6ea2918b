"""``casstore export JOB --format gage -o DIR``: GAGE's field names, values equal to the
rescore's own numbers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import casstore
from casstore.bundle.gage import GAGE_MANIFEST, RAW_ARCHIVE_SCHEMA
from tests.helpers import run_cli

JOB = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")
pytestmark = pytest.mark.realdata


def _harbor(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_bytes())["external_harness"]["harbor"]


def test_gage_summary_is_the_rescore_s(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    job = fixtures_dir / JOB
    out = tmp_path / "gage"
    code, text, err = run_cli(capsys, "export", str(job), "--format", "gage", "-o", str(out))
    assert (
        code == 0
        and text == f"89 trials of 1ea8f217-0d00-4ce0-859b-0fc92e7325d7 written to {out} (GAGE)\n"
    ), err
    report = casstore.rescore([job], store=tmp_path / "none").to_json()
    harbor = _harbor(out)
    assert harbor["sample_count"] == len(report["tasks"]) == 89
    assert harbor["trial_count"] == report["counts"]["attempts"] == 89
    counts = report["counts"]
    assert harbor["completed"] == counts["scored"] + counts["partial"] == 88
    assert harbor["failed"] == counts["errored"] + counts["no_verifier"] == 1
    assert harbor["aborted"] == 0 and harbor["skipped"] == counts["invalid"] == 0
    assert harbor["harbor_resolve_rate"] == report["resolve_rate"] == 0.4157303370786517
    assert harbor["harbor_score_mean"] == report["outputs"]["reward"]["mean"]
    assert harbor["external_trial_pass_hat_k"] == {"pass_hat@1": report["pass_hat_k"]["1"]["value"]}
    rollup = harbor["failure_rollup"]
    assert rollup["failure_code"] == report["failure_rollup"]["failure_codes"]
    assert rollup["exception_type"] == {"AgentTimeoutError": 17, "NonZeroAgentExitCodeError": 4}
    assert rollup["failure_domain"] == {"agent": 20, "verifier": 1}
    paths = harbor["raw_artifact_paths"]
    assert len(paths) == 89 and all(Path(p).is_file() and p.endswith("/result.json") for p in paths)
    manifest = json.loads((out / GAGE_MANIFEST).read_bytes())
    assert manifest["schema"] == RAW_ARCHIVE_SCHEMA
    assert manifest["jobs_dir"] == str(job.resolve()) and manifest["launcher_result"] is None
    for entry in manifest["files"]:
        data = (out / entry["path"]).read_bytes()
        assert entry["sha256"] == "sha256:" + hashlib.sha256(data).hexdigest()
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_bytes().splitlines()]
    by_task = {task["task"]: task for task in report["tasks"]}
    for sample in samples:
        task = by_task[sample["sample_id"]]
        assert sample["task_type"] == "external_harness.harbor"
        assert sample["eval_result"]["harbor_score_mean"] == task["outputs"]["reward"]["mean"]
        assert sum(sample["eval_result"]["trial_pass"]) == task["successes"]
    statuses = [t["status"] for s in samples for t in s["trial_results"]]
    assert statuses.count("completed") == 88 and statuses.count("failed") == 1


def test_gage_export_of_an_imported_job(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with casstore.open_store(store) as opened:
        casstore.import_jobs(opened, [fixtures_dir / JOB], name="tb2")
    out = tmp_path / "gage"
    code, text, err = run_cli(
        capsys, "--store", str(store), "export", "tb2", "--format", "gage", "-o", str(out), "--json"
    )
    assert code == 0, err
    assert json.loads(text)["trials"] == 89
    harbor = _harbor(out)
    assert harbor["trial_count"] == 89 and harbor["harbor_resolve_rate"] == 0.4157303370786517
    first = json.loads((out / "samples.jsonl").read_bytes().splitlines()[0])
    evidence = first["trial_results"][0]["evidence"]
    with casstore.open_store(store) as opened:
        assert (
            json.loads(casstore.Jobs(opened).evidence(evidence))["trial_name"]
            == first["trial_results"][0]["trial"]
        )
    code, _, err = run_cli(capsys, "export", "tb2", "--format", "xml", "-o", str(tmp_path / "x"))
    assert code == 2 and "unknown format 'xml' (trials or gage)" in err
    code, _, err = run_cli(
        capsys, "--store", str(store), "export", "tb2", "--format", "gage", "-o", str(out)
    )
    assert code == 2 and "must not exist or be an empty directory" in err
