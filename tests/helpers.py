"""Small helpers shared by the tests: minimal tasks, tree snapshots, CLI runs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from cli.main import run

TASK_TOML = "[verifier]\ntimeout_sec = 10.0\n"


def make_task(root: Path, name: str = "task", files: dict[str, str] | None = None) -> Path:
    """A minimal valid Harbor task ``root/name`` with task.toml, instruction.md and ``files``."""
    task = root / name
    content = {"task.toml": TASK_TOML, "instruction.md": "Do it.\n"} | (files or {})
    for relative, text in content.items():
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below ``root``: relative path → ``("dir", mode)``, ``("file", mode, size,
    sha256 hex)``, ``("link", target)`` or ``("special", file type, mode)`` (a FIFO or a
    device, never opened); walked with directory descriptors so that paths beyond PATH_MAX are
    seen too; links never followed."""
    result: dict[str, tuple] = {}
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        relative_dir = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            key = os.path.normpath(os.path.join(relative_dir, name))
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                result[key] = ("link", os.readlink(name, dir_fd=dirfd))
            elif stat.S_ISDIR(info.st_mode):
                result[key] = ("dir", mode)
            elif not stat.S_ISREG(info.st_mode):
                result[key] = ("special", stat.S_IFMT(info.st_mode), mode)
            else:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dirfd)
                with os.fdopen(fd, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                result[key] = ("file", mode, info.st_size, digest)
    return result


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI on ``argv`` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    code = run(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def store_cli(
    capsys: pytest.CaptureFixture[str], store: Path | str, *argv: str
) -> tuple[int, object, str]:
    """:func:`run_cli` with ``--store store``: (exit status, parsed JSON or stdout, stderr)."""
    code, out, err = run_cli(capsys, "--store", str(store), *argv)
    try:
        return code, json.loads(out), err
    except ValueError:
        return code, out, err
