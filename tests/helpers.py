"""Small helpers shared by the tests: minimal tasks, tree snapshots, CLI runs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from cli.main import run

TASK_TOML = "[verifier]\ntimeout_sec = 10.0\n"
ROOT = Path(__file__).resolve().parents[1]
CLI = "from cli.main import main; main()"  # the CLI, as a script for run_python


def make_task(root: Path, name: str = "task", files: dict[str, str] | None = None) -> Path:
    """A minimal valid Harbor task ``root/name`` with task.toml, instruction.md and ``files``."""
    task = root / name
    content = {"task.toml": TASK_TOML, "instruction.md": "Do it.\n"} | (files or {})
    for relative, text in content.items():
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


def snapshot(root: Path, *, reader_tables: bool = True) -> dict[str, tuple]:
    """Every entry below ``root``: relative path → ``("dir", mode)``, ``("file", mode, size,
    sha256 hex)``, ``("link", target)`` or ``("special", file type, mode)`` (a FIFO or a
    device, never opened); walked with directory descriptors so that paths beyond PATH_MAX are
    seen too; links never followed. ``reader_tables=False``: an LMDB ``lock.mdb`` only as
    ``("lock", mode)``, since every reader of a store writes its slot there."""
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
            elif name == "lock.mdb" and not reader_tables:
                result[key] = ("lock", mode)
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


_RUN_AND_LIST = """
import json, sys
from cli.main import run
code = run(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""


def python(script: str, *argv: str, env: dict[str, str] | None = None) -> str:
    """Run ``script`` in a fresh interpreter of this environment; its stdout (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_fresh(
    scratch: Path, *argv: str, cache: Path | str | None = None
) -> tuple[int, str, str, set[str]]:
    """``casstore argv`` in a fresh interpreter (the validation cache ``cache`` when given):
    exit status, stdout, stderr and the modules it loaded (listed into a file of ``scratch``)."""
    modules = scratch / f"modules-{os.urandom(4).hex()}.json"
    env = os.environ | ({} if cache is None else {"CASSTORE_CACHE_DIR": str(cache)})
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST, str(modules), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout, done.stderr, set(json.loads(modules.read_text()))


def python_env() -> dict[str, str]:
    """The environment of a fresh interpreter running this repository's code."""
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")


def run_python(
    script: str, *argv: str, prefix: Sequence[str] = (), timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -c script argv...`` in a fresh interpreter from the repository (behind
    ``prefix``, e.g. ``unshare -m``), its output captured as text (a crash or a signal ends
    it, not pytest)."""
    return subprocess.run(
        [*prefix, sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        env=python_env(),
        cwd=ROOT,
        timeout=timeout,
    )


TB2_HAIKU_COUNTS = {
    "attempts": 89,
    "scored": 68,
    "partial": 20,
    "errored": 1,
    "no_verifier": 0,
    "invalid": 0,
    "harbor_errors": 21,
}
"""The breakdown of the real tb2-haiku job (../shared/fixtures), as import and rescore give
it: Harbor's own ``n_errors`` is 21."""


BYTECODE_CHECK = """
import importlib.util, os, sys
for name in sys.argv[1:]:
    source = importlib.util.find_spec(name).origin
    try:
        with open(importlib.util.cache_from_source(source), "rb") as file:
            header = file.read(16)
    except FileNotFoundError:
        print(name, "no .pyc"); continue
    flags, info = int.from_bytes(header[4:8], "little"), os.stat(source)
    if flags & 1:  # hash-based
        with open(source, "rb") as file:
            current = header[8:16] == importlib.util.source_hash(file.read())
    else:
        stamp = (int(info.st_mtime) & 0xFFFFFFFF, info.st_size & 0xFFFFFFFF)
        current = stamp == tuple(int.from_bytes(header[i : i + 4], "little") for i in (8, 12))
    if header[:4] != importlib.util.MAGIC_NUMBER or not current:
        print(name, "stale .pyc")
"""


def without_bytecode(
    python: Path, modules: Sequence[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> list[str]:
    """The ``modules`` that ``python`` (a venv's interpreter) would compile from source on
    import: ``name no .pyc`` or ``name stale .pyc`` (wrong magic number, or the header's
    mtime and size, or hash, not the source's), one per line; [] when all are compiled. Run
    in ``cwd``: the project whose modules are found first."""
    done = subprocess.run(
        [str(python), "-c", BYTECODE_CHECK, *modules],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=cwd,
    )
    return done.stdout.splitlines()
