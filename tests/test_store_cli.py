"""The store commands: publish, ls, show, taskset, checkout, fsck, gc (JSON and exit codes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from casstore.archive.discover import discover
from cli.main import run
from tests.helpers import make_task, store_cli
from tests.test_discovery import FIXTURES, write_task


def test_publish_json_reuse_and_taskset(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    write_task(source, "b", native="org/b")
    store = tmp_path / "store"
    code, items, _ = store_cli(capsys, store, "publish", str(source), "--taskset", "set", "--json")
    assert code == 0 and [i["name"] for i in items] == ["a", "org-b"]
    assert set(items[0]) == {
        "name",
        "id",
        "revision",
        "address",
        "archive_ref",
        "content_digest",
        "reused",
        "repaired",
    }
    assert items[1]["id"] == "org/b" and not any(i["reused"] for i in items)
    assert [i["content_digest"] for i in items] == [t.content_digest for t in discover(source)]
    code, again, _ = store_cli(
        capsys, store, "publish", str(source), "--compression", "zstd", "--json"
    )
    assert code == 0 and all(i["reused"] for i in again)
    assert [i["revision"] for i in again] == [i["revision"] for i in items]
    code, rows, _ = store_cli(capsys, store, "ls", "tasksets", "--json")
    assert code == 0 and rows[0]["ref"] == "default/set" and rows[0]["tasks"] == 2
    code, rows, _ = store_cli(capsys, store, "ls", "tasks", "--json")
    assert [r["revision"] for r in rows] == [i["revision"] for i in items]
    code, shown, _ = store_cli(capsys, store, "show", "org-b", "--json")
    assert code == 0 and shown["kind"] == "task"
    assert shown["revision"]["digest"] == items[1]["revision"]
    code, shown, _ = store_cli(capsys, store, "show", "default/set", "--json")
    assert shown["kind"] == "taskset" and len(shown["revision"]["tasks"]) == 2


def test_publish_options_and_usage_errors(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    write_task(source, "b")
    store = tmp_path / "store"
    code, _, _ = store_cli(capsys, store, "publish", str(source), "--name", "x")
    assert code == 2
    code, items, _ = store_cli(
        capsys,
        store,
        "publish",
        str(source / "a"),
        "--name",
        "x",
        "--workspace",
        "w",
        "--fileset",
        "f",
        "--prefix",
        "p",
        "--create",
        "--json",
    )
    assert code == 0 and items[0]["archive_ref"].startswith("w/f#p/a/")
    code, _, err = store_cli(
        capsys, store, "publish", str(source / "a"), "--name", "x", "-w", "w", "--create"
    )
    assert code == 1
    assert err == (
        "casstore: w/x: a task of that name exists (publish without --create to add a revision)\n"
    )
    assert store_cli(capsys, store, "publish", str(source / "a"), "--name", "bad/name")[0] == 2
    assert store_cli(capsys, store, "show", "missing")[0] == 2
    assert store_cli(capsys, store, "checkout", "missing", str(tmp_path / "o"))[0] == 2
    assert store_cli(capsys, store, "taskset", "create", "s", "nope")[0] == 2
    missing, plain = tmp_path / "nothing", tmp_path / "file"
    plain.write_text("x")
    code, _, err = store_cli(capsys, store, "publish", str(missing))
    assert code == 2 and err == f"casstore: {missing}: does not exist\n"
    code, _, err = store_cli(capsys, store, "publish", str(plain))
    assert code == 2 and err == f"casstore: {plain}: not a directory\n"
    code, _, err = store_cli(capsys, store, "gc", "--min-age", "-5")
    assert code == 2 and err.startswith("casstore: ") and err.count("\n") == 1


def test_taskset_commands(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    store = tmp_path / "store"
    _, items, _ = store_cli(capsys, store, "publish", str(source), "--json")
    code, made, _ = store_cli(capsys, store, "taskset", "create", "s", "a", "--json")
    assert code == 0 and made["id"] == "default/s"
    assert made["tasks"] == [{"task": "default/a", "revision": items[0]["revision"]}]
    code, _, err = store_cli(capsys, store, "taskset", "create", "s", "a")
    assert code == 1
    assert err == "casstore: default/s: a taskset of that name exists (use taskset replace)\n"
    code, again, _ = store_cli(capsys, store, "taskset", "replace", "s", "a", "--json")
    assert code == 0 and again["revision"] == made["revision"]


def test_checkout_fsck_gc_and_corruption(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    write_task(source, "b")
    store = tmp_path / "store"
    _, items, _ = store_cli(capsys, store, "publish", str(source), "--taskset", "s", "--json")
    code, result, _ = store_cli(capsys, store, "checkout", "s", str(tmp_path / "out"), "--json")
    assert code == 0 and [t["dir"] for t in result["tasks"]] == ["a", "b"]
    assert sorted(os.listdir(tmp_path / "out")) == ["a", "b"]
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 0 and report["ok"] and report["revisions"] == 2
    code, report, _ = store_cli(capsys, store, "gc", "--dry-run", "--min-age", "0", "--json")
    assert code == 0 and report["removed"] == []
    archive = store / "filesets" / items[0]["archive_ref"].replace("#", "/")
    os.chmod(archive, 0o644)
    data = bytearray(archive.read_bytes())
    data[-10] ^= 0x55
    archive.write_bytes(bytes(data))
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 1 and not report["ok"]
    assert [p["path"] for p in report["problems"]] == [str(archive)]
    code, text, _ = store_cli(capsys, store, "fsck")
    assert code == 1 and items[0]["archive_ref"] in text and f": {archive}: " in text
    assert text.endswith("1 problem: 2 revisions, 2 archives\n")
    code, _, err = store_cli(capsys, store, "checkout", "s", str(tmp_path / "out2"))
    assert code == 1 and err.startswith(f"casstore: {archive}: ") and err.count("\n") == 1
    assert not (tmp_path / "out2").exists()
    # Publishing the same task again repairs the damaged archive; fsck is clean again.
    code, again, _ = store_cli(capsys, store, "publish", str(source / "a"), "--json")
    assert code == 0 and again[0]["reused"] and again[0]["repaired"]
    assert store_cli(capsys, store, "fsck")[0] == 0
    code, text, _ = store_cli(capsys, store, "publish", str(source / "a"))
    assert code == 0 and text.startswith("reused default/a#")


READ_ONLY = [
    ["ls", "tasks"],
    ["ls", "tasksets"],
    ["ls", "jobs"],
    ["export", "somejob", "-o", "OUT"],
    ["rescore", "somejob"],
    ["show", "a"],
    ["checkout", "a", "OUT"],
    ["fsck"],
    ["gc"],
    ["taskset", "create", "s", "a"],
    ["taskset", "replace", "s", "a"],
]


@pytest.mark.parametrize("argv", READ_ONLY, ids=lambda argv: " ".join(argv[:2]))
def test_read_only_commands_never_create_a_store(tmp_path: Path, capsys, argv) -> None:
    store = tmp_path / "nowhere"
    argv = [str(tmp_path / "o") if arg == "OUT" else arg for arg in argv]
    code, out, err = store_cli(capsys, store, *argv)
    assert code == 2 and out == ""
    hint = "(publish something first, or pass --store DIR)"
    assert err == f"casstore: {store}: no casstore store here {hint}\n"
    assert list(tmp_path.iterdir()) == []


def test_empty_store_option_is_a_usage_error(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = store_cli(capsys, "", "ls", "tasks")
    assert code == 2 and err.startswith("casstore: ") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_stderr_is_silent_on_success_and_one_line_on_failure(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):  # rich would treat stderr as a terminal
        monkeypatch.delenv(name, raising=False)
    source = tmp_path / "src"
    write_task(source, "a")
    store = tmp_path / "store"
    for argv in (
        ["publish", str(source), "--taskset", "s"],
        ["checkout", "s", str(tmp_path / "out")],
        ["fsck"],
        ["gc", "--dry-run"],
        ["ls", "tasks"],
    ):
        capsys.readouterr()
        assert run(["--store", str(store), *argv]) == 0
        assert capsys.readouterr().err == "", argv
    for argv in (
        ["publish", str(source), "--create"],
        ["checkout", "s", str(tmp_path / "out")],
        ["publish", str(tmp_path / "missing")],
    ):
        capsys.readouterr()
        assert run(["--store", str(store), *argv]) in (1, 2)
        err = capsys.readouterr().err
        assert err.startswith("casstore: ") and err.count("\n") == 1, (argv, err)
    corrupted = next((store / "filesets").rglob("task_archive"))
    os.chmod(corrupted, 0o644)
    corrupted.write_bytes(corrupted.read_bytes()[:-20])
    capsys.readouterr()
    assert run(["--store", str(store), "fsck"]) == 1
    assert capsys.readouterr().err == ""
    assert run(["--store", str(store), "checkout", "s", str(tmp_path / "out2")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"casstore: {corrupted}: ") and err.count("\n") == 1


def test_show_and_counts_are_readable(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a", metadata='reward_keys = ["speed"]')
    store = tmp_path / "store"
    code, text, _ = store_cli(capsys, store, "publish", str(source), "--taskset", "one")
    assert code == 0 and text.splitlines()[-1].endswith(
        "  1 task (new revision, pinning exactly these)"
    )
    _, items, _ = store_cli(capsys, store, "ls", "tasks", "--json")
    code, text, _ = store_cli(capsys, store, "show", "one")
    lines = text.splitlines()
    assert code == 0 and "  tasks: 1" in lines
    assert f"    default/a  {items[0]['revision'][:19]}" in lines  # 12 hex digits
    assert not any("[" in line or "{" in line for line in lines)
    code, text, _ = store_cli(capsys, store, "show", "a")
    assert "  metrics: reward, speed" in text.splitlines()
    assert "  views: none" in text.splitlines()
    assert store_cli(capsys, store, "ls", "tasksets")[1].endswith("  1 task\n")
    assert store_cli(capsys, store, "checkout", "one", str(tmp_path / "o"))[1].startswith(
        "ok 1 task "
    )
    assert store_cli(capsys, store, "fsck")[1] == "ok: 1 revision, 1 archive\n"


@pytest.mark.realdata
def test_real_suite_cli_roundtrip(tmp_path: Path, capsys) -> None:
    suite = FIXTURES / "tasks" / "terminal-bench-qc"
    store = tmp_path / "store"
    code, items, _ = store_cli(capsys, store, "publish", str(suite), "--taskset", "tb", "--json")
    assert code == 0 and len(items) == len(discover(suite))
    code, result, _ = store_cli(capsys, store, "checkout", "tb", str(tmp_path / "out"), "--json")
    assert code == 0 and len(result["tasks"]) == len(items)
    assert store_cli(capsys, store, "fsck")[0] == 0


def test_a_warning_is_one_casstore_line(tmp_path: Path) -> None:
    """The console script prints a skipped ``task_template`` as one ``casstore:`` line on
    stderr (not Python's two-line warning naming a source line), and publishes the rest."""
    data = tmp_path / "data"
    make_task(data, "a")
    make_task(data, "task_template")
    casstore = Path(sys.executable).with_name("casstore")
    done = subprocess.run(
        [str(casstore), "--store", str(tmp_path / "store"), "publish", str(data), "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and [r["name"] for r in json.loads(done.stdout)] == ["a"]
    assert done.stderr == f"casstore: {data / 'task_template'}: skipped (task template)\n"
