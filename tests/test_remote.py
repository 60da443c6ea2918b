"""Remotes against a real S3 API server on loopback (tests.remote_server): push from one
store, pull / checkout / rescore in another, identical answers; every damaged remote object
is a typed error naming its key, and nothing reaches the destination."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

import casstore
from casstore.errors import (
    CorruptRemoteError,
    CorruptStoreError,
    UnknownReferenceError,
    UsageError,
)
from casstore.remote import api as remote
from tests.helpers import make_task, snapshot, store_cli
from tests.remote_server import S3, s3, s3_server

__all__ = ["s3", "s3_server"]

JOB = "2026-05-10__01-23-57"
SUITES = ("harbor-cookbook", "harbor-workshop", "terminal-bench-qc")


def _boto(s3: S3):  # the test's own view of the bucket (the product uses obstore)
    return boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _keys(s3: S3, prefix: str = "") -> dict[str, bytes]:
    client = _boto(s3)
    listed = client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", [])
    return {
        o["Key"]: client.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read() for o in listed
    }


def _put(s3: S3, key: str, data: bytes) -> None:
    _boto(s3).put_object(Bucket=s3.bucket, Key=key, Body=data)


def _store(root: Path, s3: S3, prefix: str = "r") -> casstore.Store:
    store = casstore.open_store(root)
    remote.add_remote(store, "origin", s3.url(prefix))
    return store


def _small(tmp_path: Path, s3: S3) -> tuple[casstore.Store, casstore.Store]:
    """Store A with two tasks and the taskset ``pair`` pushed; an empty store B."""
    a = _store(tmp_path / "a", s3)
    tasks = [make_task(tmp_path / "src", name, {"data.txt": name * 40}) for name in ("t1", "t2")]
    for task in tasks:
        casstore.publish(a, task)
    casstore.create_taskset(a, "pair", ["t1", "t2"])
    remote.push(a, ["pair", "t1", "t2"])
    return a, _store(tmp_path / "b", s3)


@pytest.mark.realdata
def test_push_pull_checkout_rescore_round_trip(
    tmp_path: Path, s3: S3, fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    a = _store(a_root, s3)
    names = []
    for suite in SUITES:
        published = casstore.publish(a, casstore.discover_tasks(fixtures_dir / "tasks" / suite))
        casstore.create_taskset(a, suite, [p.name for p in published])
        names += [p.name for p in published]
    job_dir = fixtures_dir / "jobs" / "tb2-haiku" / "jobs" / JOB
    casstore.import_jobs(a, [job_dir])
    refs = [*SUITES, *names, JOB]
    pushed = remote.push(a, refs)
    assert pushed.sent == pushed.objects > 0
    assert remote.push(a, refs).sent == 0  # only missing objects move
    a.close()

    b = _store(b_root, s3)
    b.close()
    code, out, err = store_cli(capsys, b_root, "pull", *refs, "--json")
    assert (code, err) == (0, ""), err
    assert out["archives"] == len(set(names))
    code, again, _ = store_cli(capsys, b_root, "pull", *refs, "--json")
    assert again["archives"] == 0 and not any(r["moved"] for r in again["refs"])
    for what in ("tasks", "tasksets"):
        assert (
            store_cli(capsys, a_root, "ls", what, "--json")[1]
            == (store_cli(capsys, b_root, "ls", what, "--json")[1])
        )
        assert (
            store_cli(capsys, b_root, "ls", what, "--remote", "origin", "--json")[1]
            == (store_cli(capsys, a_root, "ls", what, "--json")[1])
        )
    assert store_cli(capsys, b_root, "fsck")[0] == 0
    code, fsck, _ = store_cli(capsys, b_root, "fsck", "--remote", "origin", "--json")
    assert code == 0 and fsck["orphans"] == [] and fsck["archives"] == len(set(names))

    for suite in SUITES:
        local = store_cli(capsys, a_root, "checkout", suite, str(tmp_path / f"a-{suite}"), "--json")
        far = store_cli(
            capsys, b_root, "checkout", f"origin:{suite}", str(tmp_path / f"b-{suite}"), "--json"
        )
        assert far[0] == 0, far[2]
        assert far[1]["tasks"] == local[1]["tasks"]  # identical revisions and addresses
        assert snapshot(tmp_path / f"b-{suite}") == snapshot(tmp_path / f"a-{suite}")

    code, local, _ = store_cli(capsys, a_root, "rescore", JOB, "--json")
    code_b, far, err = store_cli(capsys, b_root, "rescore", f"origin:{JOB}", "--json")
    assert (code, code_b) == (0, 0), err
    assert json.dumps(far, sort_keys=True) == json.dumps(local, sort_keys=True)
    code, pulled_job, _ = store_cli(capsys, b_root, "rescore", JOB, "--json")
    assert pulled_job == local


def test_remote_records_add_ls_rm(
    tmp_path: Path, s3: S3, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s"
    code, out, _ = store_cli(capsys, root, "remote", "add", "origin", s3.url("p"), "--json")
    assert code == 0 and out == {"name": "origin", "url": s3.url("p"), "endpoint_url": None}
    code, _, err = store_cli(capsys, root, "remote", "add", "origin", s3.url("q"))
    assert code == 1 and "a remote of that name exists" in err
    code, _, err = store_cli(capsys, root, "remote", "add", "x", "http://bucket/p")
    assert code == 2 and "s3://bucket[/prefix]" in err
    assert store_cli(capsys, root, "remote", "ls", "--json")[1] == [out]
    listed = store_cli(capsys, root, "ls", "tasks", "--remote", "origin")
    assert listed == (0, "", "no tasks on the remote origin (push some first)\n")
    code, _, err = store_cli(capsys, root, "fsck", "--remote", "origin")
    assert (code, err) == (0, "")
    assert store_cli(capsys, root, "remote", "rm", "origin")[0] == 0
    assert store_cli(capsys, root, "remote", "ls", "--json")[1] == []
    code, _, err = store_cli(capsys, root, "push", "x")
    assert code == 2 and "name the remote" in err


def test_layout_keys_and_bytes_are_the_stores(tmp_path: Path, s3: S3) -> None:
    a, _ = _small(tmp_path, s3)
    held = _keys(s3, "r/")
    _, task = a.tasks.get("t1")
    archive = f"r/filesets/{task.archive_ref}"
    assert held[archive] == a.filesets.path_of(task.archive_ref).read_bytes()
    raw = a.index.read(lambda txn: bytes(txn.raw_get("revisions", task.digest)))
    assert held[f"r/revisions/{task.digest}"] == raw
    ref = a.index.read(lambda txn: bytes(txn.raw_get("tasks", "default/t1")))
    assert held["r/refs/tasks/default/t1"] == ref
    assert sorted(k.split("/")[1] for k in held) == sorted(
        ["filesets"] * 2 + ["revisions"] * 2 + ["taskset_revisions"] + ["refs"] * 3
    )


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def _archive_key(a: casstore.Store, name: str) -> str:
    return f"r/filesets/{a.tasks.get(name)[1].archive_ref}"


def test_flipped_archive_byte_is_refused_naming_the_key(tmp_path: Path, s3: S3) -> None:
    a, b = _small(tmp_path, s3)
    key = _archive_key(a, "t2")
    data = _keys(s3, key)[key]
    _put(s3, key, _flip(data, len(data) // 2))
    dest = tmp_path / "dest"
    with pytest.raises(CorruptRemoteError) as caught:
        remote.checkout_remote(b, "origin:pair", dest)
    assert caught.value.path == f"{s3.url()}/{key}"
    assert not dest.exists()
    with pytest.raises(CorruptRemoteError) as pulled:
        remote.pull(b, ["pair"])
    assert pulled.value.path == f"{s3.url()}/{key}"
    assert b.tasksets.list() == [] and b.tasks.list() == []
    # what passed its checks may be placed (a rerun would not fetch it again), never t2's
    placed = {ref for ref, _ in b.filesets.archives()}
    assert placed <= {a.tasks.get("t1")[1].archive_ref}
    assert b.filesets.temporaries() == []
    report = remote.fsck_remote(b)
    assert not report.ok
    assert [(p["kind"], p["key"]) for p in report.problems] == [
        ("corrupt_object", f"{s3.url()}/{key}")
    ]


def test_a_damaged_local_archive_is_not_left_on_the_remote(tmp_path: Path, s3: S3) -> None:
    a = _store(tmp_path / "a", s3)
    casstore.publish(a, make_task(tmp_path / "src", "t1", {"data.txt": "t1" * 40}))
    path = a.filesets.path_of(a.tasks.get("t1")[1].archive_ref)
    path.chmod(0o644)
    path.write_bytes(_flip(path.read_bytes(), 100))
    with pytest.raises(CorruptStoreError) as caught:
        remote.push(a, ["t1"])
    assert caught.value.path == str(path)
    assert "not to its address" in caught.value.rule
    held = _keys(s3, "r/")
    assert _archive_key(a, "t1") not in held  # sent while hashed, then removed
    assert not any(key.startswith("r/refs/") for key in held)


@pytest.mark.parametrize("what", ["archive", "revision", "taskset"])
def test_truncated_object_is_refused_naming_the_key(tmp_path: Path, s3: S3, what: str) -> None:
    a, b = _small(tmp_path, s3)
    _, task = a.tasks.get("t1")
    _, pins = a.tasksets.get("pair")
    key = {
        "archive": _archive_key(a, "t1"),
        "revision": f"r/revisions/{task.digest}",
        "taskset": f"r/taskset_revisions/{pins.digest}",
    }[what]
    data = _keys(s3, key)[key]
    _put(s3, key, data[: len(data) - 7])
    dest = tmp_path / "dest"
    with pytest.raises(CorruptRemoteError) as caught:
        remote.checkout_remote(b, "origin:pair", dest)
    assert caught.value.path == f"{s3.url()}/{key}"
    assert not dest.exists()
    with pytest.raises(CorruptRemoteError):
        remote.pull(b, ["pair"])
    assert b.tasksets.list() == [] and b.tasks.list() == []
    assert remote.fsck_remote(b).problems[0]["key"] == f"{s3.url()}/{key}"


def test_ref_naming_a_missing_revision(tmp_path: Path, s3: S3, capsys) -> None:
    a, b = _small(tmp_path, s3)
    _, task = a.tasks.get("t1")
    _boto(s3).delete_object(Bucket=s3.bucket, Key=f"r/revisions/{task.digest}")
    dest = tmp_path / "dest"
    b.close()
    code, _, err = store_cli(capsys, tmp_path / "b", "checkout", "origin:t1", str(dest))
    missing = f"{s3.url()}/r/revisions/{task.digest}"
    assert code == 1
    assert err == f"casstore: {missing}: missing (named by refs/tasks/default/t1)\n"
    assert not dest.exists()
    b = casstore.open_store(tmp_path / "b")
    with pytest.raises(CorruptRemoteError):
        remote.pull(b, ["t1"])
    assert b.tasks.list() == []
    kinds = {(p["kind"], p["key"]) for p in remote.fsck_remote(b).problems}
    assert ("dangling_ref", missing) in kinds and ("missing_object", missing) in kinds


def test_damaged_ref_and_unknown_names(tmp_path: Path, s3: S3) -> None:
    _, b = _small(tmp_path, s3)
    ref = _keys(s3, "r/refs/tasks/default/t1")["r/refs/tasks/default/t1"]
    _put(s3, "r/refs/tasks/default/t2", ref)  # a ref naming another key
    with pytest.raises(CorruptRemoteError) as caught:
        remote.pull(b, ["t2"])
    assert caught.value.path == f"{s3.url()}/r/refs/tasks/default/t2"
    with pytest.raises(UnknownReferenceError):
        remote.pull(b, ["nosuch"])
    with pytest.raises(UnknownReferenceError):
        remote.pull(b, [f"t1#sha256:{'0' * 64}"])
    with pytest.raises(UsageError):
        remote.checkout_remote(b, "elsewhere:t1", tmp_path / "dest")


def test_refs_keep_history_and_pull_moves_names(tmp_path: Path, s3: S3) -> None:
    a, b = _small(tmp_path, s3)
    first = a.tasks.get("t1")[1].digest
    source = tmp_path / "src" / "t1"
    (source / "instruction.md").write_text("Do it again.\n")
    [published] = casstore.publish(a, source)
    second = published.revision
    remote.push(a, ["t1"])
    assert remote.push(a, ["t1"]).refs[0]["moved"] is False
    remote.pull(b, [f"t1#{first}"])
    assert b.tasks.get("t1")[1].digest == first
    remote.pull(b, ["t1"])
    record, latest = b.tasks.get("t1")
    assert latest.digest == second
    assert [e.digest for e in record.history] == [first, second]
    far = remote.ls_remote(b, "origin", "tasks")
    assert [(r["ref"], r["revision"], r["revisions"]) for r in far] == [
        ("default/t1", second, 2),
        ("default/t2", a.tasks.get("t2")[1].digest, 1),
    ]


def test_job_values_checked(tmp_path: Path, s3: S3, capsys) -> None:
    from casstore.examples.job import write_example_job  # a small Harbor job tree

    a = _store(tmp_path / "a", s3)
    job_dir = write_example_job(tmp_path / "job", ["alpha", "beta"])
    [report] = casstore.import_jobs(a, [job_dir])
    remote.push(a, [report.job])
    a.close()
    b = _store(tmp_path / "b", s3)
    b.close()
    code, local, _ = store_cli(capsys, tmp_path / "a", "rescore", report.job, "--json")
    code_b, far, err = store_cli(
        capsys, tmp_path / "b", "rescore", f"origin:{report.job}", "--json"
    )
    assert (code, code_b) == (0, 0), err
    assert far == local
    with casstore.open_store(tmp_path / "b") as b:
        assert casstore.rescore_remote(b, [f"origin:{report.job}"]).to_json() == local
    [table] = [k for k in _keys(s3, "r/reward_tables/")]
    data = _keys(s3, table)[table]
    _put(s3, table, _flip(data, len(data) - 3))
    code, _, err = store_cli(capsys, tmp_path / "b", "rescore", f"origin:{report.job}")
    assert code == 1 and err.startswith(f"casstore: {s3.url()}/{table}: the object's bytes hash")
    assert store_cli(capsys, tmp_path / "b", "ls", "jobs", "--json")[1] == []


def test_credentials_from_a_profile_and_the_endpoint_option(
    tmp_path: Path, s3: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No AWS_* credentials nor endpoint in the environment: the profile of the shared
    credentials file and the remote's --endpoint-url reach the server."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n"
        "[ci]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "ci")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    from casstore.remote.client import _profile_settings

    assert _profile_settings() == {"access_key_id": "testing", "secret_access_key": "testing"}
    store = casstore.open_store(tmp_path / "a")
    remote.add_remote(store, "origin", s3.url("p"), s3.endpoint)
    casstore.publish(store, make_task(tmp_path / "src", "t"))
    assert remote.push(store, ["t"]).sent == 2
    monkeypatch.delenv("AWS_PROFILE")  # the test's own client, boto3, reads it too
    assert sorted(_keys(s3, "p/refs/")) == ["p/refs/tasks/default/t"]


def test_api_arguments_checked(tmp_path: Path, s3: S3) -> None:
    store = _store(tmp_path / "a", s3)
    with pytest.raises(UsageError, match="expected a Store"):
        remote.push(str(tmp_path / "a"), ["t"])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="expected REFs"):
        remote.pull(store, 5)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="expected REFs"):
        remote.push(store, [])


def test_checkout_naming_no_remote_says_so(tmp_path: Path, s3: S3, capsys) -> None:
    """``checkout NAME:REF`` with NAME no remote of the store names the remote, not the REF as
    an invalid local name (a local taskset or task name holds no ':' before a '#')."""
    _, b = _small(tmp_path, s3)
    b.close()
    dest = tmp_path / "dest"
    code, _, err = store_cli(capsys, tmp_path / "b", "checkout", "elsewhere:t1", str(dest))
    assert (code, err) == (
        2,
        "casstore: elsewhere: no remote of that name (casstore remote add NAME URL)\n",
    )
    assert not dest.exists()
