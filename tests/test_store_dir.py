"""A store directory casstore cannot use is refused by every command alike (issue 17, item 8).

With ``DIR/index`` a regular file, ``ls`` said "no casstore store here" (exit 2) while
``publish`` said ``File exists`` (exit 1). casstore never makes such a directory and cannot
tell a foreign one from a damaged one: every command, reading or writing, and the Python API
refuse it with one line naming the entry that is wrong (exit 2), and nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import casstore
from casstore.errors import UsageError
from casstore.store import Store
from tests.helpers import make_task, run_cli, snapshot, store_cli
from tests.trials_builder import make_job, trial_json, trial_result


def _damage(root: Path, how: str) -> str:
    """Make ``root`` a store directory damaged as ``how`` says; the rule it breaks."""
    if how == "the store is a file":
        root.write_text("not a directory")
        return f"not a casstore store ({root} is a regular file, not a directory)"
    if how == "index is a file":
        root.mkdir()
        (root / "index").write_text("not a directory")
        return f"not a casstore store ({root / 'index'} is a regular file, not a directory)"
    store = Store(root)  # a real store first
    store.close()
    if how == "filesets is a file":  # made by the first publish: not there yet
        (root / "filesets").write_text("x")
        return f"not a casstore store ({root / 'filesets'} is a regular file, not a directory)"
    if how == "lock.mdb is a FIFO":  # LMDB's lock file: opening it failed after a wait
        lock = root / "index" / "lock.mdb"
        lock.unlink()
        os.mkfifo(lock)
        return f"not a casstore store ({lock} is a FIFO, not a regular file)"
    data = root / "index" / "data.mdb"
    data.unlink()
    if how == "data.mdb is a directory":
        data.mkdir()
        return f"not a casstore store ({data} is a directory, not a regular file)"
    os.mkfifo(data)
    return f"not a casstore store ({data} is a FIFO, not a regular file)"


HOWS = [
    *("the store is a file", "index is a file", "filesets is a file"),
    *("data.mdb is a directory", "data.mdb is a FIFO", "lock.mdb is a FIFO"),
]


@pytest.mark.parametrize("how", HOWS)
def test_every_command_refuses_it_alike(tmp_path: Path, capsys, how: str) -> None:
    root = tmp_path / "store"
    rule = _damage(root, how)
    before = snapshot(root)
    task = make_task(tmp_path)
    trials = {"t__1": trial_json(trial_result("t", "t__1", {"reward": 1.0}))}
    job = make_job(tmp_path / "job", trials)
    commands = [
        ["ls", "tasks"],
        ["ls", "jobs"],
        ["publish", str(task)],
        ["import", str(job)],
        ["show", "task"],
        ["taskset", "create", "s", "task"],
        ["checkout", "task", str(tmp_path / "out")],
        ["fsck"],
        ["gc"],
        ["export", "job", "-o", str(tmp_path / "t.jsonl")],
        ["rescore", "job"],
    ]
    for argv in commands:
        code, out, err = run_cli(capsys, "--store", str(root), *argv)
        assert (argv, code, out, err) == (argv, 2, "", f"casstore: {root}: {rule}\n")
    assert snapshot(root) == before
    for create in (True, False):
        with pytest.raises(UsageError) as caught:
            casstore.open_store(root, create=create)
        assert str(caught.value) == f"{root}: {rule}"
    assert snapshot(root) == before


def test_a_missing_or_empty_directory_is_still_where_a_store_is_made(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    for root in (tmp_path / "new", tmp_path / "empty"):
        if root.name == "empty":
            root.mkdir()
        with casstore.open_store(root) as store:
            assert store.tasks.list() == []
            casstore.publish(store, task)
        assert (root / "index" / "data.mdb").is_file() and (root / "filesets").is_dir()


def test_a_store_is_created_only_in_a_missing_or_an_empty_directory(tmp_path: Path, capsys) -> None:
    # The fresh tester's findings: publish made an index beside a user's files, and beside
    # archives whose index/data.mdb was deleted (gc would then remove every one of them).
    task = make_task(tmp_path / "src", "a")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("hello\n")
    store = tmp_path / "store"
    assert store_cli(capsys, store, "publish", str(task))[0] == 0
    (store / "index" / "data.mdb").unlink()
    (store / "index" / "lock.mdb").unlink()
    for root, first in ((notes, notes / "notes.txt"), (store, store / "filesets")):
        before = sorted(str(p) for p in root.rglob("*"))
        for argv in (["publish", str(task)], ["import", str(tmp_path / "src")]):
            code, out, err = store_cli(capsys, root, *argv)
            assert out == "", argv
            rule = (
                f"not a casstore store (no index/data.mdb) and not empty ({first} exists): "
                "a store is created only in a missing or an empty directory"
            )
            assert (code, err) == (2, f"casstore: {root}: {rule}\n"), (argv, err)
        assert sorted(str(p) for p in root.rglob("*")) == before
    empty = tmp_path / "empty"
    (empty / "index").mkdir(parents=True)  # what an interrupted creation leaves
    assert store_cli(capsys, empty, "publish", str(task))[0] == 0
