"""The host side of one sandbox: its work directory, private root and bind list.

Made before bwrap starts, when nothing runs inside yet (so no path in the root can be a link
a sandboxed process planted): ``<work>/root`` is the private writable root, ``<work>/etc``
the private ``passwd`` and ``group``, ``<work>/io`` the files that carry commands' output and
transfers. Every mount point and every Dockerfile ``WORKDIR`` outside a bind is made here with
mode 0755 (bwrap would make a missing parent with mode 0700, which a non-root user cannot
cross). Writable bind sources get mode 0777, as Harbor's Docker environment does with
``chmod 777`` inside, so a non-root agent or verifier can write its logs.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from casstore.errors import SandboxError
from casstore.sandbox.accounts import Accounts
from casstore.sandbox.namespaces import Binding

__all__ = ["READ_ONLY", "Work", "inside", "prepare_work"]

READ_ONLY = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""The host trees bound read-only (when the host has them)."""

_SKELETON = {"tmp": 0o1777, "var": 0o755, "var/tmp": 0o1777, "root": 0o700, "home": 0o755}
_SKELETON |= {"run": 0o755}


def inside(path: str, tops: Iterable[str]) -> bool:
    """Whether the absolute ``path`` is one of ``tops`` or below one."""
    return any(path == top or path.startswith(top.rstrip("/") + "/") for top in tops)


@dataclass(frozen=True)
class Work:
    """One sandbox's work directory on the host."""

    path: Path
    bindings: tuple[Binding, ...]
    accounts: Accounts

    @property
    def root(self) -> Path:
        return self.path / "root"

    def io_file(self, name: str) -> Path:
        return self.path / "io" / name


def _bindings(work: Path, mounts: list[Any]) -> list[Binding]:
    """Harbor's mounts as bindings, after the private passwd and group files."""
    bindings = [
        Binding(str(work / "etc" / "passwd"), "/etc/passwd", read_only=True),
        Binding(str(work / "etc" / "group"), "/etc/group", read_only=True),
    ]
    for mount in mounts:
        if mount.get("type") != "bind":
            raise SandboxError(mount.get("target"), "only bind mounts are supported")
        target = posixpath.normpath(mount["target"])
        if not target.startswith("/") or inside(target, READ_ONLY):
            raise SandboxError(target, "a mount must be absolute and outside the host trees")
        bindings.append(Binding(mount["source"], target, bool(mount.get("read_only"))))
    return bindings


def _make_dirs(root: Path, path: str, mode: int = 0o755) -> None:
    """``root/path`` and its missing parents, each with ``mode`` whatever the umask."""
    current = root
    for part in Path(path.lstrip("/")).parts:
        current = current / part
        if not current.is_dir():
            current.mkdir()
            os.chmod(current, mode)


def prepare_work(base: Path | None, mounts: list[Any], workdirs: Iterable[str]) -> Work:
    """A new work directory under ``base`` (the system's temporary directory if None) with
    the root's skeleton, mount points and ``workdirs``; SandboxError for a bad mount."""
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="casstore-sandbox-", dir=base))
    try:
        for name in ("etc", "io", "root"):
            (path / name).mkdir()
        os.chmod(path / "root", 0o755)
        accounts = Accounts(path / "etc")
        accounts.create()
        bindings = _bindings(path, mounts)
        root = path / "root"
        for name, mode in _SKELETON.items():
            _make_dirs(root, name)
            os.chmod(root / name, mode)
        for binding in bindings[2:]:
            _make_dirs(root, posixpath.dirname(binding.target))
            point = root / binding.target.lstrip("/")
            if Path(binding.source).is_dir():
                _make_dirs(root, binding.target)
                if not binding.read_only:
                    os.chmod(binding.source, 0o777)
            else:
                point.touch()
        targets = [binding.target for binding in bindings]
        for workdir in workdirs:
            if not inside(workdir, READ_ONLY) and not inside(workdir, targets):
                _make_dirs(root, workdir)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return Work(path, tuple(bindings), accounts)
