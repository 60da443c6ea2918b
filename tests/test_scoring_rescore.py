"""``casstore rescore`` refusals on small generated jobs (no real data needed): a trial given
twice, malformed options, missing paths, unknown tasksets and one-line metric script errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from casstore.examples.job import write_example_job
from casstore.trials import Jobs
from tests.helpers import run_cli
from tests.test_discovery import write_task

TASKS = ["alpha", "beta"]


@pytest.fixture(autouse=True)
def no_uv(monkeypatch) -> None:
    """Metric scripts run with this interpreter (see tests/test_scoring_engine.py)."""
    monkeypatch.setenv("CASSTORE_UV", "")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return write_example_job(tmp_path / "jobs", TASKS, attempts=3)


def attempts(capsys, *args: str) -> int:
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)["counts"]["attempts"]


def test_the_same_trial_twice_is_refused(capsys, tmp_path: Path, job: Path) -> None:
    from casstore.store import Store
    from casstore.trials import write_trials_jsonl

    assert attempts(capsys, "rescore", str(job)) == 6
    other = write_example_job(tmp_path / "other", TASKS, attempts=3, name="other-job")
    assert attempts(capsys, "rescore", str(job), str(other)) == 12  # two jobs: fine

    code, _, err = run_cli(capsys, "rescore", str(job), str(job))
    assert code == 1
    assert err.count("\n") == 1 and "alpha__0: trial given twice" in err
    assert f"{job} is given twice (6 repeated trial(s))" in err

    store = tmp_path / "store"
    with Store(store) as opened:
        Jobs(opened).import_jobs([job])
        (record,) = Jobs(opened).list()
        exported = tmp_path / "trials.jsonl"
        write_trials_jsonl(Jobs(opened).trial_records(record.job_id), exported)
    job_id = record.job_id
    for sources, first, second in [
        ([job_id, str(job)], f"imported job {job_id}", str(job)),
        ([str(job), str(exported)], str(job), str(exported)),
        ([job_id, str(job), str(exported)], f"imported job {job_id}", str(job)),
    ]:
        code, _, err = run_cli(capsys, "--store", str(store), "rescore", *sources)
        assert code == 1, err
        assert f"casstore: {job_id}/alpha__0: trial given twice, by {first} and by {second}" in err
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(exported.read_text() * 2)
    code, _, err = run_cli(capsys, "rescore", str(doubled))
    assert code == 1 and f"trial given twice by {doubled} (6 repeated trial(s))" in err
    code, out, _ = run_cli(capsys, "rescore", str(job), str(job), "--json")
    assert code == 1 and json.loads(out)["error"]["kind"] == "scoring"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--threshold", "nan", "--threshold: must be a finite number, not nan"),
        ("--threshold", "inf", "--threshold: must be a finite number, not inf"),
        (
            "--metric-timeout",
            "0",
            "--metric-timeout: must be > 0 and at most 86400 seconds (a day), not 0",
        ),
        (
            "--metric-timeout",
            "-1",
            "--metric-timeout: must be > 0 and at most 86400 seconds (a day), not -1",
        ),
        ("--k", "", "--k: empty item in ''"),
        ("--k", "1,,2", "--k: empty item in '1,,2'"),
        ("--group-by", "agent,agent", "--group-by: field 'agent' repeated"),
        ("--group-by", "agent,", "--group-by: empty item in 'agent,'"),
    ],
)
def test_malformed_options_are_bad_usage(
    capsys, job: Path, option: str, value: str, message: str
) -> None:
    code, _, err = run_cli(capsys, "rescore", str(job), option, value)
    assert code == 2 and err.startswith(f"casstore: {message}") and err.count("\n") == 1


def test_group_by_empty_means_no_groups(capsys, job: Path) -> None:
    code, out, err = run_cli(capsys, "rescore", str(job), "--group-by", "", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["groups"] == [] and report["group_by"] == []


def test_missing_paths_are_bad_usage(capsys, tmp_path: Path, job: Path) -> None:
    missing = tmp_path / "missing-path"
    for source in (str(missing), "trials.jsonl"):
        code, _, err = run_cli(capsys, "--store", str(tmp_path / "nostore"), "rescore", source)
        assert (code, err) == (2, f"casstore: {source}: no such file or directory\n")
    store = tmp_path / "store"
    from casstore.store import Store

    with Store(store) as opened:  # a store exists: still a missing path, not an unknown job
        Jobs(opened).import_jobs([job])
    code, _, err = run_cli(capsys, "--store", str(store), "rescore", str(missing))
    assert (code, err) == (2, f"casstore: {missing}: no such file or directory\n")
    code, _, err = run_cli(capsys, "--store", str(store), "rescore", "no-such-job")
    assert code == 2 and "no imported job of that id or name" in err
    script = tmp_path / "nosuch.py"
    code, _, err = run_cli(capsys, "rescore", str(job), "--metric", str(script))
    assert code == 2 and err.startswith(f"casstore: {script}: no such metric script")
    views = tmp_path / "missing.toml"
    code, _, err = run_cli(capsys, "rescore", str(job), "--views", str(views))
    assert (code, err) == (2, f"casstore: {views}: cannot read views: No such file or directory\n")


def test_unknown_taskset_says_taskset(capsys, tmp_path: Path, job: Path) -> None:
    from casstore.archive.discover import discover
    from casstore.store import Store

    store = tmp_path / "store"
    with Store(store) as opened:
        (task,) = discover(write_task(tmp_path / "tasks", "alpha"))
        opened.publish(task)
    code, _, err = run_cli(
        capsys, "--store", str(store), "rescore", str(job), "--taskset", "nosuch"
    )
    assert code == 2
    assert "nosuch: no taskset or task of that name" in err and "no task of" not in err


def test_failing_metric_script_is_one_line(capsys, tmp_path: Path, job: Path) -> None:
    script = tmp_path / "metric.py"
    script.write_text("def compute():\n    raise RuntimeError('rewards look wrong')\n\ncompute()\n")
    code, _, err = run_cli(capsys, "rescore", str(job), "--metric", str(script))
    assert code == 1
    assert err == (
        f"casstore: {script}: metric script failed (exit 1): RuntimeError: rewards look wrong\n"
    )
