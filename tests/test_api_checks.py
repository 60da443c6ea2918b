"""What the public Python API refuses, and how: every wrong argument is a casstore error naming
it (never AttributeError, TypeError or a pydantic error), the CLI's rules hold for the API too,
and a store is closed as soon as nothing references it."""

from __future__ import annotations

import gc
import math
import weakref
from pathlib import Path

import pytest

import casstore
from casstore.archive.pack import pack_tree
from casstore.errors import StoreError, UnknownReferenceError, UsageError
from casstore.examples.job import write_example_job
from tests.conftest import FIXTURES
from tests.helpers import make_task, run_cli

JOB = FIXTURES / "jobs" / "tb2-haiku" / "jobs" / "2026-05-10__01-23-57"
K_RULE = "--k: every k must be an integer from 1 to 2147483648 (the most attempts a task can have)"
LIMIT_RULE = "a limit is a whole number from 1 to 9223372036854775807 (bytes or entries)"


@pytest.mark.parametrize("compression", ["bzip2", "GZIP", "", "xz"])
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


def test_no_compression_is_the_file_name_s_for_pack_only(tmp_path) -> None:
    """``casstore.pack(..., compression=None)`` takes it from the file name (gzip for digests
    only); the packer itself and publish still refuse None (issue 18, item 2)."""
    task = make_task(tmp_path)
    assert casstore.pack(task, tmp_path / "x.tar", None).compression == "none"
    assert casstore.pack(task, None, None).compression == "gzip"
    with pytest.raises(UsageError, match="None is not gzip, zstd or none"):
        pack_tree(task, None, None)  # type: ignore[arg-type]
    with (
        casstore.open_store(tmp_path / "store") as store,
        pytest.raises(UsageError, match="None is not gzip, zstd or none"),
    ):
        casstore.publish(store, task, compression=None)


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
        with pytest.raises(UnknownReferenceError, match="no taskset or task of that name"):
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
            "--metric-timeout: must be > 0 and at most 86400 seconds (a day), not 0",
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
        ("ks", [0], ["--k", "0"], f"{K_RULE}, not 0"),
        ("ks", [2, 0], ["--k", "2,0"], f"{K_RULE}, not 0"),  # a k that is no int: test_bounds
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


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"max_entries": 0},
            f"max_entries: {LIMIT_RULE}, not 0",
        ),
        (
            {"max_file_bytes": "1MiB"},
            f"max_file_bytes: {LIMIT_RULE}, not '1MiB' (str)",
        ),
        (
            {"max_path_bytes": True},
            f"max_path_bytes: {LIMIT_RULE}, not True (bool)",
        ),
        (
            {"max_entrys": 3},
            "max_entrys: not a limit (one of max_entries, max_file_bytes, max_payload_bytes, "
            "max_expanded_bytes, max_archive_bytes, max_metadata_bytes, max_path_bytes, "
            "max_config_bytes)",
        ),
    ],
)
def test_bad_limits_are_one_line_usage_errors(limits, message) -> None:
    with pytest.raises(UsageError) as raised:
        casstore.Limits(**limits)
    assert str(raised.value) == message
    with pytest.raises(UsageError) as raised:  # --limit: the same rule, naming the assignment
        casstore.Limits().with_overrides(["entries=0"])
    assert str(raised.value) == f"entries=0: {LIMIT_RULE}, not 0"


def _store_path_refused(path: str) -> str:
    return f"store: expected a Store, not the path {path!r}: open it with casstore.open_store"


def test_wrong_types_name_the_argument(tmp_path) -> None:
    """Every refusal is a UsageError naming the argument and what it expected."""
    task = make_task(tmp_path)
    root = str(tmp_path / "store")
    archive = tmp_path / "task.tar"
    casstore.pack(task, archive, "none")
    text_file = (tmp_path / "t").open("w")
    cases = [
        (
            lambda: casstore.discover_tasks(None),
            "path: expected a path (str or Path), not NoneType",
        ),
        (lambda: casstore.discover_tasks(42), "path: expected a path (str or Path), not int"),
        (
            lambda: casstore.pack(task, text_file),
            "out: expected a path, a binary file or None, not a text file",
        ),
        (lambda: casstore.pack(task, 5), "out: expected a path, a binary file or None, not int"),
        (
            lambda: casstore.pack(task, None, limits={"max_entries": 3}),
            "limits: expected a casstore.Limits or None, not dict",
        ),
        (
            lambda: casstore.verify(archive, b"sha256:00"),
            "expect: expected an address (str 'sha256:<hex>', a Digest or None), not bytes",
        ),
        (lambda: casstore.fsck(root), _store_path_refused(root)),
        (
            lambda: casstore.checkout(root, "default/task", tmp_path / "d"),
            _store_path_refused(root),
        ),
        (lambda: casstore.publish(root, task), _store_path_refused(root)),
        (lambda: casstore.Jobs(root), _store_path_refused(root)),
        (lambda: casstore.import_jobs(Path(root), []), _store_path_refused(root)),
        (
            lambda: casstore.fsck(None),
            "store: expected a Store (casstore.open_store), not NoneType",
        ),
        (lambda: casstore.rescore(["x"], ks="1,2"), "ks: expected a sequence of integers, not str"),
        (lambda: casstore.rescore(["x"], threshold="0.5"), "threshold: expected a number, not str"),
        (
            lambda: casstore.rescore(["x"], metric_timeout=None),
            "metric_timeout: expected a number, not NoneType",
        ),
        (
            lambda: casstore.rescore(["x"], views=[{"name": "v"}]),
            "views: expected items that are a View (scoring.parse_views), not dict",
        ),
        (
            lambda: casstore.rescore([1]),
            "sources: expected items that are a path (str or Path), not int",
        ),
        (lambda: casstore.rescore(["x"], store=3), "store: expected a path (str or Path), not int"),
    ]
    with casstore.open_store(root) as store:
        cases += [
            (
                lambda: casstore.publish(store, ["a"]),
                "tasks: expected a DiscoveredTask (casstore.discover_tasks), not str",
            ),
            (
                lambda: casstore.publish(store, 7),
                "tasks: expected a DiscoveredTask, tasks or a task or dataset path, not int",
            ),
            (
                lambda: store.tasks.replace("n", "x"),
                "task: expected a DiscoveredTask (casstore.discover_tasks), not str",
            ),
            (
                lambda: store.publish(None),
                "task: expected a DiscoveredTask (casstore.discover_tasks), not NoneType",
            ),
            (
                lambda: casstore.create_taskset(store, "t", [1]),
                "tasks: expected items that are a name (str), not int",
            ),
            (lambda: casstore.checkout(store, 1, tmp_path / "d"), "ref: expected a str, not int"),
        ]
        for call, message in cases:
            with pytest.raises(UsageError) as raised:
                call()
            assert str(raised.value) == message
        assert store.tasks.list() == []  # nothing was published
    text_file.close()


@pytest.mark.realdata
def test_a_single_path_or_name_is_a_one_item_list(tmp_path) -> None:
    task = make_task(tmp_path, "cipher")
    with casstore.open_store(tmp_path / "store") as store:
        (published,) = casstore.publish(store, casstore.discover_tasks(task)[0])  # one task
        assert published.name == "cipher"
        pinned = casstore.create_taskset(store, "t", "cipher")
        assert [pin["task"] for pin in pinned.tasks] == ["default/cipher"]
        again = casstore.replace_taskset(store, "t", "default/cipher")
        assert again.reused
        (report,) = casstore.import_jobs(store, JOB)
        assert report.trials == 89
    scored = casstore.rescore(str(JOB), store=tmp_path / "store", metrics="mean", group_by="agent")
    assert scored.to_json()["resolve_rate"] == 0.4157303370786517
    assert scored.group_by == ["agent"]


def test_a_name_with_several_tasks_names_the_argument(tmp_path) -> None:
    tasks = [casstore.discover_tasks(make_task(tmp_path, name))[0] for name in ("a", "b")]
    with casstore.open_store(tmp_path / "store") as store:
        for given in (tasks, iter(tasks), (task for task in tasks)):
            with pytest.raises(UsageError) as raised:
                casstore.publish(store, given, "nm")
            assert str(raised.value) == "name: 'nm' names a single task, and 2 tasks were given"
        with pytest.raises(UsageError) as raised:
            casstore.publish(store, [], "nm")
        assert str(raised.value) == "name: 'nm' names a single task, and no task was given"
