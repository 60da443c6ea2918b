"""``casstore run`` against a bare Harbor job, and a cache-hit rerun (issue 13).

Groups:

* ``run-overhead``: ``casstore run`` (the real command, a process, ``--force-rerun`` so that
  every round runs every attempt) against the bare Harbor job of
  ``benchmarks/test_bench_sandbox.py`` (:func:`tests.sandbox_helpers.run_job`: Harbor's own
  ``Job``, oracle agent, ``casstore.sandbox:HostEnvironment``) run as a process each round, as
  ``harbor run`` is (in one long-lived process Harbor's per-process costs, its imports and
  its telemetry's first probe, would be paid once), both over the same 20 plain tasks × 5
  attempts, 4 concurrent trials. ``cpu_seconds``: the CPU time of the spawned processes (and
  theirs: Harbor, the sandboxes) per round. Target: the run takes at most 1.10x the bare
  job's wall time (a ratio >= 0.91).
* ``run-cache-hit``: ``casstore run`` of a 1,000-trial job (200 tasks × 5 attempts, written
  with :func:`casstore.examples.job.write_example_job` and stamped with the run's own
  digests), already imported: no Harbor process (asserted: no ``launcher_result.json``), the
  attempts counted and scored again. Target: under 1 s wall (``max_seconds``). Measured as an
  installed package runs (``bytecode``: compiled modules cached in a session folder through
  ``PYTHONPYCACHEPREFIX``) and in ``run-cache-hit-no-bytecode`` with nothing cached (this
  ``.venv``'s ``PYTHONDONTWRITEBYTECODE=1``), each after one warm-up round (outside the
  timing: it writes the compiled modules, and records the run's caches the first rerun may
  leave unrecorded, its job just written). ``cpu_seconds``: the CPU time of the spawned
  process per round.

The smoke run (``--benchmark-disable``) uses 2 tasks × 1 attempt and 10 tasks × 2 attempts.
Nothing is asserted about time (the machine is shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.conftest import bench_enabled
from benchmarks.measure import measure
from casstore.examples.harbor_tasks import write_plain_tasks
from tests.sandbox_helpers import IMPORT_PATH, require_sandbox_tools

ROOT = Path(__file__).resolve().parents[1]
CASSTORE = str(Path(sys.executable).parent / "casstore")
TASKS, ATTEMPTS, CONCURRENCY = 20, 5, 4


def _run_argv(store: Path, source: Path, jobs: Path, sandbox: Path, *extra: str) -> list[str]:
    return [
        CASSTORE,
        "--store",
        str(store),
        "run",
        str(source),
        "--agent",
        "oracle",
        "--job-name",
        "bench",
        "--jobs-dir",
        str(jobs),
        "--environment-import-path",
        IMPORT_PATH,
        "--ek",
        f'sandbox_dir="{sandbox}"',
        "--json",
        *extra,
    ]


def _casstore_run(argv: list[str], env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(argv, capture_output=True, check=True, env=env)
    return json.loads(done.stdout)


@pytest.mark.parametrize("side", ["bare harbor job", "casstore run"])
def test_run_overhead(benchmark, request: pytest.FixtureRequest, tmp_path: Path, side: str) -> None:
    require_sandbox_tools()
    enabled = bench_enabled(request.config)
    tasks, attempts = (TASKS, ATTEMPTS) if enabled else (2, 1)
    write_plain_tasks(tmp_path / "tasks", tasks)
    rounds = iter(range(1_000))
    argv = _run_argv(
        tmp_path / "store",
        tmp_path / "tasks",
        tmp_path / "jobs",
        tmp_path / "sandboxes",
        "--attempts",
        str(attempts),
        "--concurrency",
        str(CONCURRENCY),
        "--force-rerun",
    )

    def bare() -> int:
        name = f"job-{next(rounds)}"
        script = (
            "import sys; from pathlib import Path; from tests.sandbox_helpers import run_job; "
            "run_job(*map(Path, sys.argv[1:4]), attempts=int(sys.argv[4]), "
            "concurrency=int(sys.argv[5]), name=sys.argv[6])"
        )
        folders = [tmp_path / "tasks", tmp_path / "bare-jobs", tmp_path / "sandboxes"]
        subprocess.run(
            [sys.executable, "-c", script, *map(str, folders), str(attempts), "4", name],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        return len(list((tmp_path / "bare-jobs" / name).glob("*/result.json")))

    def ours() -> int:
        return _casstore_run(argv)["run"]["attempts_run"]

    rounds_run = 3 if enabled else 1
    before = os.times()
    done = measure(benchmark, bare if side == "bare harbor job" else ours, rounds=rounds_run)
    after = os.times()
    spent = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    benchmark.extra_info["cpu_seconds"] = round(spent / rounds_run, 2)
    assert done == tasks * attempts
    benchmark.group = "run-overhead"
    benchmark.extra_info.update(label=side, trials=tasks * attempts)
    if side == "bare harbor job":
        benchmark.extra_info["baseline"] = True
    else:
        benchmark.extra_info["targets"] = {"bare harbor job": 0.91}


@pytest.mark.parametrize("mode", ["bytecode", "no-bytecode"])
def test_cache_hit_rerun(
    benchmark, request: pytest.FixtureRequest, tmp_path: Path, mode: str
) -> None:
    from casstore.examples.job import write_example_job
    from casstore.run.config import RunOptions, check_options
    from casstore.run.identity import NO_AGENT, options_digest, write_stamp
    from casstore.run.source import resolve_source

    enabled = bench_enabled(request.config)
    tasks, attempts = (200, 5) if enabled else (10, 2)
    paths = write_plain_tasks(tmp_path / "tasks", tasks)
    jobs, sandbox = tmp_path / "jobs", tmp_path / "sandboxes"
    job_dir = write_example_job(jobs, [p.name for p in paths], attempts=attempts, name="bench")
    options = RunOptions(
        agent="oracle",
        attempts=attempts,
        job_name="bench",
        jobs_dir=jobs,
        environment_import_path=IMPORT_PATH,
        environment_kwargs=[f'sandbox_dir="{sandbox}"'],
    )
    checked = check_options(options)
    found = resolve_source(str(tmp_path / "tasks"), None, jobs)
    write_stamp(job_dir, options_digest(checked.base, {}), NO_AGENT, found.digests())
    argv = _run_argv(
        tmp_path / "store", tmp_path / "tasks", jobs, sandbox, "--attempts", str(attempts)
    )
    env = dict(os.environ)
    if mode == "bytecode":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    else:
        env.pop("PYTHONPYCACHEPREFIX", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    first = _casstore_run(argv, env)  # imports the job: later rounds are reruns
    assert first["run"]["cache"] == "hit" and first["run"]["launcher"] is None
    _casstore_run(argv, env)  # the warm-up round (module docstring)

    def rerun() -> dict:
        return _casstore_run(argv, env)

    rounds = 5 if enabled else 1
    before = os.times()
    report = measure(benchmark, rerun, rounds=rounds)
    after = os.times()
    spent = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    assert report["run"]["cache"] == "hit" and report["run"]["attempts_run"] == 0
    assert report["counts"]["attempts"] == tasks * attempts
    assert not (job_dir / "launcher_result.json").exists()  # no Harbor process, ever
    benchmark.group = "run-cache-hit" + ("" if mode == "bytecode" else "-no-bytecode")
    benchmark.extra_info.update(
        label=f"casstore run, cache hit ({mode})",
        trials=tasks * attempts,
        max_seconds=1.0,
        cpu_seconds=round(spent / rounds, 3),
    )
