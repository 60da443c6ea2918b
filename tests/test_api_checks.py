"""What the public Python API refuses, and how: every wrong argument is a casstore error naming
it (never AttributeError, TypeError or a pydantic error), the CLI's rules hold for the API too,
and a store is closed as soon as nothing references it."""

from __future__ import annotations

import gc
import math
import weakref

import pytest

import casstore
from casstore.archive.pack import pack_tree
from casstore.errors import StoreError, UnknownReferenceError, UsageError
from casstore.examples.job import write_example_job
from tests.helpers import make_task, run_cli


@pytest.mark.parametrize("compression", ["bzip2", "GZIP", "", None, "xz"])
def test_unknown_compression_is_refused(tmp_path, compression) -> None:
    task = make_task(tmp_path)
    out = tmp_path / "x.tar"
    with pytest.raises(UsageError, match="is not gzip, zstd or none") as raised:
        casstore.pack(task, out, compression)
    assert str(raised.value) == f"compression: {compression!r} is not gzip, zstd or none"
    assert not out.exists()
    with pytest.raises(UsageError, match="is not gzip, zstd or none"):
        pack_tree(task, None, compression)  # the encoder itself refuses it
    with casstore.open_store(tmp_path / "store") as store:
        with pytest.raises(UsageError, match="is not gzip, zstd or none"):
            casstore.publish(store, task, compression=compression)
        assert store.tasks.list() == []
        casstore.publish(store, task)  # stored: a reused revision is refused as well
        with pytest.raises(UsageError, match="is not gzip, zstd or none"):
            store.tasks.replace("task", casstore.discover_tasks(task)[0], compression=compression)


def test_a_store_nothing_references_is_closed(tmp_path) -> None:
    root = tmp_path / "store"
    collecting = gc.isenabled()
    gc.disable()  # reference counting alone must close it: no cycle keeps it open
    try:
        store = casstore.open_store(root)
        assert store.tasks.list() == [] and store.tasksets.list() == []
        watched = weakref.ref(store)
        del store
        assert watched() is None
        casstore.open_store(root).close()  # not "already open in this process"
    finally:
        if collecting:
            gc.enable()


def test_a_closed_store_says_so(tmp_path) -> None:
    task = make_task(tmp_path)
    store = casstore.open_store(tmp_path / "store")
    store.close()
    store.close()  # idempotent
    closed = f"{tmp_path / 'store' / 'index'}: the store is closed"
    for use in (
        lambda: store.tasks.list(),
        lambda: store.tasksets.get("default/suite"),
        lambda: store.resolve("default/task"),
        lambda: casstore.publish(store, task),
        lambda: casstore.fsck(store),
        lambda: casstore.Jobs(store).list(),
        lambda: store.index.map_size,
    ):
        with pytest.raises(StoreError) as raised:
            use()
        assert str(raised.value) == closed


def test_rescore_takes_an_open_store(tmp_path) -> None:
    job = write_example_job(tmp_path / "jobs", ["alpha", "beta"], attempts=3)
    with casstore.open_store(tmp_path / "store") as store:
        (imported,) = casstore.import_jobs(store, [job])
        for name in ("alpha", "beta"):
            (task,) = casstore.discover_tasks(make_task(tmp_path / "tasks", name))
            store.tasks.replace(name, task)
        casstore.create_taskset(store, "suite", ["alpha", "beta"])
        report = casstore.rescore([imported.job], store=store, taskset="suite")
        assert report.counts["attempts"] == 6
        assert casstore.rescore([imported.job], store=store).counts == report.counts
        with pytest.raises(UnknownReferenceError, match="no taskset \\(or task\\) of that name"):
            casstore.rescore([imported.job], store=store, taskset="nosuch")
        assert len(store.tasks.list()) == 2  # still open


@pytest.mark.parametrize(
    ("option", "value", "cli", "message"),
    [
        (
            "threshold",
            math.nan,
            ["--threshold", "nan"],
            "--threshold: must be a finite number, not nan",
        ),
        (
            "threshold",
            math.inf,
            ["--threshold", "inf"],
            "--threshold: must be a finite number, not inf",
        ),
        (
            "metric_timeout",
            0,
            ["--metric-timeout", "0"],
            "--metric-timeout: must be > 0 seconds, not 0",
        ),
        (
            "metric_timeout",
            math.nan,
            ["--metric-timeout", "nan"],
            "--metric-timeout: must be a finite number, not nan",
        ),
        (
            "metrics",
            ["median"],
            ["--metric", "median"],
            "median: --metric is mean, sum, min, max or a metric.py path",
        ),
        (
            "metrics",
            ["no/such.py"],
            ["--metric", "no/such.py"],
            "no/such.py: no such metric script (--metric is mean, sum, min, max or a metric.py)",
        ),
        ("ks", [0], ["--k", "0"], "--k: every k must be an integer >= 1"),
        ("ks", [2, 1.5], ["--k", "2,0"], "--k: every k must be an integer >= 1"),
    ],
)
def test_rescore_options_are_checked_as_the_cli_checks_them(
    capsys, tmp_path, option, value, cli, message
) -> None:
    """One rule and one message for the API and the CLI, checked before any source is read
    (the source here does not exist)."""
    missing = str(tmp_path / "no-such-job")
    with pytest.raises(UsageError) as raised:
        casstore.rescore([missing], **{option: value})
    assert str(raised.value) == message
    assert run_cli(capsys, "rescore", missing, *cli) == (2, "", f"casstore: {message}\n")
