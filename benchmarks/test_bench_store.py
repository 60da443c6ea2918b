"""Store benchmarks: publishing, the LMDB index and checkout of a taskset.

* ``publish``: 1,000 generated small tasks (``task.toml``, ``instruction.md``, a test script, a
  Dockerfile and a solution) published one by one into a fresh store each round; discovery
  (scan + content digest) is done once outside the timing, ``Store.publish`` re-scans, packs,
  stores, verifies and registers each task. Rate: ``tasks_per_second``.
* ``index-get`` / ``index-put``: reads and writes of revision-sized records through
  :class:`casstore.store.Index` (``read``/``write`` transactions), either one operation per
  transaction (``each``: every put is a durable LMDB commit) or all in one transaction
  (``batch``). Rate: ``ops_per_second``.
* ``checkout``: a taskset pinning the 1,000 tasks checked out into a fresh directory each round
  (every archive verified, extracted and loaded with Harbor's ``Task``). Rate:
  ``tasks_per_second``.

With ``--benchmark-disable`` (pyproject's default) each test runs once on tiny sizes (10 tasks,
100 index operations) as a smoke test.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from casstore.archive.discover import TaskCollection, discover
from casstore.store import Index, Store
from tests.helpers import TASK_TOML

TEST_SH = "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n"
DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\n"
TASKSET = "bench"


def sizes(enabled: bool) -> tuple[int, int]:
    """``(tasks, index operations)``: the real sizes, or tiny ones for the smoke run."""
    return (1000, 10_000) if enabled else (10, 100)


def write_dataset(root: Path, count: int) -> Path:
    """``count`` small valid Harbor tasks ``root/task-NNNN``; returns ``root``."""
    for number in range(count):
        task = root / f"task-{number:04d}"
        (task / "tests").mkdir(parents=True)
        (task / "environment").mkdir()
        (task / "solution").mkdir()
        (task / "task.toml").write_text(TASK_TOML)
        (task / "instruction.md").write_text(f"# Task {number}\n\nWrite {number} to /app/out.\n")
        (task / "tests" / "test.sh").write_text(TEST_SH)
        (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
        (task / "solution" / "solve.sh").write_text(f"#!/bin/sh\necho {number} > /app/out\n")
        os.chmod(task / "tests" / "test.sh", 0o755)
        os.chmod(task / "solution" / "solve.sh", 0o755)
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, enabled: bool) -> TaskCollection:
    """The discovered generated tasks (1,000, or 10 when benchmarks are disabled)."""
    count, _ = sizes(enabled)
    root = write_dataset(tmp_path_factory.mktemp("store-dataset") / "dataset", count)
    tasks = discover(root)
    assert len(tasks) == count
    return tasks


def publish_all(root: Path, tasks: TaskCollection) -> Store:
    """Publish every task into a new store at ``root``; returns the (open) store."""
    store = Store(root)
    for task in tasks:
        store.publish(task)
    return store


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, dataset: TaskCollection):
    """A store holding the dataset and the taskset ``default/bench`` pinning every task."""
    store = publish_all(tmp_path_factory.mktemp("store-published") / "store", dataset)
    store.tasksets.create(TASKSET, [record.name for record, _ in store.tasks.list()])
    yield store
    store.close()


class Timed:
    """``target`` wrapped to remember the duration of each call (also when pytest-benchmark
    is disabled and keeps no statistics)."""

    def __init__(self, target: Callable) -> None:
        self.target = target
        self.seconds: list[float] = []

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.target(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)


def measure(benchmark, target: Callable, rounds: int, count: int, key: str, **kwargs):
    """Run ``target`` ``rounds`` times (once when disabled); record ``count / fastest round``
    under ``extra_info[key]``; return the last result."""
    timed = Timed(target)
    result = benchmark.pedantic(timed, rounds=rounds, iterations=1, **kwargs)
    benchmark.extra_info[key] = round(count / min(timed.seconds), 1)
    return result


# --- publish ------------------------------------------------------------------------------


def test_publish(benchmark, dataset: TaskCollection, tmp_path: Path) -> None:
    counter = itertools.count()
    stores: list[Store] = []

    def setup():
        return (tmp_path / f"store-{next(counter)}", dataset), {}

    def run(root: Path, tasks: TaskCollection) -> None:
        stores.append(publish_all(root, tasks))

    benchmark.group = "store-publish"
    measure(benchmark, run, 3, len(dataset), "tasks_per_second", setup=setup)
    benchmark.extra_info.update(label=f"publish {len(dataset)} tasks", tasks=len(dataset))
    last = stores[-1]
    rows = last.tasks.list()
    assert len(rows) == len(dataset)
    assert {revision.content_digest for _, revision in rows} == {
        task.content_digest for task in dataset
    }
    for store in stores:
        store.close()


# --- LMDB index ---------------------------------------------------------------------------


def revision_value(number: int) -> dict:
    """A record of the size and shape of a task revision."""
    hex_ = f"{number:064x}"
    return {
        "native_id": f"task-{number:04d}",
        "dir_name": f"task-{number:04d}",
        "archive_ref": f"default/harbor-tasks#task-{number:04d}/{hex_}/task_archive",
        "address": f"sha256:{hex_}",
        "content_digest": f"blake3:{hex_}",
        "compression": "gzip",
        "entries": 9,
        "payload_bytes": 300,
        "archive_bytes": 500,
        "metrics": ["reward"],
        "views": [],
        "digest": f"sha256:{hex_}",
        "created": "2025-01-01T00:00:00.000000+00:00",
    }


def keys(count: int) -> list[str]:
    return [f"sha256:{number:064x}" for number in range(count)]


def put_ops(index: Index, count: int, mode: str) -> Callable[[], None]:
    values = [(key, revision_value(number)) for number, key in enumerate(keys(count))]
    if mode == "batch":

        def run() -> None:
            def body(txn) -> None:
                for key, value in values:
                    txn.put("revisions", key, value)

            index.write(body)

        return run

    def run_each() -> None:
        for key, value in values:
            index.write(lambda txn, key=key, value=value: txn.put("revisions", key, value))

    return run_each


def get_ops(index: Index, count: int, mode: str) -> Callable[[], int]:
    wanted = keys(count)
    if mode == "batch":

        def run() -> int:
            return index.read(
                lambda txn: sum(txn.get("revisions", key) is not None for key in wanted)
            )

        return run

    def run_each() -> int:
        found = 0
        for key in wanted:
            found += index.read(lambda txn, key=key: txn.get("revisions", key)) is not None
        return found

    return run_each


parametrize_modes = pytest.mark.parametrize("mode", ["each", "batch"])


@parametrize_modes
def test_index_put(benchmark, enabled: bool, tmp_path: Path, mode: str) -> None:
    _, count = sizes(enabled)
    with Index(tmp_path / "index") as index:
        benchmark.group = "store-index-put"
        measure(benchmark, put_ops(index, count, mode), 3, count, "ops_per_second")
        benchmark.extra_info.update(label=f"put, {mode} txn", ops=count)
        assert index.read(lambda txn: txn.count("revisions")) == count


@parametrize_modes
def test_index_get(benchmark, enabled: bool, tmp_path: Path, mode: str) -> None:
    _, count = sizes(enabled)
    with Index(tmp_path / "index") as index:
        put_ops(index, count, "batch")()
        benchmark.group = "store-index-get"
        found = measure(benchmark, get_ops(index, count, mode), 5, count, "ops_per_second")
        benchmark.extra_info.update(label=f"get, {mode} txn", ops=count)
        assert found == count


# --- checkout -----------------------------------------------------------------------------


def test_checkout(benchmark, published: Store, tmp_path: Path) -> None:
    import harbor.models.task.task  # noqa: F401  (import Harbor before the timing)

    counter = itertools.count()
    ref = f"default/{TASKSET}"

    def setup():
        return (ref, tmp_path / f"checkout-{next(counter)}"), {}

    def teardown(ref: str, dest: Path) -> None:
        shutil.rmtree(dest, ignore_errors=True)

    count = len(published.tasksets.get(ref)[1].tasks)
    benchmark.group = "store-checkout"
    result = measure(
        benchmark,
        published.checkout,
        3,
        count,
        "tasks_per_second",
        setup=setup,
        teardown=teardown,
    )
    benchmark.extra_info.update(label=f"checkout taskset of {count} tasks", tasks=count)
    assert result.kind == "taskset" and len(result.tasks) == count
