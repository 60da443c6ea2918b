"""``casstore run`` with Harbor's own Job, its ``oracle`` agent and the host sandbox
(``casstore.sandbox:HostEnvironment``): no mocks of Harbor.

Each test runs the command as a user does (in this process, or as a child process for the
interrupt) and proves from the files what ran: ``launcher_result.json`` is written by each
launch only, ``attempts_run`` counts the trials Harbor added, the trial directories are
Harbor's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from casstore.errors import RunError
from casstore.examples.harbor_tasks import EXPECTED_REWARDS, write_harbor_task, write_harbor_tasks
from casstore.run.lock import job_lock
from tests.helpers import run_cli
from tests.sandbox_helpers import IMPORT_PATH, require_sandbox_tools, sandbox_processes

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["plain", "multi-reward"]


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A dataset of two example tasks, a store, a jobs folder and a sandbox folder."""
    require_sandbox_tools()
    write_harbor_tasks(tmp_path / "ds", TASKS)
    return {
        "ds": tmp_path / "ds",
        "store": tmp_path / "store",
        "jobs": tmp_path / "jobs",
        "sandbox": tmp_path / "sandbox",
    }


def _argv(place: dict[str, Path], *extra: str, source: Path | None = None) -> list[str]:
    return [
        "--store",
        str(place["store"]),
        "run",
        str(source or place["ds"]),
        "--agent",
        "oracle",
        "--job-name",
        "suite",
        "--jobs-dir",
        str(place["jobs"]),
        "--environment-import-path",
        IMPORT_PATH,
        "--ek",
        f'sandbox_dir="{place["sandbox"]}"',
        "--json",
        *extra,
    ]


def _run(capsys: pytest.CaptureFixture[str], place: dict[str, Path], *extra: str) -> Any:
    code, out, err = run_cli(capsys, *_argv(place, *extra))
    assert code == 0, err
    return json.loads(out)


def _trial_dirs(job_dir: Path) -> set[str]:
    return {p.parent.name for p in job_dir.glob("*/result.json")}


def test_runs_once_then_hits_then_adds_only_missing_attempts(capsys, place) -> None:
    """A first run launches Harbor for every attempt and reports what Harbor recorded; the
    same run again starts no Harbor process (launcher_result.json not rewritten, no new
    trial directory); --attempts 2 → 3 runs one attempt per task in the same job."""
    first = _run(capsys, place, "--attempts", "2")
    job_dir = place["jobs"] / "suite"
    run = first["run"]
    assert (run["cache"], run["attempts_run"], run["attempts_reused"]) == ("none", 4, 0)
    assert run["launcher"]["outcome"] == "completed" and run["launcher"]["exit_status"] == 0
    assert first["counts"]["attempts"] == 4 and first["counts"]["scored"] == 4
    harbor = json.loads((job_dir / "result.json").read_bytes())
    assert run["job_id"] == harbor["id"]
    recorded = [m for e in harbor["stats"]["evals"].values() for m in e["metrics"]]
    # Harbor's Mean over the two tasks' rewards (a missing key counts 0), as Harbor recorded
    assert first["harbor_metrics"] == recorded == [{"reward": 1.0, "speed": 0.125, "style": 0.25}]
    assert first["outputs"]["style"]["mean"] == EXPECTED_REWARDS["multi-reward"]["style"]
    launched = (job_dir / "launcher_result.json").read_bytes()
    trials = _trial_dirs(job_dir)
    assert len(trials) == 4

    again = _run(capsys, place, "--attempts", "2")
    assert again["run"]["cache"] == "hit" and again["run"]["launcher"] is None
    assert (again["run"]["attempts_run"], again["run"]["attempts_reused"]) == (0, 0)
    assert (job_dir / "launcher_result.json").read_bytes() == launched
    assert _trial_dirs(job_dir) == trials
    assert {k: again[k] for k in ("counts", "outputs")} == {
        k: first[k] for k in ("counts", "outputs")
    }

    more = _run(capsys, place, "--attempts", "3", "--concurrency", "2")
    assert (more["run"]["cache"], more["run"]["attempts_run"]) == ("incomplete", 2)
    assert more["run"]["job_id"] == run["job_id"]
    assert _trial_dirs(job_dir) > trials and len(_trial_dirs(job_dir)) == 6
    assert more["counts"]["attempts"] == 6


def test_editing_one_task_reruns_only_that_task(capsys, place) -> None:
    """A changed tests/test.sh makes the stamp stale: the job directory goes, but the store's
    attempts of the unchanged task are reused (the report says from which job)."""
    first = _run(capsys, place, "--attempts", "2")
    with (place["ds"] / "plain" / "tests" / "test.sh").open("a") as script:
        script.write("# edited\n")
    second = _run(capsys, place, "--attempts", "2")
    run = second["run"]
    assert (run["cache"], run["attempts_run"], run["attempts_reused"]) == ("stale", 2, 2)
    assert run["job_id"] != first["run"]["job_id"]
    assert run["trials_from"] == {run["job_id"]: 2, first["run"]["job_id"]: 2}
    plain = sorted(n for n in first["run"]["trials"][first["run"]["job_id"]] if "plain" in n)
    assert sorted(run["trials"][first["run"]["job_id"]]) == sorted(
        n for n in first["run"]["trials"][first["run"]["job_id"]] if n not in plain
    )  # the unchanged task's trials, from the first job
    assert {r["task_name"] for r in _results(place["jobs"] / "suite")} == {"plain"}
    assert second["counts"]["attempts"] == 4


def _results(job_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in sorted(job_dir.glob("*/result.json"))]


def test_kwargs_invalidate_a_rotated_secret_does_not_force_reruns_all(
    capsys, place, monkeypatch
) -> None:
    """A changed --ak value reruns (stale, nothing reused: another options digest); a new
    value of the same secret reference reuses everything; --force-rerun reruns all."""
    monkeypatch.setenv("CASSTORE_TEST_KEY", "first-secret-value")
    secret = ["--env-secret", "TEST_KEY=casstore-test-key"]
    base = _run(capsys, place, "--ak", "note=1", *secret)
    assert base["run"]["attempts_run"] == 2
    changed = _run(capsys, place, "--ak", "note=2", *secret)
    assert (changed["run"]["cache"], changed["run"]["attempts_run"]) == ("stale", 2)
    assert changed["run"]["attempts_reused"] == 0
    job_dir = place["jobs"] / "suite"
    files = [job_dir / "config.json", job_dir / "lock.json", *job_dir.glob("*/config.json")]
    assert all(b"secret-value" not in path.read_bytes() for path in files)
    assert b"${TEST_KEY}" in (job_dir / "config.json").read_bytes()
    monkeypatch.setenv("CASSTORE_TEST_KEY", "rotated-secret-value")
    rotated = _run(capsys, place, "--ak", "note=2", *secret)
    assert (rotated["run"]["cache"], rotated["run"]["attempts_run"]) == ("hit", 0)
    forced = _run(capsys, place, "--ak", "note=2", *secret, "--force-rerun")
    assert (forced["run"]["cache"], forced["run"]["attempts_run"]) == ("forced", 2)
    assert forced["run"]["attempts_reused"] == 0
    assert forced["run"]["job_id"] != changed["run"]["job_id"]


def test_a_concurrent_run_on_the_same_job_name_is_refused(capsys, place) -> None:
    with job_lock(place["jobs"], "suite"):
        code, out, err = run_cli(capsys, *_argv(place))
    assert code == 1
    assert err == (
        f"casstore: {place['jobs'] / 'suite'}: another casstore run (pid {os.getpid()}) is "
        "using this job; wait for it or choose another --job-name\n"
    )
    assert json.loads(out)["error"]["kind"] == "run"
    assert not (place["jobs"] / "suite").exists()


def test_sigint_cancels_imports_and_the_next_run_runs_the_rest(capsys, place) -> None:
    """SIGINT to ``casstore run`` while a slow trial runs: cancelled.json, no process of the
    job left, the finished trial imported; the next run runs only the cancelled task."""
    with _slow_run(place) as (child, job_dir):
        _wait_for(lambda: len(_finished(job_dir)) == 2 and _started(job_dir, "slow"), child)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
        assert child.returncode == 130, err
        assert err.decode() == (
            f"casstore: {job_dir}: interrupted; its completed trials are imported, the job is "
            "marked cancelled (cancelled.json): run again to run the rest\n"
        )
        cancelled = json.loads((job_dir / "cancelled.json").read_bytes())
        assert cancelled["signal"] == "SIGINT"
        launcher = json.loads((job_dir / "launcher_result.json").read_bytes())
        assert launcher["outcome"] == "cancelled"
        assert _group_members(launcher["pid"]) == []
        assert sandbox_processes(place["sandbox"]) == []
        code, listed, _ = run_cli(capsys, "--store", str(place["store"]), "ls", "jobs", "--json")
        (job,) = json.loads(listed)
        assert code == 0 and job["trials"] == 3  # two finished, one cancelled: aborted evidence
        assert job["failure_codes"].get("cancelled") == 1
    rest = _run(capsys, place, "--concurrency", "3")
    assert (rest["run"]["cache"], rest["run"]["attempts_run"]) == ("incomplete", 1)
    assert rest["counts"]["attempts"] == 3 and rest["counts"]["scored"] == 3


def test_a_killed_run_keeps_its_job_locked_while_its_harbor_lives(capsys, place) -> None:
    """SIGKILL of ``casstore run`` cannot stop its Harbor (another session): the job stays
    locked (Harbor holds the lock's descriptor) until that Harbor ends, so a rerun cannot start
    a second Harbor on the same job directory; then the lock is free again."""
    with _slow_run(place) as (child, job_dir):
        _wait_for(lambda: _started(job_dir, "slow"), child)
        child.kill()
        child.wait(timeout=30)
        with pytest.raises(RunError) as busy, job_lock(place["jobs"], "suite"):
            pass
        assert f"(pid {child.pid})" in str(busy.value)
        code, _, err = run_cli(capsys, *_argv(place))
        assert code == 1 and "another casstore run" in err
    deadline = time.monotonic() + 180
    while True:  # the orphaned Harbor finishes its trials, then the lock is free
        try:
            with job_lock(place["jobs"], "suite"):
                break
        except RunError:
            assert time.monotonic() < deadline, "the orphaned Harbor did not end"
            time.sleep(0.2)
    assert not (job_dir / "launcher_result.json").exists()  # nobody waited for it


@contextmanager
def _slow_run(place) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``casstore run`` of the dataset plus a ``slow`` task, as a process: ``(process, job
    dir)``; the slow task's oracle waits until the block ends (its gate removed)."""
    gate = Path("/opt") / f"casstore-test-gate-{uuid.uuid4().hex}"  # the sandbox sees /opt
    gate.write_text("hold\n")
    try:
        write_harbor_task(place["ds"], "slow", _slow_task(gate))
        child = subprocess.Popen(
            [str(Path(sys.executable).parent / "casstore"), *_argv(place, "--concurrency", "3")],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        yield child, place["jobs"] / "suite"
    finally:
        gate.unlink()


def _slow_task(gate: Path) -> dict[str, tuple[str, int]]:
    """A task whose oracle waits while ``gate`` exists (then passes)."""
    plain = {**_files("plain")}
    plain["solution/solve.sh"] = (
        f"#!/bin/bash\nwhile [ -e {gate} ]; do sleep 0.2; done\necho hello > /app/out.txt\n",
        0o755,
    )
    plain["tests/test.sh"] = (
        "#!/bin/bash\nif [ -e /app/out.txt ]; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n",
        0o755,
    )
    return plain


def _files(name: str) -> dict[str, tuple[str, int]]:
    from casstore.examples import harbor_tasks

    return harbor_tasks._BUILDERS[name]()


def _finished(job_dir: Path) -> list[Path]:
    return list(job_dir.glob("*/result.json"))


def _started(job_dir: Path, task: str) -> bool:
    return any(job_dir.glob(f"{task}__*/config.json"))


def _wait_for(condition, child: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the job did not get there in time"
        time.sleep(0.2)


def _group_members(pgid: int) -> list[int]:
    """Live processes of the process group ``pgid``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    found.append(int(entry.name))
            except ProcessLookupError:
                continue
    return found


def test_a_taskset_reference_is_checked_out_and_run(capsys, place) -> None:
    """A stored taskset: checked out (verified) into the jobs folder, its trials labelled with
    the taskset's name; the same reference again finds the tasks in place: a hit."""
    code, _, err = run_cli(
        capsys, "--store", str(place["store"]), "publish", str(place["ds"]), "--taskset", "suite"
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, *_argv(place, source=Path("default/suite")))
    assert code == 0, err
    first = json.loads(out)
    assert (first["run"]["cache"], first["run"]["attempts_run"]) == ("none", 2)
    checked_out = place["jobs"] / ".casstore-tasks" / "default" / "suite"
    assert sorted(p.name for p in checked_out.iterdir()) == sorted(TASKS)
    assert {r["source"] for r in _results(place["jobs"] / "suite")} == {"suite"}
    code, out, err = run_cli(capsys, *_argv(place, source=Path("default/suite")))
    assert code == 0, err
    assert json.loads(out)["run"]["cache"] == "hit"
