"""Fixtures of the benchmark suites: generated trees, packed archives and the baseline tools.

pyproject's ``addopts`` holds ``--benchmark-disable``, so the normal test run executes every
benchmark once as a smoke test: then :func:`bench_enabled` is False and the trees are the tiny
``*-smoke`` shapes of :mod:`benchmarks.trees`. With ``--benchmark-enable`` (``make bench``,
``make bench-report``) the trees have the sizes of the issue. Trees are generated once per
session under pytest's temporary directory; the big ones are removed at the end of the session.

Reporting conventions read by :mod:`benchmarks.report` (``benchmark.extra_info``):

* ``label``: short name of the measurement in the report (default: the test name);
* ``baseline``: True for a reference tool; every other measurement of the same group gets the
  ratio ``baseline median / its median`` (> 1: we are faster) against each baseline;
* ``bytes``: input bytes processed, for the MB/s column; ``output_bytes``: bytes produced;
* ``targets``: ``{baseline label: minimum ratio}`` the issue asks for;
* ``peak_rss_bytes`` / ``peak_rss_limit_bytes``: a measured peak RSS and its bound;
* ``other_load``: cores that other processes kept busy during the measurement (a shared
  machine makes ratios noisy; this shows when).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.trees import SHAPES, TreeShape, make_tree, tree_bytes
from casstore.archive.pack import pack_tree
from casstore.archive.read import verify_archive

TAR = (
    "tar --sort=name --format=posix --pax-option=delete=atime,delete=ctime --mtime=@0 "
    "--owner=0 --group=0 --numeric-owner"
)
COMPRESSORS = {"gzip": "gzip -n -6", "zstd": "zstd -3 -q", "none": None}
DECOMPRESSORS = {"gzip": "gzip -dc", "zstd": "zstd -dc -q", "none": None}
SUFFIX = {"gzip": ".tar.gz", "zstd": ".tar.zst", "none": ".tar"}


@pytest.fixture(scope="module", autouse=True)
def settled(request: pytest.FixtureRequest) -> None:
    """Before each benchmark module (when benchmarks really run): the page cache's dirty
    pages written out (``sync``), so that one module's gigabytes of output are not flushed
    by the kernel while the next module is timed."""
    if bench_enabled(request.config):
        os.sync()


def bench_enabled(config: pytest.Config) -> bool:
    """Whether benchmarks really run (``--benchmark-enable``) rather than once as a smoke test."""
    session = getattr(config, "_benchmarksession", None)
    if session is not None:
        return not session.disabled
    return not config.getoption("benchmark_disable") or config.getoption("benchmark_enable")


@pytest.fixture(scope="session")
def enabled(request: pytest.FixtureRequest) -> bool:
    """True under ``--benchmark-enable``: full-size trees; False: smoke-sized trees."""
    return bench_enabled(request.config)


@pytest.fixture(scope="session")
def shape_of(enabled: bool) -> Callable[[str], TreeShape]:
    """``shape_of("large")``: the issue's shape, or its smoke variant when disabled."""
    return lambda name: SHAPES[name if enabled else f"{name}-smoke"]


@dataclass(frozen=True, slots=True)
class Tree:
    """A generated task directory: ``path``, its ``shape`` and ``payload_bytes`` (all files)."""

    path: Path
    shape: TreeShape
    payload_bytes: int


@pytest.fixture(scope="session")
def trees(
    tmp_path_factory: pytest.TempPathFactory, shape_of: Callable[[str], TreeShape]
) -> Iterator[Callable[[str], Tree]]:
    """``trees("small")`` → the generated :class:`Tree`, made on first use in the session."""
    made: dict[str, Tree] = {}
    base = tmp_path_factory.mktemp("trees")

    def get(name: str) -> Tree:
        if name not in made:
            path = make_tree(base / name, shape_of(name))
            made[name] = Tree(path, shape_of(name), tree_bytes(path))
        return made[name]

    yield get
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def archives(
    tmp_path_factory: pytest.TempPathFactory, trees: Callable[[str], Tree]
) -> Iterator[Callable[[str, str], Path]]:
    """``archives("large", "zstd")`` → our archive of that tree, packed on first use."""
    made: dict[tuple[str, str], Path] = {}
    base = tmp_path_factory.mktemp("archives")

    def get(name: str, compression: str) -> Path:
        if (name, compression) not in made:
            out = base / f"{name}{SUFFIX[compression]}"
            pack_tree(trees(name).path, out, compression)  # type: ignore[arg-type]
            made[name, compression] = out
        return made[name, compression]

    yield get
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Pack and verify a tiny task once, so that no measured round pays first-use costs
    (Harbor's TaskConfig import, thread start-up)."""
    base = tmp_path_factory.mktemp("warm")
    out = base / "warm.tar.gz"
    pack_tree(make_tree(base / "warm", SHAPES["small-smoke"]), out)
    verify_archive(out)


def shell(command: str) -> None:
    """Run a shell pipeline; fail on the first failing command of it."""
    subprocess.run(["bash", "-o", "pipefail", "-c", command], check=True)


def gnu_pack(source: Path, out: Path, compression: str) -> None:
    """The GNU baseline: a canonical ``tar`` of ``source`` piped to ``gzip -n -6``/``zstd -3``."""
    tar = f"{TAR} -C {shlex.quote(str(source.parent))} -cf - {shlex.quote(source.name)}"
    compressor = COMPRESSORS[compression]
    target = shlex.quote(str(out))
    shell(f"{tar} | {compressor} > {target}" if compressor else f"{tar} > {target}")


def gnu_read(archive: Path, compression: str, dest: Path | None) -> None:
    """The GNU read baseline: decompress and ``tar -t`` (list) or ``tar -x`` into ``dest``."""
    decompressor = DECOMPRESSORS[compression]
    quoted = shlex.quote(str(archive))
    source = f"{decompressor} {quoted} | tar" if decompressor else f"tar <{quoted}"
    if dest is None:
        shell(f"{source} -tf - >/dev/null")
    else:
        dest.mkdir()
        shell(f"{source} -xf - --no-same-owner -C {shlex.quote(str(dest))}")


def harbor_pack(source: Path, out: Path) -> None:
    """Harbor 0.20's publisher archive: its own file collection and ``_create_archive``."""
    from harbor.publisher.packager import Packager
    from harbor.publisher.publisher import Publisher

    task_dir = source.resolve()
    Publisher._create_archive(task_dir, Packager.collect_files(task_dir), out)
