"""``casstore rescore`` end to end: job directories, imported jobs, trials.jsonl, --taskset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import run
from tests.test_discovery import write_task

JOB = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")
pytestmark = pytest.mark.realdata


def rescore_json(capsys, *args: str, store: Path | None = None) -> dict:
    capsys.readouterr()
    prefix = ["--store", str(store)] if store else []
    assert run([*prefix, "rescore", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_job_directory(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    report = rescore_json(capsys, str(fixtures_dir / JOB), "--metric", "mean", "--metric", "max")
    assert report["harbor_metrics"] == [{"mean": 0.4157303370786517}, {"max": 1.0}]
    assert report["counts"]["partial"] == 20
    assert set(report["pass_at_k"]["1"]) == {
        "value",
        "eligible_tasks",
        "stderr",
        "ci95",
        "ci95_method",
    }
    for key in (
        "reward_key",
        "outputs",
        "pass_hat_k",
        "harbor_pass_at_k",
        "failure_rollup",
        "groups",
        "tasks",
        "diagnostics",
    ):
        assert key in report
    assert len(report["tasks"]) == 89
    capsys.readouterr()
    assert run(["rescore", str(fixtures_dir / JOB)]) == 0
    out = capsys.readouterr().out
    assert "0.4157" in out and "partial 20" in out
    # failure codes read as their names, as from a stored job (not as enum members)
    assert "codes trial_exception 20, verifier_result_missing 1" in out


def test_imported_job_and_saved_trials(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    from casstore.store import Store
    from casstore.trials import Jobs, write_trials_jsonl

    store = tmp_path / "store"
    with Store(store) as opened:
        Jobs(opened).import_jobs([fixtures_dir / JOB])
        (job,) = Jobs(opened).list()
        write_trials_jsonl(Jobs(opened).trial_records(job.job_id), tmp_path / "trials.jsonl")
    by_id = rescore_json(capsys, job.job_id, store=store)
    assert by_id["harbor_metrics"] == [{"mean": 0.4157303370786517}]
    saved = rescore_json(capsys, str(tmp_path / "trials.jsonl"))
    assert saved["outputs"] == by_id["outputs"] and saved["counts"] == by_id["counts"]
    capsys.readouterr()
    assert run(["--store", str(store), "rescore", "no-such-job"]) == 2
    assert "no-such-job" in capsys.readouterr().err
    assert run(["--store", str(store), "rescore", job.job_id, "--reward-key", "other"]) == 1
    assert "reward key" in capsys.readouterr().err


def rescore_json_store(capsys, store: Path, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run(["--store", str(store), "rescore", *args])
    return code, capsys.readouterr().err


def test_taskset_reference(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    from casstore.archive.discover import discover
    from casstore.store import Store
    from casstore.trials import read_job, write_trials_jsonl

    job = read_job(fixtures_dir / JOB)
    chosen = {"chess-best-move", "sqlite-with-gcov"}
    trials = tmp_path / "trials.jsonl"
    write_trials_jsonl([t for t in job.trials if t.task_name in chosen], trials)
    store = tmp_path / "store"
    with Store(store) as opened:
        names = []
        for name in [*sorted(chosen), "extra-task"]:
            (task,) = discover(write_task(tmp_path / "tasks", name))
            names.append(opened.publish(task).name)
        opened.tasksets.replace("exact", names[:2])
        opened.tasksets.replace("bigger", names)
        opened.tasksets.replace("smaller", names[:1])
    report = rescore_json(capsys, str(trials), "--taskset", "exact", store=store)
    assert report["counts"]["attempts"] == 2
    code, err = rescore_json_store(capsys, store, str(trials), "--taskset", "bigger")
    assert code == 1 and "without trials: " in err and "extra-task" in err
    code, err = rescore_json_store(capsys, store, str(trials), "--taskset", "smaller")
    assert code == 1 and "not in the taskset: sqlite-with-gcov" in err


def test_usage_errors(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    job = str(fixtures_dir / JOB)
    assert run(["rescore", job, "--k", "0"]) == 2
    assert run(["rescore", job, "--k", "x"]) == 2
    assert run(["rescore", job, "--group-by", "colour"]) == 2
    assert run(["rescore", job, "--metric", "median"]) == 2
    views = tmp_path / "views.toml"
    views.write_text('[views.q]\nsignals = [{ metric = "harbor_reward", output = "reward" }]\n')
    report = rescore_json(capsys, job, "--views", str(views), "--k", "1,2", "--group-by", "")
    assert report["views"]["q"]["value"] == 37 / 89
    assert report["groups"] == [] and list(report["pass_at_k"]) == ["1", "2"]
    assert report["pass_at_k"]["2"] == {
        "value": None,
        "eligible_tasks": 0,
        "stderr": None,
        "ci95": None,
        "ci95_method": None,
    }
