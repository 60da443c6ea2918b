"""A damaged store: byte flips in stored values and a truncated ``data.mdb`` give casstore's
one-line ``corrupt_store`` error (exit 1, the JSON error object with ``--json``), never a
traceback or SIGBUS; ``fsck`` reports damaged imported jobs by kind and job id."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import zipfile
from pathlib import Path

import lmdb
import msgspec
import pytest

from casstore.api import fsck
from casstore.errors import CorruptStoreError, UsageError
from casstore.store import Store
from casstore.store.index import Index
from casstore.store.values import decode, decode_value
from casstore.trials import Jobs
from tests.helpers import CLI, run_python, store_cli
from tests.trials_builder import make_job, trial_json, trial_result

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 20  # enough for a zstd dictionary (evidence.MIN_DICT_SAMPLES)


@pytest.fixture
def imported(tmp_path: Path) -> tuple[Path, str]:
    """A store holding one imported generated job: (store directory, job id)."""
    trials = {
        f"t{i % 3}__{i}": trial_json(trial_result(f"t{i % 3}", f"t{i % 3}__{i}", started=i))
        for i in range(TRIALS)
    }
    job_dir = make_job(tmp_path / "job", trials)
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([job_dir], name="demo")
    return tmp_path / "store", report.job


def _raw(store_dir: Path, db: str, key: str) -> bytes:
    """The stored (msgpack) bytes at ``key`` of ``db``."""
    with Store(store_dir, create=False) as store:
        return store.index.read(lambda txn: bytes(txn._txn.get(key.encode(), db=txn._dbs[db])))


def _flip(store_dir: Path, db: str, key: str, position: int) -> None:
    """Flip (xor 0xff) byte ``position`` of the value at ``key`` of ``db``, in data.mdb itself
    (the value is found there as a whole, once)."""
    raw = _raw(store_dir, db, key)
    data_file = store_dir / "index" / "data.mdb"
    content = data_file.read_bytes()
    assert content.count(raw) == 1
    offset = content.find(raw) + position
    with data_file.open("r+b") as handle:
        handle.seek(offset)
        handle.write(bytes([content[offset] ^ 0xFF]))


def _column_end(table: bytes, column: str) -> int:
    """The offset of the last byte of ``column``'s ``.npy`` member in a stored table."""
    info = zipfile.ZipFile(io.BytesIO(table)).getinfo(f"{column}.npy")
    start = info.header_offset
    names, extra = struct.unpack("<HH", table[start + 26 : start + 30])
    return start + 30 + names + extra + info.compress_size - 1


def _flip_table_column(store_dir: Path, job: str, column: str) -> None:
    raw = _raw(store_dir, "reward_tables", job)
    table = decode_value(raw)
    _flip(store_dir, "reward_tables", job, len(raw) - len(table) + _column_end(table, column))


def _assert_one_line(code: int, out: object, err: str, path: str) -> None:
    """Exit 1, one ``casstore: <path>: ...`` line on stderr, the JSON error on stdout."""
    assert code == 1
    assert err.count("\n") == 1 and err.startswith(f"casstore: {path}: ")
    assert "Traceback" not in err
    assert isinstance(out, dict) and out["ok"] is False
    assert out["error"]["kind"] == "corrupt_store" and out["error"]["path"] == path


def _fsck_problems(capsys, store_dir: Path) -> list[tuple[str, str]]:
    code, report, err = store_cli(capsys, store_dir, "fsck", "--json")
    assert code == 1 and err == "" and report["ok"] is False
    return [(problem["kind"], problem["ref"]) for problem in report["problems"]]


# byte flips -----------------------------------------------------------------------------


def test_clean_store_fsck_checks_jobs(imported, capsys) -> None:
    store_dir, _ = imported
    code, report, _ = store_cli(capsys, store_dir, "fsck", "--json")
    assert code == 0 and report["ok"] and (report["jobs"], report["trials"]) == (1, TRIALS)
    code, text, _ = store_cli(capsys, store_dir, "fsck")
    assert code == 0 and text == f"ok: 0 revisions, 0 archives, 1 job, {TRIALS} trials\n"


def test_flipped_reward_table_column(imported, capsys) -> None:
    store_dir, job = imported
    _flip_table_column(store_dir, job, "task")
    code, out, err = store_cli(capsys, store_dir, "rescore", "demo", "--json")
    _assert_one_line(code, out, err, f"reward_tables/{job}")
    assert "CRC-32 mismatch" in err and "column task" in err
    assert _fsck_problems(capsys, store_dir) == [("corrupt_reward_table", job)]


@pytest.mark.parametrize("column", ["trials", "tasks"])
def test_flipped_name_column_is_found_before_any_output(imported, capsys, column) -> None:
    store_dir, job = imported
    _flip_table_column(store_dir, job, column)  # RewardTable.from_bytes checks it lazily
    store = Store(store_dir, create=False)
    with store, pytest.raises(CorruptStoreError, match=f"column {column}: CRC-32") as caught:
        Jobs(store).reward_table(job)
    assert caught.value.path == f"reward_tables/{job}"
    code, out, err = store_cli(capsys, store_dir, "rescore", "demo")
    assert (code, out) == (1, "") and err.startswith(f"casstore: reward_tables/{job}: ")
    assert _fsck_problems(capsys, store_dir) == [("corrupt_reward_table", job)]


def test_missing_reward_table_is_damage(imported, capsys) -> None:
    """A job record whose reward table was deleted: corrupt_store (exit 1) naming the table,
    never the usage error of an unknown job (exit 2)."""
    store_dir, job = imported
    with Store(store_dir, create=False) as store:
        store.index.write(lambda txn: txn.delete("reward_tables", job))
    rule = "missing (the job record names this job; fsck reports it)"
    with Store(store_dir, create=False) as store, pytest.raises(CorruptStoreError) as caught:
        Jobs(store).reward_table("demo")
    assert (caught.value.path, caught.value.rule) == (f"reward_tables/{job}", rule)
    for source in ("demo", job):
        code, out, err = store_cli(capsys, store_dir, "rescore", source)
        assert (code, out, err) == (1, "", f"casstore: reward_tables/{job}: {rule}\n")
        code, out, err = store_cli(capsys, store_dir, "rescore", source, "--json")
        _assert_one_line(code, out, err, f"reward_tables/{job}")
        assert out == {
            "ok": False,
            "error": {
                "kind": "corrupt_store",
                "path": f"reward_tables/{job}",
                "message": f"reward_tables/{job}: {rule}",
            },
        }
    assert _fsck_problems(capsys, store_dir) == [("corrupt_reward_table", job)]


def test_flipped_job_record(imported, capsys) -> None:
    store_dir, job = imported
    raw = _raw(store_dir, "jobs", job)
    _flip(store_dir, "jobs", job, raw.index(b"\xa4name\xa4demo") + 6)  # inside the name
    for argv in (["rescore", job], ["ls", "jobs"], ["export", job, "-o", "x.jsonl"]):
        code, out, err = store_cli(capsys, store_dir, *argv, "--json")
        _assert_one_line(code, out, err, f"jobs/{job}")
    assert _fsck_problems(capsys, store_dir) == [("corrupt_job", job)]


def test_flipped_trial_record(imported, capsys, tmp_path: Path) -> None:
    store_dir, job = imported
    key = f"{job}/00000000"  # the job's one trial pack
    raw = _raw(store_dir, "trial_packs", key)
    _flip(store_dir, "trial_packs", key, raw.index(b"t1__4"))  # 't' becomes a bad UTF-8 byte
    output = str(tmp_path / "out.jsonl")
    code, out, err = store_cli(capsys, store_dir, "export", job, "-o", output, "--json")
    _assert_one_line(code, out, err, f"trial_packs/{key}")
    assert not Path(output).exists()
    # the damaged pack's header still counts 20 records: the reward table's 20 rows agree
    assert _fsck_problems(capsys, store_dir) == [("corrupt_trial", key)]


def test_missing_evidence_and_trial_record(imported, capsys) -> None:
    from casstore.trials.stored_form import encode_trial_pack, pack_body

    store_dir, job = imported
    with Store(store_dir, create=False) as store:
        records = Jobs(store).trial_records(job)
    pack = f"{job}/00000000"
    stored = msgspec.msgpack.decode(pack_body(_raw(store_dir, "trial_packs", pack), True))
    with Store(store_dir, create=False) as store:

        def damage(txn) -> None:
            txn.delete("evidence", records[0].evidence.partition("#")[0])
            txn.delete("zstd_dicts", records[0].evidence_dict)
            fewer = encode_trial_pack([msgspec.msgpack.encode(r) for r in stored[1:]])
            txn._txn.put(pack.encode(), fewer, db=txn._dbs["trial_packs"])

        store.index.write(damage)
    problems = _fsck_problems(capsys, store_dir)
    assert len(problems) == 2 * (TRIALS - 1) + 2  # the pack and the dictionary per trial
    for record in records[1:]:
        ref = f"{job}/{record.trial_name}"
        assert problems.count(("missing_evidence", ref)) == 2
    assert ("corrupt_reward_table", job) in problems  # 20 rows, 19 trial records
    assert ("corrupt_job", job) in problems  # 20 trial names in the job record


@pytest.mark.parametrize("damage", ["flipped", "frames"])
def test_corrupt_evidence_pack(imported, capsys, damage: str) -> None:
    """A pack whose bytes no longer hash to its key, or one without the frame a trial
    references, is ``corrupt_evidence`` for each such trial."""
    store_dir, job = imported
    with Store(store_dir, create=False) as store:
        records = Jobs(store).trial_records(job)
    key = records[0].evidence.partition("#")[0]
    raw = _raw(store_dir, "evidence", key)
    if damage == "flipped":
        _flip(store_dir, "evidence", key, len(raw) - 1)
        hurt = records
    else:  # the first trial's reference names frame 99 of its 20-frame pack
        from casstore.trials.stored import job_record
        from casstore.trials.stored_form import encode_stored, encode_trial_pack

        with Store(store_dir, create=False) as store:
            record = job_record(store.index, job)
            records[0].evidence = f"{key}#99"
            pack = encode_trial_pack(
                [encode_stored(r, record.path, record.reward_key) for r in records]
            )
            store.index.write(
                lambda txn: txn._txn.put(
                    f"{job}/00000000".encode(), pack, db=txn._dbs["trial_packs"]
                )
            )
        hurt = records[:1]
    problems = _fsck_problems(capsys, store_dir)
    assert problems == [("corrupt_evidence", f"{job}/{r.trial_name}") for r in hurt]
    code, report, _ = store_cli(capsys, store_dir, "fsck", "--json")
    assert code == 1
    message = report["problems"][0]["message"]
    if damage == "flipped":
        assert message.startswith(f"evidence/{key}: the pack's bytes hash to sha256:")
    else:
        assert message == f"evidence/{key}: {TRIALS} frames, no frame 99"


def test_saved_trials_import_keeps_evidence_elsewhere(imported, capsys, tmp_path: Path) -> None:
    store_dir, _ = imported
    saved = tmp_path / "saved.jsonl"
    assert store_cli(capsys, store_dir, "export", "demo", "-o", str(saved))[0] == 0
    other = tmp_path / "other"
    assert store_cli(capsys, other, "import", str(saved))[0] == 0
    code, report, _ = store_cli(capsys, other, "fsck", "--json")
    assert code == 0 and report["ok"] and report["trials"] == TRIALS


def test_damaged_value_in_any_database_names_it(tmp_path: Path) -> None:
    with Index(tmp_path / "index") as index:
        index.write(lambda txn: txn._txn.put(b"k", b"\xc1", db=txn._dbs["tasks"]))  # never msgpack
        with pytest.raises(CorruptStoreError) as caught:
            index.read(lambda txn: txn.get("tasks", "k"))
        assert caught.value.path == "tasks/k" and caught.value.kind == "corrupt_store"
        with pytest.raises(CorruptStoreError, match=r"^tasks/k: stored value does not decode"):
            index.read(lambda txn: list(txn.items("tasks")))
    with pytest.raises(UsageError):  # a casstore error of the decoder passes unchanged
        decode("tasks", "k", _refuse)


def _refuse() -> None:
    raise UsageError("x", "refused")


# truncated data.mdb ---------------------------------------------------------------------


def _cli(store_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess: a SIGBUS ends it, not pytest (returncode -7)."""
    return run_python(CLI, "--store", str(store_dir), *argv, timeout=60)


def _assert_refused(store_dir: Path, size: int, *argv: str) -> str:
    """The CLI exits 1 with one line naming data.mdb, which keeps its size; returns stdout."""
    data_file = store_dir / "index" / "data.mdb"
    done = _cli(store_dir, *argv)
    assert done.returncode == 1, (argv, done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"casstore: {data_file}: data.mdb ")
    assert data_file.stat().st_size == size  # never re-created nor grown
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("size", [0, 4096, 8192, "half", "one page short"])
def test_truncated_data_file(imported, size) -> None:
    store_dir, _ = imported
    data_file = store_dir / "index" / "data.mdb"
    full = data_file.stat().st_size
    size = {"half": full // 2, "one page short": full - 4096}.get(size, size)
    os.truncate(data_file, size)
    with pytest.raises(CorruptStoreError) as caught:
        Store(store_dir)
    assert caught.value.path == str(data_file) and data_file.stat().st_size == size
    _assert_refused(store_dir, size, "import", str(store_dir))  # a creating command
    out = _assert_refused(store_dir, size, "ls", "jobs", "--json")
    assert '"kind": "corrupt_store"' in out


@pytest.mark.slow
def test_truncated_data_file_every_reader(imported) -> None:
    store_dir, _ = imported
    data_file = store_dir / "index" / "data.mdb"
    size = data_file.stat().st_size // 2
    os.truncate(data_file, size)
    for argv in (["rescore", "demo", "--json"], ["fsck"], ["export", "demo", "-o", "x.jsonl"]):
        _assert_refused(store_dir, size, *argv)


def test_fresh_store_opens_and_reopens(tmp_path: Path) -> None:
    with Store(tmp_path / "new") as store:
        assert Jobs(store).list() == []
        page = store.index.env.stat()["psize"]
    assert (tmp_path / "new" / "index" / "data.mdb").stat().st_size >= 2 * page
    with Store(tmp_path / "new", create=False) as store:
        assert fsck(store).ok
    env = lmdb.open(str(tmp_path / "bare"))  # an index LMDB created, never written
    env.close()
    Index(tmp_path / "bare").close()


# records of the right encoding but the wrong shape ----------------------------------------

TASK_FIELDS = [
    "native_id",
    "dir_name",
    "archive_ref",
    "address",
    "content_digest",
    "compression",
    "entries",
    "payload_bytes",
    "archive_bytes",
    "metrics",
    "views",
    "digest",
    "created",
]


@pytest.fixture
def published(tmp_path: Path) -> tuple[Path, str]:
    """A store with one published task ``default/task``; (store root, its revision digest)."""
    from casstore.archive.discover import discover
    from tests.helpers import make_task

    root = tmp_path / "store"
    with Store(root) as store:
        result = store.publish(discover(make_task(tmp_path))[0])
    return root, result.revision


def test_records_are_stored_as_maps_of_their_fields_in_order(published) -> None:
    """The stored encoding (the store's schema): a revision is a map of its fields in
    declaration order, a name record ``workspace``, ``name``, ``history`` of
    ``{digest, created}``; what the index holds is what a record reads back as."""
    root, digest = published
    with Store(root) as store:
        raw_name, raw_revision = store.index.read(
            lambda txn: (txn.get("tasks", "default/task"), txn.get("revisions", digest))
        )
        record, revision = store.tasks.get("task")
    assert list(raw_revision) == TASK_FIELDS and raw_revision == revision.to_builtins()
    assert raw_name == {
        "workspace": "default",
        "name": "task",
        "history": [{"digest": digest, "created": record.history[0].created}],
    }
    assert raw_name == record.to_builtins() and list(raw_name) == ["workspace", "name", "history"]


def _damaged(root: Path, db: str, key: str, change) -> CorruptStoreError:
    """The error reading ``default/task`` after ``change`` (dict → dict) of the valid stored
    value at ``key`` of ``db``."""
    with Store(root) as store:
        store.index.write(lambda txn: txn.put(db, key, change(dict(txn.get(db, key)))))
        with pytest.raises(CorruptStoreError) as caught:
            store.tasks.get("task")
    return caught.value


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (lambda v: v | {"entries": "5"}, "Expected `int`, got `str` - at `$.entries`"),
        (lambda v: v | {"metrics": "reward"}, "Expected `array`, got `str` - at `$.metrics`"),
        (lambda v: v | {"extra": 1}, "Object contains unknown field `extra`"),
        (lambda v: {k: x for k, x in v.items() if k != "address"}, "missing required field"),
        (lambda v: v | {"entries": v["entries"] + 1}, "the revision's content hashes to"),
    ],
)
def test_a_revision_of_the_wrong_shape_is_corrupt(published, change, rule) -> None:
    root, digest = published
    error = _damaged(root, "revisions", digest, change)
    assert error.path == f"revisions/{digest}" and error.kind == "corrupt_store"
    assert error.rule.startswith("stored value does not decode: ") and rule in error.rule


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (lambda v: v | {"history": [{"digest": 1, "created": ""}]}, "at `$.history[0].digest`"),
        (lambda v: v | {"history": {}}, "Expected `array`, got `object` - at `$.history`"),
        (lambda v: v | {"history": []}, "the record has no revision"),
        (lambda v: v | {"name": "other"}, "the record names default/other"),
        (lambda v: {k: x for k, x in v.items() if k != "workspace"}, "missing required field"),
    ],
)
def test_a_name_record_of_the_wrong_shape_is_corrupt(published, change, rule, capsys) -> None:
    root, _ = published
    error = _damaged(root, "tasks", "default/task", change)
    assert error.path == "tasks/default/task" and rule in error.rule
    code, out, err = store_cli(capsys, root, "ls", "tasks")  # one line, exit 1
    assert (code, out) == (1, "") and err.startswith("casstore: tasks/default/task: stored value")
    assert err.count("\n") == 1 and rule in err
