"""Same tree, same bytes: whatever mtimes, owners, creation order, umask or thread count."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import casstore.archive.compress
from casstore.archive.pack import pack_tree
from casstore.archive.read import extract_archive, verify_archive
from tests.helpers import TASK_TOML, snapshot

segment = st.text(alphabet="abcXYZ019_.-é ", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)
tree_spec = st.fixed_dictionaries(
    {
        "files": st.dictionaries(
            st.lists(segment, min_size=1, max_size=3).map(tuple),
            st.tuples(st.binary(max_size=3000), st.sampled_from([0o644, 0o755, 0o600, 0o4755])),
            max_size=12,
        ),
        "empty_dirs": st.lists(st.lists(segment, min_size=1, max_size=2).map(tuple), max_size=3),
        "links": st.integers(0, 3),
    }
)


def build(root: Path, spec: dict, seed: int) -> Path:
    """Create the tree of ``spec`` under ``root/task`` in a seed-dependent order."""
    rng = random.Random(seed)
    old = os.umask(0o022)
    try:
        task = root / "task"
        task.mkdir(parents=True)
        files = {("x", *parts): data for parts, data in spec["files"].items()}
        files = {p: d for p, d in files.items() if not _under_a_file(p, files)}
        files[("task.toml",)] = (TASK_TOML.encode(), 0o644)
        files[("instruction.md",)] = (b"Do it.\n", 0o644)
        order = list(files.items())
        rng.shuffle(order)
        made: list[Path] = []
        for parts, (data, mode) in order:
            path = task.joinpath(*parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(mode)
            made.append(path)
        for parts in spec["empty_dirs"]:
            if not _under_a_file(("x", *parts, ""), files):
                task.joinpath("x", *parts).mkdir(parents=True, exist_ok=True)
        for index, target in enumerate(sorted(made)[: spec["links"]]):
            os.symlink(os.path.relpath(target, task), task / f"link{index}")
        for path in task.rglob("*"):
            stamp = rng.randint(0, 2**31)
            os.utime(path, (stamp, stamp), follow_symlinks=False)
            os.lchown(path, rng.randint(0, 5000), rng.randint(0, 5000))
        return task
    finally:
        os.umask(old)


def _under_a_file(parts: tuple[str, ...], files: dict) -> bool:
    """Whether a proper prefix of ``parts`` is itself a file: such paths cannot exist."""
    return any(parts[:depth] in files for depth in range(1, len(parts)))


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tree_spec, seeds=st.tuples(st.integers(0, 99), st.integers(100, 199)))
def test_same_tree_same_bytes_and_round_trip(compression, spec, seeds):
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        first = build(base / "one", spec, seeds[0])
        second = build(base / "two", spec, seeds[1])
        a = pack_tree(first, base / "a", compression)
        old = os.umask(0o077)  # the packing process's umask must not matter
        try:
            b = pack_tree(second, base / "b", compression)
        finally:
            os.umask(old)
        assert (base / "a").read_bytes() == (base / "b").read_bytes()
        assert (a.address, a.content_digest) == (b.address, b.content_digest)
        extract_archive(base / "a", base / "out", a.address)
        assert snapshot(base / "out" / "task") == snapshot(first)
        again = pack_tree(base / "out" / "task", base / "c", compression)
        assert (base / "c").read_bytes() == (base / "a").read_bytes()
        assert again.content_digest == a.content_digest


def test_content_digest_is_the_same_for_every_compression(tmp_path):
    task = build(
        tmp_path, {"files": {("f",): (b"x" * 5000, 0o644)}, "empty_dirs": [], "links": 1}, 1
    )
    results = {c: pack_tree(task, tmp_path / c, c) for c in ("gzip", "zstd", "none")}
    assert len({r.content_digest for r in results.values()}) == 1
    assert len({r.address for r in results.values()}) == 3
    plain = (tmp_path / "none").read_bytes()
    assert results["none"].content_digest == results["gzip"].content_digest
    assert (
        str(results["none"].address) == "sha256:" + __import__("hashlib").sha256(plain).hexdigest()
    )


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_bytes_do_not_depend_on_thread_count(tmp_path, monkeypatch, compression):
    rng = random.Random(7)
    files = {
        ("big",): (rng.randbytes(3 * 2**20) + b"text " * 400_000, 0o644),
        ("small",): (b"abc", 0o644),
    }
    task = build(tmp_path, {"files": files, "empty_dirs": [], "links": 0}, 3)
    addresses = set()
    for count in (1, 2, 4):
        monkeypatch.setattr(casstore.archive.compress, "workers", lambda count=count: count)
        addresses.add(pack_tree(task, tmp_path / f"{compression}{count}", compression).address)
    assert len(addresses) == 1
    verify_archive(tmp_path / f"{compression}1", addresses.pop())
