"""The host sandbox under a bare Harbor job, and its own cost per trial (issue 13, item 6).

Groups:

* ``sandbox-job``: Harbor's own ``Job`` (oracle agent, ``casstore.sandbox:HostEnvironment``,
  4 concurrent trials) over 20 plain tasks × 5 attempts = 100 trials
  (:func:`casstore.examples.harbor_tasks.write_plain_tasks`); each round a new job directory.
  This is the baseline ``casstore run`` is compared to (its benchmark: <= 1.10x this wall
  time). ``extra_info``: ``trials``, ``per_trial_ms`` (wall / trials), ``cpu_seconds``.
* ``sandbox-trial``: one environment's life as a trial drives it, outside Harbor: ``start``
  (private root, bwrap, the plain task's Dockerfile: ENV, WORKDIR, COPY), one ``exec`` of
  ``true``, ``stop`` (kill, wait, delete). ``extra_info``: the median ``start_ms``,
  ``exec_ms`` and ``stop_ms`` over the round's environments.

With ``--benchmark-disable`` (the smoke run) the job is 2 tasks × 1 attempt and the trial
loop runs 2 environments. Nothing is asserted about time (the machine is shared).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest

from benchmarks.conftest import bench_enabled
from benchmarks.measure import cpu_seconds, measure
from casstore.examples.harbor_tasks import write_plain_tasks
from tests.sandbox_helpers import host_environment, require_sandbox_tools, run_job

TASKS, ATTEMPTS, CONCURRENCY = 20, 5, 4


def test_bare_harbor_job(benchmark, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    require_sandbox_tools()
    enabled = bench_enabled(request.config)
    tasks, attempts = (TASKS, ATTEMPTS) if enabled else (2, 1)
    write_plain_tasks(tmp_path / "tasks", tasks)
    rounds = iter(range(1_000))

    def setup():
        return (), {"name": f"job-{next(rounds)}"}

    def job(name: str) -> Path:
        return run_job(
            tmp_path / "tasks",
            tmp_path / "jobs",
            tmp_path / "sandboxes",
            attempts=attempts,
            concurrency=CONCURRENCY,
            name=name,
        )

    before = cpu_seconds()
    job_dir = measure(benchmark, job, rounds=3 if enabled else 1, setup=setup)
    after = cpu_seconds()
    assert len(list(job_dir.glob("*/result.json"))) == tasks * attempts
    benchmark.group = "sandbox-job"
    benchmark.extra_info.update(
        label="harbor job, host sandbox",
        trials=tasks * attempts,
        concurrency=CONCURRENCY,
        per_trial_ms=round(benchmark.stats.stats.median * 1000 / (tasks * attempts), 1)
        if benchmark.stats
        else None,
        cpu_seconds=round(after[2] - before[2], 2),
    )


def test_environment_start_exec_stop(
    benchmark, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    require_sandbox_tools()
    count = 20 if bench_enabled(request.config) else 2
    (task,) = write_plain_tasks(tmp_path / "tasks", 1)
    phases: dict[str, list[float]] = {"start_ms": [], "exec_ms": [], "stop_ms": []}

    async def lives() -> None:
        for index in range(count):
            env = host_environment(task, tmp_path / f"trial-{index}", tmp_path / "sandboxes")
            marks = [time.perf_counter()]
            await env.start(force_build=False)
            marks.append(time.perf_counter())
            result = await env.exec("true")
            marks.append(time.perf_counter())
            await env.stop(delete=True)
            marks.append(time.perf_counter())
            assert result.return_code == 0
            for name, first, last in zip(phases, marks, marks[1:], strict=False):
                phases[name].append((last - first) * 1000)

    measure(benchmark, lambda: asyncio.run(lives()), rounds=3 if count > 2 else 1)
    benchmark.group = "sandbox-trial"
    benchmark.extra_info.update(
        label=f"{count} environments: start, exec true, stop",
        **{name: round(statistics.median(values), 1) for name, values in phases.items()},
    )
