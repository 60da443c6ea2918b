"""Store management (issue 18, item 15): ``log``, ``rm``, ``rename``, ``ls --all``, and gc of
the revisions no name reaches."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import casstore
from casstore.errors import UnknownReferenceError, UsageError
from tests.conftest import FIXTURES
from tests.helpers import snapshot, store_cli
from tests.test_discovery import write_task

SIMPLE = FIXTURES / "tasks" / "harbor-cookbook" / "simple-task"


def _publish(capsys, store: Path, task: Path) -> dict:
    code, items, err = store_cli(capsys, store, "publish", str(task), "--json")
    assert code == 0, err
    return items[0]


def _fsck_clean(capsys, store: Path) -> dict:
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 0 and report["ok"] and report["problems"] == [], report
    return report


@pytest.mark.realdata
def test_log_of_a_real_task_published_twice(tmp_path: Path, capsys) -> None:
    task = shutil.copytree(SIMPLE, tmp_path / "src" / "simple-task", symlinks=True)
    store = tmp_path / "store"
    first = _publish(capsys, store, task)
    assert first["address"].startswith("sha256:0d95ce9b87ae")  # the README's, as packed
    with (task / "instruction.md").open("a") as handle:
        handle.write("Also say goodbye.\n")
    (task / "notes.txt").write_text("new file\n")
    (task / "environment" / "Dockerfile").unlink()
    (task / "tests" / "test.sh").chmod(0o700)  # a mode counts, as in the address
    second = _publish(capsys, store, task)
    third = _publish(capsys, store, task)  # unchanged: the same revision, no new entry
    assert third["reused"] and third["revision"] == second["revision"]
    code, history, _ = store_cli(capsys, store, "log", "simple-task", "--json")
    assert code == 0 and history["kind"] == "task" and history["ref"] == "default/simple-task"
    newest, oldest = history["entries"]
    assert [newest["revision"], oldest["revision"]] == [second["revision"], first["revision"]]
    assert newest["created"] > oldest["created"] and oldest["changes"] is None
    assert newest["changes"] == {
        "address": [first["address"], second["address"]],
        "content_digest": [first["content_digest"], second["content_digest"]],
        "scoring": False,
        "files": {
            "added": ["notes.txt"],
            "removed": ["environment/Dockerfile"],
            "changed": ["instruction.md", "tests/test.sh"],
        },
    }
    code, text, _ = store_cli(capsys, store, "log", "simple-task")
    lines = text.splitlines()
    short = casstore.digest.short
    assert lines[0] == "task default/simple-task: 2 revisions"
    assert (
        lines[1]
        == f"{short(second['revision'])}  {newest['created'][:19].replace('T', ' ')}  (latest)"
    )
    assert lines[2:8] == [
        f"  address {short(first['address'])} → {short(second['address'])}",
        f"  content digest {short(first['content_digest'])} → {short(second['content_digest'])}",
        "  added notes.txt",
        "  removed environment/Dockerfile",
        "  changed instruction.md",
        "  changed tests/test.sh",
    ]
    assert lines[9:] == ["  first revision"] and max(map(len, lines)) <= 100
    assert (
        f"  address {first['address']} → {second['address']}"
        in store_cli(capsys, store, "log", "simple-task", "--long")[1].splitlines()
    )


@pytest.mark.parametrize("damage", ["missing", "flipped"])
def test_log_with_an_archive_missing_or_damaged_still_prints_the_history(
    tmp_path: Path, capsys, damage: str
) -> None:
    """A damaged archive gave `files not compared: ...`, exit 0; a missing one failed the whole
    log as bad usage (exit 2, `cannot open archive`): both now give the history."""
    store = tmp_path / "store"
    task = write_task(tmp_path / "src", "a")
    first = _publish(capsys, store, task)
    (task / "notes.txt").write_text("new\n")
    _publish(capsys, store, task)
    (archive,) = [
        p for p in (store / "filesets").rglob("task_archive") if first["address"][7:] in str(p)
    ]
    archive.chmod(0o644)
    if damage == "missing":
        archive.unlink()
    else:
        data = bytearray(archive.read_bytes())
        data[len(data) // 2] ^= 0xFF
        archive.write_bytes(bytes(data))
    code, text, err = store_cli(capsys, store, "log", "a")
    assert (code, err) == (0, ""), err
    (unread,) = [line for line in text.splitlines() if line.startswith("  files not compared: ")]
    assert str(archive).replace(first["address"][7:], first["address"][7:19] + "…") in unread
    assert "first revision" in text


def test_log_of_a_taskset_says_which_pins_changed(tmp_path: Path, capsys) -> None:
    source, store = tmp_path / "src", tmp_path / "store"
    a, b, c = (write_task(source, name) for name in "abc")
    ra, rb, rc = (_publish(capsys, store, task)["revision"] for task in (a, b, c))
    assert store_cli(capsys, store, "taskset", "create", "s", "a", "b")[0] == 0
    (a / "instruction.md").write_text("Another thing.\n")
    ra2 = _publish(capsys, store, a)["revision"]
    assert store_cli(capsys, store, "taskset", "replace", "s", "a", "c")[0] == 0
    code, history, _ = store_cli(capsys, store, "log", "s", "--json")
    assert code == 0 and history["kind"] == "taskset"
    assert history["entries"][0]["changes"] == {
        "added": {"default/c": rc},
        "removed": {"default/b": rb},
        "changed": {"default/a": [ra, ra2]},
    }
    assert history["entries"][1]["changes"] is None
    assert (
        casstore.log(casstore.open_store(store), "s").entries[0].revision
        == history["entries"][0]["revision"]
    )


def test_rm_then_gc_keeps_pinned_revisions(tmp_path: Path, capsys) -> None:
    source, store = tmp_path / "src", tmp_path / "store"
    task = write_task(source, "a")
    old = _publish(capsys, store, task)
    assert store_cli(capsys, store, "taskset", "create", "s", "a")[0] == 0
    (task / "instruction.md").write_text("Another thing.\n")
    new = _publish(capsys, store, task)
    code, done, _ = store_cli(capsys, store, "rm", "a", "--json")
    assert code == 0 and done == {"kind": "task", "ref": "default/a", "was": None, "revisions": 2}
    report = _fsck_clean(capsys, store)  # kept until gc, listed as information
    assert report["revisions"] == 2 and report["unreachable"] == [f"revisions/{new['revision']}"]
    code, text, _ = store_cli(capsys, store, "fsck")
    assert (
        f"unreachable (info): revisions/{new['revision']} (no name reaches it: gc removes it)"
        in text
    )
    code, _, err = store_cli(capsys, store, "show", "a")
    assert (code, err) == (2, "casstore: default/a: no taskset or task of that name\n")
    code, report, _ = store_cli(capsys, store, "gc", "--min-age", "0", "--json")
    assert code == 0 and report["revisions"] == [f"revisions/{new['revision']}"]
    assert report["removed"] == [new["archive_ref"]]
    assert _fsck_clean(capsys, store)["revisions"] == 1
    assert store_cli(capsys, store, "show", new["revision"])[0] == 2  # gone
    code, shown, _ = store_cli(capsys, store, "show", old["revision"], "--json")
    assert code == 0 and shown["names"] == []  # pinned by s, named by nobody
    code, _, _ = store_cli(capsys, store, "checkout", "s", str(tmp_path / "out"))
    assert code == 0 and (tmp_path / "out" / "a" / "instruction.md").read_text() == (
        "Do the thing.\n"
    )
    code, report, _ = store_cli(capsys, store, "gc", "--min-age", "0", "--json")
    assert report["revisions"] == [] and report["removed"] == []  # nothing more to do
    code, text, _ = store_cli(capsys, store, "rm", "s")
    assert (code, text) == (0, "removed taskset default/s (1 revision kept until gc)\n")
    code, text, _ = store_cli(capsys, store, "gc", "--min-age", "0")
    lines = text.splitlines()  # gc names what it removes whole
    assert code == 0 and f"removed revision {old['revision']}" in lines
    assert sum(line.startswith("removed taskset revision sha256:") for line in lines) == 1
    assert lines[-1].startswith("removed 2 revisions, 1 archive, ")
    assert store_cli(capsys, store, "ls", "tasksets", "--json")[1] == []
    assert _fsck_clean(capsys, store)["revisions"] == 0


def test_gc_dry_run_lists_and_a_clean_store_is_left_unwritten(tmp_path: Path, capsys) -> None:
    source, store = tmp_path / "src", tmp_path / "store"
    item = _publish(capsys, store, write_task(source, "a"))
    before = snapshot(store, reader_tables=False)
    code, report, _ = store_cli(capsys, store, "gc", "--min-age", "0", "--json")
    assert code == 0 and report["revisions"] == [] and report["removed"] == []
    assert snapshot(store, reader_tables=False) == before  # a lock only: data.mdb unchanged
    assert store_cli(capsys, store, "rm", "a")[0] == 0
    removed = snapshot(store, reader_tables=False)
    code, report, _ = store_cli(capsys, store, "gc", "--min-age", "0", "--dry-run", "--json")
    assert report["revisions"] == [f"revisions/{item['revision']}"]
    assert report["removed"] == [item["archive_ref"]]
    assert snapshot(store, reader_tables=False) == removed


def test_rename_keeps_the_history(tmp_path: Path, capsys) -> None:
    source, store = tmp_path / "src", tmp_path / "store"
    task = write_task(source, "a")
    _publish(capsys, store, task)
    (task / "instruction.md").write_text("Another thing.\n")
    _publish(capsys, store, task)
    assert store_cli(capsys, store, "taskset", "create", "s", "a")[0] == 0
    code, before, _ = store_cli(capsys, store, "log", "a", "--json")
    code, text, _ = store_cli(capsys, store, "rename", "a", "b")
    assert (code, text) == (0, "renamed task default/a → default/b (2 revisions)\n")
    code, after, _ = store_cli(capsys, store, "log", "b", "--json")
    assert code == 0 and after["entries"] == before["entries"] and after["ref"] == "default/b"
    assert store_cli(capsys, store, "log", "a")[0] == 2
    _fsck_clean(capsys, store)
    # the taskset keeps its pin (made under the old name); a new pin takes the new name
    code, shown, _ = store_cli(capsys, store, "show", "s", "--json")
    assert shown["revision"]["tasks"][0]["task"] == "default/a"
    assert store_cli(capsys, store, "checkout", "s", str(tmp_path / "out"))[0] == 0
    code, made, _ = store_cli(capsys, store, "taskset", "replace", "s", "b", "--json")
    assert made["tasks"][0]["task"] == "default/b"
    code, done, _ = store_cli(capsys, store, "rename", "s", "t", "--json")
    assert done == {"kind": "taskset", "ref": "default/t", "was": "default/s", "revisions": 2}
    rows = store_cli(capsys, store, "ls", "tasksets", "--all", "--json")[1]
    assert [(row["ref"], row["latest"]) for row in rows] == [
        ("default/t", True),
        ("default/t", False),
    ]
    assert rows[0]["created"] > rows[1]["created"] and rows[0]["revisions"] == 2
    code, text, _ = store_cli(capsys, store, "ls", "tasksets", "--all")
    assert [line.split("  ")[1] for line in text.splitlines()] == ["1 task", "1 task"]
    assert text.splitlines()[0].endswith("  latest") and not text.splitlines()[1].endswith("latest")
    _fsck_clean(capsys, store)


def test_refusals_change_nothing(tmp_path: Path, capsys) -> None:
    source, store = tmp_path / "src", tmp_path / "store"
    for name in "ab":
        _publish(capsys, store, write_task(source, name))
    assert store_cli(capsys, store, "taskset", "create", "s", "a")[0] == 0
    assert store_cli(capsys, store, "taskset", "create", "a", "b")[0] == 0  # a task and taskset
    before = snapshot(store, reader_tables=False)
    for argv, message in [
        (["rename", "a", "b", "--kind", "task"], "default/b: a task of that name exists"),
        (["rename", "b", "s"], "default/s: a taskset of that name exists"),
        (["rename", "nosuch", "c"], "default/nosuch: no taskset or task of that name"),
        (["rename", "b", "w/b"], "w/b: a rename stays in its workspace (default, not w)"),
        (
            ["rename", "a", "c"],
            "default/a: both a taskset and a task have that name: say "
            "--kind taskset or --kind task",
        ),
        (
            ["rm", "a"],
            "default/a: both a taskset and a task have that name: say --kind "
            "taskset or --kind task",
        ),
        (["rm", "nosuch"], "default/nosuch: no taskset or task of that name"),
        (["rm", "s", "--kind", "task"], "default/s: no task of that name"),
        (["rm", "b#sha256:00000000"], "b#sha256:00000000: rm NAME is a name, without #<revision>"),
        (
            ["rename", "b", "bad name"],
            "bad name: not a valid name (1 to 255 ASCII letters, "
            "digits, '_', '-', '.'; not '.' or '..')",
        ),
        (["log", "nosuch"], "default/nosuch: no taskset or task of that name"),
        # an empty argument is named as '' (the line used to start with the rule)
        (
            ["rm", ""],
            "'': not a valid name (1 to 255 ASCII letters, digits, '_', '-', '.'; not '.' or '..')",
        ),
        (
            ["rename", "b", ""],
            "'': not a valid name (1 to 255 ASCII letters, digits, '_', '-', '.'; not '.' or '..')",
        ),
    ]:
        code, out, err = store_cli(capsys, store, *argv)
        assert (code, out, err) == (2, "", f"casstore: {message}\n"), argv
    assert snapshot(store, reader_tables=False) == before
    _fsck_clean(capsys, store)
    code, _, _ = store_cli(capsys, store, "rm", "a", "--kind", "taskset")
    assert code == 0 and store_cli(capsys, store, "show", "a", "--json")[1]["kind"] == "task"


def test_api(tmp_path: Path) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    with casstore.open_store(tmp_path / "store") as store:
        casstore.publish(store, source)
        assert casstore.rename(store, "a", "b").ref == "default/b"
        assert [entry.changes for entry in casstore.log(store, "b").entries] == [None]
        assert casstore.rm(store, "b", "task").revisions == 1
        with pytest.raises(UnknownReferenceError):
            casstore.rm(store, "b")
        with pytest.raises(UsageError, match="expected a Store"):
            casstore.log(str(tmp_path / "store"), "b")  # type: ignore[arg-type]
