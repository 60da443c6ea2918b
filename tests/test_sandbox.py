"""casstore.sandbox:HostEnvironment under Harbor's own Job (oracle agent, no mocks of Harbor).

One job runs every example task of ``casstore.examples.harbor_tasks`` plus the two network
probes against a server on the host's loopback; the tests read Harbor's result.json files.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from casstore.examples.harbor_tasks import (
    AGENT_UID,
    EXPECTED_REWARDS,
    PROBE_TASKS,
    write_harbor_tasks,
)
from tests.sandbox_helpers import (
    IMPORT_PATH,
    require_sandbox_tools,
    run_job,
    sandbox_processes,
    trial_results,
)


@pytest.fixture(scope="module")
def loopback_server() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1 accepting (and closing) connections: its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, loopback_server: int) -> dict[str, Any]:
    """The job over every example task: its directory, results and sandbox directory."""
    require_sandbox_tools()
    base = tmp_path_factory.mktemp("sandbox-job")
    write_harbor_tasks(base / "tasks", probe_port=loopback_server)
    sandbox_dir = base / "sandboxes"
    job_dir = run_job(base / "tasks", base / "jobs", sandbox_dir)
    return {"dir": job_dir, "results": trial_results(job_dir), "sandbox_dir": sandbox_dir}


def _only(job: dict[str, Any], task: str) -> dict[str, Any]:
    (result,) = job["results"][task]
    return result


def test_every_task_ran_once(job: dict[str, Any]) -> None:
    assert sorted(job["results"]) == sorted([*EXPECTED_REWARDS, *PROBE_TASKS])
    assert all(len(trials) == 1 for trials in job["results"].values())


@pytest.mark.parametrize("task", sorted(EXPECTED_REWARDS))
def test_rewards_are_exactly_what_each_verifier_writes(job: dict[str, Any], task: str) -> None:
    result = _only(job, task)
    assert result["verifier_result"]["rewards"] == EXPECTED_REWARDS[task]
    if task != "agent-timeout":
        assert result["exception_info"] is None


def test_multi_step_task_scores_each_step(job: dict[str, Any]) -> None:
    steps = _only(job, "multi-step")["step_results"]
    assert [step["step_name"] for step in steps] == ["first", "second"]
    assert [step["verifier_result"]["rewards"] for step in steps] == [{"reward": 1.0}] * 2


def test_agent_timeout_is_recorded_as_harbor_records_it(job: dict[str, Any]) -> None:
    """The oracle sleeps 30 s under a 1 s agent timeout: Harbor's AgentTimeoutError, then the
    verifier still runs (and finds no late file: the solution was killed)."""
    result = _only(job, "agent-timeout")
    info = result["exception_info"]
    assert info["exception_type"] == "AgentTimeoutError"
    assert info["exception_message"] == "Agent execution timed out after 1.0 seconds"
    assert result["verifier_result"]["rewards"] == {"reward": 0.0}


def test_network_is_unshared_without_internet(job: dict[str, Any]) -> None:
    """The host's loopback server is reachable from a public task only; a no-network task
    still has its own loopback (the daemon task's verifier talked to the solution's server)."""
    rewards = {task: _only(job, task)["verifier_result"]["rewards"] for task in PROBE_TASKS}
    assert rewards == {task: {"reward": value} for task, value in PROBE_TASKS.items()}
    assert _only(job, "offline-daemon")["verifier_result"]["rewards"] == {"reward": 1.0}


def test_non_root_agent_runs_as_its_uid(job: dict[str, Any]) -> None:
    trial = job["dir"] / _only(job, "non-root")["trial_name"]
    assert (trial / "agent" / "uid.txt").read_text() == f"{AGENT_UID}\n"
    assert not (trial / "agent" / "usr.txt").exists()


def test_no_process_of_the_job_is_left(job: dict[str, Any]) -> None:
    """The offline daemon (detached with setsid) and the timed-out sleep are gone, and every
    private root was deleted."""
    assert sandbox_processes(job["sandbox_dir"]) == []
    assert list(job["sandbox_dir"].iterdir()) == []


def test_harbor_cli_runs_tasks_with_the_import_path(tmp_path: Path) -> None:
    """``harbor run -e casstore.sandbox:HostEnvironment`` (Harbor's own CLI, the same
    ``EnvironmentConfig.import_path``) with environment kwargs through ``--ek``."""
    require_sandbox_tools()
    write_harbor_tasks(tmp_path / "tasks", ["plain", "multi-reward"])
    harbor = Path(sys.executable).with_name("harbor")
    command = [str(harbor), "run", "-p", "tasks", "-a", "oracle", "-e", IMPORT_PATH]
    command += [
        "-o",
        "jobs",
        "--job-name",
        "cli",
        "--ek",
        f"sandbox_dir={tmp_path / 'sb'}",
        "--quiet",
    ]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    results = trial_results(tmp_path / "jobs" / "cli")
    rewards = {task: trials[0]["verifier_result"]["rewards"] for task, trials in results.items()}
    assert rewards == {task: EXPECTED_REWARDS[task] for task in ("plain", "multi-reward")}
    config = json.loads((tmp_path / "jobs" / "cli" / "config.json").read_bytes())
    assert config["environment"]["import_path"] == IMPORT_PATH
    assert list((tmp_path / "sb").iterdir()) == []


def test_an_environment_it_cannot_honour_fails_that_trial_only(tmp_path: Path) -> None:
    """A compose environment and a multi-stage Dockerfile: Harbor records the SandboxError on
    their trials (naming the file and line), the job goes on and the plain task scores."""
    require_sandbox_tools()
    (plain,) = write_harbor_tasks(tmp_path / "tasks", ["plain"])
    for name, file, text in (
        ("compose", "docker-compose.yaml", "services: {}\n"),
        ("stages", "Dockerfile", "FROM a AS build\nFROM b\n"),
    ):
        shutil.copytree(plain, tmp_path / "tasks" / name)
        (tmp_path / "tasks" / name / "environment" / file).write_text(text)
    job_dir = run_job(tmp_path / "tasks", tmp_path / "jobs", tmp_path / "sb")
    results = {task: trials[0] for task, trials in trial_results(job_dir).items()}
    assert results["plain"]["verifier_result"]["rewards"] == {"reward": 1.0}
    compose = results["compose"]["exception_info"]
    assert compose["exception_type"] == "SandboxError"
    assert compose["exception_message"].endswith(
        "compose/environment/docker-compose.yaml: compose services are not supported"
    )
    stages = results["stages"]["exception_info"]
    assert stages["exception_type"] == "SandboxError"
    assert stages["exception_message"].endswith(
        "stages/environment/Dockerfile:2: multi-stage builds are not supported"
    )
    assert sandbox_processes(tmp_path / "sb") == []


@pytest.mark.realdata
def test_a_real_multi_step_task_runs_whole(fixtures_dir: Path, tmp_path: Path) -> None:
    """harbor-cookbook/multi-step (step workdir uploads, healthchecks, step verifier env,
    per-step artifacts), its apt-get RUN skipped: every step scores 1, as with Docker."""
    require_sandbox_tools()
    shutil.copytree(fixtures_dir / "tasks/harbor-cookbook/multi-step", tmp_path / "tasks/ms")
    job_dir = run_job(tmp_path / "tasks", tmp_path / "jobs", tmp_path / "sb", dockerfile_run="skip")
    ((result,),) = trial_results(job_dir).values()
    assert result["exception_info"] is None
    steps = [(step["step_name"], step["verifier_result"]) for step in result["step_results"]]
    assert steps == [
        (name, {"rewards": {"reward": 1.0}}) for name in ("scaffold", "implement", "document")
    ]
    artifacts = job_dir / result["trial_name"] / "steps"
    assert (artifacts / "scaffold/artifacts/app/greet.sh").is_file()
    assert not (artifacts / "scaffold/artifacts/app/README.md").exists()
    assert (artifacts / "document/artifacts/app/README.md").is_file()
    assert sandbox_processes(tmp_path / "sb") == []


_KILLED_JOB = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from casstore.examples.harbor_tasks import write_harbor_task
from tests.sandbox_helpers import run_job
base = Path(sys.argv[1])
solve = "#!/bin/bash\\nsetsid sleep 300 >/dev/null 2>&1 </dev/null &\\nsleep 300\\n"
write_harbor_task(base / "tasks", "slow", {
    "task.toml": ("[agent]\\ntimeout_sec = 600.0\\n", 0o644),
    "instruction.md": ("Wait.\\n", 0o644),
    "environment/Dockerfile": ("FROM a\\n", 0o644),
    "solution/solve.sh": (solve, 0o755),
    "tests/test.sh": ("#!/bin/bash\\n", 0o755),
})
run_job(base / "tasks", base / "jobs", base / "sb")
"""


def test_a_killed_harbor_takes_its_sandboxes_with_it(tmp_path: Path) -> None:
    """SIGKILL to the process running Harbor (no stop called): bwrap's --die-with-parent
    ends the sandbox, the solution's detached daemon included."""
    require_sandbox_tools()
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    script = [sys.executable, "-c", _KILLED_JOB, str(tmp_path), str(root)]
    process = subprocess.Popen(
        script, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(1200):  # until the two sleeps run inside (at most 120 s)
            inside = sandbox_processes(tmp_path / "sb")
            if len(inside) >= 4:  # bwrap's sleeper, bash, the two sleeps
                break
            time.sleep(0.1)
        assert len(inside) >= 4, inside
    finally:
        process.kill()
        process.wait()
    for _ in range(100):
        left = sandbox_processes(tmp_path / "sb")
        if not left:
            break
        time.sleep(0.05)
    assert left == []
