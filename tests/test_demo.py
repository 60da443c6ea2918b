"""``casstore demo``: the whole data path on the embedded example, repeatable."""

from __future__ import annotations

import json

import orjson
import pytest

from casstore.examples.suite import EXAMPLE_TASKS
from cli.main import run


def demo(capsys, *extra: str) -> dict:
    assert run(["demo", *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_demo_runs_the_whole_path_and_reuses_on_rerun(tmp_path, capsys):
    first = demo(capsys, "--dir", str(tmp_path))
    assert [p["name"] for p in first["published"]] == sorted(EXAMPLE_TASKS)
    assert not any(p["reused"] for p in first["published"])
    assert len(first["checkout"]["tasks"]) == 3
    assert first["import"]["trials"] == 15 and first["import"]["imported"] == 15
    recorded = orjson.loads((tmp_path / "jobs/demo-job/result.json").read_bytes())
    metrics = next(iter(recorded["stats"]["evals"].values()))["metrics"]
    assert first["rescore"]["harbor_metrics"] == metrics
    assert first["rescore"]["counts"]["attempts"] == 15
    again = demo(capsys, "--dir", str(tmp_path))
    assert all(p["reused"] for p in again["published"])
    assert again["taskset"]["revision"] == first["taskset"]["revision"]
    assert again["taskset"]["reused"] is True
    assert list(again["taskset"]) == ["id", "revision", "tasks", "reused"]
    assert again["archive"]["address"] == first["archive"]["address"]
    assert again["import"]["imported"] == 0
    assert again["rescore"]["outputs"] == first["rescore"]["outputs"]


@pytest.mark.realdata
def test_demo_on_a_real_job(tmp_path, capsys, fixtures_dir):
    job = next((fixtures_dir / "jobs/tb2-haiku/jobs").iterdir())
    report = demo(capsys, "--dir", str(tmp_path), "--job", str(job))
    assert report["import"]["trials"] == 89
    assert report["rescore"]["harbor_metrics"] == [{"mean": 0.4157303370786517}]
