"""One long-lived bubblewrap process per trial, and commands entering its namespaces.

``bwrap`` builds the sandbox's mount, PID, IPC and UTS namespaces (and its network namespace
when the task has no internet) around a process that only sleeps. Its PID-1 process (bwrap's
own init, reaping orphans) holds the namespaces for the trial: a daemon a command leaves
behind lives on there, so the verifier still reaches it. Commands enter with ``nsenter``
(mount, PID, IPC, UTS and root, and the network when the sandbox has its own), then
``setpriv`` sets the user and narrows the capabilities (root keeps Docker's default set less
``CAP_MKNOD``, and less ``CAP_NET_RAW`` when the network is the host's: no mount, module,
ptrace, raw-I/O or admin rights).
Killing PID 1 makes the kernel kill every process of the namespace: ``close`` does that.

Without root on the host (or when asked), the sandbox also gets its own user namespace
mapping the caller to root inside (``--unshare-user --uid 0 --gid 0``); commands enter it
keeping their credentials (the caller is root there) and their groups (``setgroups`` is
denied in such a namespace). Only root exists inside: no other uid is mapped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from casstore.errors import SandboxError

__all__ = ["Binding", "Sandbox", "namespace_members"]

_ROOT_CAPS = (
    "chown,dac_override,fowner,fsetid,kill,setgid,setuid,setpcap,net_bind_service,"
    "sys_chroot,audit_write,setfcap"
)
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Binding:
    """A host path bound at ``target`` inside the sandbox."""

    source: str
    target: str
    read_only: bool = False


def namespace_members(namespace: str) -> list[int]:
    """Host pids of the processes whose PID namespace is ``namespace`` (``pid:[inode]``)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == namespace:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _host_tree(name: str) -> list[str]:
    """How ``/name`` of the host appears inside: a symlink as a symlink, a directory
    read-only, nothing when the host has neither."""
    path = Path("/") / name
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    if path.is_dir():
        return ["--ro-bind", str(path), str(path)]
    return []


class Sandbox:
    """A running sandbox: ``pid`` is its PID 1 seen from the host, ``namespace`` its PID
    namespace (``pid:[inode]``)."""

    def __init__(
        self, process: asyncio.subprocess.Process, info: dict, shared_net: bool, own_users: bool
    ) -> None:
        self.process = process
        self.pid = int(info["child-pid"])
        self.namespace = f"pid:[{info['pid-namespace']}]"
        self.shared_net = shared_net
        self.own_users = own_users

    @classmethod
    async def launch(
        cls,
        root: Path,
        bindings: list[Binding],
        *,
        shared_net: bool,
        own_users: bool,
        hostname: str,
        log: Path,
    ) -> Sandbox:
        """Start bwrap on the private ``root`` with host ``/usr``, ``/etc``, ``/opt`` (and the
        shell's ``/bin``, ``/lib*``, ``/sbin``) read-only and ``bindings`` on top, in a user
        namespace of its own when ``own_users``; SandboxError (with bwrap's message) if it
        does not come up."""
        argv = ["bwrap", "--bind", str(root), "/"]
        for name in ("usr", "etc", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            argv += _host_tree(name)
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for binding in bindings:
            argv += ["--ro-bind" if binding.read_only else "--bind", binding.source]
            argv.append(binding.target)
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", hostname]
        if not shared_net:
            argv.append("--unshare-net")
        if own_users:
            argv += ["--unshare-user", "--uid", "0", "--gid", "0"]
        read, write = os.pipe()
        argv += ["--die-with-parent", "--new-session", "--info-fd", str(write)]
        argv += ["--", "/bin/sleep", "infinity"]
        with log.open("wb") as errors:
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=errors,
                    stderr=errors,
                    pass_fds=(write,),
                )
            finally:
                os.close(write)
        try:
            data = await asyncio.wait_for(asyncio.to_thread(_read_all, read), START_TIMEOUT)
        except BaseException:
            process.kill()  # its end of the pipe closes: the reading thread ends
            await asyncio.shield(process.wait())
            raise
        finally:
            os.close(read)
        try:
            info = json.loads(data)
        except ValueError:
            raise await _failed(process, root, log) from None
        sandbox = cls(process, info, shared_net, own_users)
        try:
            await sandbox._ready(root)
        except BaseException:
            await asyncio.shield(sandbox.close())
            raise
        if not sandbox.alive():
            raise await _failed(process, root, log)
        return sandbox

    async def _ready(self, root: Path) -> None:
        """Wait until bwrap has exec'd the sleeper: its info comes before the mounts are
        done, and an early ``nsenter`` would find a half-made root."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        sleeper = os.path.realpath("/bin/sleep")
        while loop.time() < deadline and self.alive():
            for child in _children(self.pid):
                try:
                    if os.readlink(f"/proc/{child}/exe") == sleeper:
                        return
                except OSError:
                    continue
            await asyncio.sleep(0.002)
        if self.alive():
            raise SandboxError(str(root), "bubblewrap started but its sandbox never became ready")

    def enter_argv(self, uid: int, gid: int, named: bool) -> list[str]:
        """The argv prefix that runs a program inside as ``uid``/``gid`` (with the user's
        groups when ``named``, none otherwise)."""
        argv = ["nsenter", "--target", str(self.pid), "--mount", "--uts", "--ipc", "--pid"]
        argv += ["--root"] if self.shared_net else ["--net", "--root"]
        if self.own_users:
            argv += ["--user", "--preserve-credentials"]
        argv += ["--", "setpriv", "--reuid", str(uid), "--regid", str(gid)]
        if self.own_users:
            argv.append("--keep-groups")
        else:
            argv.append("--init-groups" if named else "--clear-groups")
        caps = _ROOT_CAPS if self.shared_net else _ROOT_CAPS + ",net_raw"
        bounding = "-all," + ",".join(f"+{cap}" for cap in caps.split(","))
        argv += ["--bounding-set", bounding, "--inh-caps", "-all", "--"]
        return argv

    def alive(self) -> bool:
        """Whether PID 1 of the sandbox still runs."""
        return self.process.returncode is None

    async def close(self, grace: float = 5.0) -> list[int]:
        """Kill every process of the sandbox (PID 1 first: the kernel kills the rest) and
        wait for them; returns the pids still present after ``grace`` seconds (none)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(self.process.wait(), timeout=grace)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        left = namespace_members(self.namespace)
        while left and loop.time() < deadline:
            await asyncio.sleep(0.02)
            left = namespace_members(self.namespace)
        return left


async def _failed(process: asyncio.subprocess.Process, root: Path, log: Path) -> SandboxError:
    """The error of a bwrap that exited at start: its own message (or its exit status)."""
    await process.wait()
    message = log.read_text(errors="replace").strip() or f"exit {process.returncode}"
    return SandboxError(str(root), f"bubblewrap did not start: {message}")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(word) for word in text.split()]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)
