"""Leftover temporaries of killed publications (issue 17, item 5): fsck reports them as
information (path, size, age; exit 0), gc removes those older than ``--min-age`` and says what
they were, keeps the younger ones (a publication may be writing them) and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from casstore.store import Store
from tests.helpers import make_task, store_cli

ROOT = Path(__file__).resolve().parents[1]
DAY = 86400


def _store_with_leftovers(tmp_path: Path, capsys) -> tuple[Path, Path, Path]:
    """A store with one task and two leftover temporaries beside its archive: ``old`` (500
    bytes, two days old) and ``young`` (100 bytes, just written)."""
    store = tmp_path / "store"
    code, _, err = store_cli(capsys, store, "publish", str(make_task(tmp_path / "src", "a")))
    assert code == 0, err
    task_dir = store / "filesets" / "default" / "harbor-tasks" / "a"
    old, young = task_dir / ".tmp-killed1", task_dir / ".tmp-running"
    old.write_bytes(b"x" * 500)
    young.write_bytes(b"y" * 100)
    two_days_ago = time.time() - 2 * DAY
    os.utime(old, (two_days_ago, two_days_ago))
    return store, old, young


def test_fsck_reports_temporaries_with_paths_and_ages(tmp_path: Path, capsys) -> None:
    store, old, young = _store_with_leftovers(tmp_path, capsys)
    code, out, err = store_cli(capsys, store, "fsck")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"temporary (info): {old} (500 bytes, 2 d old)"
    assert lines[1].startswith(f"temporary (info): {young} (100 bytes, ") and "s old)" in lines[1]
    assert lines[2] == "ok: 1 revision, 1 archive"
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 0 and report["ok"]
    [first, second] = report["temporaries"]
    assert (first["path"], first["bytes"]) == (str(old), 500)
    assert 2 * DAY - 60 < first["age_seconds"] < 2 * DAY + 60
    assert (second["path"], second["bytes"]) == (str(young), 100)
    assert 0 <= second["age_seconds"] < DAY


def test_gc_removes_old_temporaries_and_says_what_they_were(tmp_path: Path, capsys) -> None:
    store, old, young = _store_with_leftovers(tmp_path, capsys)
    code, out, _ = store_cli(capsys, store, "gc", "--dry-run", "--min-age", "3600")
    assert code == 0 and old.exists()
    assert out.splitlines() == [
        f"would remove temporary {old} (500 bytes, 2 d old)",
        "would remove 0 archives, 1 temporary file, 500 bytes",
        "kept 1 temporary file younger than 3600 s (--min-age 0 to include)",
    ]
    code, report, _ = store_cli(capsys, store, "gc", "--min-age", "3600", "--json")
    assert code == 0 and not old.exists() and young.exists()
    assert report["removed"] == [] and report["freed_bytes"] == 500
    assert [(t["path"], t["bytes"]) for t in report["temporaries"]] == [(str(old), 500)]
    assert [t["path"] for t in report["kept_young_temporaries"]] == [str(young)]
    code, out, _ = store_cli(capsys, store, "gc", "--min-age", "0")
    assert code == 0 and not young.exists()
    assert out.splitlines()[-1] == "removed 0 archives, 1 temporary file, 100 bytes"
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 0 and report["ok"] and report["temporaries"] == []


# argv: store, task dir. Publishes the task with a file object that stops after 4 KiB
# written (the process is killed there): a temporary is left.
PUBLISHER = r"""
import os, sys, time
from casstore.archive.discover import discover
from casstore.store import Store
import casstore.store.fileset as fileset

real = os.fdopen
def slow(fd, *args, **kwargs):
    handle = real(fd, *args, **kwargs)
    write = handle.write
    def stalled(data):
        n = write(data)
        handle.flush()
        print("writing", flush=True)
        time.sleep(60)
        return n
    handle.write = stalled
    return handle
fileset.os.fdopen = slow
with Store(sys.argv[1]) as store:
    store.publish(discover(sys.argv[2])[0])
"""


def test_a_killed_publication_leaves_a_temporary_gc_removes(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    Store(store).close()
    task = make_task(tmp_path / "src", "k", {"payload.bin": "z" * 100_000})
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    publisher = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, str(store), str(task)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert publisher.stdout is not None
    assert publisher.stdout.readline() == "writing\n"
    publisher.send_signal(signal.SIGKILL)
    publisher.wait()
    code, report, _ = store_cli(capsys, store, "fsck", "--json")
    assert code == 0 and report["ok"] and report["revisions"] == 0
    [left] = report["temporaries"]
    assert Path(left["path"]).name.startswith(".tmp-") and left["bytes"] > 0
    code, report, _ = store_cli(capsys, store, "gc", "--min-age", "0", "--json")
    assert code == 0 and [t["path"] for t in report["temporaries"]] == [left["path"]]
    assert report["freed_bytes"] == left["bytes"] and not Path(left["path"]).exists()
