"""Crash safety (kill -9 at random points of publications and of imports) and two concurrent
publishing processes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from casstore.api import fsck
from casstore.store import Store
from casstore.trials import Jobs
from tests.helpers import run_python

ROOT = Path(__file__).resolve().parents[1]

# argv: store, work dir, name prefix, task count, compression. Generates small tasks, prints
# "ready", publishes them one by one, then prints the results as one JSON line.
WORKER = r"""
import json, os, sys
from pathlib import Path
from casstore.archive.discover import discover
from casstore.store import Store

store_dir, work, prefix, count, compression = sys.argv[1:6]
data = Path(work) / prefix
for i in range(int(count)):
    task = data / f"{prefix}-{i:04}"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('schema_version = "1.1"\n')
    (task / "instruction.md").write_text(f"Task {prefix} {i}.\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1\n")
    (task / "payload.bin").write_bytes(os.urandom(512 + i))
tasks = discover(data)
print("ready", flush=True)
results = []
with Store(store_dir) as store:
    for task in tasks:
        r = store.publish(task, compression=compression)
        results.append({"name": r.name, "content_digest": r.content_digest,
                        "expected": task.content_digest, "revision": r.revision})
print(json.dumps(results), flush=True)
"""


def start_worker(store: Path, work: Path, prefix: str, count: int, compression: str):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(store), str(work), prefix, str(count), compression],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def assert_consistent(store_dir: Path) -> int:
    """fsck is clean (orphans allowed) and every revision's archive exists; return #tasks."""
    with Store(store_dir) as store:
        report = fsck(store)
        assert report.ok, report.problems
        for record, revision in store.tasks.list():
            assert store.filesets.path_of(revision.archive_ref).is_file(), record.name
        return report.tasks


@pytest.mark.slow
def test_kill_9_at_random_points(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    store_dir = tmp_path / "store"
    registered, partial = 0, 0
    for run in range(20):
        worker = start_worker(store_dir, tmp_path / "work", f"r{run}", 12, "gzip")
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
        time.sleep(rng.uniform(0.0, 0.12))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        count = assert_consistent(store_dir)
        assert count >= registered
        partial += 0 < count - registered < 12
        registered = count
    assert partial >= 3, "kills should land in the middle of publishing"
    # Killed runs' leftovers never block later publications under the same names.
    done = start_worker(store_dir, tmp_path / "final", "r0", 12, "gzip")
    _, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert_consistent(store_dir)
    with Store(store_dir) as store:
        gone = store.gc(min_age=0)
        assert fsck(store).orphans == [] and fsck(store).temporaries == []
        assert len(gone.removed) == len(set(gone.removed))


# argv: store, job dirs. Imports each job directory in turn, printing "importing <n>" before
# the n-th (a kill lands in its parse, its streamed write or its commit).
IMPORTER = r"""
import sys
from casstore.store import Store
from casstore.trials import Jobs

with Store(sys.argv[1]) as store:
    for n, job in enumerate(sys.argv[2:]):
        print(f"importing {n}", flush=True)
        Jobs(store).import_jobs([job])
"""


def _jobs(root: Path, count: int, trials: int) -> list[Path]:
    """``count`` generated job directories of ``trials`` trials each (distinct job ids)."""
    from tests.trials_builder import make_job, trial_json, trial_result

    jobs = []
    for n in range(count):
        job_id = f"{n:08d}-2222-3333-4444-555555555555"
        results = {
            f"t{i % 9}__{n}_{i}": trial_json(
                trial_result(f"t{i % 9}", f"t{i % 9}__{n}_{i}", started=i, job_id=job_id)
            )
            for i in range(trials)
        }
        jobs.append(make_job(root / f"job{n}", results, job_id=job_id))
    return jobs


@pytest.mark.slow
def test_kill_9_during_import(tmp_path: Path) -> None:
    """20 imports of 4 jobs killed at random points (during a job drawn at random, up to
    50 ms after it began: an import of one takes about 40 ms; a store is started afresh once
    it holds every job): fsck stays clean, a job is stored whole or not at all (fsck also
    checks that its record names exactly its stored trials), nothing committed is lost, and
    a last import completes every job."""
    rng = random.Random(20261201)
    jobs = _jobs(tmp_path / "jobs", 4, 200)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    stores, stored, interrupted = 0, {}, 0
    store_dir = tmp_path / "store0"
    for _ in range(20):
        worker = subprocess.Popen(
            [sys.executable, "-c", IMPORTER, str(store_dir), *map(str, jobs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert worker.stdout is not None
        victim = rng.randrange(len(jobs))
        for n in range(victim + 1):
            assert worker.stdout.readline() == f"importing {n}\n", worker.stderr.read()
        time.sleep(rng.uniform(0.0, 0.05))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        with Store(store_dir) as store:
            report = fsck(store)
            assert report.ok, report.problems
            now = {job.job_id: job.trials for job in Jobs(store).list()}
        assert all(now.get(job) == trials for job, trials in stored.items())  # none lost
        assert all(trials == 200 for trials in now.values())  # whole jobs only
        interrupted += len(now) < len(jobs)
        stored = now
        if len(now) == len(jobs):  # every job in: the next kills go to a new store
            stores += 1
            store_dir, stored = tmp_path / f"store{stores}", {}
    assert interrupted >= 10, "kills should land in the middle of importing"
    done = run_python(IMPORTER, str(store_dir), *map(str, jobs))
    assert done.returncode == 0, done.stderr
    with Store(store_dir) as store:
        assert fsck(store).ok and len(Jobs(store).list()) == 4


@pytest.mark.slow
def test_two_processes_publish_concurrently(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    Store(store_dir).close()
    workers = [
        start_worker(store_dir, tmp_path / "work", prefix, 200, compression)
        for prefix, compression in (("p", "none"), ("q", "gzip"))
    ]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        results.extend(json.loads(out.splitlines()[-1]))
    assert len(results) == 400
    assert all(r["content_digest"] == r["expected"] for r in results)
    with Store(store_dir) as store:
        listed = {record.name: revision for record, revision in store.tasks.list()}
        assert len(listed) == 400
        for r in results:
            assert listed[r["name"]].digest == r["revision"]
            assert listed[r["name"]].content_digest == r["expected"]
        report = fsck(store)
        assert report.ok and report.revisions == 400 and report.orphans == []
