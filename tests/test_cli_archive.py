"""``casstore pack``, ``verify``, ``extract`` and ``demo`` through the CLI: output, exit codes."""

from __future__ import annotations

import json

import pytest

from casstore.archive.pack import pack_tree
from tests.helpers import make_task, run_cli

ZERO = "sha256:" + "0" * 64


@pytest.fixture
def task(tmp_path):
    return make_task(tmp_path, files={"tests/test.sh": "#!/bin/sh\necho 1\n"})


def test_pack_json_reports_the_archive(task, tmp_path, capsys):
    code, out, err = run_cli(capsys, "pack", str(task), "-o", str(tmp_path / "t.tgz"), "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    expected = pack_tree(task, None, "gzip")
    assert report == {
        "address": str(expected.address),
        "content_digest": str(expected.content_digest),
        "entries": 5,
        "payload_bytes": expected.payload_bytes,
        "archive_bytes": (tmp_path / "t.tgz").stat().st_size,
        "compression": "gzip",
    }


def test_verify_json_ok_and_failure(task, tmp_path, capsys):
    archive = tmp_path / "t.tzst"
    run_cli(capsys, "pack", str(task), "-o", str(archive), "-c", "zstd")
    code, out, _ = run_cli(capsys, "verify", str(archive), "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and report["error"] is None
    assert report["entries"] == 5
    code, out, err = run_cli(capsys, "verify", str(archive), "--expect", ZERO, "--json")
    report = json.loads(out)
    assert err == f"casstore: {report['error']['message']}\n"
    assert code == 1 and report["ok"] is False
    assert report["error"]["kind"] == "digest_mismatch"
    assert report["error"]["path"] == str(archive)


def test_corrupt_archive_exits_1_with_one_line(task, tmp_path, capsys):
    archive = tmp_path / "t.tgz"
    run_cli(capsys, "pack", str(task), "-o", str(archive))
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    code, out, err = run_cli(capsys, "verify", str(archive))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("casstore: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["pack"],
        ["pack", "/no/such/dir", "-o", "x"],
        ["pack", "--bogus"],
        ["verify", "/no/such/archive"],
        ["verify", "ARCHIVE", "--expect", "sha256:00"],
        ["verify", "ARCHIVE", "--limit", "nonsense=1"],
        ["extract", "ARCHIVE", "EXISTING"],
        ["pack", "TASK", "-o", "x", "-c", "lzma"],
    ],
)
def test_bad_usage_exits_2(argv, task, tmp_path, capsys):
    archive = tmp_path / "t.tgz"
    pack_tree(task, archive)
    (tmp_path / "existing").mkdir()
    (tmp_path / "existing" / "f").write_text("x")  # an empty directory is a destination
    names = {"ARCHIVE": str(archive), "EXISTING": str(tmp_path / "existing"), "TASK": str(task)}
    code, _, err = run_cli(capsys, *[names.get(a, a) for a in argv])
    assert code == 2
    assert err.startswith("casstore: ") and err.count("\n") == 1


def test_limit_override_from_the_cli(task, tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "pack", str(task), "-o", str(tmp_path / "x"), "--limit", "entries=3"
    )
    assert code == 1
    assert "limit max_entries exceeded: 4 > 3" in err
    assert not (tmp_path / "x").exists()


def test_extract_creates_dest_with_the_task(task, tmp_path, capsys):
    archive = tmp_path / "t.tgz"
    run_cli(capsys, "pack", str(task), "-o", str(archive))
    code, out, _ = run_cli(capsys, "extract", str(archive), str(tmp_path / "dest"), "--json")
    assert code == 0
    assert json.loads(out)["dest"] == str(tmp_path / "dest" / "task")
    assert (tmp_path / "dest/task/tests/test.sh").read_text() == "#!/bin/sh\necho 1\n"


@pytest.mark.parametrize("command", ["extract", "pack"])
def test_json_failures_are_json_too(command, task, tmp_path, capsys):
    archive = tmp_path / "t.tgz"
    pack_tree(task, archive)
    archive.write_bytes(archive.read_bytes()[:-20])
    argv = {
        "extract": ["extract", str(archive), str(tmp_path / "dest"), "--json"],
        "pack": ["pack", str(tmp_path / "nope"), "-o", str(tmp_path / "x"), "--json"],
    }[command]
    code, out, err = run_cli(capsys, *argv)
    report = json.loads(out)
    assert report["ok"] is False
    assert report["error"]["kind"] == {"extract": "corrupt", "pack": "usage"}[command]
    assert code == {"extract": 1, "pack": 2}[command]
    assert err == f"casstore: {report['error']['message']}\n"


def test_empty_store_option_is_bad_usage_and_creates_nothing(task, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run_cli(capsys, "--store", "", "publish", str(task))
    assert code == 2
    assert err == "casstore: --store (or CASSTORE_HOME) must name a directory, not ''\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_missing_choice_argument_lists_the_choices_on_one_line(capsys):
    code, _, err = run_cli(capsys, "ls")
    assert code == 2
    assert err == "casstore: Missing argument 'what'. Choose from: tasks, tasksets, jobs\n"
