"""The store commands: publish, ls, show, taskset, checkout, fsck, gc (JSON and exit codes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from casstore.discovery import discover
from cli.main import run
from tests.test_discovery import FIXTURES, write_task


def call(capsys: pytest.CaptureFixture[str], store: Path, *argv: str) -> tuple[int, object]:
    """Run the CLI with ``--store store``; return (exit status, parsed JSON or stdout text)."""
    capsys.readouterr()
    code = run(["--store", str(store), *argv])
    out = capsys.readouterr().out
    try:
        return code, json.loads(out)
    except ValueError:
        return code, out


def test_publish_json_reuse_and_taskset(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    write_task(source, "b", native="org/b")
    store = tmp_path / "store"
    code, items = call(capsys, store, "publish", str(source), "--taskset", "set", "--json")
    assert code == 0 and [i["name"] for i in items] == ["a", "org-b"]
    assert set(items[0]) == {
        "name",
        "id",
        "revision",
        "address",
        "archive_ref",
        "content_digest",
        "reused",
    }
    assert items[1]["id"] == "org/b" and not any(i["reused"] for i in items)
    assert [i["content_digest"] for i in items] == [t.content_digest for t in discover(source)]
    code, again = call(capsys, store, "publish", str(source), "--compression", "zstd", "--json")
    assert code == 0 and all(i["reused"] for i in again)
    assert [i["revision"] for i in again] == [i["revision"] for i in items]
    code, rows = call(capsys, store, "ls", "tasksets", "--json")
    assert code == 0 and rows[0]["ref"] == "default/set" and rows[0]["tasks"] == 2
    code, rows = call(capsys, store, "ls", "tasks", "--json")
    assert [r["revision"] for r in rows] == [i["revision"] for i in items]
    code, shown = call(capsys, store, "show", "org-b", "--json")
    assert code == 0 and shown["kind"] == "task"
    assert shown["revision"]["digest"] == items[1]["revision"]
    code, shown = call(capsys, store, "show", "default/set", "--json")
    assert shown["kind"] == "taskset" and len(shown["revision"]["tasks"]) == 2


def test_publish_options_and_usage_errors(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    write_task(source, "b")
    store = tmp_path / "store"
    code, _ = call(capsys, store, "publish", str(source), "--name", "x")
    assert code == 2
    code, items = call(
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
    code, _ = call(
        capsys, store, "publish", str(source / "a"), "--name", "x", "-w", "w", "--create"
    )
    assert code == 1
    assert call(capsys, store, "publish", str(source / "a"), "--name", "bad/name")[0] == 2
    assert call(capsys, store, "show", "missing")[0] == 2
    assert call(capsys, store, "checkout", "missing", str(tmp_path / "o"))[0] == 2
    assert call(capsys, store, "taskset", "create", "s", "nope")[0] == 2
    assert call(capsys, store, "publish", str(tmp_path / "nothing"))[0] == 2


def test_taskset_commands(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    store = tmp_path / "store"
    _, items = call(capsys, store, "publish", str(source), "--json")
    code, made = call(capsys, store, "taskset", "create", "s", "a", "--json")
    assert code == 0 and made["id"] == "default/s"
    assert made["tasks"] == [{"task": "default/a", "revision": items[0]["revision"]}]
    assert call(capsys, store, "taskset", "create", "s", "a")[0] == 1
    code, again = call(capsys, store, "taskset", "replace", "s", "a", "--json")
    assert code == 0 and again["revision"] == made["revision"]


def test_checkout_fsck_gc_and_corruption(tmp_path: Path, capsys) -> None:
    source = tmp_path / "src"
    write_task(source, "a")
    write_task(source, "b")
    store = tmp_path / "store"
    _, items = call(capsys, store, "publish", str(source), "--taskset", "s", "--json")
    code, result = call(capsys, store, "checkout", "s", str(tmp_path / "out"), "--json")
    assert code == 0 and [t["dir"] for t in result["tasks"]] == ["a", "b"]
    assert sorted(os.listdir(tmp_path / "out")) == ["a", "b"]
    code, report = call(capsys, store, "fsck", "--json")
    assert code == 0 and report["ok"] and report["revisions"] == 2
    code, report = call(capsys, store, "gc", "--dry-run", "--min-age", "0", "--json")
    assert code == 0 and report["removed"] == []
    archive = store / "filesets" / items[0]["archive_ref"].replace("#", "/")
    os.chmod(archive, 0o644)
    data = bytearray(archive.read_bytes())
    data[-10] ^= 0x55
    archive.write_bytes(bytes(data))
    code, report = call(capsys, store, "fsck", "--json")
    assert code == 1 and not report["ok"]
    assert [p["path"] for p in report["problems"]] == [str(archive)]
    code, text = call(capsys, store, "fsck")
    assert code == 1 and items[0]["archive_ref"] in text
    assert call(capsys, store, "checkout", "s", str(tmp_path / "out2"))[0] == 1
    assert not (tmp_path / "out2").exists()


@pytest.mark.realdata
def test_real_suite_cli_roundtrip(tmp_path: Path, capsys) -> None:
    suite = FIXTURES / "tasks" / "terminal-bench-qc"
    store = tmp_path / "store"
    code, items = call(capsys, store, "publish", str(suite), "--taskset", "tb", "--json")
    assert code == 0 and len(items) == len(discover(suite))
    code, result = call(capsys, store, "checkout", "tb", str(tmp_path / "out"), "--json")
    assert code == 0 and len(result["tasks"]) == len(items)
    assert call(capsys, store, "fsck")[0] == 0
