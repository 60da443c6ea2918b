"""Small helpers shared by the tests: minimal tasks, tree snapshots, CLI runs."""

from __future__ import annotations

import json
import os
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
    """Every entry below ``root``: relative path → (kind, mode bits, bytes or link target)."""
    result: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            relative = str(path.relative_to(root))
            info = path.lstat()
            mode = info.st_mode & 0o7777
            if path.is_symlink():
                result[relative] = ("link", mode, os.readlink(path))
            elif path.is_dir():
                result[relative] = ("dir", mode, None)
            else:
                result[relative] = ("file", mode, path.read_bytes())
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
