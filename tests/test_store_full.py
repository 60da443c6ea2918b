"""A full disk (issue 17, item 2): an import whose commit finds no room, and a publication
whose archive does not fit, each exit 1 with one line naming the store and saying the disk
is full; nothing is half-written (fsck is clean, the counts are those before, no temporary
file is left) and the store takes the same writes once there is room again.

The store lives on a small tmpfs mounted in a private mount namespace (``unshare -m`` as
root, ``unshare -rm`` otherwise); where neither is allowed the test is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import make_task, run_python
from tests.trials_builder import make_job, trial_json, trial_result

# argv: the tmpfs, the sources. Runs the scenario in this process, prints its steps as JSON.
SCENARIO = r"""
import contextlib, io, json, os, sys
from pathlib import Path
from cli.main import run

disk, sources = Path(sys.argv[1]), Path(sys.argv[2])
store = disk / "store"
steps = {}

def step(name, *argv):
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["--store", str(store), *argv])
    out.flush()
    steps[name] = [code, out.buffer.getvalue().decode(), err.getvalue()]

def fill(leave):
    info = os.statvfs(disk)
    size = info.f_bavail * info.f_frsize - leave
    with (disk / "fill").open("wb") as handle:
        handle.write(b"\0" * max(size, 0))

step("publish first", "publish", str(sources / "small"))
step("import first", "import", str(sources / "job1"), "--name", "first")
fill(leave=24 << 10)
step("import full", "import", str(sources / "job2"), "--name", "second", "--json")
step("publish full", "publish", str(sources / "big"))
step("temporaries", "fsck", "--json")
step("fsck full", "fsck", "--json")
step("ls jobs full", "ls", "jobs", "--json")
(disk / "fill").unlink()
step("import again", "import", str(sources / "job2"), "--name", "second")
step("publish again", "publish", str(sources / "big"))
step("fsck after", "fsck", "--json")
step("ls jobs after", "ls", "jobs", "--json")
print(json.dumps(steps))
"""


def _mount_namespace() -> list[str] | None:
    """``unshare -m`` (root) or ``unshare -rm`` (root mapped in a user namespace), whichever
    this machine allows; None when neither."""
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True)
        except FileNotFoundError:
            return None
        if done.returncode == 0:
            return prefix
    return None


def _sources(root: Path) -> Path:
    """A small task, a task with 256 KiB of random payload (more than the disk has left),
    a job of 20 trials and one of 200 (its commit needs more than is left)."""
    make_task(root, "small")
    make_task(root, "big")
    (root / "big" / "payload.bin").write_bytes(os.urandom(256 << 10))
    for name, count, job_id in (
        ("job1", 20, "11111111-2222-3333-4444-555555555555"),
        ("job2", 200, "22222222-3333-4444-5555-666666666666"),
    ):
        trials = {
            f"t{i % 7}__{i}": trial_json(
                trial_result(f"t{i % 7}", f"t{i % 7}__{i}", started=i, job_id=job_id)
            )
            for i in range(count)
        }
        make_job(root / name, trials, job_id=job_id)
    return root


def test_full_disk_is_one_line_and_leaves_the_store_consistent(tmp_path: Path) -> None:
    prefix = _mount_namespace()
    if prefix is None:
        pytest.skip("no mount namespace here (unshare -m and unshare -rm both refused)")
    sources = _sources(tmp_path / "sources")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = 'mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@"'
    mounted = [*prefix, "sh", "-c", script, "sh", str(disk)]
    done = run_python(SCENARIO, str(disk), str(sources), prefix=mounted, timeout=600)
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)
    store = disk / "store"
    assert steps["publish first"][0] == 0 and steps["import first"][0] == 0
    for name in ("import full", "publish full"):
        code, _, err = steps[name]
        assert code == 1, (name, err)
        assert err.startswith(f"casstore: {store}: the disk is full (") and err.count("\n") == 1
        assert "Traceback" not in err
    error = json.loads(steps["import full"][1])["error"]
    assert error["kind"] == "store" and error["path"] == str(store)
    code, report, _ = steps["fsck full"]
    report = json.loads(report)
    assert code == 0 and report["ok"] and report["temporaries"] == []
    assert (report["revisions"], report["jobs"], report["trials"]) == (1, 1, 20)
    assert [job["name"] for job in json.loads(steps["ls jobs full"][1])] == ["first"]
    # room again: the same writes go through
    assert steps["import again"][0] == 0 and steps["publish again"][0] == 0
    code, report, _ = steps["fsck after"]
    report = json.loads(report)
    assert code == 0 and report["ok"] and (report["revisions"], report["trials"]) == (2, 220)
    assert sorted(job["name"] for job in json.loads(steps["ls jobs after"][1])) == [
        "first",
        "second",
    ]
