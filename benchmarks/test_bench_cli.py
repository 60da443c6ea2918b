"""Whole-process benchmarks of the command line: the real ``casstore`` process, as a user or a
script runs it, start-up included, beside in-run baselines (issue 19).

Groups (each measurement spawns one process per round; ``cpu_seconds`` is the CPU time of the
spawned processes per round, steadier than the wall time on a shared machine):

* ``cli-help``: ``casstore --help`` against ``python -c pass`` (the interpreter alone) and
  ``python -c "import typer"`` (the floor of any typer CLI); limit 250 ms.
* ``cli-ls-tasks``: ``casstore ls tasks`` on a store of 1,000 published tasks; limit 300 ms.
* ``cli-verify-real``: ``casstore verify`` of a small real Harbor task's archive
  (``harbor-workshop/cipher`` of ../shared/fixtures), with the validation cache warm (limit
  300 ms) and cold (a new empty cache folder each round: Harbor's TaskConfig is imported;
  limit 700 ms), against ``gzip -dc | tar -t``.
* ``cli-pack-real``: ``casstore pack`` of that task, cache warm (limit 300 ms), against
  ``tar | gzip -n -6``.
* ``cli-pack-medium-gzip``: ``casstore pack`` of 4,000 files of 4 KiB
  (:data:`benchmarks.trees.SHAPES` ``medium``) against ``tar --sort=name ... | gzip -n -6``;
  target >= 1.0x.

Every group is measured twice: as an installed package runs (``bytecode``: the compiled
modules cached, in a folder of the session through ``PYTHONPYCACHEPREFIX``; one warm-up round
writes them) and with ``-no-bytecode`` groups where nothing is cached and every import
compiles its source (``PYTHONDONTWRITEBYTECODE=1`` and ``PYTHONPYCACHEPREFIX`` an empty folder,
so that the ``.pyc`` files the Makefile compiles into ``.venv`` are not found: an install
without them, as uv makes by default and as the issue's figures).

Limits are wall-time medians (``extra_info["max_seconds"]``), reported met or missed by
:mod:`benchmarks.report`, never asserted (the machine may be shared). Only single-input
commands are measured. With ``--benchmark-disable`` each runs once on smoke sizes.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.conftest import Tree, gnu_pack, gnu_read
from benchmarks.measure import measure
from benchmarks.test_bench_store import write_dataset

CASSTORE = str(Path(sys.executable).with_name("casstore"))
ROOT = Path(__file__).resolve().parent.parent
REAL_TASK = ROOT.parent / "shared" / "fixtures" / "tasks" / "harbor-workshop" / "cipher"
OURS = "casstore"
PYTHON_PASS = "python -c pass"
GNU_PACK = "tar | gzip -n -6"
GNU_LIST = "gzip -dc | tar -t"
ROUNDS = 15
PACK_ROUNDS = 5


@pytest.fixture(scope="module", params=["bytecode", "no-bytecode"])
def python_env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(group suffix, environment of the spawned processes): compiled modules cached in a
    session folder, or never written (module docstring)."""
    env = dict(os.environ)
    if request.param == "bytecode":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
        return "", env
    never = tmp_path_factory.mktemp("no-pycache")  # stays empty: no .pyc is found or written
    return "-no-bytecode", env | {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(never)}


def spawn(argv: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``argv`` (a whole process); its stdout. It must exit 0."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, f"{argv}: {done.stderr}"
    return done.stdout


def timed(benchmark, target: Callable, rounds: int, args=(), setup=None):
    """:func:`benchmarks.measure.measure` after one warm-up round (outside the timing: it
    writes the compiled modules), recording the CPU seconds of the spawned processes per
    round (``extra_info["cpu_seconds"]``)."""
    warm_args, warm_kwargs = setup() if setup is not None else (args, {})
    target(*warm_args, **warm_kwargs)
    before = os.times()
    result = measure(benchmark, target, rounds, args=args, setup=setup)
    after = os.times()
    spent = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    benchmark.extra_info["cpu_seconds"] = round(spent / rounds, 4)
    return result


def rounds_of(enabled: bool, rounds: int) -> int:
    return rounds if enabled else 1


@pytest.fixture(scope="module")
def real_task() -> Path:
    """The small real Harbor task (skipped when ../shared/fixtures is not there)."""
    if not (REAL_TASK / "task.toml").is_file():
        pytest.skip(f"real Harbor data not found at {REAL_TASK}")
    return REAL_TASK


@pytest.fixture(scope="module")
def real_archive(real_task: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real task packed by the CLI: the session's validation cache then knows it."""
    out = tmp_path_factory.mktemp("cli-real") / "cipher.tar.gz"
    spawn([CASSTORE, "pack", str(real_task), "-o", str(out)])
    return out


@pytest.fixture(scope="module")
def task_store(tmp_path_factory: pytest.TempPathFactory, enabled: bool) -> tuple[Path, int]:
    """A store of 1,000 published tasks (10 in smoke runs), published by one ``casstore
    publish`` of the dataset; (store path, task count)."""
    count = 1000 if enabled else 10
    base = tmp_path_factory.mktemp("cli-store")
    dataset = write_dataset(base / "dataset", count)
    spawn([CASSTORE, "--store", str(base / "store"), "publish", str(dataset), "--json"])
    return base / "store", count


# --- start-up ------------------------------------------------------------------------------

PYTHON_BASELINES = {
    "python": ([sys.executable, "-c", "pass"], PYTHON_PASS),
    "typer": ([sys.executable, "-c", "import typer"], 'python -c "import typer"'),
}


@pytest.mark.parametrize("tool", ["casstore", *PYTHON_BASELINES])
def test_help(benchmark, enabled, python_env, tool):
    suffix, env = python_env
    benchmark.group = f"cli-help{suffix}"
    if tool == "casstore":
        argv, info = [CASSTORE, "--help"], {"label": f"{OURS} --help", "max_seconds": 0.25}
    else:
        argv, label = PYTHON_BASELINES[tool]
        info = {"label": label, "baseline": True}
    out = timed(benchmark, spawn, rounds_of(enabled, ROUNDS), args=(argv, env))
    benchmark.extra_info.update(info)
    assert tool != "casstore" or "Usage: casstore" in out


@pytest.mark.parametrize("tool", ["casstore", "python"])
def test_ls_tasks(benchmark, enabled, python_env, task_store, tool):
    (suffix, env), (store, count) = python_env, task_store
    benchmark.group = f"cli-ls-tasks{suffix}"
    if tool == "casstore":
        argv = [CASSTORE, "--store", str(store), "ls", "tasks"]
        info = {"label": f"{OURS} ls tasks ({count} tasks)", "max_seconds": 0.30}
    else:
        argv, label = PYTHON_BASELINES[tool]
        info = {"label": label, "baseline": True}
    out = timed(benchmark, spawn, rounds_of(enabled, ROUNDS), args=(argv, env))
    benchmark.extra_info.update(info)
    assert tool != "casstore" or len(out.splitlines()) == count


# --- one small real task --------------------------------------------------------------------


def _cold_cache(base: Path, env: dict[str, str]) -> Callable[[], tuple[tuple, dict]]:
    """``setup`` of a round with a new, empty validation cache folder."""
    counter = itertools.count()

    def setup() -> tuple[tuple, dict]:
        cache = base / f"cache-{next(counter)}"
        return (), {"env": env | {"CASSTORE_CACHE_DIR": str(cache)}}

    return setup


@pytest.mark.parametrize("tool", ["casstore-warm", "casstore-cold", "gnu"])
def test_verify_real(benchmark, enabled, python_env, real_archive, tool, tmp_path):
    suffix, env = python_env
    benchmark.group = f"cli-verify-real{suffix}"
    argv = [CASSTORE, "verify", str(real_archive)]
    rounds = rounds_of(enabled, ROUNDS)
    if tool == "casstore-warm":
        out = timed(benchmark, spawn, rounds, args=(argv, env))
        info = {"label": f"{OURS} verify, cache warm", "max_seconds": 0.30}
        assert out.startswith("ok sha256:")
    elif tool == "casstore-cold":
        cold = _cold_cache(tmp_path, env)
        out = timed(benchmark, lambda env: spawn(argv, env), rounds, setup=cold)
        info = {"label": f"{OURS} verify, cache cold", "max_seconds": 0.70}
        assert out.startswith("ok sha256:")
    else:
        timed(benchmark, gnu_read, rounds, args=(real_archive, "gzip", None))
        info = {"label": GNU_LIST, "baseline": True}
    benchmark.extra_info.update(info, bytes=real_archive.stat().st_size)


@pytest.mark.parametrize("tool", ["casstore", "gnu"])
def test_pack_real(benchmark, enabled, python_env, real_task, real_archive, tool, tmp_path):
    suffix, env = python_env
    benchmark.group = f"cli-pack-real{suffix}"
    out = tmp_path / f"{tool}.tar.gz"
    if tool == "casstore":
        run = spawn
        args: tuple = ([CASSTORE, "pack", str(real_task), "-o", str(out)], env)
        info = {"label": f"{OURS} pack, cache warm", "max_seconds": 0.30}
    else:
        run, args = gnu_pack, (real_task, out, "gzip")
        info = {"label": GNU_PACK, "baseline": True}
    timed(benchmark, run, rounds_of(enabled, ROUNDS), args=args)
    benchmark.extra_info.update(info, output_bytes=out.stat().st_size)
    if tool == "casstore":
        assert out.read_bytes() == real_archive.read_bytes()


# --- a 4,000-file tree --------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["casstore", "gnu"])
def test_pack_medium(benchmark, enabled, python_env, trees, tool, tmp_path):
    suffix, env = python_env
    source: Tree = trees("medium")
    benchmark.group = f"cli-pack-medium-gzip{suffix}"
    out = tmp_path / f"{tool}.tar.gz"
    if tool == "casstore":
        run = spawn
        args: tuple = ([CASSTORE, "pack", str(source.path), "-o", str(out)], env)
        info = {"label": f"{OURS} pack (whole process)", "targets": {GNU_PACK: 1.0}}
    else:
        run, args = gnu_pack, (source.path, out, "gzip")
        info = {"label": GNU_PACK, "baseline": True}
    timed(benchmark, run, rounds_of(enabled, PACK_ROUNDS), args=args)
    benchmark.extra_info.update(info, bytes=source.payload_bytes, output_bytes=out.stat().st_size)
    assert out.stat().st_size > source.payload_bytes // 20
