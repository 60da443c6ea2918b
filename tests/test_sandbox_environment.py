"""casstore.sandbox:HostEnvironment driven directly (start, exec, files, stop), as a Trial does.

Every test starts a real bubblewrap sandbox; none mocks Harbor or the kernel.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from casstore.errors import SandboxError
from casstore.examples.harbor_tasks import write_harbor_task
from tests.sandbox_helpers import host_environment, require_sandbox_tools, sandbox_processes

_TOML = """\
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
network_mode = "{net}"
"""
_DOCKERFILE = """\
FROM debian:bookworm
ARG BASE=/srv
ENV APP_HOME=${BASE}/app LEVEL=3
ENV LEGACY old style value
WORKDIR $APP_HOME
COPY --chown=worker --chmod=0750 data/ ./data/
COPY note.txt /srv/note.txt
RUN echo "built $LEVEL in $(pwd) as $(id -un)" > /srv/built.txt
USER worker
RUN id -un > /tmp/run-user.txt
EXPOSE 80
CMD ["sleep", "1"]
"""


def _task(tmp_path: Path, dockerfile: str = _DOCKERFILE, net: str = "public") -> Path:
    return write_harbor_task(
        tmp_path / "tasks",
        "direct",
        {
            "task.toml": (_TOML.format(net=net), 0o644),
            "instruction.md": ("Nothing.\n", 0o644),
            "environment/Dockerfile": (dockerfile, 0o644),
            "environment/data/a.txt": ("alpha\n", 0o644),
            "environment/data/sub/b.txt": ("beta\n", 0o600),
            "environment/note.txt": ("note\n", 0o644),
            "tests/test.sh": ("#!/bin/bash\n", 0o755),
        },
    )


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A started sandbox of the Dockerfile above, driven on one event loop."""
    require_sandbox_tools()
    loop = asyncio.new_event_loop()
    env = host_environment(_task(tmp_path), tmp_path / "trial", tmp_path / "sandboxes")
    loop.run_until_complete(env.start(force_build=False))
    try:
        yield {"env": env, "loop": loop, "tmp": tmp_path}
    finally:
        loop.run_until_complete(env.stop(delete=True))
        loop.close()


def _exec(box: dict[str, Any], command: str, **kwargs: Any) -> Any:
    return box["loop"].run_until_complete(box["env"].exec(command, **kwargs))


def test_dockerfile_env_workdir_copy_and_run_are_honoured(sandbox: dict[str, Any]) -> None:
    result = _exec(sandbox, 'echo "$APP_HOME|$LEVEL|$LEGACY|$(pwd)"; cat /srv/built.txt')
    assert result.stdout == "/srv/app|3|old style value|/srv/app\nbuilt 3 in /srv/app as root\n"
    assert result.return_code == 0
    listing = _exec(sandbox, "stat -c '%U %a %n' data data/a.txt data/sub/b.txt /srv/note.txt")
    assert listing.stdout.splitlines() == [
        "worker 750 data",
        "worker 750 data/a.txt",
        "worker 750 data/sub/b.txt",
        "root 644 /srv/note.txt",
    ]
    assert _exec(sandbox, "cat /tmp/run-user.txt").stdout == "worker\n"


def test_default_user_is_the_dockerfile_user_and_exec_takes_user_cwd_env(
    sandbox: dict[str, Any],
) -> None:
    assert _exec(sandbox, "id -un").stdout == "worker\n"
    uid = int(_exec(sandbox, "id -u").stdout)
    assert uid >= 1000
    assert _exec(sandbox, "id -u", user="root").stdout == "0\n"
    assert _exec(sandbox, "id -u; id -un 2>&1", user=4321).stdout.startswith("4321\n")
    result = _exec(sandbox, 'pwd; echo "$X $HOME"', cwd="/tmp", env={"X": "y"}, user="nobody")
    assert result.stdout == "/tmp\ny /nonexistent\n"
    assert _exec(sandbox, "exit 3").return_code == 3


def test_host_environment_is_not_leaked(sandbox: dict[str, Any], monkeypatch: Any) -> None:
    monkeypatch.setenv("CASSTORE_SECRET_PROBE", "leak")
    keys = set(_exec(sandbox, "env -0 | tr '\\0' '\\n' | cut -d= -f1").stdout.split())
    assert "CASSTORE_SECRET_PROBE" not in keys
    assert {"PATH", "HOME", "APP_HOME", "LEVEL", "CASSTORE_SANDBOX"} <= keys


def test_outside_the_binds_nothing_is_writable(sandbox: dict[str, Any]) -> None:
    """As root: the host trees are read-only and cannot be remounted (no CAP_SYS_ADMIN);
    what the sandbox writes in its private root never reaches the host's paths."""
    probe = "for d in /usr /etc /opt /bin; do touch $d/casstore-probe 2>/dev/null && echo $d; done"
    assert _exec(sandbox, probe, user="root").stdout is None
    remount = _exec(sandbox, "mount -o remount,rw /usr 2>&1", user="root")
    assert remount.return_code != 0
    assert _exec(sandbox, "echo x > /tmp/mine && echo y > /root/mine", user="root").return_code == 0
    assert not Path("/root/mine").exists()
    assert not any(Path(d, "casstore-probe").exists() for d in ("/usr", "/etc", "/opt"))
    mknod = _exec(sandbox, "mknod /tmp/disk b 8 0 2>&1", user="root")
    assert mknod.return_code != 0


def test_log_binds_are_the_trial_directories(sandbox: dict[str, Any]) -> None:
    _exec(sandbox, "echo a > /logs/agent/a.txt; echo v > /logs/verifier/v.txt", user="nobody")
    trial = sandbox["tmp"] / "trial"
    assert (trial / "agent" / "a.txt").read_text() == "a\n"
    assert (trial / "verifier" / "v.txt").read_text() == "v\n"


def test_uploads_and_downloads_round_trip(sandbox: dict[str, Any], tmp_path: Path) -> None:
    env, loop = sandbox["env"], sandbox["loop"]
    source = tmp_path / "up"
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "f.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(source / "deep" / "f.sh", 0o755)
    (source / "g.txt").write_bytes(b"\x00\xffbytes")
    loop.run_until_complete(env.upload_dir(source, "/opt2/x"))
    loop.run_until_complete(env.upload_file(source / "g.txt", "/new/dir/g.bin"))
    assert _exec(sandbox, "/opt2/x/deep/f.sh; stat -c %a /opt2/x/deep/f.sh").stdout == "hi\n755\n"
    back = tmp_path / "down"
    loop.run_until_complete(env.download_dir("/opt2/x", back))
    loop.run_until_complete(env.download_file("/new/dir/g.bin", back / "g.copy"))
    assert (back / "deep" / "f.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert (back / "g.txt").read_bytes() == (back / "g.copy").read_bytes() == b"\x00\xffbytes"
    _exec(sandbox, "ln -s /etc/passwd /opt2/x/abs", user="root")
    with pytest.raises(SandboxError, match=r"/opt2/x: not copied out: .*abs"):
        loop.run_until_complete(env.download_dir("/opt2/x", tmp_path / "refused"))
    assert _exec(sandbox, 'echo "$HOSTNAME $(hostname)"').stdout == "direct direct\n"
    with pytest.raises(SandboxError, match="/no/such/file"):
        loop.run_until_complete(env.download_file("/no/such/file", back / "missing"))
    with pytest.raises(SandboxError, match="/usr/x"):
        loop.run_until_complete(env.upload_file(source / "g.txt", "/usr/x/g.txt"))


def test_upload_does_not_follow_a_link_the_sandbox_planted(
    sandbox: dict[str, Any], tmp_path: Path
) -> None:
    """A link to a host path inside the private root resolves inside the sandbox."""
    outside = tmp_path / "host-target"
    outside.mkdir()
    _exec(sandbox, f"ln -s {outside} /tmp/escape", user="root")
    (tmp_path / "f").write_text("x")
    with pytest.raises(SandboxError):
        sandbox["loop"].run_until_complete(
            sandbox["env"].upload_file(tmp_path / "f", "/tmp/escape/f")
        )
    assert list(outside.iterdir()) == []


def test_timeout_kills_the_command_and_raises(sandbox: dict[str, Any]) -> None:
    with pytest.raises(TimeoutError, match="timed out after 1 seconds"):
        _exec(sandbox, "sleep 60; echo late > /tmp/late", timeout_sec=1)
    assert _exec(sandbox, "ps -eo args | grep -c '^sleep 60' || true").stdout == "0\n"
    assert _exec(sandbox, "test -e /tmp/late").return_code == 1


def test_stop_kills_every_process_even_detached_ones(tmp_path: Path) -> None:
    require_sandbox_tools()
    env = host_environment(_task(tmp_path), tmp_path / "trial", tmp_path / "sandboxes")

    async def scenario() -> tuple[str, list[int]]:
        await env.start(force_build=False)
        await env.exec("setsid nohup sleep 1000 >/dev/null 2>&1 < /dev/null &", user="root")
        await env.exec("(sleep 1000 &) ; disown -a", user="worker")
        # the detached shells exec their sleep a moment later: wait for it (at most 10 s)
        running = await env.exec(
            "for _ in $(seq 100); do [ $(pgrep -c -x sleep) = 3 ] && break; sleep 0.1; done;"
            " pgrep -c -x sleep"
        )
        alive = sandbox_processes(tmp_path / "sandboxes")
        await env.stop(delete=True)
        assert alive
        return running.stdout, sandbox_processes(tmp_path / "sandboxes")

    count, left = _run(scenario())
    assert count == "3\n"  # the two left behind and bwrap's own sleeper
    assert left == []
    assert list((tmp_path / "sandboxes").iterdir()) == []


def test_no_network_sandbox_has_only_loopback(tmp_path: Path) -> None:
    require_sandbox_tools()
    from harbor.models.task.config import NetworkMode, NetworkPolicy

    env = host_environment(
        _task(tmp_path, net="no-network"),
        tmp_path / "trial",
        tmp_path / "sandboxes",
        network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK),
    )

    async def scenario() -> str:
        await env.start(force_build=False)
        try:
            result = await env.exec("ls /sys/class/net 2>/dev/null || cat /proc/net/dev")
            return result.stdout or ""
        finally:
            await env.stop(delete=True)

    names = {line.split(":")[0].strip() for line in _run(scenario()).splitlines() if ":" in line}
    assert names == {"lo"}


@pytest.mark.parametrize(
    ("dockerfile", "line", "rule"),
    [
        ("FROM a\nRUN exit 7\n", 2, "RUN exited with 7"),
        ("FROM a\nCOPY missing.txt /x\n", 2, "not found in the build context"),
        ("FROM a\nCOPY note.txt /etc/note.txt\n", 2, "inside a read-only host tree"),
    ],
)
def test_a_dockerfile_step_that_fails_fails_start(
    tmp_path: Path, dockerfile: str, line: int, rule: str
) -> None:
    require_sandbox_tools()
    env = host_environment(_task(tmp_path, dockerfile), tmp_path / "trial", tmp_path / "sb")

    async def scenario() -> None:
        try:
            await env.start(force_build=False)
        finally:
            await env.stop(delete=True)

    with pytest.raises(SandboxError, match=rule) as caught:
        _run(scenario())
    assert f"Dockerfile:{line}" in str(caught.value)
    assert sandbox_processes(tmp_path / "sb") == []


def test_skipping_run_lines(tmp_path: Path) -> None:
    require_sandbox_tools()
    task = _task(tmp_path, "FROM a\nRUN exit 7\nWORKDIR /w\n")
    env = host_environment(task, tmp_path / "trial", tmp_path / "sb", dockerfile_run="skip")

    async def scenario() -> str | None:
        await env.start(force_build=False)
        try:
            return (await env.exec("pwd")).stdout
        finally:
            await env.stop(delete=True)

    assert _run(scenario()) == "/w\n"


_ROOT_ONLY = "FROM a\nENV LEVEL=1\nWORKDIR /w\nCOPY note.txt ./\n"


async def _root_only_scenario(env: Any, outside: Path) -> dict[str, Any]:
    """Start, look around as root, try another user, move a file both ways, stop."""
    await env.start(force_build=False)
    try:
        seen = await env.exec("id -u; cat /w/note.txt; cat /proc/self/uid_map | wc -l")
        try:
            await env.exec("id -u", user=1000)
            other = "ran"
        except SandboxError as error:
            other = str(error)
        await env.upload_file(outside / "up.txt", "/w/up.txt")
        await env.download_file("/w/up.txt", outside / "down.txt")
        await env.exec("setsid sleep 1000 > /dev/null 2>&1 < /dev/null &")
    finally:
        await env.stop(delete=True)
    return {"seen": seen.stdout, "other": other, "down": (outside / "down.txt").read_text()}


def test_own_user_namespace_has_only_root(tmp_path: Path) -> None:
    """``user_namespace=True`` (what a caller without root gets): root inside, mapped; any
    other user refused by name; files and stop work as without it."""
    require_sandbox_tools()
    task = _task(tmp_path, _ROOT_ONLY)
    env = host_environment(task, tmp_path / "trial", tmp_path / "sb", user_namespace=True)
    (tmp_path / "up.txt").write_text("up\n")
    seen = _run(_root_only_scenario(env, tmp_path))
    assert seen["seen"] == "0\nnote\n1\n"
    assert seen["other"] == (
        "user 1000: only root exists in a sandbox with its own user namespace (no host root)"
    )
    assert seen["down"] == "up\n"
    assert sandbox_processes(tmp_path / "sb") == []


def _unprivileged(base: str, queue: Any) -> None:
    """In a child process: run the scenario once as root (every module it uses loaded: the
    interpreter's own files may be unreadable to uid 65534), then become uid/gid 65534 and
    run it as that caller."""
    import json

    root = Path(base)
    try:
        warm = host_environment(root / "tasks" / "direct", root / "warm", root / "sb-warm")
        asyncio.run(_root_only_scenario(warm, root))
        for path in [root, *root.rglob("*")]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        os.environ["HOME"] = base
        env = host_environment(root / "tasks" / "direct", root / "trial", root / "sb")
        result = asyncio.run(_root_only_scenario(env, root))
        result["left"] = sandbox_processes(root / "sb")
        queue.put(json.dumps(result))
    except BaseException as error:  # the parent reports it
        queue.put(json.dumps({"error": repr(error)}))


def test_a_caller_without_root_gets_a_root_only_sandbox(tmp_path: Path) -> None:
    """A real unprivileged caller (uid 65534, no capability): bwrap makes the user namespace
    itself, and the same scenario gives the same answers."""
    import json
    import multiprocessing
    import shutil
    import tempfile

    require_sandbox_tools()
    base = Path(tempfile.mkdtemp(prefix="casstore-unprivileged-", dir="/tmp"))
    try:
        os.chmod(base, 0o777)
        _task(base, _ROOT_ONLY)
        (base / "up.txt").write_text("up\n")
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        child = context.Process(target=_unprivileged, args=(str(base), queue))
        child.start()
        answer = json.loads(queue.get(timeout=120))
        child.join(timeout=30)
        assert "error" not in answer, answer
        assert answer["seen"] == "0\nnote\n1\n"
        assert answer["other"].startswith("user 1000: only root exists")
        assert (answer["down"], answer["left"]) == ("up\n", [])
        assert list((base / "sb").iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_start_that_fails_leaves_nothing(tmp_path: Path) -> None:
    """A bind whose source is missing: bwrap's own message in the SandboxError, no process
    and no work directory left."""
    require_sandbox_tools()
    env = host_environment(_task(tmp_path, _ROOT_ONLY), tmp_path / "trial", tmp_path / "sb")
    env._mounts.append({"type": "bind", "source": str(tmp_path / "gone"), "target": "/data"})
    with pytest.raises(SandboxError, match=r"bubblewrap did not start: .*gone"):
        _run(env.start(force_build=False))
    assert list((tmp_path / "sb").iterdir()) == []
    assert sandbox_processes(tmp_path / "sb") == []


@pytest.mark.parametrize(
    ("mount", "rule"),
    [
        ({"type": "volume", "source": "v", "target": "/v"}, "only bind mounts"),
        ({"type": "bind", "source": "/tmp", "target": "/usr/share/x"}, "outside the host trees"),
        ({"type": "bind", "source": "/tmp", "target": "rel"}, "must be absolute"),
    ],
)
def test_mounts_it_cannot_make_are_refused(tmp_path: Path, mount: dict, rule: str) -> None:
    require_sandbox_tools()
    env = host_environment(_task(tmp_path, _ROOT_ONLY), tmp_path / "trial", tmp_path / "sb")
    env._mounts.append(mount)
    with pytest.raises(SandboxError, match=rule):
        _run(env.start(force_build=False))
    assert list((tmp_path / "sb").iterdir()) == []


def test_a_bad_environment_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="dockerfile_run: 'maybe': use 'run' or 'skip'"):
        host_environment(
            _task(tmp_path), tmp_path / "trial", tmp_path / "sb", dockerfile_run="maybe"
        )


def test_output_streams_to_harbor_callbacks(sandbox: dict[str, Any]) -> None:
    """Harbor's ``scoped_output_callback`` sees the output while the command runs."""
    chunks: list[tuple[str, str]] = []

    async def collect(text: str, stream: str) -> None:
        chunks.append((text, stream))

    with sandbox["env"].scoped_output_callback(collect):
        result = _exec(sandbox, "echo first; sleep 0.3; echo second >&2")
    assert result.stdout == "first\nsecond\n"
    assert "".join(text for text, _ in chunks) == "first\nsecond\n"
    assert len(chunks) >= 2 and {stream for _, stream in chunks} == {"stdout"}


def test_a_prebuilt_image_task_gets_its_environment_files_in_the_workdir(tmp_path: Path) -> None:
    """No Dockerfile, ``docker_image`` set: the image is the host; Harbor's rule uploads the
    environment directory into the workdir."""
    require_sandbox_tools()
    task = write_harbor_task(
        tmp_path / "tasks",
        "prebuilt",
        {
            "task.toml": (
                '[environment]\ndocker_image = "ubuntu:24.04"\nworkdir = "/work"\n',
                0o644,
            ),
            "instruction.md": ("Nothing.\n", 0o644),
            "environment/data.txt": ("data\n", 0o644),
            "tests/test.sh": ("#!/bin/bash\n", 0o755),
        },
    )
    env = host_environment(task, tmp_path / "trial", tmp_path / "sb")

    async def scenario() -> str | None:
        await env.start(force_build=False)
        try:
            return (await env.exec("pwd; cat data.txt")).stdout
        finally:
            await env.stop(delete=True)

    assert _run(scenario()) == "/work\ndata\n"


def test_a_network_change_between_phases_is_refused_at_start(tmp_path: Path) -> None:
    """A public agent phase with a no-network verifier phase needs a network switch the
    sandbox cannot make: refused before anything runs (Harbor would fail at verification)."""
    require_sandbox_tools()
    from harbor.models.task.config import NetworkMode, NetworkPolicy

    env = host_environment(
        _task(tmp_path),
        tmp_path / "trial",
        tmp_path / "sb",
        phase_network_policies=[NetworkPolicy(network_mode=NetworkMode.NO_NETWORK)],
    )
    with pytest.raises(SandboxError, match="cannot change its network between"):
        _run(env.start(force_build=False))
    assert not (tmp_path / "sb").exists() or list((tmp_path / "sb").iterdir()) == []


def test_user_namespace_takes_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="user_namespace: 'no': use true or false"):
        host_environment(_task(tmp_path), tmp_path / "trial", tmp_path / "sb", user_namespace="no")


def test_the_entrypoint_starts_detached_with_sleep_infinity(tmp_path: Path) -> None:
    """An entrypoint that starts a service then runs its arguments, as Docker runs it under
    Harbor's compose command: the service answers, and stop ends both."""
    require_sandbox_tools()
    dockerfile = (
        'FROM a\nWORKDIR /w\nCOPY note.txt /entry.sh\nENTRYPOINT ["/bin/bash", "/entry.sh"]\n'
    )
    task = _task(tmp_path, dockerfile)
    (task / "environment" / "note.txt").write_text(
        'echo "started in $(pwd) with $*" > /tmp/entry-ran\nexec "$@"\n'
    )
    env = host_environment(task, tmp_path / "trial", tmp_path / "sb")

    async def scenario() -> tuple[str | None, list[int]]:
        await env.start(force_build=False)
        try:
            for _ in range(100):
                seen = await env.exec(
                    "cat /tmp/entry-ran 2>/dev/null && pgrep -c -f '^sleep infinity'"
                )
                if seen.return_code == 0:
                    break
                await asyncio.sleep(0.05)
            alive = sandbox_processes(tmp_path / "sb")
        finally:
            await env.stop(delete=True)
        return seen.stdout, alive

    seen, alive = _run(scenario())
    assert seen == "started in /w with sleep infinity\n1\n"
    assert alive
    assert sandbox_processes(tmp_path / "sb") == []
