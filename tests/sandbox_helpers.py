"""Running real Harbor jobs on ``casstore.sandbox:HostEnvironment`` (tests and benchmarks).

``require_sandbox_tools`` is the gate: without bwrap, nsenter or setpriv (or without root) a
sandbox test is skipped with the reason, and fails under ``CASSTORE_REQUIRE_REALDATA=1``
(set by .ci/run, which installs bubblewrap), as tests/conftest.py does for real data.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

IMPORT_PATH = "casstore.sandbox:HostEnvironment"
REQUIRED = os.environ.get("CASSTORE_REQUIRE_REALDATA") == "1"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import


def require_sandbox_tools() -> None:
    """Skip (fail under CASSTORE_REQUIRE_REALDATA=1) when the sandbox cannot run here."""
    missing = [tool for tool in ("bwrap", "nsenter", "setpriv") if not shutil.which(tool)]
    reason = f"sandbox tools missing: {', '.join(missing)}" if missing else None
    if reason is None and os.geteuid() != 0:
        reason = "the host sandbox runs as root only"
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"CASSTORE_REQUIRE_REALDATA=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def run_job(
    tasks: Path,
    jobs_dir: Path,
    sandbox_dir: Path,
    *,
    attempts: int = 1,
    concurrency: int = 4,
    name: str = "job",
    **env_kwargs: Any,
) -> Path:
    """Run Harbor's own Job (oracle agent, the host sandbox with ``env_kwargs``) over the
    dataset ``tasks``; the job directory."""
    from harbor.job import Job
    from harbor.models.job.config import DatasetConfig, JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig

    config = JobConfig(
        job_name=name,
        jobs_dir=jobs_dir,
        n_attempts=attempts,
        n_concurrent_trials=concurrency,
        quiet=True,
        agents=[AgentConfig(name="oracle")],
        datasets=[DatasetConfig(path=tasks)],
        environment=EnvironmentConfig(
            import_path=IMPORT_PATH, kwargs={"sandbox_dir": str(sandbox_dir), **env_kwargs}
        ),
    )

    async def main() -> None:
        job = await Job.create(config)
        await job.run()

    asyncio.run(main())
    return jobs_dir / name


def trial_results(job_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Task name → the ``result.json`` of each of its trials in the job."""
    found: dict[str, list[dict[str, Any]]] = {}
    for result in sorted(job_dir.glob("*/result.json")):
        record = json.loads(result.read_bytes())
        found.setdefault(record["task_name"], []).append(record)
    return found


def _host_forms(path: Path) -> set[str]:
    """How ``path`` can appear as a mount's root in /proc/*/mountinfo (relative to the file
    system holding it, for each mount of ours it lies under)."""
    forms = {str(path)}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        root, point = fields[3], fields[4]
        if path.is_relative_to(point):
            forms.add(str(Path(root) / path.relative_to(point)))
    return forms


def sandbox_processes(sandbox_dir: Path) -> list[int]:
    """Pids of live processes whose root is a sandbox made in ``sandbox_dir`` (the source of
    their ``/`` mount, in /proc/PID/mountinfo, lies there): bwrap's PID 1 and whatever
    entered with ``nsenter --root``, and no other job's (other directories). A zombie holds
    nothing and has no mounts to read."""
    forms = tuple(f"{form.rstrip('/')}/" for form in _host_forms(sandbox_dir))
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            mounts = Path(f"/proc/{entry.name}/mountinfo").read_text()
        except OSError:
            continue
        for line in mounts.splitlines():
            fields = line.split()
            if fields[4] == "/" and fields[3].startswith(forms):
                found.append(int(entry.name))
                break
    return found


def host_environment(task_dir: Path, trial_dir: Path, sandbox_dir: Path, **kwargs: Any) -> Any:
    """A HostEnvironment for the task at ``task_dir`` outside any trial, with Harbor's three
    log binds from ``trial_dir`` (what a Trial passes); ``kwargs`` go to the environment."""
    from harbor.models.task.task import Task
    from harbor.models.trial.paths import TrialPaths

    from casstore.sandbox import HostEnvironment

    task = Task(task_dir)
    paths = TrialPaths(trial_dir)
    paths.mkdir()
    mounts = [
        {"type": "bind", "source": str(source.resolve()), "target": f"/logs/{name}"}
        for name, source in (
            ("agent", paths.agent_dir),
            ("verifier", paths.verifier_dir),
            ("artifacts", paths.artifacts_dir),
        )
    ]
    return HostEnvironment(
        environment_dir=task.paths.environment_dir,
        environment_name=task.short_name,
        session_id=f"{task_dir.name}__test__env",
        trial_paths=paths,
        task_env_config=task.config.environment,
        mounts=mounts,
        sandbox_dir=str(sandbox_dir),
        **kwargs,
    )
