"""A store that cannot be written (issue 17, item 1): read-only mounts, files this user cannot
write, and a writer holding LMDB's lock.

Every reading command works on a store mounted read-only (a private mount namespace,
``unshare -m``) or whose directories and files this user cannot write (a user namespace as
``nobody``), with the answers it gives on the writable store, and leaves the store's bytes
as they were; every writing command exits 1 with one line
``casstore: <store>: the store is read-only (<why>)``. A reading command started while an
import holds the write transaction does not wait for it, and sees what was committed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from casstore.errors import StoreError
from casstore.store import Store
from casstore.trials import Jobs
from tests.helpers import CLI, ROOT, make_task, python_env, run_python, snapshot, store_cli
from tests.trials_builder import make_job, trial_json, trial_result

# argv: store, scratch dir, then the commands as one JSON list of argv lists. Runs each in
# this process and prints {command: [exit status, stdout, stderr]} (paths made SCRATCH).
RUNNER = r"""
import contextlib, io, json, sys
from cli.main import run

store, scratch, commands = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
results = {}
for argv in commands:
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["--store", store, *[a.replace("SCRATCH", scratch) for a in argv]])
    out.flush()
    text = out.buffer.getvalue().decode()
    shown = [text.replace(scratch, "SCRATCH"), err.getvalue().replace(scratch, "SCRATCH")]
    results[" ".join(argv)] = [code, *shown]
print(json.dumps(results))
"""

READING = [
    ["ls", "tasks", "--json"],
    ["ls", "tasksets", "--json"],
    ["ls", "jobs", "--json"],
    ["show", "pinned", "--json"],
    ["show", "default/alpha", "--json"],
    ["fsck", "--json"],
    ["rescore", "demo", "--json"],
    ["export", "demo", "-o", "SCRATCH/trials.jsonl"],
    ["checkout", "pinned", "SCRATCH/dataset"],
    ["gc", "--dry-run", "--min-age", "0", "--json"],
]


def _writing(sources: Path) -> list[list[str]]:
    """Every writing command, each with something to write."""
    return [
        ["publish", str(sources / "beta")],
        ["taskset", "create", "other", "alpha"],
        ["taskset", "replace", "pinned", "alpha", "beta"],
        ["import", str(sources / "job2")],
        ["gc", "--min-age", "0"],
    ]


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, Path]:
    """(store, sources): a store with tasks ``alpha`` and ``beta`` (taskset ``pinned``), a
    generated job ``demo`` and an orphan archive; sources: a new task ``beta`` to publish
    again changed, and a new job ``job2``."""
    sources = tmp_path / "sources"
    trials = {
        f"t{i % 3}__{i}": trial_json(trial_result(f"t{i % 3}", f"t{i % 3}__{i}", started=i))
        for i in range(20)
    }
    store = tmp_path / "store"
    with Store(store) as opened:
        for name in ("alpha", "beta"):
            task = make_task(sources, name, {"tests/test.sh": "#!/bin/sh\necho 1\n"})
            opened.publish(_discovered(task))
        opened.tasksets.create("pinned", ["alpha", "beta"])
        Jobs(opened).import_jobs([make_job(sources / "job", trials)], name="demo")
    (sources / "beta" / "instruction.md").write_text("Do it differently.\n")
    job2 = "22222222-3333-4444-5555-666666666666"
    other = {"t9__0": trial_json(trial_result("t9", "t9__0", job_id=job2))}
    make_job(sources / "job2", other, job_id=job2)
    return store, sources


def _discovered(task: Path):  # one discovered task
    from casstore.archive.discover import discover

    return discover(task)[0]


def _namespace(kind: str) -> list[str] | None:
    """The ``unshare`` prefix for a ``mount`` namespace (a read-only bind mount: as root, or
    mapped to root in a user namespace) or a ``user`` namespace as ``nobody``; None when
    this machine allows neither."""
    candidates = {
        "mount": [["unshare", "-m"], ["unshare", "-rm"]],
        "user": [["unshare", "--user", "--map-user=65534", "--map-group=65534"]],
    }[kind]
    for prefix in candidates:
        if shutil.which(prefix[0]) is None:
            return None
        done = subprocess.run([*prefix, "true"], capture_output=True)
        if done.returncode == 0:
            return prefix
    return None


def _run(prefix: list[str], store: Path, scratch: Path, commands: list[list[str]], mount=None):
    """The commands' results, run by :data:`RUNNER` behind ``prefix`` (with ``mount``: the
    store bind-mounted read-only there first)."""
    scratch.mkdir(exist_ok=True)
    if mount is not None:
        script = 'mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && shift 2 && exec "$@"'
        prefix = [*prefix, "sh", "-c", script, "sh", str(store), str(mount)]
    argv = [str(mount or store), str(scratch), json.dumps(commands)]
    done = run_python(RUNNER, *argv, prefix=prefix, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _baseline(store: Path, scratch: Path) -> dict[str, list]:
    """The reading commands' results on the writable store."""
    return _run([], store, scratch, READING)


def _assert_read_only(results: dict, baseline: dict, writes: list[list[str]], store: str, why):
    for argv in READING:
        name = " ".join(argv)
        assert results[name] == baseline[name], name
        assert results[name][0] == 0, name
    for argv in writes:
        code, _, err = results[" ".join(argv)]
        assert code == 1, argv
        assert err == f"casstore: {store}: the store is read-only ({why})\n", argv


def test_read_only_mount(shared: tuple[Path, Path], tmp_path: Path) -> None:
    prefix = _namespace("mount")
    if prefix is None:
        pytest.skip("no mount namespace here (unshare -m and unshare -rm both refused)")
    store, sources = shared
    data = snapshot(store, reader_tables=False)
    baseline = _baseline(store, tmp_path / "a")
    assert snapshot(store, reader_tables=False) == data  # the reads wrote only lock.mdb
    before = snapshot(store)
    mount = tmp_path / "mnt"
    mount.mkdir()
    writes = _writing(sources)
    results = _run(prefix, store, tmp_path / "b", READING + writes, mount=mount)
    _assert_read_only(results, baseline, writes, str(mount), "Read-only file system")
    assert snapshot(store) == before


def test_store_this_user_cannot_write(shared: tuple[Path, Path], tmp_path: Path) -> None:
    prefix = _namespace("user")
    if prefix is None:
        pytest.skip("no user namespace here (unshare --user refused)")
    store, sources = shared
    baseline = _baseline(store, tmp_path / "a")
    before = snapshot(store)
    scratch = tmp_path / "b"
    modes = {path: path.stat().st_mode for path in [store, *store.rglob("*")]}
    for path in modes:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        writes = _writing(sources)
        results = _run(prefix, store, scratch, READING + writes)
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    why = f"Permission denied: {store / 'index' / 'data.mdb'}"
    _assert_read_only(results, baseline, writes, str(store), why)
    assert snapshot(store) == before


def test_writing_api_on_a_read_only_store(shared: tuple[Path, Path]) -> None:
    """The Python API: the store opens read-only; its first write reopens it read-write,
    or raises the one error when it cannot (here: a store whose index this user cannot
    write, simulated by the check the index makes)."""
    store, _ = shared
    with Store(store, create=False) as opened:
        assert not opened.index.writable  # opening takes no write lock
        assert [record.name for record, _ in opened.tasks.list()] == ["alpha", "beta"]
        opened.tasksets.replace("again", ["alpha"])
        assert opened.index.writable
    if os.geteuid() == 0:
        return  # root may write anything: the namespace tests above cover it
    (store / "index" / "data.mdb").chmod(0o444)
    try:
        with Store(store, create=False) as opened, pytest.raises(StoreError) as refused:
            opened.tasksets.replace("again", ["beta"])
        assert str(refused.value).startswith(f"{store}: the store is read-only (Permission")
    finally:
        (store / "index" / "data.mdb").chmod(0o644)


# argv: store. Opens a write transaction, writes a name, prints "ready" and commits when a
# line comes on stdin; prints "committed".
WRITER = r"""
import sys
from casstore.store import Store
with Store(sys.argv[1], create=False) as store:
    txn = store.index.begin_write()
    txn.put("tasksets", "default/held", {"workspace": "default", "name": "held", "history": []})
    print("ready", flush=True)
    sys.stdin.readline()
    txn.abort()
    store.tasksets.replace("held", ["alpha"])
    print("committed", flush=True)
"""


def test_reading_never_waits_for_a_writer(shared: tuple[Path, Path], capsys) -> None:
    store, _ = shared
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
        cwd=ROOT,
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        assert writer.stdout.readline() == "ready\n"
        # the write transaction is held: these would wait for it if opening took the lock
        for argv in (["ls", "tasksets", "--json"], ["fsck", "--json"], ["show", "pinned"]):
            # timeout: a hang guard (without the fix the command never returns)
            done = run_python(CLI, "--store", str(store), *argv, timeout=120)
            assert done.returncode == 0, (argv, done.stderr)
        code, listed, _ = store_cli(capsys, store, "ls", "tasksets", "--json")
        assert code == 0 and [row["ref"] for row in listed] == ["default/pinned"]
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline() == "committed\n"
    finally:
        writer.stdin.close()
        writer.wait(timeout=120)
    code, listed, _ = store_cli(capsys, store, "ls", "tasksets", "--json")
    assert code == 0 and [row["ref"] for row in listed] == ["default/held", "default/pinned"]
