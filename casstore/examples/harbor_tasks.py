"""Bash-only Harbor tasks casstore writes itself, to run real Harbor jobs in tests.

Each task runs with Harbor's ``oracle`` agent in any environment whose host has bash and the
coreutils (``casstore.sandbox:HostEnvironment`` in the tests); ``EXPECTED_REWARDS`` says what
its verifier writes. The tasks: a plain one, a multi-step one (Harbor's ``steps/``), one with a
``reward.json`` of several reward keys, one without internet whose solution starts a daemon
(``python3 -m http.server`` on the loopback) the verifier talks to (with bash's ``/dev/tcp``),
one whose agent and verifier are not root, one whose oracle outlives the agent timeout, and,
with ``probe_port``, three that try to reach a server on the host's loopback at that port (one
with internet, one with ``network_mode = "no-network"``, one with the deprecated
``allow_internet = false``): reward 1 when the connection succeeds.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "AGENT_UID",
    "EXPECTED_REWARDS",
    "PROBE_TASKS",
    "write_harbor_task",
    "write_harbor_tasks",
    "write_plain_tasks",
]

AGENT_UID = 4242
"""The numeric user the non-root task's agent runs as (its verifier runs as ``nobody``)."""

EXPECTED_REWARDS: dict[str, dict[str, float]] = {
    "plain": {"reward": 1.0},
    "multi-step": {"reward": 1.0},
    "multi-reward": {"reward": 1.0, "style": 0.5, "speed": 0.25},
    "offline-daemon": {"reward": 1.0},
    "non-root": {"reward": 1.0},
    "agent-timeout": {"reward": 0.0},
}
"""Task name → the rewards its verifier writes after the oracle (the timeout task's oracle is
cut short, so its verifier finds nothing: 0)."""

PROBE_TASKS: dict[str, float] = {
    "probe-online": 1.0,
    "probe-offline": 0.0,
    "probe-legacy-offline": 0.0,
}
"""Task name → its reward: whether it reached the host's loopback server."""

_TOML = """\
schema_version = "1.1"

[metadata]
category = "casstore-example"

[agent]
timeout_sec = {agent_timeout}
{agent_user}
[verifier]
timeout_sec = 60.0
{verifier_user}
[environment]
network_mode = "{network}"
"""

_DOCKERFILE = """\
FROM ubuntu:24.04
ENV GREETING=hello
WORKDIR /app
COPY seed.txt /app/seed.txt
"""

_REWARD = (
    "if {check}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > "
    "/logs/verifier/reward.txt; fi\n"
)


def _script(body: str) -> tuple[str, int]:
    return "#!/bin/bash\n" + body, 0o755


def _toml(
    agent_timeout: float = 60.0,
    network: str = "public",
    agent_user: str = "",
    verifier_user: str = "",
) -> str:
    return _TOML.format(
        agent_timeout=agent_timeout,
        network=network,
        agent_user=agent_user and f"user = {agent_user}\n",
        verifier_user=verifier_user and f"user = {verifier_user}\n",
    )


def _common(instruction: str) -> dict[str, tuple[str, int]]:
    return {
        "instruction.md": (instruction, 0o644),
        "environment/Dockerfile": (_DOCKERFILE, 0o644),
        "environment/seed.txt": ("seed\n", 0o644),
    }


def _plain() -> dict[str, tuple[str, int]]:
    return {
        **_common("Write `$GREETING world` into /app/answer.txt.\n"),
        "task.toml": (_toml(), 0o644),
        "solution/solve.sh": _script('echo "$GREETING world" > answer.txt\n'),
        "tests/test.sh": _script(
            _REWARD.format(
                check='[ "$(cat /app/answer.txt)" = "hello world" ] && '
                '[ "$(cat /app/seed.txt)" = seed ]'
            )
        ),
    }


def _multi_step() -> dict[str, tuple[str, int]]:
    files = {
        **_common("Two steps: see steps/.\n"),
        "task.toml": (
            _toml() + '\n[[steps]]\nname = "first"\n\n[[steps]]\nname = "second"\n',
            0o644,
        ),
        "steps/first/instruction.md": ("Write 1 into /app/step.txt.\n", 0o644),
        "steps/first/solution/solve.sh": _script("echo 1 > /app/step.txt\n"),
        "steps/first/tests/test.sh": _script(
            _REWARD.format(check='[ "$(cat /app/step.txt)" = 1 ]')
        ),
        "steps/second/instruction.md": ("Append 2 to /app/step.txt.\n", 0o644),
        "steps/second/solution/solve.sh": _script("echo 2 >> /app/step.txt\n"),
        "steps/second/tests/test.sh": _script(
            _REWARD.format(check='[ "$(tr -d "\\n" < /app/step.txt)" = 12 ]')
        ),
    }
    del files["instruction.md"]
    return files


def _multi_reward() -> dict[str, tuple[str, int]]:
    return {
        **_common("Write ok into /app/out.txt.\n"),
        "task.toml": (_toml(), 0o644),
        "solution/solve.sh": _script("echo ok > /app/out.txt\n"),
        "tests/test.sh": _script(
            'if [ "$(cat /app/out.txt)" = ok ]; then r=1; else r=0; fi\n'
            'printf \'{"reward": %s, "style": 0.5, "speed": 0.25}\\n\' "$r" '
            "> /logs/verifier/reward.json\n"
        ),
    }


def _offline_daemon() -> dict[str, tuple[str, int]]:
    serve = (
        "mkdir -p /srv/www && echo served > /srv/www/index.txt\n"
        "cd /srv/www && setsid nohup python3 -m http.server 8765 --bind 127.0.0.1 "
        "> /tmp/daemon.log 2>&1 < /dev/null &\n"
        "for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null && exit 0; "
        "sleep 0.1; done\nexit 1\n"
    )
    fetch = (
        "exec 3<>/dev/tcp/127.0.0.1/8765 || { echo 0 > /logs/verifier/reward.txt; exit 0; }\n"
        "printf 'GET /index.txt HTTP/1.0\\r\\n\\r\\n' >&3\nbody=$(cat <&3)\n"
        + _REWARD.format(check='[[ "$body" == *served* ]]')
    )
    return {
        **_common("Serve /srv/www on 127.0.0.1:8765 and leave the server running.\n"),
        "task.toml": (_toml(network="no-network"), 0o644),
        "solution/solve.sh": _script(serve),
        "tests/test.sh": _script(fetch),
    }


def _non_root() -> dict[str, tuple[str, int]]:
    solve = (
        "id -u > /logs/agent/uid.txt\n"
        "touch /usr/casstore-probe 2>/dev/null && echo wrote > /logs/agent/usr.txt\nexit 0\n"
    )
    check = (
        f'[ "$(cat /logs/agent/uid.txt)" = {AGENT_UID} ] && [ "$(id -un)" = nobody ] && '
        "[ ! -e /logs/agent/usr.txt ] && ! touch /etc/casstore-probe 2>/dev/null"
    )
    return {
        **_common("Record your uid in /logs/agent/uid.txt.\n"),
        "task.toml": (_toml(agent_user=str(AGENT_UID), verifier_user='"nobody"'), 0o644),
        "solution/solve.sh": _script(solve),
        "tests/test.sh": _script(_REWARD.format(check=check)),
    }


def _agent_timeout() -> dict[str, tuple[str, int]]:
    return {
        **_common("Take your time.\n"),
        "task.toml": (_toml(agent_timeout=1.0), 0o644),
        "solution/solve.sh": _script("sleep 30\necho done > /app/late.txt\n"),
        "tests/test.sh": _script(_REWARD.format(check="[ -e /app/late.txt ]")),
    }


def _probe(port: int, network: str) -> dict[str, tuple[str, int]]:
    check = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"
    toml = _toml(network=network)
    if network == "legacy":
        toml = toml.replace('network_mode = "legacy"', "allow_internet = false")
    return {
        **_common("Nothing to do.\n"),
        "task.toml": (toml, 0o644),
        "solution/solve.sh": _script("true\n"),
        "tests/test.sh": _script(_REWARD.format(check=check)),
    }


_BUILDERS = {
    "plain": _plain,
    "multi-step": _multi_step,
    "multi-reward": _multi_reward,
    "offline-daemon": _offline_daemon,
    "non-root": _non_root,
    "agent-timeout": _agent_timeout,
}


def write_harbor_task(dest: Path, name: str, files: dict[str, tuple[str, int]]) -> Path:
    """Write ``files`` (relative path → (text, mode)) as the task ``dest/name``; its path."""
    task = dest / name
    for relative, (text, mode) in sorted(files.items()):
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, mode)
    return task


def write_harbor_tasks(
    dest: Path, names: list[str] | None = None, probe_port: int | None = None
) -> list[Path]:
    """Write the tasks ``names`` (default: every one of ``EXPECTED_REWARDS``) into the
    dataset directory ``dest``, plus the three probe tasks when ``probe_port`` is given; their
    paths in that order. KeyError for an unknown name."""
    dest.mkdir(parents=True, exist_ok=True)
    written = [write_harbor_task(dest, name, _BUILDERS[name]()) for name in names or _BUILDERS]
    if probe_port is not None:
        written.append(write_harbor_task(dest, "probe-online", _probe(probe_port, "public")))
        written.append(write_harbor_task(dest, "probe-offline", _probe(probe_port, "no-network")))
        legacy = _probe(probe_port, "legacy")
        written.append(write_harbor_task(dest, "probe-legacy-offline", legacy))
    return written


def write_plain_tasks(dest: Path, count: int) -> list[Path]:
    """Write ``count`` copies of the plain task (``plain-000``, ``plain-001``, ...; reward 1
    each) into the dataset directory ``dest``: the benchmarks' taskset."""
    dest.mkdir(parents=True, exist_ok=True)
    return [write_harbor_task(dest, f"plain-{index:03d}", _plain()) for index in range(count)]
