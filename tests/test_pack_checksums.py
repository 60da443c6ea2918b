"""Every trial pack carries a CRC-32 checked on every read and by fsck (issue 17, item 7):
a byte changed anywhere in a pack is ``corrupt_store`` (exit 1) or an fsck problem, never a
silently different reward. Schema 3 stores (packs without it) stay readable; the next import
of a job writes its packs with checksums and marks the store 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from casstore.api import fsck
from casstore.errors import CorruptStoreError
from casstore.store import Store
from casstore.store.index import SCHEMA_VERSION
from casstore.trials import Jobs
from casstore.trials.importing import import_records
from casstore.trials.stored import job_record, stored_pack
from tests.helpers import store_cli
from tests.test_golden_bytes import _records, _sha, _values
from tests.test_import import _as_schema, _schema_marker
from tests.trials_builder import make_job, trial_json, trial_result

TB2 = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")
REWARD_ONE = b"\xa6reward\xcb\x3f\xf0" + bytes(6)  # {"reward": 1.0}, as a record holds it
REWARD_ZERO = b"\xa6reward\xcb" + bytes(8)
# the tb2-haiku job as casstore at schema 3 stored it (tests/test_golden_bytes.py before the
# schema bump): its trial pack and its job record (without imported_at and path)
SCHEMA_3_PACKS = "d3f20740386f5dec3715b9e212587bb9fcf097f82e0791094d526f737d6fe6e0"
SCHEMA_3_JOBS = "d0316bef1ab3cd7577586dd21523d1e83380bb0b1f25435b3ee0c32d77844550"


def _put(store_dir: Path, db: str, key: str, value: bytes) -> None:
    with Store(store_dir, create=False) as store:
        store.index.write(lambda txn: txn.raw_put(db, key, value))


def _pack(store_dir: Path) -> tuple[str, bytes]:
    """The key and bytes of the store's one trial pack."""
    with Store(store_dir, create=False) as store:
        items = store.index.read(lambda txn: list(txn.raw_items("trial_packs")))
    (key, raw), *_ = items
    return key.decode(), bytes(raw)


def _problems(capsys, store_dir: Path) -> tuple[int, list[tuple[str, str]]]:
    code, report, _ = store_cli(capsys, store_dir, "fsck", "--json")
    return code, [(p["kind"], p["ref"]) for p in report["problems"]]


@pytest.fixture
def tb2(fixtures_dir: Path, tmp_path: Path, capsys) -> tuple[Path, str]:
    store_dir = tmp_path / "store"
    code, report, _ = store_cli(capsys, store_dir, "import", str(fixtures_dir / TB2), "--json")
    assert code == 0
    return store_dir, report["job"]


@pytest.mark.realdata
def test_a_changed_reward_in_a_pack_is_corrupt(tb2, capsys, tmp_path: Path) -> None:
    """The failure of issue 17: a reward of 1.0 changed to 0.0 inside the tb2-haiku pack
    decodes as a valid record, and fsck passed. Now every read of the pack (export, the
    trial records) is one corrupt_store line and fsck reports the pack."""
    store_dir, job = tb2
    key, raw = _pack(store_dir)
    assert raw.count(REWARD_ONE) == 37
    _put(store_dir, "trial_packs", key, raw.replace(REWARD_ONE, REWARD_ZERO, 1))
    assert _problems(capsys, store_dir) == (1, [("corrupt_trial", key)])
    out = tmp_path / "out.jsonl"
    code, text, err = store_cli(capsys, store_dir, "export", job, "-o", str(out))
    assert (code, text) == (1, "") and not out.exists()
    assert err == (
        f"casstore: trial_packs/{key}: stored value does not decode: the trial pack's CRC-32 "
        "does not match its bytes\n"
    )
    with Store(store_dir, create=False) as store, pytest.raises(CorruptStoreError):
        Jobs(store).trial_records(job)


def test_every_byte_of_a_pack_is_checked(tmp_path: Path) -> None:
    """Each byte of a pack changed (three ways), and the pack given without its checksum:
    the read fails, whatever the byte."""
    trials = {
        f"t{i}__x": trial_json(trial_result(f"t{i}", f"t{i}__x", {"reward": i / 2}, started=i))
        for i in range(3)
    }
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([make_job(tmp_path / "job", trials)])
        record = job_record(store.index, report.job)
    key, raw = _pack(tmp_path / "store")
    assert record.pack_checksums and raw[:1] == b"\xc1"
    args = (report.job, record.path, record.reward_key, True)
    assert len(stored_pack(key.encode(), raw, *args)) == 3
    for at in range(len(raw)):
        for mask in (0x01, 0x80, 0xFF):
            damaged = raw[:at] + bytes((raw[at] ^ mask,)) + raw[at + 1 :]
            with pytest.raises(CorruptStoreError, match=f"trial_packs/{key}"):
                stored_pack(key.encode(), damaged, *args)
    with pytest.raises(CorruptStoreError, match="has no CRC-32"):
        stored_pack(key.encode(), raw[5:], *args)  # a schema-3 pack in a schema-4 job


@pytest.mark.realdata
def test_a_schema_3_store_is_read_then_upgraded_by_the_next_import(
    fixtures_dir: Path, tb2, capsys
) -> None:
    """A store as casstore at schema 3 wrote it (the very bytes: the digests recorded
    before the bump) opens and reads as before, reading commands leave it at 3; the next
    import of the job rewrites its pack with a CRC-32 and marks the store 4, after which a
    changed reward is found."""
    store_dir, job = tb2
    with Store(store_dir, create=False) as store:
        before = Jobs(store).trial_records(job)
    _as_schema(store_dir, 3)
    with Store(store_dir, create=False) as store:
        packs = _values(store, "trial_packs")
        digests = (
            _sha(repr(sorted(packs.items())).encode()),
            _records(store, "jobs", "imported_at", "path"),
        )
        assert digests[0] == SCHEMA_3_PACKS
        assert _sha(repr(sorted(digests[1].items())).encode()) == SCHEMA_3_JOBS
        assert not job_record(store.index, job).pack_checksums
        assert Jobs(store).trial_records(job) == before
        assert fsck(store).ok
    data = (store_dir / "index" / "data.mdb").read_bytes()
    for argv in (
        ["fsck"],
        ["export", job, "-o", str(store_dir.parent / "x.jsonl")],
        ["rescore", job],
    ):
        assert store_cli(capsys, store_dir, *argv, "--json")[0] == 0
    assert _schema_marker(store_dir) == 3
    assert (store_dir / "index" / "data.mdb").read_bytes() == data
    code, report, _ = store_cli(capsys, store_dir, "import", str(fixtures_dir / TB2), "--json")
    assert (code, report["imported"], report["trials"]) == (0, 0, 89)
    assert _schema_marker(store_dir) == SCHEMA_VERSION == 5
    key, raw = _pack(store_dir)
    assert raw[:1] == b"\xc1"
    with Store(store_dir, create=False) as store:
        assert job_record(store.index, job).pack_checksums
        assert Jobs(store).trial_records(job) == before
    _put(store_dir, "trial_packs", key, raw.replace(REWARD_ONE, REWARD_ZERO, 1))
    assert _problems(capsys, store_dir) == (1, [("corrupt_trial", key)])


def test_a_pack_is_0xc1_its_crc_32_and_the_array_schema_3_wrote(tmp_path: Path) -> None:
    """0xC1 (a byte msgpack never uses: no schema-3 pack starts with it), the CRC-32 of the
    rest (big-endian), then the msgpack array of the records as schema 3 wrote it."""
    import zlib

    trials = {"t__x": trial_json(trial_result("t", "t__x"))}
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([make_job(tmp_path / "job", trials)])
    _, raw = _pack(tmp_path / "store")
    assert int.from_bytes(raw[1:5], "big") == zlib.crc32(raw[5:])
    assert raw[5] == 0x91  # a one-record array


# the repair of a damaged pack -------------------------------------------------------------


def _fsck_messages(capsys, store_dir: Path) -> tuple[int, list[tuple[str, str, str]]]:
    code, report, _ = store_cli(capsys, store_dir, "fsck", "--json")
    return code, [(p["kind"], p["ref"], p["message"]) for p in report["problems"]]


@pytest.mark.realdata
def test_a_damaged_pack_is_replaced_by_importing_the_job_directory(
    fixtures_dir: Path, tb2, capsys
) -> None:
    """fsck names the repair of a damaged pack; importing the job directory again reads its
    trials again and writes the pack anew: the records as they were before the damage (the
    reward of 1.0 back), fsck clean, the score as before. Before the fix the import failed
    with the damaged pack's corrupt_store, and nothing could repair it."""
    store_dir, job = tb2
    with Store(store_dir, create=False) as store:
        before = Jobs(store).trial_records(job)
    key, raw = _pack(store_dir)
    _put(store_dir, "trial_packs", key, raw.replace(REWARD_ONE, REWARD_ZERO, 1))
    assert _fsck_messages(capsys, store_dir) == (
        1,
        [
            (
                "corrupt_trial",
                key,
                f"trial_packs/{key}: stored value does not decode: the trial pack's CRC-32 "
                "does not match its bytes (importing the job directory again replaces it "
                "with the trials read again)",
            )
        ],
    )
    code, report, err = store_cli(capsys, store_dir, "import", str(fixtures_dir / TB2), "--json")
    assert (code, err, report["job"], report["trials"], report["imported"]) == (
        0,
        "",
        job,
        89,
        0,
    )
    assert _fsck_messages(capsys, store_dir) == (0, [])
    assert _pack(store_dir) == (key, raw)  # the very bytes written before the damage
    with Store(store_dir, create=False) as store:
        assert Jobs(store).trial_records(job) == before
    code, scored, _ = store_cli(capsys, store_dir, "rescore", job, "--json")
    assert code == 0 and scored["resolve_rate"] == pytest.approx(0.4157303370786517)


def _job_with_a_saved_trial(tmp_path: Path, capsys) -> tuple[Path, Path, str, Path]:
    """A job of 5 trials imported from its directory, then a saved trial its directory does
    not hold (``extra__1``, no evidence) merged into it; returns the store, the job
    directory, the job id and a saved-trials file of all 6 (exported before any damage)."""
    trials = {
        f"t{i}__x": trial_json(trial_result(f"t{i}", f"t{i}__x", {"reward": 1.0}, started=i))
        for i in range(5)
    }
    job_dir, store_dir = make_job(tmp_path / "job", trials), tmp_path / "store"
    code, report, _ = store_cli(capsys, store_dir, "import", str(job_dir), "--json")
    assert code == 0
    saved, everything = tmp_path / "extra.jsonl", tmp_path / "all.jsonl"
    assert store_cli(capsys, store_dir, "export", report["job"], "-o", str(saved))[0] == 0
    extra = json.loads(saved.read_text().splitlines()[0])
    extra.update(trial_name="extra__1", evidence=None, evidence_dict=None, result_path=None)
    saved.write_text(json.dumps(extra) + "\n")
    assert store_cli(capsys, store_dir, "import", str(saved))[0] == 0
    assert store_cli(capsys, store_dir, "export", report["job"], "-o", str(everything))[0] == 0
    return store_dir, job_dir, report["job"], everything


def test_a_damaged_pack_is_not_replaced_by_a_directory_lacking_its_trials(
    tmp_path: Path, capsys
) -> None:
    """A damaged pack holding a trial its job directory lacks (one merged from saved trials):
    importing the directory is refused, one corrupt_store line naming the pack and the trial,
    the store unchanged; importing saved trials holding them all (an earlier export) replaces
    the pack, fsck then reporting only that trial's evidence missing (as before the damage)."""
    store_dir, job_dir, job, everything = _job_with_a_saved_trial(tmp_path, capsys)
    assert _fsck_messages(capsys, store_dir)[1] == [
        (
            "missing_evidence",
            f"{job}/extra__1",
            f"{job}/extra__1: no evidence reference (importing the job directory again reads "
            "it again)",
        )
    ]
    key, raw = _pack(store_dir)
    damaged = raw.replace(REWARD_ONE, REWARD_ZERO, 1)
    _put(store_dir, "trial_packs", key, damaged)
    code, text, err = store_cli(capsys, store_dir, "import", str(job_dir))
    assert (code, text) == (1, "")
    assert err == (
        f"casstore: trial_packs/{key}: stored value does not decode: the trial pack's CRC-32 "
        "does not match its bytes; not replaced: 1 trial(s) it may hold are not among those "
        "imported ('extra__1'); import the job directory or a saved-trials file that holds "
        "them\n"
    )
    assert _pack(store_dir) == (key, damaged)
    code, report, err = store_cli(capsys, store_dir, "import", str(everything), "--json")
    assert (code, err, report["trials"], report["imported"]) == (0, "", 6, 0)
    assert _pack(store_dir) == (key, raw)
    assert [kind for kind, _, _ in _fsck_messages(capsys, store_dir)[1]] == ["missing_evidence"]


def test_a_damaged_pack_of_another_job_does_not_stop_an_import(tmp_path: Path) -> None:
    """Saved trials replacing trials of one job, while another job's pack is damaged: the
    import is done (the evidence the replaced trials referenced is kept, what references it
    being unknown: fsck names the damage first); before the fix it failed with the other
    job's corrupt_store."""
    import msgspec

    jobs = []
    for name in ("a", "b"):
        trials = {f"{name}__x": trial_json(trial_result(name, f"{name}__x", {"reward": 1.0}))}
        jobs.append(make_job(tmp_path / name, trials, job_id=f"job-{name}"))
    with Store(tmp_path / "store") as store:
        first, second = (Jobs(store).import_jobs([job])[0] for job in jobs)
        (record,) = Jobs(store).trial_records(first.job)
        key = f"{second.job}/00000000"
        raw = store.index.read(lambda txn: bytes(txn.raw_get("trial_packs", key)))
        store.index.write(lambda txn: txn.raw_put("trial_packs", key, raw[:-1] + b"\x00"))
        saved = msgspec.structs.replace(record, evidence=None, evidence_dict=None)
        report = import_records(store.index, first.job, [saved], "reward")
        assert (report.trials, report.imported) == (1, 0)
        assert [t.evidence for t in Jobs(store).trial_records(first.job)] == [None]
        assert sorted(p["kind"] for p in fsck(store).problems) == [
            "corrupt_trial",
            "missing_evidence",
        ]


def test_a_damaged_pack_among_several_is_replaced_leaving_no_orphan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packs of 5 trials, evidence packs of 2: the second trial pack damaged, the import of
    the job directory reads its 5 trials again (new evidence packs: the old ones only they
    referenced are removed, what they referenced being unknown), the other packs' trials as
    they were: the records as before the damage, each evidence the trial's result.json bytes,
    fsck clean (before the removal: two orphan_evidence)."""
    import casstore.trials.chunk as chunk
    import casstore.trials.packs as packs

    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 2)
    monkeypatch.setattr(packs, "TRIALS_PER_PACK", 5)
    trials = {
        f"t{i:02d}__x": trial_json(
            trial_result(f"t{i % 4}", f"t{i:02d}__x", {"reward": i % 2}, started=i)
        )
        for i in range(12)
    }
    job = make_job(tmp_path / "job", trials)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job])
        before = Jobs(store).trial_records(report.job)
        key = f"{report.job}/00000001"
        raw = store.index.read(lambda txn: bytes(txn.raw_get("trial_packs", key)))
        store.index.write(lambda txn: txn.raw_put("trial_packs", key, raw[:-1] + b"\x00"))
        assert [(p["kind"], p["ref"]) for p in fsck(store).problems] == [("corrupt_trial", key)]
        (again,) = Jobs(store).import_jobs([job])
        assert (again.trials, again.imported) == (12, 0)
        checked = fsck(store)
        assert checked.ok, checked.problems
        after = Jobs(store).trial_records(report.job)
        fields = ("trial_name", "rewards", "attempt", "result_path", "task_name")
        assert [[getattr(r, f) for f in fields] for r in after] == [
            [getattr(r, f) for f in fields] for r in before
        ]
        for trial in after:
            assert Jobs(store).evidence(trial.evidence) == Path(trial.result_path).read_bytes()
        kept = {t.evidence for t in after} & {t.evidence for t in before}
        assert len(kept) == 7  # the trials of the two intact packs keep their references
        assert store.index.read(lambda txn: txn.count("evidence")) == 4 + 3  # kept, new
