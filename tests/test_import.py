"""Job import into a store: real Harbor data, idempotent and incremental re-import, saved
trials (trials.jsonl), the CLI (JSON outputs and exit codes)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import msgpack
import numpy as np
import pytest

from casstore.api import fsck
from casstore.errors import CheckError, RewardKeyError
from casstore.store import Store
from casstore.store.index import SCHEMA_VERSION, Txn
from casstore.table.columns import Flag, Kind
from casstore.trials import (
    Jobs,
    read_job,
    read_trials_jsonl,
    table_from_records,
    write_trials_jsonl,
)
from casstore.trials.records import REWARD_KEY_METADATA
from casstore.trials.stored import TRIAL_DATABASES
from tests.helpers import store_cli
from tests.trials_builder import make_job, trial_json, trial_result, write_trial

TB2 = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")


# real data ------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_tb2_job_facts(fixtures_dir: Path) -> None:
    job_dir = fixtures_dir / TB2
    job = read_job(job_dir)
    assert len(job.trials) == 89 and len(job.table) == 89
    assert job.job_id == "1ea8f217-0d00-4ce0-859b-0fc92e7325d7"
    assert sum(not r.has_verifier for r in job.trials) == 1
    errored = [r for r in job.trials if r.exception_type is not None]
    assert len(errored) == 21
    assert sum(r.rewards is not None for r in errored) == 20
    types = sorted(r.exception_type for r in errored)
    assert types.count("AgentTimeoutError") == 17
    assert types.count("NonZeroAgentExitCodeError") == 4
    assert all(r.valid for r in job.trials)
    for record in job.trials:
        reward_txt = job_dir / record.trial_name / "verifier" / "reward.txt"
        if record.rewards is None:
            assert not reward_txt.exists()
        else:
            assert record.rewards == {"reward": float(reward_txt.read_text())}
            assert record.kinds == {"reward": Kind.NUMBER}
    table = job.table
    assert int(np.count_nonzero(table.flags & Flag.NO_VERIFIER)) == 1
    assert int(np.count_nonzero(table.flags & Flag.EXCEPTION)) == 21
    # Harbor's recorded mean counts the attempt without a reward as 0
    harbor_mean = float(np.nan_to_num(table.primary, nan=0.0).sum() / len(table))
    assert harbor_mean == 0.4157303370786517
    assert job.record.recorded_metrics["predev-auto__terminal-bench"] == [
        {"mean": 0.4157303370786517}
    ]
    assert job.failure_codes == {"verifier_result_missing": 1, "trial_exception": 20}
    # Harbor 0.20 rejects these 0.6.4 files (mounts_json): a diagnostic, never a rejection
    (drift,) = [d for d in job.diagnostics if d["code"] == "harbor_schema_drift"]
    assert drift["count"] == drift["trials"] == 89 and drift["job_files"] == ["config.json"]
    assert table.agents == ["", "predev-auto@0.1.0"] and table.datasets == ["", "terminal-bench"]


@pytest.mark.realdata
def test_full_trials_keep_their_evidence(fixtures_dir: Path, tmp_path: Path) -> None:
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([fixtures_dir / "jobs" / "full-trials"])
        assert report.trials == report.imported == 3
        assert report.failure_codes["job_result_missing_partial"] == 1
        records = Jobs(store).trial_records(report.job)
        assert len(records) == 3
        for record in records:
            raw = Path(record.result_path).read_bytes()
            assert Jobs(store).evidence(record.evidence) == raw
            assert record.evidence_bytes == len(raw)
        assert {r.exception_type for r in records} == {None, "NonZeroAgentExitCodeError"}


@pytest.mark.realdata
def test_tb2_store_round_trip_and_evidence(fixtures_dir: Path, tmp_path: Path) -> None:
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([fixtures_dir / TB2])
        assert (report.trials, report.imported, report.exceptions, report.no_verifier) == (
            89,
            89,
            21,
            1,
        )
        record = Jobs(store).list()[0]
        assert record.dictionary is not None  # 89 files: a trained dictionary
        table = Jobs(store).reward_table(record.name)
        assert len(table) == 89 and table.trials == read_job(fixtures_dir / TB2).table.trials
        trial = Jobs(store).trial_records(record.job_id)[5]
        assert Jobs(store).evidence(trial.evidence) == Path(trial.result_path).read_bytes()


# store ----------------------------------------------------------------------------------------


def _job(tmp_path: Path, n: int = 4) -> Path:
    trials = {
        f"t{i % 2}__{i}": trial_json(
            trial_result(f"t{i % 2}", f"t{i % 2}__{i}", {"reward": i % 2, "acc": 0.5}, started=i)
        )
        for i in range(n)
    }
    return make_job(tmp_path / "job", trials, expected=n)


def _snapshot(store: Store, job: str) -> tuple:
    table = Jobs(store).reward_table(job)
    records = Jobs(store).trial_records(job)
    return table.to_bytes(), [(r.trial_name, r.attempt, r.evidence) for r in records]


def test_import_is_idempotent(tmp_path: Path) -> None:
    job_dir = _job(tmp_path)
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([job_dir])
        before = _snapshot(store, first.job)
        (second,) = Jobs(store).import_jobs([job_dir])
        assert second.imported == 0 and second.trials == first.trials == 4
        assert _snapshot(store, first.job) == before
        assert len(Jobs(store).list()) == 1
        assert second.failure_codes == first.failure_codes == {}


def test_incremental_import_adds_new_trials(tmp_path: Path) -> None:
    job_dir = _job(tmp_path)
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([job_dir])
        # a new trial of t0 that started before every other one: attempts shift
        write_trial(
            job_dir, "t0__new", trial_json(trial_result("t0", "t0__new", {"reward": 1}, started=-5))
        )
        (second,) = Jobs(store).import_jobs([job_dir])
        assert second.imported == 1 and second.trials == 5
        attempts = {r.trial_name: r.attempt for r in Jobs(store).trial_records(first.job)}
        assert attempts["t0__new"] == 0 and attempts["t0__0"] == 1 and attempts["t0__2"] == 2
        table = Jobs(store).reward_table(first.job)
        assert len(table) == 5 and "t0__new" in table.trials
        assert second.failure_codes == {"trial_count_mismatch": 1}  # lock.json said 4


def test_reward_table_by_name_and_unknown_job(tmp_path: Path) -> None:
    from casstore.errors import UnknownReferenceError

    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([_job(tmp_path)], name="mine")
        assert Jobs(store).reward_table("mine").jobs == [report.job]
        with pytest.raises(UnknownReferenceError):
            Jobs(store).reward_table("nope")


# saved trials -----------------------------------------------------------------------------------


def test_trials_jsonl_round_trip(tmp_path: Path) -> None:
    trials = {
        "a__1": trial_json(trial_result("a", "a__1"), '{"rewards": {"reward": NaN, "x": true}}'),
        "b__1": trial_json(trial_result("b", "b__1", exception="AgentTimeoutError")),
        "c__1": trial_json(trial_result("c", "c__1"), '{"rewards": {"reward": null}}'),
        "d__1": trial_json(trial_result("d", "d__1", verifier=False)),
    }
    job = read_job(make_job(tmp_path / "job", trials), reward_key="reward")
    path = tmp_path / "trials.jsonl"
    assert write_trials_jsonl(job.trials, path) == 4
    key, records = read_trials_jsonl(path)
    assert key == "reward"
    assert [r.trial_name for r in records] == [r.trial_name for r in job.trials]
    nan_row = records[0]
    assert math.isnan(nan_row.rewards["reward"]) and nan_row.rewards["x"] == 1.0
    assert nan_row.kinds == {"reward": Kind.NONFINITE, "x": Kind.BOOLEAN}
    assert records[1:] == job.trials[1:]
    again = table_from_records(records, key, jobs=[job.job_id])
    assert again.to_bytes() == job.table.to_bytes()


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_lines(path: Path, items: list[dict]) -> None:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


def _edited_saved_trials(tmp_path: Path, index: int, **fields) -> tuple[Path, Path, list[dict]]:
    """:func:`_job` saved to ``tmp_path/trials.jsonl`` with ``fields`` set on trial ``index``:
    (job directory, saved trials file, its items)."""
    job_dir = _job(tmp_path)
    path = tmp_path / "trials.jsonl"
    write_trials_jsonl(read_job(job_dir).trials, path)
    items = _lines(path)
    items[index].update(fields)
    _write_lines(path, items)
    return job_dir, path, items


def test_saved_trials_refused_without_or_with_mixed_reward_keys(tmp_path: Path) -> None:
    job_dir, path, items = _edited_saved_trials(tmp_path, 2, metadata={REWARD_KEY_METADATA: "acc"})
    with pytest.raises(RewardKeyError) as mixed:
        read_trials_jsonl(path)
    message = str(mixed.value)
    assert ":3:" in message and "'acc'" in message
    assert f"casstore export {job_dir.resolve()} -o FILE --reward-key reward" in message
    del items[2]["metadata"]
    _write_lines(path, items)
    with pytest.raises(RewardKeyError, match=r"has no metadata\['harbor_primary_reward_key'\]"):
        read_trials_jsonl(path)
    with pytest.raises(RewardKeyError, match="casstore export"):
        read_trials_jsonl(path)


# CLI --------------------------------------------------------------------------------------------


def test_cli_import_export_ls(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    job_dir = _job(tmp_path)
    code, report, _ = store_cli(capsys, store, "import", str(job_dir), "--json")
    assert code == 0
    assert set(report) == {
        "job",
        "trials",
        "imported",
        "counts",
        "failure_codes",
        "diagnostics",
    }
    assert (report["trials"], report["imported"], report["counts"]["invalid"]) == (4, 4, 0)
    code, again, _ = store_cli(capsys, store, "import", str(job_dir), "--json")
    assert code == 0 and again["imported"] == 0
    code, rows, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert code == 0 and [r["job"] for r in rows] == [report["job"]]
    assert rows[0]["name"] == "job" and rows[0]["trials"] == 4
    out = tmp_path / "out.jsonl"
    code, exported, _ = store_cli(capsys, store, "export", "job", "-o", str(out), "--json")
    assert code == 0 and exported["trials"] == 4 and len(_lines(out)) == 4
    # rebuilding from the job directory with another key is one command, no store needed
    rebuilt = tmp_path / "acc.jsonl"
    code, _, _ = store_cli(
        capsys, store, "export", str(job_dir), "-o", str(rebuilt), "--reward-key", "acc"
    )
    assert code == 0
    assert read_trials_jsonl(rebuilt)[0] == "acc"
    # saved trials import as their job
    code, saved, _ = store_cli(capsys, tmp_path / "other", "import", str(rebuilt), "--json")
    assert code == 0 and saved["job"] == report["job"] and saved["trials"] == 4


def test_cli_several_jobs_give_a_list(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        make_job(runs / name, {"t__1": trial_json(trial_result("t", "t__1"))}, job_id=name)
    code, reports, _ = store_cli(capsys, tmp_path / "store", "import", str(runs), "--json")
    assert code == 0 and [r["job"] for r in reports] == ["a", "b"]


def test_cli_exit_codes(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    (tmp_path / "plain").mkdir()
    code, _, err = store_cli(capsys, store, "import", str(tmp_path / "plain"))
    assert code == 2 and err.count("\n") == 1 and str(tmp_path / "plain") in err
    code, _, err = store_cli(capsys, store, "import", str(tmp_path / "missing"))
    assert code == 2 and "missing" in err
    code, _, err = store_cli(capsys, store, "export", "unknown-job", "-o", str(tmp_path / "x"))
    assert code == 2
    _, path, _ = _edited_saved_trials(tmp_path, 1, metadata={REWARD_KEY_METADATA: "acc"})
    code, _, err = store_cli(capsys, store, "import", str(path))
    assert code == 1 and "casstore export" in err and err.count("\n") == 1
    # a directory with trial dirs but nothing readable and no job result: check failure
    broken = make_job(tmp_path / "broken", {"t__1": "garbage"}, job_id=None)
    code, _, err = store_cli(capsys, store, "import", str(broken))
    assert code in (1, 2)


def _job_with_lone_surrogates(tmp_path: Path) -> Path:
    """A job of three readable trials (one named with an escaped surrogate pair, an emoji)
    and two whose result.json holds a lone surrogate escape (Harbor's loader refuses both)."""
    trials = {
        f"t__{i}": trial_json(trial_result("t", f"t__{i}", {"reward": i % 2})) for i in range(2)
    }
    trials["pair__1"] = trial_json(trial_result("pair", "pair__1")).replace(
        '"trial_name": "pair__1"', r'"trial_name": "pair__\ud83d\ude00"', 1
    )
    trials["name__1"] = trial_json(trial_result("name", "name__1")).replace(
        '"trial_name": "name__1"', r'"trial_name": "name__\ud800x"', 1
    )
    trials["key__1"] = trial_json(
        trial_result("key", "key__1"), r'{"rewards": {"reward": 1.0, "acc\uDC00": 0.5}}'
    )
    return make_job(tmp_path / "job", trials)


LONE_SURROGATE_DIAGNOSTIC = {
    "code": "result_unreadable",
    "count": 2,
    "trials": [
        {
            "trial_dir": "key__1",
            "reason": "result.json unparseable: lone surrogate in a string (not valid Unicode)",
        },
        {
            "trial_dir": "name__1",
            "reason": "result.json unparseable: lone surrogate in a string (not valid Unicode)",
        },
    ],
}


def test_import_of_lone_surrogates_lists_them_as_unreadable(tmp_path: Path) -> None:
    job_dir = _job_with_lone_surrogates(tmp_path)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
        assert (report.trials, report.imported) == (3, 3)
        assert report.failure_codes == {"result_unreadable": 2}
        assert [d for d in report.diagnostics if d["code"] == "result_unreadable"] == [
            LONE_SURROGATE_DIAGNOSTIC
        ]
        records = Jobs(store).trial_records(report.job)
        assert [r.trial_name for r in records] == ["pair__\U0001f600", "t__0", "t__1"]
        pair = records[0]
        assert (
            Jobs(store).evidence(pair.evidence)
            == (job_dir / "pair__1" / "result.json").read_bytes()
        )
        assert Jobs(store).reward_table(report.job).trials == ["pair__\U0001f600", "t__0", "t__1"]
        assert fsck(store).ok


def test_cli_import_rescore_export_of_lone_surrogates(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    job_dir = _job_with_lone_surrogates(tmp_path)
    code, report, err = store_cli(capsys, store, "import", str(job_dir), "--json")
    assert (code, err) == (0, "")
    assert (report["trials"], report["imported"]) == (3, 3)
    assert report["failure_codes"] == {"result_unreadable": 2}
    assert LONE_SURROGATE_DIAGNOSTIC in report["diagnostics"]
    for source in (str(job_dir), report["job"]):
        code, scored, err = store_cli(capsys, store, "rescore", source, "--json")
        assert (code, err) == (0, "")
        assert scored["counts"]["attempts"] == 3
        assert sorted(t["task"] for t in scored["tasks"]) == ["pair", "t"]
        out = tmp_path / "out.jsonl"
        code, text, err = store_cli(capsys, store, "export", source, "-o", str(out))
        assert (code, err) == (0, "")
        assert text == f"3 trials of {report['job']} written to {out}\n"
        names = sorted(item["trial_name"] for item in _lines(out))
        assert names == ["pair__\U0001f600", "t__0", "t__1"]


def test_shutil_copy_of_job_keeps_id(tmp_path: Path) -> None:
    """The job id comes from Harbor's job result.json, not from where the directory is."""
    job_dir = _job(tmp_path)
    copy = tmp_path / "elsewhere" / "job"
    shutil.copytree(job_dir, copy)
    assert read_job(copy).job_id == read_job(job_dir).job_id


@pytest.mark.realdata
def test_reimport_keeps_drift_diagnostic(fixtures_dir: Path, tmp_path: Path) -> None:
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([fixtures_dir / TB2])
        (second,) = Jobs(store).import_jobs([fixtures_dir / TB2])
        assert second.imported == 0 and second.trials == 89
        assert second.failure_codes == first.failure_codes
        assert [d["code"] for d in second.diagnostics] == [d["code"] for d in first.diagnostics]


def _pack_records(items: list[tuple[bytes, bytes]]) -> list[list]:
    """The trial records (msgpack arrays, decoded) of ``trial_packs`` items, in order."""
    import msgspec

    from casstore.trials.stored_form import pack_body

    return [
        record for _, value in items for record in msgspec.msgpack.decode(pack_body(value, True))
    ]


def _index_items(store_dir: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every (key, value) of the trial databases, job records without ``imported_at``."""
    import lmdb
    import msgpack

    env = lmdb.open(str(store_dir / "index"), max_dbs=32, readonly=True, lock=False)
    found: dict[str, list[tuple[bytes, bytes]]] = {}
    try:
        with env.begin() as txn:
            for db in TRIAL_DATABASES:
                items = []
                for key, value in txn.cursor(db=env.open_db(db.encode(), txn=txn, create=False)):
                    if db == "jobs":
                        record = msgpack.unpackb(value, raw=False)
                        record.pop("imported_at")
                        value = msgpack.packb(record, use_bin_type=True)
                    items.append((bytes(key), bytes(value)))
                found[db] = items
    finally:
        env.close()
    return found


@pytest.mark.parametrize("layout", ["task-prefixed", "duplicate", "tasks-across-chunks"])
def test_packed_import_stores_what_records_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """The packed path (records, evidence and table made in the workers, written as they
    are) stores byte for byte what encoding the decoded records stores, and its attempts and
    table are those of :func:`assign_attempts` and :func:`table_from_records`: attempts
    assigned in the workers (each task within one chunk) or in the main process (a duplicate
    trial name, tasks across chunks), unreadable files, invalid and secondary rewards."""
    import casstore.trials.chunk as chunk
    import casstore.trials.importing as importing
    import casstore.trials.packs as stored_packs
    from casstore.trials.table import assign_attempts

    def dir_name(i: int) -> str:
        return (
            f"x{(i * 7) % 40:02d}__{i}" if layout == "tasks-across-chunks" else f"t{i % 3}__{i:03d}"
        )

    trials: dict[str, str | None] = {
        dir_name(i): trial_json(
            trial_result(
                f"t{i % 3}",
                f"t{i % 3}__{i:03d}",
                {"reward": i % 2, "acc": 0.5} if i % 4 else {"reward": True},
                exception="AgentTimeoutError" if i % 5 == 0 else None,
                started=i % 7,
            ),
            '{"rewards": {"reward": "bad"}}' if i % 13 == 0 else None,
        )
        for i in range(40)
    }
    if layout == "duplicate":
        trials["zz-copy"] = trials["t1__001"]  # a duplicate trial name
    trials["broken"] = "{"
    trials["missing"] = None
    job_dir = make_job(tmp_path / "job", trials, expected=40)
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 6)
    monkeypatch.setattr(stored_packs, "TRIALS_PER_PACK", 7)

    def import_job(store_dir: Path, packed: bool) -> list[dict]:
        original = importing.read_job

        def read(*args, **kwargs):
            parsed = original(*args, workers=2, **kwargs)
            if not packed:
                parsed.trials = parsed.trials  # drops the packed form: records re-encoded
                parsed.evidence = parsed.evidence
            return parsed

        monkeypatch.setattr(importing, "read_job", read)
        with Store(store_dir) as store:
            reports = [r.to_json() for r in Jobs(store).import_jobs([job_dir])]
        monkeypatch.setattr(importing, "read_job", original)
        return reports

    parsed = read_job(job_dir, workers=2)
    records = parsed.trials
    attempts = [r.attempt for r in records]
    assign_attempts(records)
    assert [r.attempt for r in records] == attempts and max(attempts) > 4
    table = table_from_records(records, "reward", jobs=[parsed.job_id])
    assert table.to_bytes() == parsed.table.to_bytes()
    assert import_job(tmp_path / "a", True) == import_job(tmp_path / "b", False)
    packed, decoded = _index_items(tmp_path / "a"), _index_items(tmp_path / "b")
    assert len(_pack_records(packed["trial_packs"])) == 40 and not packed["trials"]
    assert len(packed["trial_packs"]) == 6  # 7 per pack (TRIALS_PER_PACK), by trial name
    names = [record[0] for record in _pack_records(packed["trial_packs"])]
    assert names == sorted(names)
    assert packed == decoded


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("existing", [[], [b"a"], [b"a", b"k"], [b"m"], [b"z"]])
@pytest.mark.parametrize("equal_keys", [False, True])
def test_bulk_puts_append_as_plain_puts_store(
    tmp_path: Path, overwrite: bool, existing: list[bytes], equal_keys: bool
) -> None:
    """Bulk puts append when every key is beyond the database's last one; equal keys among
    the items and keys not beyond the last one end as plain puts leave them."""
    from casstore.store.index import Index

    items = [(b"k", b"1"), (b"c", b"2"), (b"x", b"4"), (b"n", b"6")]
    if equal_keys:
        items += [(b"k", b"3"), (b"c", b"5")]

    def stored(put) -> list[tuple[bytes, bytes]]:
        with Index(tmp_path / f"i{len(list(tmp_path.iterdir()))}") as index:

            def body(txn: Txn) -> list[tuple[bytes, bytes]]:
                cursor = txn._txn.cursor(db=txn._dbs["evidence"])
                for key in existing:
                    cursor.put(key, b"old")
                put(txn)
                return list(txn._txn.cursor(db=txn._dbs["evidence"]))

            return index.write(body)

    def plain(txn: Txn) -> None:
        cursor = txn._txn.cursor(db=txn._dbs["evidence"])
        cursor.putmulti(sorted(items, key=lambda item: item[0]), overwrite=overwrite)

    assert stored(lambda txn: txn.raw_put_many("evidence", items, overwrite)) == stored(plain)


def _stream_job(tmp_path: Path, n: int = 30) -> Path:
    trials: dict[str, str | None] = {
        f"t{i % 4}__{i:03d}": trial_json(
            trial_result(f"t{i % 4}", f"t{i % 4}__{i:03d}", {"reward": i % 2}, started=i % 5)
        )
        for i in range(n)
    }
    return make_job(tmp_path / "job", trials, expected=n)


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_import_survives_a_full_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A new job's chunks are written while it is parsed; when the map fills up meanwhile
    the transaction is abandoned and the job written the usual way (map grown): the store
    holds exactly what an import without streaming stores."""
    import lmdb

    import casstore.trials.chunk as chunk
    import casstore.trials.importing as importing
    import casstore.trials.packs as stored_packs

    job_dir = _stream_job(tmp_path)
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 4)
    monkeypatch.setattr(stored_packs, "TRIALS_PER_PACK", 3)  # packs written while parsing
    original = importing.read_job
    monkeypatch.setattr(
        importing, "read_job", lambda *a, **k: original(*a, **{**k, "workers": workers})
    )
    full = {"puts": 0}
    put = Txn.raw_put_many

    def failing_put(txn, db, items, overwrite=True):  # the map fills up at the second chunk
        full["puts"] += 1
        if full["puts"] == 2:
            raise lmdb.MapFullError("full")
        put(txn, db, items, overwrite)

    monkeypatch.setattr(Txn, "raw_put_many", failing_put)
    with Store(tmp_path / "a") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
    assert report.imported == 30 and full["puts"] == 3  # then the usual write
    monkeypatch.setattr(Txn, "raw_put_many", put)

    class Unstreamed(importing.JobStream):
        def add(self, chunk) -> None:  # nothing written while parsing
            self.failed = True

    monkeypatch.setattr(importing, "JobStream", Unstreamed)
    with Store(tmp_path / "b") as store:
        (plain,) = Jobs(store).import_jobs([job_dir])
    assert report.to_json() == plain.to_json()
    assert _index_items(tmp_path / "a") == _index_items(tmp_path / "b")


@pytest.mark.parametrize("workers", [1, 2])
def test_new_job_is_written_while_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A new job's chunks reach the store as they are parsed, in order, and its transaction
    commits without the write that follows a parse (which would write everything again)."""
    import casstore.trials.chunk as chunk
    import casstore.trials.importing as importing

    job_dir = _stream_job(tmp_path)
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 4)
    original = importing.read_job
    monkeypatch.setattr(
        importing, "read_job", lambda *a, **k: original(*a, **{**k, "workers": workers})
    )
    added: list[list[str]] = []
    add = importing.JobStream.add
    monkeypatch.setattr(
        importing.JobStream,
        "add",
        lambda self, chunk: (added.append(chunk.names), add(self, chunk)),
    )

    def no_second_write(*args, **kwargs):
        raise AssertionError("the job was written after the parse")

    monkeypatch.setattr(importing, "store_job", no_second_write)
    with Store(tmp_path / "s") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
    assert report.imported == 30 and len(added) > 2
    assert [name for names in added for name in names] == sorted(
        name for name in (p.name for p in job_dir.iterdir()) if "__" in name
    )


def test_streamed_import_of_a_job_imported_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job another import stored after this one found it new is merged with, not
    streamed over: this import reports no new trial and the store holds the job once."""
    import casstore.trials.importing as importing

    job_dir = _stream_job(tmp_path)
    original = importing.read_job
    nested: list = []

    def read(*args, **kwargs):
        if not nested:  # another import of the job runs first (the job was new when looked up)
            nested.append(None)
            nested[0] = Jobs(store).import_jobs([job_dir])
        return original(*args, **kwargs)

    monkeypatch.setattr(importing, "read_job", read)
    with Store(tmp_path / "s") as store:
        (again,) = Jobs(store).import_jobs([job_dir])
    (first,) = nested[0]
    assert first.imported == 30 and again.imported == 0 and again.trials == 30
    with Store(tmp_path / "t") as store:
        Jobs(store).import_jobs([job_dir])
    assert _index_items(tmp_path / "s") == _index_items(tmp_path / "t")


def test_streamed_import_aborts_on_a_parse_error(tmp_path: Path) -> None:
    """A job that fails to import leaves nothing behind (its open transaction aborted) and
    the store stays writable."""
    bad = make_job(tmp_path / "bad", {"t__1": "{", "t__2": None})
    (bad / "result.json").unlink(missing_ok=True)
    with Store(tmp_path / "s") as store:
        with pytest.raises(CheckError):
            Jobs(store).import_jobs([bad])
        (report,) = Jobs(store).import_jobs([_stream_job(tmp_path)])
    assert report.imported == 30
    assert len(_pack_records(_index_items(tmp_path / "s")["trial_packs"])) == 30


# newcomer stumbles ------------------------------------------------------------------------------


NOT_A_JOB = "not a Harbor job directory (nor a directory of job directories)"


def test_cli_import_refuses_a_folder_with_a_job_somewhere_below(tmp_path: Path, capsys) -> None:
    """`import /tmp` must not import unrelated jobs found levels below (tmp/x/y/demo-job)."""
    make_job(
        tmp_path / "tmp" / "x" / "y" / "demo-job", {"t__1": trial_json(trial_result("t", "t__1"))}
    )
    store = tmp_path / "store"
    code, _, err = store_cli(capsys, store, "import", str(tmp_path / "tmp"))
    assert code == 2 and err == f"casstore: {tmp_path / 'tmp'}: {NOT_A_JOB}\n"
    code, rows, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert rows == []


@pytest.mark.realdata
def test_cli_import_real_jobs_folder_and_not_above(fixtures_dir: Path, tmp_path: Path, capsys):
    store = tmp_path / "store"
    above = fixtures_dir / "jobs/tb2-haiku"  # holds jobs/, which holds the job: refused
    code, _, err = store_cli(capsys, store, "import", str(above))
    assert code == 2 and err == f"casstore: {above}: {NOT_A_JOB}\n"
    code, report, _ = store_cli(capsys, store, "import", str(above / "jobs"), "--json")
    assert code == 0 and report["trials"] == report["imported"] == 89
    code, full, _ = store_cli(
        capsys, store, "import", str(fixtures_dir / "jobs/full-trials"), "--json"
    )
    # three trial directories of that job (their config.json name it): the same job
    assert (code, full["job"], full["trials"], full["imported"]) == (0, report["job"], 89, 0)


def test_cli_export_output_checked_and_no_temporary_left(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    job_dir = _job(tmp_path)
    assert store_cli(capsys, store, "import", str(job_dir))[0] == 0
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for job in ("job", str(job_dir)):  # from the store and from the job directory
        code, _, err = store_cli(capsys, store, "export", job, "-o", str(out_dir))
        assert (code, err) == (2, f"casstore: {out_dir}: output is a directory; name the file\n")
        missing = tmp_path / "missing" / "k.jsonl"
        code, _, err = store_cli(capsys, store, "export", job, "-o", str(missing))
        assert (code, err) == (2, f"casstore: {missing}: the output's folder does not exist\n")
    assert list(out_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job", "out", "store"]


def test_write_trials_jsonl_never_leaves_its_temporary(tmp_path: Path, monkeypatch) -> None:
    records = read_job(_job(tmp_path)).trials
    out = tmp_path / "out"
    out.mkdir()

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("casstore.trials.saved.os.replace", fail)
    with pytest.raises(OSError):
        write_trials_jsonl(records, out / "k.jsonl")
    assert list(out.iterdir()) == []


def test_paths_absolute_and_hint_works_from_anywhere(tmp_path: Path, capsys, monkeypatch):
    """Imported as a relative path: the job's path, exported result_path and the rebuild hint
    name the absolute job directory, the same from the store and from the job directory."""
    job_dir = _job(tmp_path).resolve()
    store = tmp_path / "store"
    monkeypatch.chdir(tmp_path)
    assert store_cli(capsys, store, "import", "job")[0] == 0
    code, rows, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert rows[0]["path"] == str(job_dir)
    assert store_cli(capsys, store, "export", "job", "-o", "stored.jsonl")[0] == 0
    assert store_cli(capsys, store, "export", "job/", "-o", "direct.jsonl")[0] == 0
    stored, direct = _lines(tmp_path / "stored.jsonl"), _lines(tmp_path / "direct.jsonl")
    paths = sorted(item["result_path"] for item in stored)
    assert paths == sorted(item["result_path"] for item in direct)
    assert paths == sorted(str(job_dir / name / "result.json") for name in _names(job_dir))
    stored[1]["metadata"] = {REWARD_KEY_METADATA: "acc"}
    _write_lines(tmp_path / "stored.jsonl", stored)
    monkeypatch.chdir(tmp_path / "store")
    code, _, err = store_cli(capsys, store, "import", str(tmp_path / "stored.jsonl"))
    assert code == 1 and f"casstore export {job_dir} -o FILE --reward-key reward" in err


def _names(job_dir: Path) -> list[str]:
    return sorted(p.name for p in job_dir.iterdir() if p.is_dir())


def test_reimport_with_another_name_is_refused(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    job_dir = _job(tmp_path)
    code, first, _ = store_cli(capsys, store, "import", str(job_dir), "--name", "mine", "--json")
    assert code == 0
    saved = tmp_path / "saved.jsonl"
    assert store_cli(capsys, store, "export", "mine", "-o", str(saved))[0] == 0
    for source in (job_dir, saved):
        code, _, err = store_cli(capsys, store, "import", str(source), "--name", "other")
        assert code == 2 and err.count("\n") == 1
        assert f"job {first['job']} is already imported as 'mine'" in err and str(source) in err
        assert store_cli(capsys, store, "import", str(source), "--name", "mine")[0] == 0
        assert store_cli(capsys, store, "import", str(source))[0] == 0
    code, rows, _ = store_cli(capsys, store, "ls", "jobs", "--json")
    assert [row["name"] for row in rows] == ["mine"]
    assert store_cli(capsys, store, "export", "mine", "-o", str(saved))[0] == 0
    assert store_cli(capsys, store, "export", "other", "-o", str(saved))[0] == 2


def test_reimported_saved_trials_are_not_new(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    job_dir = _job(tmp_path)
    saved = tmp_path / "saved.jsonl"
    assert store_cli(capsys, store, "export", str(job_dir), "-o", str(saved))[0] == 0
    code, first, _ = store_cli(capsys, store, "import", str(saved), "--json")
    assert code == 0 and first["imported"] == first["trials"] == 4
    code, again, _ = store_cli(capsys, store, "import", str(saved), "--json")
    assert code == 0 and (again["trials"], again["imported"]) == (4, 0)
    code, text, _ = store_cli(capsys, store, "import", str(saved))
    assert code == 0 and "4 trials (0 new)" in text
    # the job directory after its saved trials: nothing new either
    code, from_dir, _ = store_cli(capsys, store, "import", str(job_dir), "--json")
    assert code == 0 and (from_dir["trials"], from_dir["imported"]) == (4, 0)
    # one more trial in the saved file: one new
    items = _lines(saved)
    extra = dict(items[0], trial_name="t0__9", attempt=0)
    _write_lines(saved, [*items, extra])
    code, more, _ = store_cli(capsys, store, "import", str(saved), "--json")
    assert code == 0 and (more["trials"], more["imported"]) == (5, 1)


def test_import_text_prints_the_breakdown_rescore_prints(tmp_path: Path, capsys) -> None:
    """Import prints rescore's breakdown (one status per attempt, then Harbor's n_errors), not
    flags that overlap (issue 18, item 3)."""
    trials = {
        "t__1": trial_json(trial_result("t", "t__1", exception="AgentTimeoutError")),
        "t__2": trial_json(trial_result("t", "t__2", verifier=False, exception="Boom", started=1)),
        "t__3": trial_json(trial_result("t", "t__3", started=2)),
    }
    job_dir = make_job(tmp_path / "job", trials)
    code, text, _ = store_cli(capsys, tmp_path / "store", "import", str(job_dir))
    assert code == 0
    counts = (
        "attempts 3   scored 1   partial 1   errored 1   no_verifier 0   invalid 0   "
        "harbor_errors 2"
    )
    assert f": 3 trials (3 new)   {counts}   failures: " in text
    code, scored, _ = store_cli(capsys, tmp_path / "store", "rescore", str(job_dir))
    assert code == 0 and f"threshold 1   {counts}\n" in scored


# stored trial records: schema 2 arrays, schema 1 maps ----------------------------------------


def _as_schema(store_dir: Path, version: int) -> None:
    """Rewrite a store as schema ``version`` (1, 2, 3 or 4) wrote it (schema 4: a store without
    trajectories is schema 5's bytes, its marker 4): job records without
    ``pack_checksums``; schema 3: trial packs without their CRC-32 (the msgpack array alone);
    schemas 1 and 2: one record per trial in ``trials`` (schema 2: the stored array; schema 1:
    a msgpack map of every field, with ``job_id``, absolute ``result_path`` and the
    reward-key metadata), one evidence entry per file (keyed by the SHA-256 of the entry, or
    of the raw file for schema 1) that the records name instead of pack references, no
    packs; the schema marker. Schema 4: the same store without its ``trial_cache`` database
    (schema 5 added it)."""
    import lmdb

    from casstore.store.values import encode_value

    env = lmdb.open(str(store_dir / "index"), max_dbs=32)
    try:
        with env.begin(write=True) as txn:
            txn.drop(env.open_db(b"trial_cache", txn=txn), delete=True)
            if version == 4:
                txn.put(b"schema", encode_value(version), db=env.open_db(b"meta", txn=txn))
                return
            db = {name: env.open_db(name.encode(), txn=txn) for name in TRIAL_DATABASES}
            for key, value in list(txn.cursor(db=db["jobs"])) if version < 4 else []:
                record = msgpack.unpackb(value)
                if record.pop("pack_checksums", None) is not None:
                    txn.put(key, msgpack.packb(record, use_bin_type=True), db=db["jobs"])
            for key, value in list(txn.cursor(db=db["trial_packs"])) if version < 4 else []:
                if value[:1] == b"\xc1":  # 0xC1, the CRC-32 (4 bytes), the array
                    txn.put(key, value[5:], db=db["trial_packs"])
            txn.put(b"schema", encode_value(version), db=env.open_db(b"meta", txn=txn))
    finally:
        env.close()
    if version < 3:
        _as_single_records(store_dir, version)


def _as_single_records(store_dir: Path, version: int) -> None:
    """The trial packs and evidence packs of a schema-3 store rewritten as schema ``version``
    (1 or 2) kept them (see :func:`_as_schema`)."""
    import hashlib

    import lmdb
    import msgspec

    from casstore.store.values import decode_value, encode_value
    from casstore.trials.evidence import (
        decompress,
        encode_entry,
        entry_key,
        frame_of,
        split_reference,
    )
    from casstore.trials.records import JobRecord, from_builtins
    from casstore.trials.stored_form import decode_trial_pack, encode_stored

    env = lmdb.open(str(store_dir / "index"), max_dbs=32)
    try:
        with env.begin(write=True) as txn:
            db = {name: env.open_db(name.encode(), txn=txn) for name in TRIAL_DATABASES}
            jobs = {
                key.decode(): from_builtins(decode_value(value), JobRecord)
                for key, value in txn.cursor(db=db["jobs"])
            }
            packs = list(txn.cursor(db=db["trial_packs"]))
            evidence = {bytes(k): bytes(v) for k, v in txn.cursor(db=db["evidence"])}
            for key, value in packs:
                job = jobs[key.decode().partition("/")[0]]
                for record in decode_trial_pack(value, job.job_id, job.path, job.reward_key):
                    ref, index = split_reference(record.evidence)
                    frame, name, size = frame_of(evidence[ref.encode()], index)
                    entry = encode_entry(name, frame, size)
                    record.evidence = entry_key(entry)
                    if version == 1:
                        stored = txn.get(name.encode(), db=db["zstd_dicts"]) if name else None
                        raw = decompress(frame, decode_value(stored) if stored else None)
                        record.evidence = "sha256:" + hashlib.sha256(raw).hexdigest()
                    txn.put(record.evidence.encode(), entry, db=db["evidence"])
                    stored = (
                        msgspec.msgpack.encode(record)
                        if version == 1
                        else encode_stored(record, job.path, job.reward_key)
                    )
                    txn.put(f"{job.job_id}/{record.trial_name}".encode(), stored, db=db["trials"])
                txn.delete(key, db=db["trial_packs"])
            for key in evidence:
                txn.delete(key, db=db["evidence"])
            txn.put(b"schema", encode_value(version), db=env.open_db(b"meta", txn=txn))
    finally:
        env.close()


@pytest.mark.parametrize("version", [1, 2])
def test_older_store_is_read_and_upgraded(tmp_path: Path, version: int) -> None:
    """A store written by schema 1 (records as maps) or 2 (one record and one evidence entry
    per trial) opens, its records and evidence read as before (its marker kept), and a
    re-import that shifts attempts merges old and new records into packs (old evidence kept)
    and marks it 4."""
    job_dir = _job(tmp_path, 20)  # enough for a zstd dictionary
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([job_dir])
        packed = Jobs(store).trial_records(first.job)
    assert packed[0].evidence_dict is not None
    _as_schema(tmp_path / "store", version)
    with Store(tmp_path / "store") as store:
        assert store.index.read(lambda txn: txn.get("meta", "schema")) == version
        before = Jobs(store).trial_records(first.job)
        assert [msgspec_replace(r, evidence="") for r in before] == [
            msgspec_replace(r, evidence="") for r in packed
        ]
        assert all("#" not in r.evidence for r in before)
        for record in before:
            assert Jobs(store).evidence(record.evidence) == Path(record.result_path).read_bytes()
        path = job_dir.resolve() / before[0].trial_name / "result.json"
        assert before[0].result_path == str(path)
        assert before[0].metadata == {REWARD_KEY_METADATA: "reward"}
        write_trial(
            job_dir, "t0__new", trial_json(trial_result("t0", "t0__new", {"reward": 1}, started=-5))
        )
        assert store.index.read(lambda txn: txn.get("meta", "schema")) == version
        (second,) = Jobs(store).import_jobs([job_dir])
        assert second.imported == 1 and second.trials == 21
        assert store.index.read(lambda txn: txn.get("meta", "schema")) == SCHEMA_VERSION == 5
        records = {r.trial_name: r for r in Jobs(store).trial_records(first.job)}
        assert Jobs(store).evidence(records["t0__new"].evidence).startswith(b"{")
        assert fsck(store).ok
    assert records["t0__new"].attempt == 0 and records["t0__0"].attempt == 1
    for old in before:
        assert records[old.trial_name].result_path == old.result_path
        assert records[old.trial_name].evidence == old.evidence
    items = _index_items(tmp_path / "store")
    assert not items["trials"] and len(_pack_records(items["trial_packs"])) == 21


def _schema_marker(store_dir: Path) -> int:
    """``meta/schema`` as stored, read with raw lmdb (a read-only environment)."""
    import lmdb

    from casstore.store.values import decode_value

    env = lmdb.open(str(store_dir / "index"), max_dbs=32, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return decode_value(txn.get(b"schema", db=env.open_db(b"meta", txn=txn, create=False)))
    finally:
        env.close()


@pytest.mark.parametrize("version", [2, 3, 4, 5])
def test_reading_commands_leave_the_index_as_it_was(tmp_path: Path, capsys, version: int) -> None:
    """Opening a store and reading it (fsck, ls, show, export, rescore, gc) writes nothing to
    data.mdb: an older store keeps its schema marker, so the casstore that wrote it still opens
    it. The first write (an import) marks it 5 (SCHEMA_VERSION)."""
    store_dir = tmp_path / "store"
    job_dir = _job(tmp_path, 20)
    code, report, _ = store_cli(capsys, store_dir, "import", str(job_dir), "--json")
    assert code == 0
    if version != SCHEMA_VERSION:
        _as_schema(store_dir, version)
    assert _schema_marker(store_dir) == version
    data = store_dir / "index" / "data.mdb"
    before = data.read_bytes()
    out = tmp_path / "out.jsonl"
    for argv in (
        ["fsck", "--json"],
        ["ls", "jobs", "--json"],
        ["ls", "tasks", "--json"],
        ["rescore", report["job"], "--json"],
        ["rescore", str(job_dir), "--json"],
        ["export", "job", "-o", str(out), "--json"],
        ["gc", "--dry-run", "--json"],
        ["gc", "--json"],
    ):
        code, result, err = store_cli(capsys, store_dir, *argv)
        assert (code, err) == (0, ""), argv
    assert result["removed"] == [] and len(_lines(out)) == 20
    code, fsck, _ = store_cli(capsys, store_dir, "fsck", "--json")
    assert (code, fsck["ok"], fsck["jobs"], fsck["trials"]) == (0, True, 1, 20)
    assert _schema_marker(store_dir) == version
    assert data.read_bytes() == before
    write_trial(job_dir, "t0__new", trial_json(trial_result("t0", "t0__new", {"reward": 1})))
    code, again, err = store_cli(capsys, store_dir, "import", str(job_dir), "--json")
    assert (code, err, again["imported"]) == (0, "", 1)
    assert _schema_marker(store_dir) == SCHEMA_VERSION


def test_older_schema_is_marked_by_the_first_committed_write(tmp_path: Path) -> None:
    """The marker of an older index changes in the first write transaction that commits: not
    on open, not in one that fails, not in a lock-only one (gc); a new index is marked when
    created; a newer schema is still refused on open."""
    from casstore.errors import StoreError
    from casstore.store.index import Index

    index_dir = tmp_path / "index"
    with Index(index_dir):
        pass
    assert _schema_marker(tmp_path) == SCHEMA_VERSION
    with Index(index_dir) as index:
        index.write(lambda txn: txn.put("meta", "schema", 2))
    with Index(index_dir) as index:
        assert index.read(lambda txn: txn.get("meta", "schema")) == 2
        index.write(lambda txn: txn.has("jobs", "x"), lock_only=True)  # as gc does

        def failing(txn) -> None:
            txn.put("jobs", "y", 1)
            raise RuntimeError("disk on fire")

        with pytest.raises(RuntimeError, match="on fire"):
            index.write(failing)
        marker_and_y = index.read(lambda txn: (txn.get("meta", "schema"), txn.get("jobs", "y")))
        assert marker_and_y == (2, None)
        index.write(lambda txn: txn.put("jobs", "z", 1))
        assert index.read(lambda txn: txn.get("meta", "schema")) == SCHEMA_VERSION
        index.write(lambda txn: txn.put("meta", "schema", 6))  # a newer casstore's index
    with pytest.raises(StoreError) as refused:
        Index(index_dir)
    assert str(refused.value) == "index: schema version 6, expected 5"


def test_an_index_killed_while_created_gets_every_database(tmp_path: Path) -> None:
    """An index whose creation was killed after some databases and before its schema marker
    (LMDB creates each named database in a transaction of its own) is completed by its next
    write: every database, the added ones too, then the marker; it opens cleanly after."""
    import lmdb

    from casstore.store.index import DATABASES, MAX_DBS, Index

    index_dir = tmp_path / "index"
    index_dir.mkdir()
    env = lmdb.open(str(index_dir), max_dbs=MAX_DBS, subdir=True)
    for name in DATABASES[:3]:  # killed here: no trial_cache, no schema
        env.open_db(name.encode())
    env.close()
    with Index(index_dir) as index:
        index.write(lambda txn: txn.put("jobs", "x", 1))
    with Index(index_dir) as index:
        assert index.read(lambda txn: txn.get("meta", "schema")) == SCHEMA_VERSION
        assert all(handle is not None for handle in index.dbs.values())


def test_streamed_import_marks_an_older_schema(tmp_path: Path) -> None:
    """A new job written while it is parsed (its own write transaction, not
    ``Index.write``) marks an index of an older schema 4 when it commits, as any first write
    does: older code would open the index and miss the job's packs."""
    store_dir = tmp_path / "store"
    first = _job(tmp_path / "a")
    trials = {"t0__x": trial_json(trial_result("t0", "t0__x", {"reward": 1}))}
    second = make_job(tmp_path / "b" / "job", trials, job_id="another-job")
    with Store(store_dir) as store:
        Jobs(store).import_jobs([first])
    _as_schema(store_dir, 2)
    with Store(store_dir) as store:
        (report,) = Jobs(store).import_jobs([second])
        assert report.imported == 1
    assert _schema_marker(store_dir) == SCHEMA_VERSION
    with Store(store_dir) as store:
        assert [r.trial_name for r in Jobs(store).trial_records("another-job")] == ["t0__x"]
        assert fsck(store).ok


def msgspec_replace(record, **changes):
    import msgspec

    return msgspec.structs.replace(record, **changes)


def test_stored_records_are_compact_and_round_trip(tmp_path: Path) -> None:
    """A stored record holds neither the job id nor the job directory nor the job's reward
    key, and decodes to the record read from the job directory."""

    job_dir = _job(tmp_path)
    parsed = read_job(job_dir)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
        assert Jobs(store).trial_records(report.job) == sorted(
            parsed.trials, key=lambda r: r.trial_name
        )
    ((key, value),) = _index_items(tmp_path / "store")["trial_packs"]
    stored = _pack_records([(key, value)])[0]
    assert isinstance(stored, list) and key.decode() == f"{report.job}/00000000"
    assert report.job not in stored and str(job_dir.resolve()) not in str(stored)
    assert stored[-2:] == [f"{stored[0]}/result.json", {}]


def test_stored_form_keeps_what_the_job_does_not_imply() -> None:
    """Another directory's result path and metadata besides the job's reward key are kept."""
    import msgspec

    from casstore.trials.records import TrialRecord
    from casstore.trials.stored_form import decode_stored, encode_stored

    record = TrialRecord(
        job_id="j",
        trial_name="t__1",
        task_name="t",
        attempt=2,
        result_path="/elsewhere/t__1/result.json",
        metadata={REWARD_KEY_METADATA: "score", "note": "x"},
    )
    for job_path, key in [("/jobs/j", "reward"), ("/jobs/j", "score"), (None, "score")]:
        assert decode_stored(encode_stored(record, job_path, key), "j", job_path, key) == record
    under = msgspec.structs.replace(record, result_path="/jobs/j/t__1/result.json")
    assert decode_stored(encode_stored(under, "/jobs/j", "score"), "j", "/jobs/j", "score") == under
    assert decode_stored(encode_stored(under, "/jobs/j", "score"), "j", "/moved", "score") == (
        msgspec.structs.replace(under, result_path="/moved/t__1/result.json")
    )


def test_reimport_from_a_moved_directory_keeps_old_result_paths(tmp_path: Path) -> None:
    """Trials stored before a job directory moved keep the path they were read from; the
    new ones name the new directory."""
    job_dir = _job(tmp_path)
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([job_dir])
        before = {r.trial_name: r.result_path for r in Jobs(store).trial_records(first.job)}
        moved = tmp_path / "moved" / "job"
        shutil.copytree(job_dir, moved)
        write_trial(moved, "t1__new", trial_json(trial_result("t1", "t1__new", {"reward": 1})))
        (second,) = Jobs(store).import_jobs([moved])
        after = {r.trial_name: r.result_path for r in Jobs(store).trial_records(first.job)}
    assert second.imported == 1
    assert {name: after[name] for name in before} == before
    assert after["t1__new"] == str(moved.resolve() / "t1__new" / "result.json")


def test_failed_import_leaves_the_store_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import (new job, streamed; then a re-import adding trials) that fails after writing
    some of its records leaves every database byte for byte as it was."""

    job_dir = _stream_job(tmp_path)
    other = _job(tmp_path / "other")
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([other])
    before = _index_items(tmp_path / "store")
    put = Txn.raw_put_many
    calls = {"n": 0}

    def failing_put(txn, db, items, overwrite=True):
        put(txn, db, items, overwrite)
        calls["n"] += 1
        if db == "trial_packs":  # after the evidence and the trial records
            raise RuntimeError("disk on fire")

    monkeypatch.setattr(Txn, "raw_put_many", failing_put)
    with Store(tmp_path / "store") as store, pytest.raises(RuntimeError, match="on fire"):
        Jobs(store).import_jobs([job_dir])
    assert _index_items(tmp_path / "store") == before and calls["n"] == 1
    write_trial(other, "t0__new", trial_json(trial_result("t0", "t0__new", {"reward": 1})))
    calls["n"] = 0
    with Store(tmp_path / "store") as store, pytest.raises(RuntimeError, match="on fire"):
        Jobs(store).import_jobs([other])
    assert _index_items(tmp_path / "store") == before


def test_evidence_is_content_addressed_in_packs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evidence is kept in one pack per chunk of trial directories read, under the SHA-256 of
    the pack's bytes; each trial references ``<pack>#<index>`` and gets back its result.json
    byte for byte; re-importing adds no pack; a reference to no pack, no frame or with a bad
    index is an unknown reference."""
    import hashlib

    import casstore.trials.chunk as chunk
    from casstore.errors import UnknownReferenceError

    # chunks cut at task boundaries: 4 tasks x 7-8
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 4)
    job_dir = _stream_job(tmp_path)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
        records = Jobs(store).trial_records(report.job)
        for record in records:
            raw = Path(record.result_path).read_bytes()
            assert Jobs(store).evidence(record.evidence) == raw and record.evidence_bytes == len(
                raw
            )
        Jobs(store).import_jobs([job_dir])
        key = records[0].evidence.partition("#")[0]
        for ref, rule in [
            (f"{key}#99", "the evidence pack has no frame with that index"),
            (f"{key}#-1", "the evidence index after '#' must be a decimal number"),
            (f"{key}#x", "the evidence index after '#' must be a decimal number"),
            ("sha256:" + "0" * 64 + "#0", "no evidence with that digest"),
            (key, "an evidence pack: name a frame, <digest>#<index>"),
            ("sha256:00#0", "not an evidence reference (sha256:<64 hex digits>#<index>)"),
            ("", "not an evidence reference (sha256:<64 hex digits>#<index>)"),
            ("#0", "not an evidence reference (sha256:<64 hex digits>#<index>)"),
            ("sha256:\ud800", "not an evidence reference (sha256:<64 hex digits>#<index>)"),
        ]:
            with pytest.raises(UnknownReferenceError) as raised:
                Jobs(store).evidence(ref)
            assert (raised.value.path, raised.value.rule) == (ref, rule)
    packs = _index_items(tmp_path / "store")["evidence"]
    assert len(records) == 30 and len(packs) == 4  # one chunk per task
    for key, value in packs:
        assert key.decode() == "sha256:" + hashlib.sha256(value).hexdigest()
    refs = {key.decode(): [] for key, _ in packs}
    for record in sorted(records, key=lambda r: r.trial_name):
        key, _, index = record.evidence.partition("#")
        refs[key].append(int(index))
    assert sorted(refs.values()) == [list(range(len(v))) for v in sorted(refs.values())]


def test_saved_trials_refuse_unknown_reward_kinds(tmp_path: Path) -> None:
    # a hand-edited kind would score the primary 0.0 "not finite" while Harbor's Mean counts it
    _, path, _ = _edited_saved_trials(tmp_path, 1, kinds={"reward": 99})
    with pytest.raises(RewardKeyError, match=r":2: not a saved trial .*kinds\['reward'\] is 99"):
        read_trials_jsonl(path)


def test_cli_import_text_names_the_trial_count_mismatch(tmp_path: Path, capsys) -> None:
    job_dir = _job(tmp_path)  # lock.json expects 4 trials
    write_trial(job_dir, "t0__extra", trial_json(trial_result("t0", "t0__extra")))
    code, out, err = store_cli(capsys, tmp_path / "store", "import", str(job_dir))
    assert code == 0 and err == ""
    assert "  trial_count_mismatch: 4 trials expected (lock.json), 5 found\n" in out
