"""The store (README, §4 Store): create/replace/reuse/pin rules, checkout, fsck, gc, real data."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import lmdb
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.archive.discover import discover
from casstore.archive.read import verify_archive
from casstore.errors import (
    CheckError,
    DigestMismatchError,
    PublicationError,
    SourceChangedError,
    StoreError,
    UnknownReferenceError,
    UsageError,
)
from casstore.store import Index, Reference, Store, load_harbor_task
from casstore.store.records import canonical, canonical_digest
from tests.helpers import snapshot
from tests.test_discovery import FIXTURES, write_task


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "store") as opened:
        yield opened


def test_publish_records_a_revision(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "alpha", native="org/alpha"))[0]
    result = store.publish(task)
    assert result.name == "org-alpha" and result.id == "org/alpha"
    assert not result.reused and result.written
    assert result.content_digest == task.content_digest
    hex_ = result.address.removeprefix("sha256:")
    assert result.archive_ref == f"default/harbor-tasks#alpha/{hex_}/task_archive"
    path = store.root / "filesets/default/harbor-tasks/alpha" / hex_ / "task_archive"
    assert verify_archive(path, result.address).content_digest.hex == task.content_digest[7:]
    record, revision = store.tasks.get("default/org-alpha")
    assert revision.digest == result.revision == canonical_digest(revision.content())
    assert revision.created and len(record.history) == 1
    assert revision.metrics == ["reward"] and revision.entries == 5
    assert revision.archive_bytes == path.stat().st_size
    assert store.revision(result.revision) == revision


def test_revision_digest_excludes_created(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    one = store.publish(task, "one")
    two = store.publish(task, "two")
    assert one.revision == two.revision and not two.reused
    assert store.tasks.get("two")[0].history[0].created >= store.revision(one.revision).created


def test_create_refuses_existing_name(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    store.tasks.create("a", task)
    with pytest.raises(StoreError, match=r"exists \(publish without --create"):
        store.tasks.create("a", task)


def test_replace_reuses_identical_and_adds_revisions(store: Store, tmp_path: Path) -> None:
    source = write_task(tmp_path / "src", "a")
    first = store.tasks.replace("a", discover(source)[0])
    again = store.tasks.replace("a", discover(source)[0], compression="zstd")
    assert again.reused and again.revision == first.revision and not again.written
    (source / "instruction.md").write_text("Changed.\n")
    second = store.tasks.replace("a", discover(source)[0])
    assert not second.reused and second.revision != first.revision
    assert second.content_digest != first.content_digest
    record, latest = store.tasks.get("a")
    assert [e.digest for e in record.history] == [first.revision, second.revision]
    assert latest.digest == second.revision
    old = store.tasks.get(f"default/a#{first.revision}")[1]
    assert old.content_digest == first.content_digest


def test_scoring_change_is_a_new_revision(store: Store, tmp_path: Path) -> None:
    first = store.publish(discover(write_task(tmp_path / "s1", "a"))[0])
    changed = write_task(tmp_path / "s2", "a", metadata='reward_keys = ["speed"]')
    task = discover(changed)[0]
    assert task.metrics == ["reward", "speed"]
    second = store.publish(task)
    assert not second.reused and second.revision != first.revision
    assert store.tasks.get("a")[1].metrics == ["reward", "speed"]


def test_source_changed_after_discovery(store: Store, tmp_path: Path) -> None:
    source = write_task(tmp_path / "src", "a")
    task = discover(source)[0]
    (source / "instruction.md").write_text("Different.\n")
    with pytest.raises(SourceChangedError) as info:
        store.publish(task)
    assert str(source) in str(info.value)
    assert list(store.filesets.archives()) == []
    with pytest.raises(UnknownReferenceError):
        store.tasks.get("a")


def test_publication_error_and_retry(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    store.tasks.create("a", discover(write_task(tmp_path / "other", "a", native="x/y"))[0])
    original = store.index.write

    def failing(body):
        raise lmdb.Error("simulated index failure")

    store.index.write = failing  # type: ignore[method-assign]
    with pytest.raises(PublicationError) as info:
        store.tasks.replace("b", task)
    store.index.write = original  # type: ignore[method-assign]
    prepared = info.value.prepared
    assert prepared.name == "b" and prepared.revision.content_digest == task.content_digest
    path = store.filesets.path_of(prepared.revision.archive_ref)
    mtime = path.stat().st_mtime_ns
    result = store.retry(prepared)
    assert result.revision == prepared.revision.digest and not result.reused
    assert path.stat().st_mtime_ns == mtime
    assert store.tasks.get("b")[1].address == prepared.revision.address


def test_existing_archive_is_reverified_not_overwritten(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    first = store.publish(task, "one")
    second = store.publish(task, "two")
    assert first.written and not second.written
    assert len(list(store.filesets.archives())) == 1


def corrupt(path: Path, offset: int = 40) -> bytes:
    """Flip one byte of a stored (read-only) archive; return the damaged bytes."""
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return bytes(data)


def test_corrupt_existing_archive_is_repaired(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    first = store.publish(task, "one")
    path = store.filesets.path_of(first.archive_ref)
    good = path.read_bytes()
    corrupt(path)
    # Another name with the same content: the damaged file at the address is replaced.
    second = store.publish(task, "two")
    assert second.written and second.repaired and not second.reused
    assert second.address == first.address and path.read_bytes() == good
    assert stat.S_IMODE(path.stat().st_mode) == 0o444 and store.fsck().ok


def test_reuse_reverifies_and_repairs_the_archive(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    first = store.publish(task, prefix="p", fileset="fs")
    path = store.filesets.path_of(first.archive_ref)
    good = path.read_bytes()
    corrupt(path, len(good) // 2)
    assert not store.fsck().ok
    # Other options would give another address: the repair keeps the revision's own.
    again = store.publish(task, compression="zstd")
    assert again.reused and again.repaired and again.written
    assert again.revision == first.revision and path.read_bytes() == good
    assert store.fsck().ok and store.fsck().archives == 1
    path.unlink()
    restored = store.publish(task)
    assert restored.reused and restored.repaired and path.read_bytes() == good
    plain = store.publish(task)
    assert plain.reused and not plain.repaired and not plain.written


def test_tasksets_pin_revisions(store: Store, tmp_path: Path) -> None:
    a = write_task(tmp_path / "src", "a")
    b = write_task(tmp_path / "src", "b")
    ra, rb = store.publish(discover(a)[0]), store.publish(discover(b)[0])
    created = store.tasksets.create("set", ["b", "default/a"])
    assert created.ref == "default/set" and not created.reused
    assert created.tasks == [
        {"task": "default/a", "revision": ra.revision},
        {"task": "default/b", "revision": rb.revision},
    ]
    with pytest.raises(StoreError, match=r"exists \(use taskset replace\)"):
        store.tasksets.create("set", ["a"])
    assert store.tasksets.replace("set", ["a", "b"]).reused
    (a / "instruction.md").write_text("New.\n")
    ra2 = store.publish(discover(a)[0])
    _, pinned = store.tasksets.get("default/set")
    assert pinned.tasks[0]["revision"] == ra.revision != ra2.revision
    kind, items = store.resolve("default/set")
    assert kind == "taskset" and [r.digest for _, r in items] == [ra.revision, rb.revision]
    newer = store.tasksets.replace("set", ["a", "b"])
    assert not newer.reused and newer.tasks[0]["revision"] == ra2.revision
    old = store.tasksets.get(f"default/set#{created.revision}")[1]
    assert old.tasks[0]["revision"] == ra.revision
    pinned_old = store.tasksets.replace("old", [f"default/a#{ra.revision}"])
    assert pinned_old.tasks == [{"task": "default/a", "revision": ra.revision}]
    assert [r.name for r, _ in store.tasksets.list()] == ["old", "set"]


def test_taskset_errors(store: Store, tmp_path: Path) -> None:
    store.publish(discover(write_task(tmp_path / "src", "a"))[0])
    with pytest.raises(UnknownReferenceError):
        store.tasksets.create("s", ["nope"])
    with pytest.raises(UnknownReferenceError):
        store.tasksets.create("s", ["a#sha256:" + "0" * 64])
    with pytest.raises(UsageError):
        store.tasksets.create("s", [])
    with pytest.raises(UsageError):
        store.tasksets.create("s", ["a", "default/a"])
    with pytest.raises(UsageError):
        store.tasksets.create("bad name", ["a"])
    with pytest.raises(UnknownReferenceError):
        store.resolve("default/missing")
    assert UnknownReferenceError("x", "y").exit_code == 2


def test_references() -> None:
    assert Reference.parse("n") == Reference(workspace="default", name="n")
    digest = "sha256:" + "ab" * 32
    ref = Reference.parse(f"w/n#{digest}")
    assert (ref.workspace, ref.name, ref.digest, str(ref)) == ("w", "n", digest, f"w/n#{digest}")
    for bad in ["w/n#sha256:12", "a/b/c", "w/", "w/n#blake3:" + "0" * 64]:
        with pytest.raises(UsageError):
            Reference.parse(bad)


def test_workspaces_filesets_prefix(store: Store, tmp_path: Path) -> None:
    task = discover(write_task(tmp_path / "src", "a"))[0]
    result = store.publish(task, workspace="team", fileset="fs", prefix="x/y")
    assert result.archive_ref.startswith("team/fs#x/y/a/")
    assert store.filesets.path_of(result.archive_ref).is_file()
    assert [r.name for r, _ in store.tasks.list("team")] == ["a"]
    assert store.tasks.list("default") == []
    with pytest.raises(UsageError):
        store.publish(task, prefix="../up")


def test_map_grows_on_demand(tmp_path: Path) -> None:
    with Store(tmp_path / "s", map_size=64 * 1024) as small:
        before = small.index.map_size
        source = tmp_path / "src"
        for i in range(60):
            write_task(source, f"t{i:03}", extra={"pad.txt": os.urandom(64)})
        results = [small.publish(task) for task in discover(source)]
        for i in range(40):
            small.tasksets.replace(f"set{i}", [r.name for r in results])
        assert small.index.map_size > before
        assert len(small.tasks.list()) == 60 and len(small.tasksets.list()) == 40


def test_open_without_create_needs_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(UsageError, match="no casstore store here") as info:
        Store(missing, create=False)
    assert info.value.path == str(missing) and not missing.exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no casstore store here"):
        Store(tmp_path / "empty", create=False)
    assert os.listdir(tmp_path / "empty") == []
    with pytest.raises(UsageError):
        Store("")
    with Store(tmp_path / "s") as created:
        created.publish(discover(write_task(tmp_path / "src", "a"))[0])
    with Store(tmp_path / "s", create=False) as opened:
        assert [r.name for r, _ in opened.tasks.list()] == ["a"]


def test_schema_version_checked(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as opened:
        opened.index.write(lambda txn: txn.put("meta", "schema", 99))
    with pytest.raises(StoreError, match="schema"):
        Index(tmp_path / "s" / "index")


def test_checkout_lays_out_dataset(store: Store, tmp_path: Path) -> None:
    source = tmp_path / "src"
    write_task(source, "a", extra={"environment/Dockerfile": b"FROM x\n"})
    write_task(source, "b", native="org/b", extra={"data/bin": bytes(range(256))})
    os.symlink("../data/bin", source / "b" / "tests" / "link")
    os.chmod(source / "b" / "data" / "bin", 0o600)
    for task in discover(source):
        store.publish(task)
    store.tasksets.create("set", ["a", "org-b"])
    dest = tmp_path / "out"
    result = store.checkout("set", dest)
    assert result.kind == "taskset" and [t["dir"] for t in result.tasks] == ["a", "b"]
    assert sorted(os.listdir(dest)) == ["a", "b"]
    for name in ("a", "b"):
        assert snapshot(dest / name) == snapshot(source / name)
        assert load_harbor_task(dest / name).name == ("org/b" if name == "b" else "a")
    with pytest.raises(UsageError):
        store.checkout("set", dest)
    single = store.checkout("org-b", tmp_path / "one")
    assert single.kind == "task" and os.listdir(tmp_path / "one") == ["b"]


def test_corrupt_archive_fsck_and_checkout(store: Store, tmp_path: Path) -> None:
    result = store.publish(discover(write_task(tmp_path / "src", "a"))[0])
    assert store.fsck().ok
    path = store.filesets.path_of(result.archive_ref)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    report = store.fsck()
    assert not report.ok and len(report.problems) == 1
    problem = report.problems[0]
    assert problem["kind"] == "corrupt_archive" and problem["path"] == str(path)
    with pytest.raises(DigestMismatchError) as info:
        store.checkout("a", tmp_path / "out")
    assert info.value.path == str(path) and str(info.value).startswith(f"{path}: ")
    assert problem["message"].startswith(f"{path}: ")
    assert not (tmp_path / "out").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
    path.unlink()
    report = store.fsck()
    assert [p["kind"] for p in report.problems] == ["missing_archive"]
    with pytest.raises(StoreError, match="missing") as missing:
        store.checkout("a", tmp_path / "out")
    assert missing.value.path == str(path)


def test_entry_level_errors_name_the_archive(store: Store, tmp_path: Path) -> None:
    result = store.publish(discover(write_task(tmp_path / "src", "a"))[0], compression="none")
    path = store.filesets.path_of(result.archive_ref)
    corrupt(path, 512 + 100)  # the second header: an error about one entry
    with pytest.raises(CheckError) as info:
        store.checkout("a", tmp_path / "out")
    message = str(info.value)
    assert info.value.path == str(path) and message.startswith(f"{path}: a/")
    assert "checksum" in message and "\n" not in message
    [problem] = store.fsck().problems
    assert problem["message"] == message


def test_fsck_dangling_and_gc(store: Store, tmp_path: Path) -> None:
    source = tmp_path / "src"
    a, b = write_task(source, "a"), write_task(source, "b")
    ra = store.publish(discover(a)[0])
    store.publish(discover(b)[0])
    store.tasksets.create("set", ["a", "b"])
    orphan = store.publish(discover(a)[0], "c", compression="zstd")
    store.index.write(lambda txn: txn.delete("tasks", "default/c"))
    store.index.write(lambda txn: txn.delete("revisions", orphan.revision))
    (store.filesets.root / "default" / "harbor-tasks" / "a" / ".tmp-crash").write_bytes(b"x")
    report = store.fsck()
    assert report.ok and report.orphans == [orphan.archive_ref]
    assert len(report.temporaries) == 1 and report.revisions == 2 and report.archives == 3
    assert store.gc(dry_run=True, min_age=0).removed == [orphan.archive_ref]
    assert store.filesets.path_of(orphan.archive_ref).exists()
    spared = store.gc(min_age=3600)
    assert (spared.removed, spared.kept_young) == ([], [orphan.archive_ref])
    for bad in (-5, float("nan")):
        with pytest.raises(UsageError):
            store.gc(dry_run=True, min_age=bad)
    done = store.gc(min_age=0)
    assert done.removed == [orphan.archive_ref] and done.freed_bytes > 0
    assert not store.filesets.path_of(orphan.archive_ref).exists()
    report = store.fsck()
    assert report.ok and report.orphans == [] and report.temporaries == []
    store.index.write(lambda txn: txn.delete("revisions", ra.revision))
    kinds = sorted(p["kind"] for p in store.fsck().problems)
    assert kinds == ["dangling_reference", "dangling_reference"]


@pytest.mark.realdata
def test_real_suites_publish_republish_checkout(tmp_path: Path) -> None:
    suites = sorted((FIXTURES / "tasks").iterdir())
    with Store(tmp_path / "store") as store:
        for suite in suites:
            tasks = discover(suite)
            results = [store.publish(task) for task in tasks]
            assert not any(r.reused for r in results)
            assert [r.content_digest for r in results] == [t.content_digest for t in tasks]
            again = [store.publish(task) for task in discover(suite)]
            assert all(r.reused for r in again)
            assert [r.revision for r in again] == [r.revision for r in results]
            made = store.tasksets.create(suite.name, [r.name for r in results])
            assert len(made.tasks) == len(tasks)
            dest = tmp_path / "out" / suite.name
            checked = store.checkout(suite.name, dest)
            assert len(checked.tasks) == len(tasks)
            for task in tasks:
                out = dest / task.dir_name
                assert load_harbor_task(out).name == task.id
                assert snapshot(out) == snapshot(task.source_dir)
        report = store.fsck()
        assert report.ok and report.orphans == [] and report.tasksets == len(suites)


def test_check_error_hierarchy() -> None:
    assert issubclass(DigestMismatchError, CheckError)
    assert issubclass(PublicationError, StoreError)


_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text()
_VALUES = st.recursive(
    _SCALARS | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _VALUES, max_size=6))
def test_canonical_digest_is_sha256_of_msgpack_with_sorted_keys(fields) -> None:
    """The digest's bytes are msgpack's (``use_bin_type``) of the fields with every map's keys
    sorted: what every stored revision's digest was made of (the store's schema)."""
    data = msgpack.packb(canonical(fields), use_bin_type=True)
    assert canonical_digest(fields) == "sha256:" + hashlib.sha256(data).hexdigest()
