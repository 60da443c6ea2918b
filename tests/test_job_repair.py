"""Repair paths of imported jobs (issue 17, item 7): a directory import fills in what saved
trials lacked; orphaned job data is reported by fsck and removed by gc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from casstore.api import fsck
from casstore.store import Store
from casstore.trials import Jobs
from tests.helpers import store_cli
from tests.trials_builder import make_job, trial_json, trial_result

TB2 = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")


def _job(tmp_path: Path, n: int = 20) -> Path:
    trials = {
        f"t{i % 3}__{i:02d}": trial_json(
            trial_result(f"t{i % 3}", f"t{i % 3}__{i:02d}", {"reward": i % 2}, started=i)
        )
        for i in range(n)
    }
    return make_job(tmp_path / "job", trials)


def _problems(report) -> list[tuple[str, str]]:
    return sorted((p["kind"], p["ref"]) for p in report.problems)


@pytest.mark.realdata
def test_a_job_directory_fills_in_what_its_saved_trials_lacked(
    fixtures_dir: Path, tmp_path: Path, capsys
) -> None:
    """Saved trials imported first (their evidence elsewhere), then the job's directory:
    every trial gets its evidence (the result.json bytes), the job record what the job's
    files say, and fsck is clean. Before the fix the trials were skipped (stored already)
    and fsck reported 89 missing_evidence with no way to repair."""
    job = fixtures_dir / TB2
    saved, store = tmp_path / "saved.jsonl", tmp_path / "store"
    assert store_cli(capsys, store, "export", str(job), "-o", str(saved))[0] == 0
    code, first, _ = store_cli(capsys, store, "import", str(saved), "--json")
    assert (code, first["imported"]) == (0, 89)
    code, again, err = store_cli(capsys, store, "import", str(job), "--json")
    assert (code, err, again["job"], again["trials"], again["imported"]) == (
        0,
        "",
        first["job"],
        89,
        0,
    )
    with Store(store) as opened:
        report = fsck(opened)
        assert report.ok, _problems(report)[:3]
        jobs = Jobs(opened)
        record = jobs.get(first["job"])
        assert record.imported_at is not None and record.harbor_version == "0.6.4"
        assert record.recorded_metrics == {
            "predev-auto__terminal-bench": [{"mean": 0.4157303370786517}]
        }
        for trial in jobs.trial_records(first["job"]):
            assert jobs.evidence(trial.evidence) == Path(trial.result_path).read_bytes()
    # and again: nothing to fill in, nothing changes
    code, third, _ = store_cli(capsys, store, "import", str(job), "--json")
    assert (code, third["imported"], third["trials"]) == (0, 0, 89)


def test_trials_replaced_by_saved_ones_are_filled_in_again(tmp_path: Path, capsys) -> None:
    """A directory-imported job whose trials saved trials replaced (no evidence of theirs in
    this store): fsck reports their evidence missing; importing the directory again reads
    them again, and fsck is clean."""
    job = _job(tmp_path)
    store, saved = tmp_path / "store", tmp_path / "saved.jsonl"
    code, report, _ = store_cli(capsys, store, "import", str(job), "--json")
    assert store_cli(capsys, store, "export", "job", "-o", str(saved))[0] == 0
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    for item in lines[:5]:
        item["evidence"], item["evidence_dict"] = None, None
    for index, item in enumerate(lines[5:8]):
        item["evidence"] = "sha256:" + "ab" * 32 + f"#{index}"  # another store's
    saved.write_text("".join(json.dumps(item) + "\n" for item in lines[:8]))
    assert store_cli(capsys, store, "import", str(saved), "--json")[0] == 0
    with Store(store) as opened:
        missing = _problems(fsck(opened))
    assert [kind for kind, _ in missing] == ["missing_evidence"] * 8
    code, again, err = store_cli(capsys, store, "import", str(job), "--json")
    assert (code, err, again["trials"], again["imported"]) == (0, "", 20, 0)
    with Store(store) as opened:
        assert fsck(opened).ok, _problems(fsck(opened))
        for trial in Jobs(opened).trial_records(report["job"]):
            assert Jobs(opened).evidence(trial.evidence) == Path(trial.result_path).read_bytes()
