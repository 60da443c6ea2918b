"""Remote benchmarks: push and pull against a real S3 API server on loopback (moto's
``ThreadedMotoServer``, as in the tests, in a process of its own), beside plain obstore
transfers of the same bytes.

* ``small``: 1,000 small generated tasks and a taskset pinning them, pushed to a fresh prefix
  each round (every object missing: archives, revisions, the taskset, the ref), then pulled
  into a fresh store each round (every object fetched, checked, placed, registered).
* ``large``: one task holding a 500 MB file of random bytes (an uncompressed archive), pushed
  and pulled alike.

Baselines (the ceiling): the same objects, as bytes already in memory, put with obstore
(``put_async``, create-only, as many at once as a push) to a fresh prefix, and got back
(``get_async``) into memory. Rates: ``objects_per_second``; MB/s from ``bytes``. Target of the
issue (``extra_info["targets"]``, not asserted): >= 0.8x of the baseline. With
``--benchmark-disable`` each runs once on tiny sizes (10 tasks, a 1 MB file).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import obstore
import pytest

import casstore
from benchmarks.test_bench_store import Timed, write_dataset
from casstore.remote import api as remote
from casstore.remote.client import open_client
from casstore.remote.config import Remote
from casstore.remote.transfer import PARALLEL
from tests.helpers import make_task
from tests.remote_server import _credentials, make_bucket, server_process

BASELINE = "obstore put/get of the same bytes"
COUNTER = itertools.count()


def sizes(enabled: bool) -> tuple[int, int]:
    """``(small tasks, bytes of the large file)``: the issue's sizes, or tiny ones."""
    return (1000, 500_000_000) if enabled else (10, 1_000_000)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A loopback S3 server with the bucket ``bench``, and the AWS environment to reach it."""
    with server_process() as endpoint:
        saved = dict(os.environ)
        os.environ.update(_credentials(endpoint))
        make_bucket(endpoint, "bench")
        yield endpoint
        os.environ.clear()
        os.environ.update(saved)


def _published(root: Path, source: Path) -> casstore.Store:
    store = casstore.open_store(root)
    names = [p.name for p in casstore.publish(store, source, compression="none")]
    casstore.create_taskset(store, "all", names)
    return store


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, enabled: bool) -> Iterator[casstore.Store]:
    count, _ = sizes(enabled)
    root = tmp_path_factory.mktemp("remote-small")
    store = _published(root / "store", write_dataset(root / "dataset", count))
    yield store
    store.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory, enabled: bool) -> Iterator[casstore.Store]:
    _, size = sizes(enabled)
    root = tmp_path_factory.mktemp("remote-large")
    task = make_task(root / "src", "large")
    with (task / "blob.bin").open("wb") as out:
        for _ in range(0, size, 1 << 24):
            out.write(os.urandom(min(1 << 24, size)))
        out.truncate(size)
    store = _published(root / "store", task)
    yield store
    store.close()
    shutil.rmtree(root, ignore_errors=True)


def _objects(store: casstore.Store) -> dict[str, bytes]:
    """The keys and bytes a push of ``all`` sends (what the baseline sends too)."""
    from casstore.remote.gather import gather

    bundle = gather(store, ["all"])
    found = dict(bundle.objects)
    for key, (path, _) in bundle.archives.items():
        found[key] = path.read_bytes()
    return found


def _prefix(endpoint: str, store: casstore.Store) -> str:
    name = f"r{next(COUNTER)}"
    remote.add_remote(store, name, f"s3://bench/{name}", endpoint)
    return name


def _plain_put(endpoint: str, objects: dict[str, bytes]) -> Remote:
    spec = Remote("plain", f"s3://bench/plain{next(COUNTER)}", endpoint)
    client = open_client(spec)

    async def run() -> None:
        gate = asyncio.Semaphore(PARALLEL)

        async def one(key: str, data: bytes) -> None:
            async with gate:
                await obstore.put_async(client.store, key, data, mode="create")

        await asyncio.gather(*(one(key, data) for key, data in objects.items()))

    asyncio.run(run())
    return spec


def _plain_get(spec: Remote, keys: list[str]) -> int:
    client = open_client(spec)

    async def run() -> int:
        gate = asyncio.Semaphore(PARALLEL)

        async def one(key: str) -> int:
            async with gate:
                result = await obstore.get_async(client.store, key)
                return len(await result.bytes_async())

        return sum(await asyncio.gather(*(one(key) for key in keys)))

    return asyncio.run(run())


def _info(benchmark, group: str, label: str, objects: dict[str, bytes], baseline: bool) -> None:
    benchmark.group = group
    benchmark.extra_info.update(
        {"label": label, "bytes": sum(map(len, objects.values())), "baseline": baseline}
    )
    if not baseline:
        benchmark.extra_info["targets"] = {BASELINE: 0.8}


class CpuTimed(Timed):
    """:class:`Timed` that also keeps each call's CPU time (this process, its threads; the
    server's process apart): on a loaded machine the wall clock waits for other work."""

    def __init__(self, target) -> None:
        super().__init__(target)
        self.cpu: list[float] = []

    def __call__(self, *args, **kwargs):
        start = time.process_time()
        try:
            return super().__call__(*args, **kwargs)
        finally:
            self.cpu.append(time.process_time() - start)


def _rate(benchmark, timed: CpuTimed, objects: dict[str, bytes]) -> None:
    benchmark.extra_info["cpu_seconds"] = [round(cpu, 3) for cpu in timed.cpu]
    benchmark.extra_info["wall_seconds"] = [round(wall, 3) for wall in timed.seconds]
    benchmark.extra_info["objects_per_second"] = round(len(objects) / min(timed.seconds), 1)
    size = sum(map(len, objects.values()))
    benchmark.extra_info["mb_per_second"] = round(size / min(timed.seconds) / 1e6, 1)


def _rounds(enabled: bool, shape: str) -> int:
    """3 rounds of the small shape, 1 of the large (the server holds every object in
    memory: 500 MB a round)."""
    return 3 if enabled and shape == "small" else 1


@pytest.mark.parametrize("shape", ["small", "large"])
def test_push(benchmark, request, server: str, enabled: bool, shape: str) -> None:
    store = request.getfixturevalue(shape)
    objects = _objects(store)
    _info(benchmark, f"remote-{shape}-push", f"casstore push ({shape})", objects, False)
    timed = CpuTimed(lambda name: remote.push(store, ["all"], name))
    report = benchmark.pedantic(
        timed,
        setup=lambda: ((_prefix(server, store),), {}),
        rounds=_rounds(enabled, shape),
        iterations=1,
    )
    assert report.sent == report.objects == len(objects)
    _rate(benchmark, timed, objects)


@pytest.mark.parametrize("shape", ["small", "large"])
def test_push_baseline(benchmark, request, server: str, enabled: bool, shape: str) -> None:
    objects = _objects(request.getfixturevalue(shape))
    _info(benchmark, f"remote-{shape}-push", BASELINE, objects, True)
    timed = CpuTimed(_plain_put)
    benchmark.pedantic(timed, args=(server, objects), rounds=_rounds(enabled, shape), iterations=1)
    _rate(benchmark, timed, objects)


@pytest.mark.parametrize("shape", ["small", "large"])
def test_pull(benchmark, request, server: str, enabled: bool, shape: str, tmp_path: Path) -> None:
    store = request.getfixturevalue(shape)
    objects = _objects(store)
    name = _prefix(server, store)
    remote.push(store, ["all"], name)
    _info(benchmark, f"remote-{shape}-pull", f"casstore pull ({shape})", objects, False)
    stores: list[casstore.Store] = []

    def setup():
        fresh = casstore.open_store(tmp_path / f"b{len(stores)}")
        remote.add_remote(fresh, name, f"s3://bench/{name}", server)
        stores.append(fresh)
        return (fresh,), {}

    timed = CpuTimed(lambda fresh: remote.pull(fresh, ["all"], name))
    report = benchmark.pedantic(timed, setup=setup, rounds=_rounds(enabled, shape), iterations=1)
    assert report.archives == sum(key.startswith("filesets/") for key in objects)
    _rate(benchmark, timed, objects)
    for fresh in stores:
        fresh.close()
        shutil.rmtree(fresh.root, ignore_errors=True)


@pytest.mark.parametrize("shape", ["small", "large"])
def test_pull_baseline(benchmark, request, server: str, enabled: bool, shape: str) -> None:
    objects = _objects(request.getfixturevalue(shape))
    spec = _plain_put(server, objects)
    _info(benchmark, f"remote-{shape}-pull", BASELINE, objects, True)
    timed = CpuTimed(_plain_get)
    got = benchmark.pedantic(
        timed, args=(spec, list(objects)), rounds=_rounds(enabled, shape), iterations=1
    )
    assert got == sum(map(len, objects.values()))
    _rate(benchmark, timed, objects)
