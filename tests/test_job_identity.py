"""One Harbor job is one stored job, whatever moment it was imported at (issue 17, item 6).

Harbor writes its job id in every trial's config.json as the trial starts; Harbor 0.6.4 (the
fixtures) writes the job's result.json only at the end. A job imported while it runs, then
after it finished, then again, is one job under Harbor's id; a store whose earlier version
named such a job by a digest of its directory keeps it (adopted, its old id and name
resolving).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from casstore.api import fsck
from casstore.store import Store
from casstore.trials import Jobs, read_job
from casstore.trials.identity import job_identity_at
from tests.helpers import store_cli
from tests.trials_builder import make_job, trial_json, trial_result, write_trial

TB2 = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")
TB2_ID = "1ea8f217-0d00-4ce0-859b-0fc92e7325d7"
HARBOR_ID = "0b6f3f0e-6c1c-4c07-9d5e-2f1b2b7a0a11"
JOB_ONE = "10000000-0000-4000-8000-000000000001"
JOB_TWO = "20000000-0000-4000-8000-000000000002"


def _running_copy(fixtures_dir: Path, dest: Path) -> Path:
    """A writable copy of the tb2-haiku job as it stood while it ran: no job result.json
    (kept beside it as ``result.json.final``)."""
    job = dest / TB2.name
    shutil.copytree(fixtures_dir / TB2, job)
    job.chmod(0o755)
    os.replace(job / "result.json", dest / "result.json.final")
    return job


def _finish(job: Path) -> None:
    """Write the job result.json Harbor writes at the end of the run."""
    shutil.copyfile(job.parent / "result.json.final", job / "result.json")


def _harbor_trial(job: Path, name: str, job_id: str | None = HARBOR_ID, started: int = 0):
    """A trial directory as Harbor writes it: config.json (the trial's ``TrialConfig``, with
    the job's id) and result.json (the ``TrialResult``)."""
    task = name.partition("__")[0]
    result = trial_result(task, name, {"reward": 1.0}, started=started, job_id=job_id)
    write_trial(job, name, trial_json(result))
    (job / name / "config.json").write_text(result.config.model_dump_json(indent=4))


@pytest.mark.realdata
def test_a_running_job_is_named_by_the_id_harbor_gave_its_trials(
    fixtures_dir: Path, tmp_path: Path, capsys
) -> None:
    """The tb2-haiku job without its result.json (as it was while it ran) has the id its
    trials' config.json name, the id of its result.json; imported then, after, and again, it
    is one job of 89 trials."""
    job = _running_copy(fixtures_dir, tmp_path)
    assert job_identity_at(job).id == TB2_ID
    assert read_job(job).job_id == TB2_ID
    store = tmp_path / "store"
    code, first, _ = store_cli(capsys, store, "import", str(job), "--json")
    assert (code, first["job"], first["imported"]) == (0, TB2_ID, 89)
    _finish(job)
    for _ in range(2):
        code, again, err = store_cli(capsys, store, "import", str(job), "--json")
        assert (code, err, again["job"], again["imported"], again["trials"]) == (
            0,
            "",
            TB2_ID,
            0,
            89,
        )
    code, listed, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert [item["job"] for item in listed] == [TB2_ID]
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert (code, report["ok"], report["jobs"], report["trials"]) == (0, True, 1, 89)


def test_a_growing_job_keeps_its_id_from_the_first_trial_to_the_end(tmp_path: Path) -> None:
    """A job written as Harbor 0.6.4 writes it, imported after each trial and after its
    result.json: one job, Harbor's id, every trial once."""
    job = make_job(tmp_path / "job", {}, job_id=None)
    with Store(tmp_path / "store") as store:
        for i in range(3):
            _harbor_trial(job, f"t{i}__run", started=i)
            (report,) = Jobs(store).import_jobs([job])
            assert (report.job, report.trials, report.imported) == (HARBOR_ID, i + 1, 1)
        (job / "result.json").write_text(json.dumps({"id": HARBOR_ID, "n_total_trials": 3}))
        (report,) = Jobs(store).import_jobs([job])
        assert (report.job, report.trials, report.imported) == (HARBOR_ID, 3, 0)
        assert [r.job_id for r in Jobs(store).list()] == [HARBOR_ID]
        assert fsck(store).ok


def test_a_trial_directory_without_its_files_yet_is_passed_over(tmp_path: Path) -> None:
    """A trial directory Harbor has just made (no config.json yet) does not name the job:
    the next trial directory that does gives the id."""
    job = make_job(tmp_path / "job", {}, job_id=None)
    (job / "a__starting").mkdir()
    _harbor_trial(job, "b__run")
    assert job_identity_at(job).id == HARBOR_ID


def test_without_any_harbor_id_the_directory_digest_stays_the_id(tmp_path: Path) -> None:
    """Trials that name no job (an older Harbor, a hand-made tree) and no job result.json:
    the id is the digest of the directory's name and config.json, as before."""
    job = make_job(tmp_path / "job", {}, job_id=None)
    _harbor_trial(job, "t0__run", job_id=None)
    identity = job_identity_at(job)
    assert identity.id.startswith("sha256:")
    assert [i.startswith("sha256:") for i in identity.former] == [True]
    assert read_job(job).job_id == identity.id


def _digest_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Name jobs as casstore did before schema 4: the trials' job id unread, no former job
    adopted."""
    import casstore.trials.identity as identity
    import casstore.trials.importing as importing

    monkeypatch.setattr(identity, "trials_job_id", lambda path, trial_dirs: None)
    monkeypatch.setattr(importing, "adopt_former", lambda *args: None)


@pytest.mark.realdata
def test_a_job_an_older_store_named_by_its_directory_is_adopted(
    fixtures_dir: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job an earlier casstore imported while it ran (id: the directory's digest) is found
    by the next import of its directory: moved under Harbor's id, no second job; its old id
    and its name still resolve, its trials and reward table are the same."""
    job = _running_copy(fixtures_dir, tmp_path)
    store = tmp_path / "store"
    with monkeypatch.context() as patch:
        _digest_named(patch)
        code, old, _ = store_cli(capsys, store, "import", str(job), "--name", "tb2", "--json")
    assert code == 0 and old["job"].startswith("sha256:")
    with Store(store) as opened:
        before = Jobs(opened).trial_records("tb2")
        table_before = Jobs(opened).reward_table("tb2")
    _finish(job)
    code, report, err = store_cli(capsys, store, "import", str(job), "--json")
    assert (code, err, report["job"], report["imported"], report["trials"]) == (
        0,
        "",
        TB2_ID,
        0,
        89,
    )
    with Store(store) as opened:
        jobs = Jobs(opened)
        assert [r.job_id for r in jobs.list()] == [TB2_ID]
        for name in ("tb2", old["job"], TB2_ID):
            assert jobs.get(name).job_id == TB2_ID
        after = jobs.trial_records("tb2")
        assert [r.trial_name for r in after] == [r.trial_name for r in before]
        assert [(r.rewards, r.evidence) for r in after] == [(r.rewards, r.evidence) for r in before]
        assert {r.job_id for r in after} == {TB2_ID}
        table = jobs.reward_table(old["job"])
        assert table.jobs == [TB2_ID] and table.trials == table_before.trials
        assert np.array_equal(table.primary, table_before.primary, equal_nan=True)
        checked = fsck(opened)
        assert (checked.ok, checked.count("jobs"), checked.count("trials")) == (True, 1, 89)
    code, scored, _ = store_cli(capsys, store, "rescore", old["job"], "--json")
    assert code == 0 and scored["resolve_rate"] == pytest.approx(0.4157303370786517)


@pytest.mark.realdata
def test_the_two_jobs_an_older_store_made_of_one_become_one(
    fixtures_dir: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure of issue 17: an earlier casstore imported the running job (digest id) and
    the finished one (Harbor's id), two jobs of one. The next import folds the first into the
    second: one job, every name and id resolving to it, nothing left of the other."""
    job = _running_copy(fixtures_dir, tmp_path)
    store = tmp_path / "store"
    with monkeypatch.context() as patch:
        _digest_named(patch)
        code, old, _ = store_cli(capsys, store, "import", str(job), "--json")
        _finish(job)
        code, new, _ = store_cli(capsys, store, "import", str(job), "--json")
        code, listed, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert len(listed) == 2 and new["job"] == TB2_ID != old["job"]
    code, report, err = store_cli(capsys, store, "import", str(job), "--json")
    assert (code, err, report["job"], report["trials"]) == (0, "", TB2_ID, 89)
    code, listed, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert [item["job"] for item in listed] == [TB2_ID]
    with Store(store) as opened:
        assert Jobs(opened).get(old["job"]).job_id == TB2_ID
        assert Jobs(opened).get(TB2.name).job_id == TB2_ID  # the name both had
        leftovers = opened.index.read(
            lambda txn: [
                key
                for db in ("jobs", "trial_packs", "reward_tables")
                for key, _ in txn.raw_items(db, old["job"])
            ]
        )
        assert leftovers == []
        checked = fsck(opened)
        assert checked.ok, checked.problems
        assert (checked.count("jobs"), checked.count("trials")) == (1, 89)


def test_a_former_id_of_another_job_is_not_adopted(tmp_path: Path, monkeypatch) -> None:
    """Two Harbor jobs with one directory name and one config.json share the digest: the
    job stored under it is adopted only by the directory whose trials it holds."""
    first = make_job(tmp_path / "a" / "job", {}, job_id=None)
    _harbor_trial(first, "t0__aaa", job_id=JOB_ONE)
    second = make_job(tmp_path / "b" / "job", {}, job_id=None)
    _harbor_trial(second, "t0__bbb", job_id=JOB_TWO)
    with Store(tmp_path / "store") as store:
        with monkeypatch.context() as patch:
            _digest_named(patch)
            (old,) = Jobs(store).import_jobs([first])
        (report,) = Jobs(store).import_jobs([second])
        assert report.job == JOB_TWO and report.imported == 1
        assert sorted(r.job_id for r in Jobs(store).list()) == sorted([old.job, JOB_TWO])
        assert [r.trial_name for r in Jobs(store).trial_records(old.job)] == ["t0__aaa"]


@pytest.mark.realdata
def test_a_job_whose_trials_another_job_copied_is_not_adopted_by_it(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    """A job directory with its own result.json id holding three trial directories copied
    from tb2-haiku (their config.json name tb2-haiku's id): the tb2-haiku job stored under
    that id is another job's, not a former id of this directory (imported from elsewhere):
    two jobs, tb2-haiku whole. Before the fix the second import moved all 89 tb2-haiku
    trials into the other job."""
    other = tmp_path / "other-job"
    other.mkdir()
    shutil.copyfile(fixtures_dir / TB2 / "config.json", other / "config.json")
    copied = sorted(p.name for p in (fixtures_dir / TB2).iterdir() if p.is_dir())[:3]
    for name in copied:
        shutil.copytree(fixtures_dir / TB2 / name, other / name)
    (other / "result.json").write_text(json.dumps({"id": HARBOR_ID, "n_total_trials": 3}))
    assert job_identity_at(other).former[0] == TB2_ID
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([fixtures_dir / TB2])
        (second,) = Jobs(store).import_jobs([other])
        assert (first.job, first.trials, second.job, second.trials) == (TB2_ID, 89, HARBOR_ID, 3)
        listed = sorted((r.job_id, r.trials, r.aliases) for r in Jobs(store).list())
        assert listed == [(HARBOR_ID, 3, []), (TB2_ID, 89, [])]
        assert fsck(store).ok


@pytest.mark.realdata
def test_a_partial_copy_of_a_finished_job_keeps_its_job_result(
    fixtures_dir: Path, tmp_path: Path, capsys
) -> None:
    """Two trial directories of the finished tb2-haiku job copied elsewhere (no job-level
    files) merge into the stored job (their trials name its Harbor id); the job result.json
    the first import read stays read: no ``job_result_missing_partial``, its times, Harbor's
    recorded metrics, the trial count lock.json gave and the Harbor version kept."""
    store = tmp_path / "store"
    code, first, _ = store_cli(
        capsys, store, "import", str(fixtures_dir / TB2), "--name", "tb2", "--json"
    )
    assert (code, first["trials"], "job_result_missing_partial" in first["failure_codes"]) == (
        0,
        89,
        False,
    )
    with Store(store) as opened:
        before = Jobs(opened).list()[0]
    copy = tmp_path / "cp1"
    copy.mkdir()
    for name in sorted(p.name for p in (fixtures_dir / TB2).iterdir() if p.is_dir())[:2]:
        shutil.copytree(fixtures_dir / TB2 / name, copy / name)
    code, merged, err = store_cli(capsys, store, "import", str(copy), "--json")
    assert (code, err, merged["job"], merged["trials"], merged["imported"]) == (
        0,
        "",
        TB2_ID,
        89,
        0,
    )
    assert merged["failure_codes"] == first["failure_codes"]
    assert [d["code"] for d in merged["diagnostics"]] == ["harbor_schema_drift"]
    code, listed, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert [(item["job"], item["failure_codes"]) for item in listed] == [
        (TB2_ID, first["failure_codes"])
    ]
    with Store(store) as opened:
        after = Jobs(opened).list()[0]
    kept = ("started_at", "finished_at", "recorded_metrics", "expected_trials", "harbor_version")
    assert [getattr(after, f) for f in kept] == [getattr(before, f) for f in kept]
    assert after.started_at is not None and after.expected_trials == 89


def test_a_job_result_never_read_stays_missing(tmp_path: Path) -> None:
    """A job imported while it ran (no job result.json), then a partial copy of it: the job
    result.json is still unread, ``job_result_missing_partial`` stays."""
    job = make_job(tmp_path / "job", {}, job_id=None, expected=2)
    for i in range(2):
        _harbor_trial(job, f"t{i}__run", started=i)
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copytree(job / "t1__run", copy / "t1__run")
    _harbor_trial(copy, "t2__run", started=2)
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([job])
        (merged,) = Jobs(store).import_jobs([copy])
        assert (merged.job, merged.trials, merged.imported) == (HARBOR_ID, 3, 1)
        assert first.failure_codes == merged.failure_codes == {"job_result_missing_partial": 1}
        assert Jobs(store).list()[0].failure_codes == {"job_result_missing_partial": 1}
        assert [d["code"] for d in merged.diagnostics] == ["job_result_missing_partial"]


@pytest.mark.parametrize("finished", [True, False])
def test_saved_trials_keep_what_the_job_files_said(tmp_path: Path, capsys, finished) -> None:
    """Saved trials of a stored job (``export``, then ``import`` of the file) read no job
    file: the job result.json read before stays read (its time, Harbor's metrics, the count
    expected); one missing before stays missing."""
    trials = {f"t__{i}": trial_json(trial_result("t", f"t__{i}", {"reward": 1.0})) for i in (1, 2)}
    job = make_job(tmp_path / "job", trials, job_id=JOB_ONE if finished else None)
    store = tmp_path / "store"
    code, first, _ = store_cli(capsys, store, "import", str(job), "--json")
    saved = tmp_path / "trials.jsonl"
    assert store_cli(capsys, store, "export", first["job"], "-o", str(saved))[0] == 0
    with Store(store) as opened:
        before = Jobs(opened).get(first["job"])
    code, again, err = store_cli(capsys, store, "import", str(saved), "--json")
    assert (code, err, again["job"], again["trials"]) == (0, "", first["job"], 2)
    assert again["failure_codes"] == first["failure_codes"]
    missing = [d for d in first["diagnostics"] if d["code"] == "job_result_missing_partial"]
    assert [d for d in again["diagnostics"] if d["code"] == "job_result_missing_partial"] == (
        missing
    )
    assert bool(missing) is not finished
    with Store(store) as opened:
        after = Jobs(opened).get(first["job"])
    kept = ("started_at", "recorded_metrics", "expected_trials", "expected_from", "harbor_version")
    assert [getattr(after, f) for f in kept] == [getattr(before, f) for f in kept]
    assert after.expected_trials == 2 and after.harbor_version == "0.20.0"
    assert (after.started_at is not None) is finished
