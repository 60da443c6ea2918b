"""Hostile conditions at run time: special files where trial files belong, a pack terminated
midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from casstore.trials import read_job
from tests.trials_builder import make_job, trial_json, trial_result


def _job(tmp_path: Path, n: int) -> Path:
    trials = {
        f"t{i % 3}__{i}": trial_json(trial_result(f"t{i % 3}", f"t{i % 3}__{i}", {"reward": i % 2}))
        for i in range(n)
    }
    return make_job(tmp_path / "job", trials, expected=n)


def _finishes(target, seconds: float = 30.0):
    """Run ``target`` on a thread; its result, or a failure when it is still blocked."""
    out: dict[str, object] = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", target()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{target} blocked"
    return out["value"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_fifo_in_place_of_result_json_is_unreadable_not_a_hang(
    tmp_path: Path, workers: int
) -> None:
    job_dir = _job(tmp_path, 40)
    fifo = job_dir / "t1__7" / "result.json"
    fifo.unlink()
    os.mkfifo(fifo)
    (job_dir / "config.json").unlink()
    os.mkfifo(job_dir / "config.json")  # a job-level file too
    job = _finishes(lambda: read_job(job_dir, workers=workers))
    assert job.n_trials == 39
    assert job.failure_codes == {"result_unreadable": 1}
    unreadable = [d for d in job.diagnostics if d["code"] == "result_unreadable"]
    assert unreadable == [
        {
            "code": "result_unreadable",
            "count": 1,
            # never read: refused by its kind (casstore.inputs), no longer read as empty
            "trials": [{"trial_dir": "t1__7", "reason": "result.json not a regular file (a FIFO)"}],
        }
    ]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_during_pack_leaves_no_temporary_file(tmp_path: Path, signum: int) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Do it.\n")
    with open(task / "tests" / "blob.bin", "wb") as blob:
        for _ in range(48):
            blob.write(os.urandom(4 << 20))  # 192 MiB of random data: gzip takes seconds
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    casstore = Path(sys.executable).with_name("casstore")
    pack = subprocess.Popen(
        [str(casstore), "pack", str(task), "-o", str(out_dir / "a.tgz")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not any(out_dir.iterdir()) and pack.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pack.poll() is None, "the pack ended before it could be terminated"
    pack.send_signal(signum)
    pack.communicate(timeout=60)
    assert pack.returncode == 128 + signum
    assert list(out_dir.iterdir()) == []
