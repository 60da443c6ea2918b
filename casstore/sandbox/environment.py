"""``HostEnvironment``: Harbor's environment interface on a bubblewrap sandbox, no Docker.

Loaded by Harbor through ``EnvironmentConfig.import_path = "casstore.sandbox:HostEnvironment"``
(``harbor run -e casstore.sandbox:HostEnvironment``). One sandbox per environment (trial):

- a private writable root under ``sandbox_dir`` (a temporary directory by default), with the
  host's ``/usr``, ``/etc`` and ``/opt`` (and ``/bin``, ``/lib*``, ``/sbin``) read-only;
- Harbor's bind mounts (``/logs/agent``, ``/logs/verifier``, ``/logs/artifacts`` from the
  trial directory, and any ``mounts`` of the job) at their targets;
- the network namespace unshared (loopback only) when the policy is ``no-network``;
- the Dockerfile's ``ENV``, ``WORKDIR``, ``USER``, ``COPY`` honoured, ``RUN`` run inside
  (``dockerfile_run="skip"`` skips them) and ``ENTRYPOINT`` started detached, as
  ``casstore.sandbox.dockerfile`` describes;
- without root on the host, a user namespace of its own in which only root exists;
- ``stop`` kills every process of the sandbox and deletes the root (``delete=False`` keeps it).

Commands see only the environment they are given (``PATH``, ``HOME``, ``USER``, ``HOSTNAME``,
the Dockerfile's and Harbor's variables, ``CASSTORE_SANDBOX`` = the session id), never the
host's. Not a security
boundary equal to a container: README, "Sandbox environment".
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shlex
import shutil
import tarfile
import uuid
from pathlib import Path
from typing import Any, override

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.definition import require_agent_environment_definition

from casstore.errors import SandboxError
from casstore.sandbox.accounts import Account
from casstore.sandbox.build import follow_recipe
from casstore.sandbox.commands import run_entering
from casstore.sandbox.dockerfile import Recipe, Step, read_dockerfile
from casstore.sandbox.namespaces import Sandbox
from casstore.sandbox.root import Work, prepare_work

__all__ = ["HostEnvironment"]

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class HostEnvironment(BaseEnvironment):
    """A Harbor environment running each trial in a bubblewrap sandbox on this host.

    Keyword arguments (Harbor's ``--ek``): ``sandbox_dir`` (where the private roots go),
    ``dockerfile_run`` (``"run"``, the default, or ``"skip"``), ``user_namespace`` (a user
    namespace of the sandbox's own, only root inside: the default without root on the
    host)."""

    def __init__(
        self,
        *args: Any,
        sandbox_dir: str | None = None,
        dockerfile_run: str = "run",
        user_namespace: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if dockerfile_run not in ("run", "skip"):
            raise SandboxError("dockerfile_run", f"{dockerfile_run!r}: use 'run' or 'skip'")
        if user_namespace is not None and not isinstance(user_namespace, bool):
            raise SandboxError("user_namespace", f"{user_namespace!r}: use true or false")
        self._dockerfile_run = dockerfile_run
        self._own_users = os.geteuid() != 0 if user_namespace is None else user_namespace
        self._sandbox_dir = sandbox_dir
        self._recipe = Recipe()
        self._sandbox: Sandbox | None = None
        self._work: Work | None = None
        self._hostname = "sandbox"
        super().__init__(*args, **kwargs)

    @staticmethod
    @override
    def type() -> str:
        return "casstore-host"

    @property
    @override
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, mounted=True)

    @classmethod
    @override
    def preflight(cls) -> None:
        missing = [tool for tool in ("bwrap", "nsenter", "setpriv") if not shutil.which(tool)]
        if missing:
            raise SystemExit(f"casstore.sandbox needs {', '.join(missing)} on PATH")

    @override
    def _validate_definition(self) -> None:
        """Harbor's own rule (a Dockerfile, a compose file or ``docker_image``); what this
        environment cannot honour is refused at ``start``, recorded on the trial."""
        require_agent_environment_definition(
            self.environment_dir, docker_image=self.task_env_config.docker_image
        )

    def _read_definition(self) -> None:
        modes = {policy.network_mode for policy in self._phase_network_policies}
        if modes - {self.network_policy.network_mode}:
            rule = "the sandbox cannot change its network between agent and verifier phases"
            raise SandboxError(f"network_mode {self.network_policy.network_mode.value}", rule)
        compose = self.environment_dir / "docker-compose.yaml"
        if compose.exists():
            raise SandboxError(str(compose), "compose services are not supported")
        dockerfile = self.environment_dir / "Dockerfile"
        if dockerfile.is_file():
            self._recipe = read_dockerfile(dockerfile)

    # -- life ------------------------------------------------------------------------------

    def _work_dir(self) -> Work:
        if self._work is None:
            raise SandboxError(self.session_id, "the sandbox is not started")
        return self._work

    def _io_file(self, suffix: str) -> Path:
        return self._work_dir().io_file(f"{uuid.uuid4().hex}{suffix}")

    @override
    async def start(self, force_build: bool) -> None:
        """Make the private root, start bwrap, follow the Dockerfile; SandboxError for what
        the sandbox cannot honour (a compose file, a Dockerfile line)."""
        self._read_definition()
        try:
            await self._start()
        except BaseException:
            await asyncio.shield(self.stop(delete=True))
            raise

    async def _start(self) -> None:
        base = Path(self._sandbox_dir) if self._sandbox_dir else None
        workdirs = [step.args[0] for step in self._recipe.steps if step.kind == "workdir"]
        workdirs += [self.task_env_config.workdir] if self.task_env_config.workdir else []
        work = await asyncio.to_thread(prepare_work, base, list(self._mounts), workdirs)
        self._work = work
        hostname = "".join(c if c.isalnum() or c == "-" else "-" for c in self.environment_name)
        self._hostname = hostname[:63].strip("-") or "sandbox"
        self._sandbox = await Sandbox.launch(
            work.root,
            list(work.bindings),
            shared_net=not self._network_disabled,
            own_users=self._own_users,
            hostname=self._hostname,
            log=work.path / "bwrap.log",
        )
        dockerfile = self.environment_dir / "Dockerfile"
        binds = [binding.target for binding in work.bindings]
        run = self._dockerfile_run == "run"
        for where in await follow_recipe(self, self._recipe, dockerfile, run=run, binds=binds):
            self.logger.warning(f"{where}: RUN skipped (dockerfile_run='skip')")
        await self._upload_environment_dir_after_start()

    @override
    async def stop(self, delete: bool) -> None:
        """Kill every process of the sandbox; delete the root unless ``delete`` is False."""
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            left = await sandbox.close()
            if left:
                self.logger.warning(f"sandbox processes still present after stop: {left}")
        work, self._work = self._work, None
        if work is not None and delete:
            await asyncio.to_thread(shutil.rmtree, work.path, True)
        elif work is not None:
            self.logger.info(f"sandbox root kept at {work.root}")

    # -- commands --------------------------------------------------------------------------

    async def account(self, user: str | int | None) -> Account:
        """The sandbox account of ``user`` (an unknown name gets one, and its home)."""
        account = self._work_dir().accounts.resolve(user)
        if self._own_users and account.uid != 0:
            rule = "only root exists in a sandbox with its own user namespace (no host root)"
            raise SandboxError(f"user {user}", rule)
        if account.created:
            home = shlex.quote(account.home)
            command = f"mkdir -p -- {home} && chown {account.uid}:{account.gid} -- {home}"
            await self.as_root(command, account.home)
        return account

    def _environment(self, account: Account, image_env: dict[str, str]) -> dict[str, str]:
        env = {"PATH": PATH, "HOME": account.home, "HOSTNAME": self._hostname}
        if account.name:
            env["USER"] = account.name
        env.update(image_env)
        env["CASSTORE_SANDBOX"] = self.session_id
        return env

    async def _exec_as(
        self,
        command: str,
        cwd: str | None,
        env: dict[str, str],
        timeout_sec: int | None,
        user: str | int | None,
        *,
        stdin: Path | None = None,
        output: Path | None = None,
    ) -> ExecResult:
        """Run ``command`` with bash in the sandbox; with ``output``, the raw output stays in
        that file and the result holds none."""
        if self._sandbox is None or not self._sandbox.alive():
            raise SandboxError(self.session_id, "the sandbox is not running")
        account = await self.account(user)
        argv = self._sandbox.enter_argv(account.uid, account.gid, account.name is not None)
        argv += ["/bin/sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", cwd or "/"]
        argv += ["/bin/bash", "-c", command]
        sink = output or self._io_file(".out")
        emit = self._output_callback() if output is None else None
        try:
            code = await run_entering(
                argv,
                env=self._environment(account, env),
                output=sink,
                stdin=stdin,
                timeout=timeout_sec,
                emit=emit,
            )
            if output is not None:
                return ExecResult(return_code=_status(code))
            text = sink.read_bytes().decode(errors="replace")
        finally:
            if output is None:
                sink.unlink(missing_ok=True)
        return ExecResult(stdout=text or None, return_code=_status(code))

    async def as_root(self, command: str, where: str, stdin: Path | None = None) -> ExecResult:
        """Run ``command`` as root in ``/``; SandboxError naming ``where`` unless it exits 0."""
        result = await self._exec_as(command, "/", {}, None, 0, stdin=stdin)
        if result.return_code != 0:
            text = (result.stdout or "").strip()[-400:]
            raise SandboxError(where, f"exit {result.return_code} in the sandbox: {text}")
        return result

    async def run_step(self, step: Step) -> ExecResult:
        """A Dockerfile RUN, as its line's user, directory and environment."""
        timeout = int(self.task_env_config.build_timeout_sec)
        command = shlex.join(step.args)
        return await self._exec_as(command, step.workdir, step.env, timeout, step.user)

    @override
    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run ``command`` with bash in the sandbox as ``user`` (else the default user, else
        the Dockerfile's USER, else root) in ``cwd`` (else the task's workdir, else the
        Dockerfile's WORKDIR); TimeoutError after ``timeout_sec``, its processes killed."""
        user = self._resolve_user(user)
        workdir = cwd or self.task_env_config.workdir or self._recipe.workdir
        env = {**self._recipe.env, **(self._merge_env(env) or {})}
        return await self._exec_as(
            command, workdir, env, timeout_sec, user if user is not None else self._recipe.user
        )

    # -- files -----------------------------------------------------------------------------

    async def _untar_inside(self, archive: Path, directory: str) -> None:
        quoted = shlex.quote(directory)
        command = f"mkdir -p -- {quoted} && tar -x --no-same-owner -f - -C {quoted}"
        await self.as_root(command, directory, stdin=archive)

    @override
    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a host file to ``target_path`` (its directory made), owned by root."""
        archive = self._io_file(".tar")
        try:
            with tarfile.open(archive, "w") as tar:
                tar.add(str(source_path), arcname=posixpath.basename(target_path))
            await self._untar_inside(archive, posixpath.dirname(target_path) or "/")
        finally:
            archive.unlink(missing_ok=True)

    @override
    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy a host directory's contents into ``target_dir`` (made), owned by root."""
        archive = self._io_file(".tar")
        try:
            with tarfile.open(archive, "w") as tar:
                for child in sorted(Path(source_dir).iterdir()):
                    tar.add(str(child), arcname=child.name)
            await self._untar_inside(archive, target_dir)
        finally:
            archive.unlink(missing_ok=True)

    async def _pack_inside(self, command: str, where: str) -> Path:
        archive = self._io_file(".tar")
        result = await self._exec_as(command, "/", {}, None, 0, output=archive)
        if result.return_code != 0:
            text = archive.read_bytes()[-400:].decode(errors="replace")
            archive.unlink(missing_ok=True)
            raise SandboxError(where, f"cannot read it in the sandbox: {text.strip()}")
        return archive

    @override
    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy the sandbox file ``source_path`` to the host path ``target_path``."""
        path = posixpath.normpath(source_path)
        parent, name = posixpath.split(path)
        command = f"tar -c -f - -C {shlex.quote(parent or '/')} -- {shlex.quote(name)}"
        archive = await self._pack_inside(command, source_path)
        target = Path(target_path)
        try:
            with tarfile.open(archive) as tar:
                member = tar.getmember(name)
                if not member.isfile():
                    raise SandboxError(source_path, "not a regular file")
                extracted = tar.extractfile(member)
                assert extracted is not None
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(extracted.read())
        finally:
            archive.unlink(missing_ok=True)

    @override
    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy the contents of the sandbox directory ``source_dir`` into ``target_dir``."""
        command = f"tar -c -f - -C {shlex.quote(source_dir)} ."
        archive = await self._pack_inside(command, source_dir)
        try:
            Path(target_dir).mkdir(parents=True, exist_ok=True)
            with tarfile.open(archive) as tar:
                tar.extractall(path=target_dir, filter="data")
        except tarfile.FilterError as error:
            rule = f"not copied out: {error} (links must stay inside the directory)"
            raise SandboxError(source_dir, rule) from None
        finally:
            archive.unlink(missing_ok=True)


def _status(code: int) -> int:
    """A shell-style exit status: 128 + N for a process killed by signal N."""
    return 128 - code if code < 0 else code
