"""Repair paths of imported jobs (issue 17, item 7): a directory import fills in what saved
trials lacked; orphaned job data is reported by fsck and removed by gc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec.structs import replace

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


# orphaned job data ----------------------------------------------------------------------------

GONE = "gone-job"


def _orphans(store_dir: Path, job: str) -> dict[str, list[tuple[str, bytes]]]:
    """Put one orphan in each trial database, copies of the job's values under keys no job
    record reaches; returns ``{kind: [(key, value)]}``."""
    with Store(store_dir, create=False) as store:

        def put(txn) -> dict[str, list[tuple[str, bytes]]]:
            pack = bytes(txn.raw_get("trial_packs", f"{job}/00000000"))
            table = bytes(txn.raw_get("reward_tables", job))
            values = {
                "orphan_trial_pack": [(f"{GONE}/00000000", pack)],
                "orphan_trial_record": [(f"{GONE}/t0__00", b"\x91\xa6t0__00")],
                "orphan_reward_table": [(GONE, table)],
                "orphan_evidence": [("sha256:" + "0" * 64, b"\x80")],
                "orphan_dictionary": [("sha256:" + "1" * 64, b"\xc4\x01x")],
            }
            dbs = ("trial_packs", "trials", "reward_tables", "evidence", "zstd_dicts")
            for db, items in zip(dbs, values.values(), strict=True):
                for key, value in items:
                    txn.raw_put(db, key, value)
            return values

        return store.index.write(put)


def test_fsck_reports_orphaned_job_data_and_gc_removes_it(tmp_path: Path, capsys) -> None:
    """A value of each trial database no job record reaches is an fsck problem (kind, key),
    exit 1; gc --dry-run lists them, gc removes them (their bytes counted), and leaves the
    job whole: fsck clean, its trials and evidence as they were."""
    store = tmp_path / "store"
    code, report, _ = store_cli(capsys, store, "import", str(_job(tmp_path)), "--json")
    with Store(store) as opened:
        before = Jobs(opened).trial_records(report["job"])
    values = _orphans(store, report["job"])
    expected = sorted((kind, key) for kind, items in values.items() for key, _ in items)
    code, checked, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 1 and sorted((p["kind"], p["ref"]) for p in checked["problems"]) == expected
    message = next(p["message"] for p in checked["problems"] if p["kind"] == "orphan_trial_pack")
    assert message == (
        f"trial_packs/{GONE}/00000000: no job record references it (casstore gc removes it; "
        "importing its job directory again restores the job record)"
    )
    code, dry, _ = store_cli(capsys, store, "gc", "--dry-run", "--json")
    listed = [f"{db}/{key}" for db, (key, _) in zip(_DBS, _first(values), strict=True)]
    assert (code, sorted(dry["job_data"]), dry["removed"]) == (0, sorted(listed), [])
    assert store_cli(capsys, store, "fsck", "--json")[0] == 1
    code, text, err = store_cli(capsys, store, "gc")
    assert (code, err) == (0, "") and "removed 5 orphaned job values" in text
    size = sum(len(key.encode()) + len(value) for key, value in _first(values))
    assert f"removed 0 archives, {size} bytes" in text
    with Store(store) as opened:
        checked = fsck(opened)
        assert checked.ok, _problems(checked)
        after = Jobs(opened).trial_records(report["job"])
        assert after == before
        assert all(Jobs(opened).evidence(r.evidence) for r in after)
    code, again, _ = store_cli(capsys, store, "gc", "--json")
    assert (code, again["job_data"]) == (0, [])


_DBS = ("trial_packs", "trials", "reward_tables", "evidence", "zstd_dicts")


def _first(values: dict[str, list[tuple[str, bytes]]]) -> list[tuple[str, bytes]]:
    return [items[0] for items in values.values()]


def test_a_lost_job_record_is_restored_by_importing_its_directory(tmp_path: Path) -> None:
    """Its job record deleted, a job's packs, table, evidence and dictionary are orphans;
    importing its directory again restores the record over them, fsck clean."""
    job = _job(tmp_path)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job])
        store.index.write(lambda txn: txn.delete("jobs", report.job))
        kinds = sorted({p["kind"] for p in fsck(store).problems})
        assert kinds == [
            "orphan_dictionary",
            "orphan_evidence",
            "orphan_reward_table",
            "orphan_trial_pack",
        ]
        (again,) = Jobs(store).import_jobs([job])
        assert (again.job, again.trials) == (report.job, 20)
        assert fsck(store).ok, _problems(fsck(store))


def test_saved_trials_replacing_a_whole_evidence_pack_leave_no_orphan(
    tmp_path: Path, capsys
) -> None:
    """Saved trials from elsewhere replacing every trial of an evidence pack: the pack no
    trial references is removed with them (fsck: their evidence missing, nothing orphaned);
    importing the directory again reads them again, fsck clean."""
    job = _job(tmp_path)
    store, saved = tmp_path / "store", tmp_path / "saved.jsonl"
    assert store_cli(capsys, store, "import", str(job))[0] == 0
    assert store_cli(capsys, store, "export", "job", "-o", str(saved))[0] == 0
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    for index, item in enumerate(lines):
        item["evidence"] = "sha256:" + "ab" * 32 + f"#{index}"
        item["evidence_dict"] = None
    saved.write_text("".join(json.dumps(item) + "\n" for item in lines))
    assert store_cli(capsys, store, "import", str(saved))[0] == 0
    with Store(store) as opened:
        kinds = {kind for kind, _ in _problems(fsck(opened))}
        assert kinds == {"missing_evidence"}
        assert opened.index.read(lambda txn: (txn.count("evidence"), txn.count("zstd_dicts"))) == (
            0,
            1,  # the job record's dictionary, which the directory's next import uses
        )
    assert store_cli(capsys, store, "import", str(job))[0] == 0
    with Store(store) as opened:
        assert fsck(opened).ok, _problems(fsck(opened))


def test_a_chunk_of_duplicate_trials_stores_no_evidence(tmp_path: Path, monkeypatch) -> None:
    """Trial directories that only repeat trial names read before are left out: their
    chunk's evidence pack, which no stored trial would reference, is not written."""
    import casstore.trials.chunk as chunk

    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 4)
    texts = {
        f"a__{i}": trial_json(trial_result("a", f"a__{i}", {"reward": 1}, started=i))
        for i in range(4)
    }
    copies = {  # other files, the same trial names
        f"zz__{i}": trial_json(trial_result("a", f"a__{i}", {"reward": 0}, started=i))
        for i in range(4)
    }
    job = make_job(tmp_path / "job", texts | copies)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job])
        assert report.trials == 4
        assert store.index.read(lambda txn: txn.count("evidence")) == 1
        assert fsck(store).ok, _problems(fsck(store))


def test_a_lost_trial_pack_is_restored_by_importing_its_directory(
    tmp_path: Path, monkeypatch
) -> None:
    """A trial pack deleted (the job record still lists its trials): fsck reports the job
    record and the table against the records left, and the evidence only its trials
    referenced; importing the directory again reads the 5 trials no record holds (new
    evidence packs) and removes that evidence: fsck clean, the records as before but for
    their evidence references, each evidence the trial's result.json bytes."""
    import casstore.trials.chunk as chunk
    import casstore.trials.packs as packs

    monkeypatch.setattr(packs, "TRIALS_PER_PACK", 5)
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 2)
    trials = {
        f"t{i:02d}__x": trial_json(trial_result(f"t{i:02d}", f"t{i:02d}__x", {"reward": i % 2}))
        for i in range(12)
    }
    job = make_job(tmp_path / "job", trials)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job])
        before = Jobs(store).trial_records(report.job)
        store.index.write(lambda txn: txn.delete("trial_packs", f"{report.job}/00000001"))
        assert sorted(kind for kind, _ in _problems(fsck(store))) == [
            "corrupt_job",
            "corrupt_reward_table",
            "orphan_evidence",  # the two evidence packs only its trials referenced
            "orphan_evidence",
        ]
        (again,) = Jobs(store).import_jobs([job])
        assert (again.trials, again.imported) == (12, 0)
        assert fsck(store).ok, _problems(fsck(store))
        after = Jobs(store).trial_records(report.job)
        assert [replace(r, evidence=None) for r in after] == [
            replace(r, evidence=None) for r in before
        ]
        assert [a.evidence == b.evidence for a, b in zip(after, before, strict=True)] == (
            [True] * 5 + [False] * 5 + [True] * 2
        )
        for trial in after:
            assert Jobs(store).evidence(trial.evidence) == Path(trial.result_path).read_bytes()
        assert store.index.read(lambda txn: txn.count("evidence")) == 6 - 2 + 3
