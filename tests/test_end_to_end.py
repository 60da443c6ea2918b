"""The whole product on real input: every fixture suite and both real job trees, via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from harbor.models.task.task import Task

from cli.main import run
from tests.helpers import snapshot

pytestmark = pytest.mark.realdata


def cli(capsys, store: Path, *argv: str) -> object:
    code = run(["--store", str(store), *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    return json.loads(captured.out)


def test_publish_checkout_import_rescore_real_data(fixtures_dir, tmp_path, capsys):
    store = tmp_path / "store"
    suites = sorted((fixtures_dir / "tasks").iterdir())
    names: list[str] = []
    for suite in suites:
        published = cli(capsys, store, "publish", str(suite), "--taskset", suite.name)
        names += [entry["name"] for entry in published]
        assert not any(entry["reused"] for entry in published)
    assert len(names) == 22
    again = cli(capsys, store, "publish", str(fixtures_dir / "tasks/harbor-cookbook"))
    assert all(entry["reused"] for entry in again)

    for suite in suites:
        dest = tmp_path / "checkout" / suite.name
        checkout = cli(capsys, store, "checkout", f"default/{suite.name}", str(dest))
        for entry in checkout["tasks"]:
            task_dir = dest / entry["dir"]
            source = suite / task_dir.name
            assert snapshot(task_dir) == snapshot(source)
            assert Task(task_dir).name == Task(source).name

    job = next((fixtures_dir / "jobs/tb2-haiku/jobs").iterdir())
    (imported,) = [cli(capsys, store, "import", str(job))]
    counts = imported["counts"]
    assert (imported["trials"], counts["errored"], counts["no_verifier"]) == (89, 1, 0)
    full = cli(capsys, store, "import", str(fixtures_dir / "jobs/full-trials"))
    # three of that job's trial directories (their config.json name it): nothing new
    assert (full["job"], full["trials"], full["imported"]) == (imported["job"], 89, 0)

    report = cli(capsys, store, "rescore", imported["job"])
    recorded = orjson.loads((job / "result.json").read_bytes())
    evals = next(iter(recorded["stats"]["evals"].values()))
    assert report["harbor_metrics"] == evals["metrics"] == [{"mean": 0.4157303370786517}]
    assert report["harbor_pass_at_k"] == {str(k): v for k, v in evals["pass_at_k"].items()}
    assert report["counts"]["attempts"] == recorded["n_total_trials"] == 89
    assert report["counts"]["partial"] + report["counts"]["errored"] == evals["n_errors"] == 21
    assert report["counts"] == counts  # one breakdown, Harbor's n_errors in it
    assert counts["harbor_errors"] == evals["n_errors"]
    reward = report["outputs"]["reward"]
    assert (reward["measured"], reward["attempts"]) == (89, 89)
    assert reward["mean"] == 37 / 89

    fsck = cli(capsys, store, "fsck")
    assert fsck["ok"] is True
