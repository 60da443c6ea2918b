"""Schema 3's packs: trial packs (``trial_packs``, numbered per job, by trial name, however the
job was read) and evidence packs (content-addressed, frames read one at a time, each with a
zstd checksum), and what ``fsck`` finds wrong with them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import casstore.trials.chunk as chunk
import casstore.trials.importing as importing
import casstore.trials.packs as stored_packs
from casstore.api import fsck
from casstore.errors import CorruptStoreError
from casstore.store import Store
from casstore.store.values import decode_value
from casstore.trials import Jobs
from casstore.trials.records import TrialRecord
from casstore.trials.stored_form import encode_stored, encode_trial_pack
from tests.helpers import store_cli
from tests.test_import import _index_items, _pack_records
from tests.trials_builder import make_job, trial_json, trial_result, write_trial

JOB = "11111111-2222-3333-4444-555555555555"


def _job(
    root: Path,
    names: list[str],
    dirs: list[str] | None = None,
    tasks: list[str] | None = None,
    **kwargs,
) -> Path:
    """A job of one trial per name (tasks ``tasks``, default ``t<i % 3>``), in directories
    ``dirs`` (default the names)."""
    trials = {
        (dirs or names)[i]: trial_json(
            trial_result(tasks[i] if tasks else f"t{i % 3}", name, started=i)
        )
        for i, name in enumerate(names)
    }
    return make_job(root / "job", trials, **kwargs)


def _fsck(capsys, store_dir: Path) -> tuple[int, dict]:
    code, report, _ = store_cli(capsys, store_dir, "fsck", "--json")
    return code, report


def test_pack_keys_are_numbers_whatever_the_trial_names(tmp_path: Path) -> None:
    """A 600-character trial name (beyond LMDB's 511-byte keys) starting a pack imports, and
    so does the job after a trial moves it to the start of another pack."""
    names = [f"a{i:04d}" for i in range(499)] + ["b" * 600]
    job_dir = _job(tmp_path, names, dirs=[f"d{i:04d}" for i in range(500)])
    with Store(tmp_path / "store") as store:
        (first,) = Jobs(store).import_jobs([job_dir])
        write_trial(job_dir, "new", trial_json(trial_result("t0", "a0499x")))
        (second,) = Jobs(store).import_jobs([job_dir])
        records = Jobs(store).trial_records(JOB)
    assert (first.imported, second.imported, second.trials) == (500, 1, 501)
    assert [r.trial_name for r in records][-2:] == ["a0499x", "b" * 600]
    packs = _index_items(tmp_path / "store")["trial_packs"]
    assert [key.decode() for key, _ in packs] == [f"{JOB}/00000000", f"{JOB}/00000001"]
    assert [record[0] for record in _pack_records(packs[1:])] == ["b" * 600]


@pytest.mark.parametrize("streamed", [True, False])
def test_packs_hold_trials_by_name_however_they_were_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """Trial names that go back after a pack was written while parsing (the first half of
    the directories holds the even names, the second half the odd ones) end in packs by
    name: the layout a re-import or an import without streaming writes."""
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 5)
    monkeypatch.setattr(stored_packs, "TRIALS_PER_PACK", 5)  # the buffer is empty after each chunk
    n = 40
    names = [f"b{2 * i:03d}" for i in range(n // 2)] + [f"b{2 * i + 1:03d}" for i in range(n // 2)]
    tasks = [f"t{i // 5}" for i in range(n)]  # one task per chunk: attempts hold, no rewrite
    dirs = [f"{task}__{i:03d}" for i, task in enumerate(tasks)]
    job_dir = _job(tmp_path, names, dirs=dirs, tasks=tasks)
    added: list[int] = []
    add = importing.JobStream.add
    monkeypatch.setattr(
        importing.JobStream, "add", lambda self, chunk: (added.append(self.packs), add(self, chunk))
    )
    if not streamed:

        class Unstreamed(importing.JobStream):
            def add(self, chunk) -> None:
                self.failed = True

        monkeypatch.setattr(importing, "JobStream", Unstreamed)
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([job_dir])
    packs = _index_items(tmp_path / "store")["trial_packs"]
    stored = [record[0] for record in _pack_records(packs)]
    assert stored == sorted(names) and len(packs) == 8  # 40 trials, 5 per pack
    assert [len(_pack_records([item])) for item in packs] == [5] * 8
    if streamed:  # packs were written while parsing, before the names went back
        assert added[:5] == [0, 1, 2, 3, 4]


def test_a_job_whose_id_extends_another_keeps_its_own_packs(tmp_path: Path) -> None:
    """Jobs ``job`` and ``job/x`` (ids from saved trials) each see only their own packs."""
    from casstore.trials.importing import import_records

    def records(job_id: str, n: int) -> list[TrialRecord]:
        return [
            TrialRecord(job_id=job_id, trial_name=f"t__{i}", task_name="t", rewards={"reward": 1})
            for i in range(n)
        ]

    with Store(tmp_path / "store") as store:
        import_records(store.index, "job", records("job", 3), "reward")
        import_records(store.index, "job/x", records("job/x", 2), "reward")
        assert len(Jobs(store).trial_records("job")) == 3
        assert len(Jobs(store).trial_records("job/x")) == 2
        assert fsck(store).ok


def test_evidence_reads_one_frame_and_checks_it(tmp_path: Path) -> None:
    """A byte flipped inside one frame of an evidence pack is a corrupt store for that
    frame's trial (zstd's content checksum), never wrong bytes; the other frames read."""
    names = [f"t__{i:02d}" for i in range(20)]
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([_job(tmp_path, names)])
        records = Jobs(store).trial_records(JOB)
        key = records[0].evidence.partition("#")[0]

        def flip(txn) -> None:
            raw = bytes(txn.raw_get("evidence", key))
            frame = decode_value(raw)["frames"][3]
            at = raw.index(frame) + len(frame) // 2
            damaged = raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]
            txn._txn.put(key.encode(), damaged, db=txn._dbs["evidence"])

        store.index.write(flip)
        with pytest.raises(CorruptStoreError) as caught:
            Jobs(store).evidence(records[3].evidence)
        assert caught.value.path == f"evidence/{key}"
        for record in records[:3] + records[4:]:
            assert Jobs(store).evidence(record.evidence) == Path(record.result_path).read_bytes()


def test_reimport_repairs_a_damaged_evidence_pack(tmp_path: Path, capsys) -> None:
    """Evidence packs are kept at their digests; a re-import that reads the same files again
    (trial names other than their directories' names) replaces a damaged one."""
    names = [f"t__{i:02d}" for i in range(20)]
    job_dir = _job(tmp_path, names, dirs=[f"dir{i:02d}" for i in range(20)])
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([job_dir])
        key = Jobs(store).trial_records(JOB)[0].evidence.partition("#")[0]
        good = bytes(store.index.read(lambda txn: txn.raw_get("evidence", key)))
        damaged = good[:-1] + bytes([good[-1] ^ 0xFF])
        store.index.write(lambda txn: txn._txn.put(key.encode(), damaged, db=txn._dbs["evidence"]))
    code, report = _fsck(capsys, tmp_path / "store")
    assert code == 1 and {p["kind"] for p in report["problems"]} == {"corrupt_evidence"}
    with Store(tmp_path / "store") as store:
        (again,) = Jobs(store).import_jobs([job_dir])
        assert again.imported == 0
        assert bytes(store.index.read(lambda txn: txn.raw_get("evidence", key))) == good
    assert _fsck(capsys, tmp_path / "store")[0] == 0


def _store_with(tmp_path: Path, n: int = 20) -> tuple[Path, list[TrialRecord], str]:
    names = [f"t__{i:02d}" for i in range(n)]
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([_job(tmp_path, names)])
        records = Jobs(store).trial_records(JOB)
    return tmp_path / "store", records, str((tmp_path / "job").resolve())


def _put_pack(store_dir: Path, number: int, value: bytes) -> None:
    with Store(store_dir, create=False) as store:
        key = f"{JOB}/{number:08d}".encode()
        store.index.write(lambda txn: txn._txn.put(key, value, db=txn._dbs["trial_packs"]))


def test_fsck_finds_a_trial_stored_twice_and_an_empty_pack(tmp_path: Path, capsys) -> None:
    store_dir, records, path = _store_with(tmp_path)
    again = encode_trial_pack([encode_stored(records[5], path, "reward")])
    _put_pack(store_dir, 1, again)
    _put_pack(store_dir, 2, encode_trial_pack([]))
    code, report = _fsck(capsys, store_dir)
    problems = [(p["kind"], p["ref"], p["message"]) for p in report["problems"]]
    assert code == 1 and report["trials"] == 21
    assert (
        "corrupt_trial",
        f"{JOB}/t__05",
        f"trial_packs/{JOB}/00000001: trial 't__05' stored twice "
        f"(also in trial_packs/{JOB}/00000000)",
    ) in problems
    assert ("corrupt_trial", f"{JOB}/00000002", f"trial_packs/{JOB}/00000002: empty") in problems
    assert {kind for kind, _, _ in problems} == {
        "corrupt_trial",
        "corrupt_job",
        "corrupt_reward_table",
    }


def test_fsck_does_not_count_a_damaged_pack(tmp_path: Path, capsys) -> None:
    """A pack that does not decode is reported once; its records are not counted (its array
    header may claim any number), so the reward table's rows are not compared."""
    store_dir, _, _ = _store_with(tmp_path)
    _put_pack(store_dir, 0, b"\xdd\xff\xff\xff\xff")
    code, report = _fsck(capsys, store_dir)
    assert code == 1 and report["trials"] == 0
    assert [(p["kind"], p["ref"]) for p in report["problems"]] == [
        ("corrupt_trial", f"{JOB}/00000000")
    ]


def test_fsck_checks_the_job_record_against_its_trials(tmp_path: Path, capsys) -> None:
    store_dir, _, _ = _store_with(tmp_path)
    with Store(store_dir, create=False) as store:

        def rename(txn) -> None:
            record = txn.get("jobs", JOB)
            record["trial_names"] = [*record["trial_names"][:-1], "t__99"]
            txn.put("jobs", JOB, record)

        store.index.write(rename)
    code, report = _fsck(capsys, store_dir)
    assert code == 1 and [(p["kind"], p["message"]) for p in report["problems"]] == [
        (
            "corrupt_job",
            f"jobs/{JOB}: the job record lists 20 trials (20 names), the store holds 20 "
            "trial records of other names",
        )
    ]


def test_fsck_verifies_the_zstd_dictionary(tmp_path: Path, capsys) -> None:
    store_dir, records, _ = _store_with(tmp_path)
    name = records[0].evidence_dict
    assert name is not None
    with Store(store_dir, create=False) as store:

        def damage(txn) -> None:
            data = txn.get("zstd_dicts", name)
            txn.put("zstd_dicts", name, data[:-1] + bytes([data[-1] ^ 0xFF]))

        store.index.write(damage)
    code, report = _fsck(capsys, store_dir)
    assert code == 1 and len(report["problems"]) == len(records)
    assert {(p["kind"], p["message"]) for p in report["problems"]} == {
        ("corrupt_evidence", f"zstd_dicts/{name}: the dictionary's bytes do not hash to its id")
    }


def test_job_result_with_a_nan_literal_imports_under_one_id(tmp_path: Path, capsys) -> None:
    """A job result.json msgspec refuses (a NaN literal) is read with the standard library
    wherever the job id is taken: the trials are written under the job record's id."""
    job_dir = _job(tmp_path, [f"t__{i:02d}" for i in range(20)])
    text = (job_dir / "result.json").read_text()
    (job_dir / "result.json").write_text(text.replace('"mean": 0.5', '"mean": NaN'))
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
        assert (report.job, report.trials) == (JOB, 20)
        assert len(Jobs(store).trial_records(JOB)) == 20
    assert _fsck(capsys, tmp_path / "store")[0] == 0


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def test_saved_trials_given_twice_are_refused(tmp_path: Path, capsys) -> None:
    names = [f"t__{i:02d}" for i in range(3)]
    job_dir = _job(tmp_path, names)
    saved = tmp_path / "saved.jsonl"
    assert store_cli(capsys, tmp_path / "a", "export", str(job_dir), "-o", str(saved))[0] == 0
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join([*_lines(saved), _lines(saved)[1]]) + "\n")
    code, out, err = store_cli(capsys, tmp_path / "b", "import", str(dup))
    assert (code, out) == (1, "")
    assert (
        err == f"casstore: {dup}: trial 't__01' of job {JOB} is given twice; pass each trial once\n"
    )


def test_reimport_keeps_the_first_of_two_directories_with_one_trial_name(tmp_path: Path) -> None:
    """A copy of a trial directory (same trial name) stays out on every re-import: the
    trial imported first keeps its record and the diagnostic names the copy each time."""
    names = [f"t__{i:02d}" for i in range(20)]
    job_dir = _job(tmp_path, names)
    copy = job_dir / "zzcopy"
    copy.mkdir()
    text = (job_dir / "t__00" / "result.json").read_text()
    (copy / "result.json").write_text(text.replace('"reward": 1.0', '"reward": 0.25'))
    with Store(tmp_path / "store") as store:
        reports = [Jobs(store).import_jobs([job_dir])[0] for _ in range(2)]
        record = {r.trial_name: r for r in Jobs(store).trial_records(JOB)}["t__00"]
        assert Jobs(store).reward_table(JOB).primary.tolist() == [1.0] * 20
    assert record.rewards == {"reward": 1.0} and record.result_path.endswith("/t__00/result.json")
    for report in reports:
        dup = next(d for d in report.diagnostics if d["code"] == "duplicate_trial_name")
        assert dup["trial_dirs"] == ["zzcopy"] and report.trials == 20
    assert reports[1].imported == 0


def test_moved_job_directory_moves_its_result_paths(tmp_path: Path) -> None:
    names = [f"t__{i:02d}" for i in range(5)]
    job_dir = _job(tmp_path, names)
    with Store(tmp_path / "store") as store:
        Jobs(store).import_jobs([job_dir])
        moved = job_dir.rename(tmp_path / "moved")
        write_trial(moved, "t__new", trial_json(trial_result("t0", "t__new")))
        (report,) = Jobs(store).import_jobs([moved])
        paths = {r.trial_name: r.result_path for r in Jobs(store).trial_records(JOB)}
    assert report.imported == 1 and len(paths) == 6
    assert paths == {n: str(moved.resolve() / n / "result.json") for n in paths}


def test_unusable_names_and_ids_are_one_line_errors(tmp_path: Path, capsys) -> None:
    """A trial directory whose name is not UTF-8 is an unreadable trial; a job directory
    whose path is not UTF-8 is refused; a job result.json id that cannot be a store key
    (a lone surrogate, 600 characters) falls back to the directory's digest id; saved
    trials with such a job id are refused."""
    import os

    names = [f"t__{i:02d}" for i in range(3)]
    job_dir = _job(tmp_path, names)
    os.rename(job_dir / "t__02", os.fsencode(job_dir) + b"/t__\xff")
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job_dir])
    assert (report.trials, report.failure_codes.get("result_unreadable")) == (2, 1)
    bad = next(d for d in report.diagnostics if d["code"] == "result_unreadable")
    assert bad["trials"] == [
        {"trial_dir": "t__\\xff", "reason": "the trial directory's name is not valid UTF-8"}
    ]
    odd = tmp_path / os.fsdecode(b"job\xff")
    os.rename(job_dir, odd)
    code, _, err = store_cli(capsys, tmp_path / "store", "import", str(odd))
    assert code == 2 and err.endswith(": the job directory's path is not valid UTF-8\n")
    for job_id in ("abc\ud800", "x" * 600):
        other = _job(tmp_path / f"ids{len(job_id)}", names, job_id=job_id)
        with Store(tmp_path / "store") as store:
            (report,) = Jobs(store).import_jobs([other])
        assert report.job.startswith("sha256:") and report.trials == 3
    saved = tmp_path / "saved.jsonl"
    assert store_cli(capsys, tmp_path / "store", "export", report.job, "-o", str(saved))[0] == 0
    saved.write_text(saved.read_text().replace(report.job, "y" * 600))
    code, _, err = store_cli(capsys, tmp_path / "other", "import", str(saved))
    assert code == 1 and "the job id is 600 bytes, more than 256" in err


@pytest.mark.parametrize("version", [1, 2])
def test_older_evidence_entries_are_checked_against_their_keys(
    tmp_path: Path, capsys, version: int
) -> None:
    """A byte flipped inside an older store's evidence entry (frames without checksums) is
    found by fsck and refused by ``Store.evidence``, never returned as wrong bytes."""
    from tests.test_import import _as_schema

    store_dir, _, _ = _store_with(tmp_path)
    _as_schema(store_dir, version)
    with Store(store_dir, create=False) as store:
        records = Jobs(store).trial_records(JOB)
        key = records[4].evidence
        assert "#" not in key

        def flip(txn) -> None:
            raw = bytes(txn.raw_get("evidence", key))
            data = decode_value(raw)["data"]
            at = raw.index(data) + len(data) // 2
            damaged = raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]
            txn._txn.put(key.encode(), damaged, db=txn._dbs["evidence"])

        store.index.write(flip)
        with pytest.raises(CorruptStoreError) as caught:
            Jobs(store).evidence(key)
        assert caught.value.path == f"evidence/{key}"
        assert (
            Jobs(store).evidence(records[3].evidence) == Path(records[3].result_path).read_bytes()
        )
    code, report = _fsck(capsys, store_dir)
    assert code == 1 and [(p["kind"], p["ref"]) for p in report["problems"]] == [
        ("corrupt_evidence", f"{JOB}/{records[4].trial_name}")
    ]


def test_fsck_finds_a_changed_evidence_reference(tmp_path: Path, capsys) -> None:
    """A trial pack whose record names another trial's evidence frame (``#3`` made ``#4``)."""
    store_dir, records, path = _store_with(tmp_path)
    key, _, index = records[3].evidence.partition("#")
    records[3].evidence = f"{key}#{int(index) + 1}"
    other = next(
        r.trial_name for r in records if r.evidence == records[3].evidence and r is not records[3]
    )
    _put_pack(store_dir, 0, encode_trial_pack([encode_stored(r, path, "reward") for r in records]))
    code, report = _fsck(capsys, store_dir)
    problems = [(p["kind"], p["ref"], p["message"]) for p in report["problems"]]
    assert code == 1 and problems == [  # the later of the two trials naming that frame
        (
            "corrupt_trial",
            f"{JOB}/{other}",
            f"evidence reference {records[3].evidence} is trial {records[3].trial_name!r}'s",
        )
    ]


def test_older_entries_check_their_dictionary_and_refuse_a_frame_index(tmp_path: Path) -> None:
    """A schema-2 entry's key covers its compressed bytes, not the dictionary: a damaged
    dictionary is a corrupt store on read, never wrong bytes; ``<entry>#0`` names no pack."""
    from casstore.errors import UnknownReferenceError
    from tests.test_import import _as_schema

    store_dir, _, _ = _store_with(tmp_path)
    _as_schema(store_dir, 2)
    with Store(store_dir, create=False) as store:
        records = Jobs(store).trial_records(JOB)
        with pytest.raises(UnknownReferenceError) as raised:
            Jobs(store).evidence(records[0].evidence + "#0")
        assert raised.value.rule == "an evidence entry, not a pack: name it without #"
        name = records[0].evidence_dict

        def damage(txn) -> None:
            data = txn.get("zstd_dicts", name)
            txn.put("zstd_dicts", name, data[:-1] + bytes([data[-1] ^ 0x01]))

        store.index.write(damage)
        for record in records:
            damaged = f"zstd_dicts/{name}: the dictionary's bytes do not hash to its id"
            with pytest.raises(CorruptStoreError, match=re.escape(damaged)):
                Jobs(store).evidence(record.evidence)


def test_undecodable_names_are_one_line_errors(tmp_path: Path, capsys) -> None:
    import os

    job_dir = _job(tmp_path, [f"t__{i:02d}" for i in range(3)])
    odd = os.fsdecode(b"na\xffme")
    code, _, err = store_cli(capsys, tmp_path / "s", "import", str(job_dir), "--name", odd)
    assert (code, err) == (2, "casstore: na\\udcffme: --name is not valid Unicode text\n")
    bad_store = tmp_path / os.fsdecode(b"s\xff")
    code, _, err = store_cli(capsys, bad_store, "import", str(job_dir))
    assert code == 2 and err.endswith(": the store path is not valid UTF-8\n")
    assert not bad_store.exists()
    assert store_cli(capsys, tmp_path / "s", "import", str(job_dir))[0] == 0
    code, _, err = store_cli(capsys, tmp_path / "s", "rescore", odd)
    assert code == 2 and err.startswith("casstore: ") and err.count("\n") == 1


def test_saved_trials_file_is_checked_whole_before_any_job_is_imported(
    tmp_path: Path, capsys
) -> None:
    job_dir = _job(tmp_path, [f"t__{i:02d}" for i in range(3)])
    saved = tmp_path / "saved.jsonl"
    assert store_cli(capsys, tmp_path / "a", "export", str(job_dir), "-o", str(saved))[0] == 0
    lines = _lines(saved)
    other = lines[0].replace(JOB, "other-job")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([*lines, other, other]) + "\n")
    code, _, err = store_cli(capsys, tmp_path / "b", "import", str(mixed))
    assert code == 1 and "of job other-job is given twice" in err
    code, out, _ = store_cli(capsys, tmp_path / "b", "ls", "jobs", "--json")
    assert code == 0 and out == []
