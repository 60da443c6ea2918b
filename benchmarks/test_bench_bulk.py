"""Many small archives: one ``casstore verify FILE...`` process against one process per file.

A script that checks a folder of archives either loops (``for f in *.tar.gz; do casstore verify
"$f"; done``: the baseline, which pays the interpreter's and the CLI's start-up once per file)
or passes them all to one command (``casstore verify *.tar.gz``: start-up paid once). Both spawn
the real ``casstore`` console script of this environment, as a user would, so start-up counts;
each round verifies the same :data:`N` archives (200; 3 in the smoke run) of small generated
tasks (``task.toml``, ``instruction.md`` and a test script: about 0.3 KiB of gzip each),
packed once per module. Besides the wall time, ``extra_info["cpu_seconds"]`` holds the CPU
time (user + system) of the spawned processes per round: the machine is shared, wall-clock
figures move with its load, CPU time much less.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.trees import write_task_files
from casstore.archive.pack import pack_tree

N = 200
N_SMOKE = 3
CASSTORE = str(Path(sys.executable).parent / "casstore")
ONE = "casstore verify FILE... (1 process)"
EACH = "casstore verify FILE (1 process per file)"
ROUNDS = {ONE: 5, EACH: 1}  # a round of EACH spawns N processes of about a second each


@pytest.fixture(scope="module")
def small_archives(tmp_path_factory: pytest.TempPathFactory, enabled: bool) -> list[Path]:
    """``N`` gzip archives of distinct small tasks (``N_SMOKE`` in the smoke run)."""
    base = tmp_path_factory.mktemp("bulk")
    archives = []
    for index in range(N if enabled else N_SMOKE):
        task = base / "tasks" / f"task-{index:03d}"
        write_task_files(task)
        (task / "tests").mkdir()
        (task / "tests" / "test.sh").write_text(f"#!/bin/sh\necho {index}\n")
        archive = base / f"task-{index:03d}.tar.gz"
        pack_tree(task, archive)
        archives.append(archive)
    return archives


def _verify_in_one_process(archives: list[Path]) -> str:
    done = subprocess.run(
        [CASSTORE, "verify", *map(str, archives)], capture_output=True, text=True, check=True
    )
    return done.stdout


def _verify_one_process_each(archives: list[Path]) -> str:
    out = []
    for archive in archives:
        done = subprocess.run(
            [CASSTORE, "verify", str(archive)], capture_output=True, text=True, check=True
        )
        out.append(done.stdout)
    return "".join(out)


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


@pytest.mark.parametrize("tool", [ONE, EACH])
def test_verify_many_small_archives(benchmark, small_archives, tool):
    benchmark.group = f"verify-{len(small_archives)}-small-archives"
    run = _verify_in_one_process if tool == ONE else _verify_one_process_each
    rounds = ROUNDS[tool] if not benchmark.disabled else 1
    before = _children_cpu()
    out = benchmark.pedantic(run, args=(small_archives,), rounds=rounds, iterations=1)
    cpu = (_children_cpu() - before) / rounds
    lines = out.splitlines()
    if tool == ONE:
        assert len(lines) == len(small_archives)
        assert all(line.startswith("ok sha256:") for line in lines)
        assert [line.rsplit("  ", 1)[1] for line in lines] == [str(a) for a in small_archives]
    else:
        assert len(lines) == 2 * len(small_archives)
        assert [line.rsplit("  ", 1)[1] for line in lines[::2]] == [str(a) for a in small_archives]
    benchmark.extra_info.update(
        label=tool,
        baseline=tool == EACH,
        cpu_seconds=round(cpu, 3),
        archives=len(small_archives),
    )
