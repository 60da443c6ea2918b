"""casstore's public Python API: the operations of the command line, as functions.

Re-exported by :mod:`casstore` (its docstring has an example). Each function is the one the
command of the same name runs; the CLI adds only argument parsing and printing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from casstore import arguments
from casstore.archive import batch
from casstore.archive.batch import Outcome
from casstore.archive.compress import Compression, check_compression
from casstore.archive.discover import DiscoveredTask, TaskCollection, discover
from casstore.archive.formats import output_compression
from casstore.archive.limits import Limits
from casstore.archive.pack import PackResult, pack_tree
from casstore.archive.read import VerifyResult, extract_archive, verify_archive
from casstore.digest import Digest
from casstore.errors import UsageError
from casstore.progress import NO_PROGRESS, Progress
from casstore.remote.api import (
    add_remote,
    checkout_remote,
    fsck_remote,
    list_remotes,
    ls_remote,
    pull,
    push,
    remote_jobs,
    remove_remote,
)
from casstore.sources import StoreArgument, check_taskset, load_sources, taskset_views
from casstore.store import DEFAULT_WORKSPACE, Store
from casstore.store.checkout import CheckoutResult
from casstore.store.core import check_store
from casstore.store.fsck import FsckReport
from casstore.store.gc import GcReport
from casstore.store.publish import PublishResult
from casstore.store.tasksets import TasksetResult
from casstore.trials.check import check_jobs
from casstore.trials.jobstore import Jobs
from casstore.trials.orphans import remove_orphans
from casstore.trials.records import ImportReport
from scoring import (
    DEFAULT_GROUP_BY,
    DEFAULT_METRIC_TIMEOUT,
    ScoreReport,
    View,
    check_options,
    count_attempts,
    load_views,
    score,
)

__all__ = [
    "add_remote",
    "checkout",
    "checkout_remote",
    "create_taskset",
    "discover_tasks",
    "extract",
    "fsck",
    "fsck_remote",
    "gc",
    "import_jobs",
    "list_remotes",
    "ls_remote",
    "open_store",
    "pack",
    "pack_into",
    "publish",
    "pull",
    "push",
    "remove_remote",
    "replace_taskset",
    "rescore",
    "rescore_remote",
    "verify",
    "verify_each",
]


def discover_tasks(path: Path | str, limits: Limits | None = None) -> TaskCollection:
    """The Harbor tasks at ``path``: one task directory, or a dataset directory of them
    (``casstore publish`` discovers the same way). Every task is scanned with every packaging
    check and carries its content digest. Raises :class:`~casstore.errors.UsageError` for a
    path that is not a directory, the check errors of :mod:`casstore.errors` for a bad task
    or dataset."""
    return discover(arguments.path(path, "path"), arguments.limits(limits))


def pack(
    source: Path | str,
    out: Path | str | BinaryIO | None,
    compression: Compression | None = None,
    limits: Limits | None = None,
) -> PackResult:
    """Pack the task directory ``source`` into the archive ``out`` (a path, a binary file, or
    None for the digests only); see :func:`casstore.archive.pack.pack_tree`. ``compression``
    defaults to the one a path's name says (``.tar.gz``/``.tgz``, ``.tar.zst``, ``.tar``),
    else gzip; UsageError for one other than gzip, zstd or none, or one the name contradicts
    (:func:`casstore.archive.formats.output_compression`)."""
    source, out = arguments.path(source, "source"), arguments.output(out)
    if compression is not None:
        compression = check_compression(compression)
    if isinstance(out, Path):
        compression = output_compression(out, compression)
    return pack_tree(source, out, compression or "gzip", arguments.limits(limits))


def verify(
    archive: Path | str, expect: Digest | str | None = None, limits: Limits | None = None
) -> VerifyResult:
    """Verify an archive (its address against ``expect`` when given, its structure, its
    canonical form); raises the check error naming the entry and the rule. See
    :func:`casstore.archive.read.verify_archive`."""
    archive, expect = arguments.path(archive, "archive"), arguments.address(expect)
    return verify_archive(archive, expect, arguments.limits(limits))


def verify_each(
    archives: Iterable[Path | str] | Path | str, limits: Limits | None = None
) -> Iterator[Outcome[VerifyResult]]:
    """Verify each of ``archives`` (one path, or several) in turn, as :func:`verify` does
    without an expected address: one :class:`~casstore.archive.batch.Outcome` per archive, in
    order, each yielded as soon as it is done; an archive that fails (its ``error``) does not
    stop the others. See :func:`casstore.archive.batch.verify_each`; ``casstore verify FILE...``
    runs it."""
    paths = [Path(item) for item in arguments.paths(archives, "archives")]
    return batch.verify_each(paths, arguments.limits(limits))


def pack_into(
    sources: Iterable[Path | str] | Path | str,
    out_dir: Path | str,
    compression: Compression = "gzip",
    limits: Limits | None = None,
) -> Iterator[Outcome[PackResult]]:
    """Pack each task directory of ``sources`` into the folder ``out_dir`` (made when
    missing) as ``<task dir name>.tar.gz`` (``.tar.zst``, ``.tar``): one
    :class:`~casstore.archive.batch.Outcome` per task, in order, as the iterator is consumed;
    a task that fails does not stop the others. Two tasks that would get the same file name,
    or a folder that cannot be made, are a :class:`~casstore.errors.UsageError` before any
    work. See :func:`casstore.archive.batch.pack_into`; ``casstore pack DIR... -o OUTDIR``
    runs it."""
    paths = [Path(item) for item in arguments.paths(sources, "sources")]
    folder = arguments.path(out_dir, "out_dir")
    compression = check_compression(compression)
    return batch.pack_into(paths, folder, compression, arguments.limits(limits))


def extract(
    archive: Path | str,
    dest: Path | str,
    expect: Digest | str | None = None,
    limits: Limits | None = None,
) -> VerifyResult:
    """Verify ``archive`` while extracting it to ``dest`` (missing, its parents made, or an
    empty directory: :class:`casstore.archive.destination.Destination`); nothing is left on
    failure. See :func:`casstore.archive.read.extract_archive`."""
    archive, dest = arguments.path(archive, "archive"), arguments.path(dest, "dest")
    expect = arguments.address(expect)
    return extract_archive(archive, dest, expect, arguments.limits(limits))


def open_store(root: Path | str = ".casstore", *, create: bool = True) -> Store:
    """The store at ``root`` (created when missing unless ``create`` is False: then
    :class:`~casstore.errors.UsageError` naming ``root``). Use it as a context manager;
    ``store.tasks.replace(name, task)`` and ``store.tasksets.create(name, tasks=[...])``
    publish and pin, as the SDK's resources do."""
    return Store(arguments.path(root, "root"), create=create)


def publish(
    store: Store,
    tasks: Path | str | DiscoveredTask | Iterable[DiscoveredTask],
    name: str | None = None,
    *,
    progress: Progress = NO_PROGRESS,
    **options: Any,
) -> list[PublishResult]:
    """Publish ``tasks`` (one discovered task, several, or a task / dataset directory
    discovered first) into ``store``, each under its default name (``name`` for a single
    task) with ``options`` as :meth:`Store.publish` takes them (``workspace``, ``fileset``,
    ``prefix``, ``compression``, ``create``, ``limits``); identical content returns the
    existing revision. One :class:`PublishResult` per task, in order. Raises as
    :meth:`Store.publish`, and :class:`~casstore.errors.UsageError` for ``name`` with
    several tasks."""
    store = check_store(store)
    found = discover(Path(tasks)) if arguments.is_path(tasks) else arguments.tasks(tasks)
    if name is not None and len(found) != 1:
        given = f"{len(found)} tasks were given" if found else "no task was given"
        raise UsageError("name", f"{name!r} names a single task, and {given}")
    progress.start(len(found))
    results = []
    for task in found:
        results.append(store.publish(task, name, **options))
        progress.advance(task.id)
    return results


def create_taskset(
    store: Store, name: str, tasks: Sequence[str] | str, workspace: str = DEFAULT_WORKSPACE
) -> TasksetResult:
    """A new taskset ``name`` pinning the current revision of each task reference in
    ``tasks`` (one, or several: names in ``workspace``, ``ws/name`` or ``ws/name#digest``);
    later task updates do not change it. Raises :class:`~casstore.errors.StoreError` if the
    name exists. See :attr:`Store.tasksets`."""
    pins = arguments.names(tasks, "tasks")
    return check_store(store).tasksets.create(arguments.text(name, "name"), pins, workspace)


def replace_taskset(
    store: Store, name: str, tasks: Sequence[str] | str, workspace: str = DEFAULT_WORKSPACE
) -> TasksetResult:
    """Create the taskset ``name`` or add a revision pinning ``tasks`` now (identical pins
    return the existing revision, ``reused``)."""
    pins = arguments.names(tasks, "tasks")
    return check_store(store).tasksets.replace(arguments.text(name, "name"), pins, workspace)


def checkout(
    store: Store, ref: str, dest: Path | str, progress: Progress = NO_PROGRESS
) -> CheckoutResult:
    """Check a taskset (or task) reference out of ``store`` into the dataset directory
    ``dest`` (``extract``'s rule: missing or an empty directory): every archive verified,
    extracted safely and loaded with Harbor's ``Task`` (what a worker does before ``harbor
    run``). See :func:`casstore.store.checkout.checkout`."""
    ref, dest = arguments.text(ref, "ref"), arguments.path(dest, "dest")
    return check_store(store).checkout(ref, dest, progress)


def import_jobs(
    store: Store,
    paths: Sequence[Path | str] | Path | str,
    reward_key: str = "reward",
    name: str | None = None,
    progress: Progress | None = None,
) -> list[ImportReport]:
    """Import Harbor job directories (one, or several; or directories of them, or
    saved-trials ``.jsonl`` files) into ``store``: one :class:`ImportReport` per job, its
    ``counts`` the breakdown ``rescore`` gives of the job (:func:`scoring.count_attempts`).
    See :class:`Jobs`."""
    found = arguments.paths(paths, "paths")
    jobs = Jobs(store)
    reports = jobs.import_jobs(found, arguments.text(reward_key, "reward_key"), name, progress)
    for report in reports:  # the breakdown rescore prints: scoring's statuses
        report.counts = count_attempts(jobs.reward_table(report.job))
    return reports


def rescore(
    sources: Sequence[Path | str] | Path | str,
    store: StoreArgument = ".casstore",
    *,
    reward_key: str | None = None,
    ks: Sequence[int] | None = None,
    threshold: float = 1.0,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    metrics: Sequence[str | Path] = ("mean",),
    views: Sequence[View] | Path | str | None = None,
    taskset: str | None = None,
    metric_timeout: float = DEFAULT_METRIC_TIMEOUT,
    progress: Progress = NO_PROGRESS,
) -> ScoreReport:
    """Score the trials of ``sources`` (one or several job directories, saved-trials files,
    ids or names of jobs imported in ``store``: an open :class:`Store`, left open, or the root
    of one), as ``casstore rescore`` does. ``views``: a view file or views; with ``taskset``
    the trials are checked against that taskset and the views its task revisions declare
    apply too (``views`` win on a name). ``progress``: the trial directories of the job
    directories given, as they are read. The other options as :func:`scoring.score` takes
    them, checked before any source is read; :mod:`scoring.report` documents the report."""
    found = arguments.paths(sources, "sources")
    opened = store if isinstance(store, Store) else arguments.path(store, "store")
    group_by = arguments.names(group_by, "group_by")
    options = arguments.score_options(ks, threshold, metrics, metric_timeout)
    check_options(**options)
    chosen = arguments.views(views)
    declared = list(load_views(chosen) if isinstance(chosen, Path) else chosen or [])
    table = load_sources(found, opened, reward_key, progress)
    if taskset is not None:
        names = {view.name for view in declared}
        items = check_taskset(table, opened, arguments.text(taskset, "taskset"))
        declared += [view for view in taskset_views(items) if view.name not in names]
    return score(table, reward_key=reward_key, group_by=group_by, views=declared, **options)


def fsck(store: Store, progress: Progress = NO_PROGRESS) -> FsckReport:
    """Re-verify every archive, reference and imported job of ``store`` (what ``casstore
    fsck`` reports); never modifies anything. See :func:`casstore.store.fsck.fsck` and
    :func:`casstore.trials.check.check_jobs` for the problem kinds."""
    return check_store(store).fsck(progress, checks=(check_jobs,))


def gc(store: Store, dry_run: bool = False, min_age: float = 60.0) -> GcReport:
    """Remove the archive files of ``store`` that no revision references, and leftover
    temporaries, older than ``min_age`` seconds, and the imported jobs' values no job record
    references (``job_data``; ``dry_run``: only list them), as ``casstore gc`` does; see
    :func:`casstore.store.gc.gc` and :func:`casstore.trials.orphans.remove_orphans`."""
    checked = check_store(store)
    report = checked.gc(dry_run=dry_run, min_age=arguments.number(min_age, "min_age"))
    orphans = remove_orphans(checked.index, dry_run)
    freed = report.freed_bytes + sum(orphan.size for orphan in orphans)
    data = [f"{orphan.db}/{orphan.key}" for orphan in orphans]
    return report.model_copy(update={"job_data": data, "freed_bytes": freed})


def rescore_remote(store: Store, jobs: Sequence[str], **options: Any) -> ScoreReport:
    """``casstore rescore NAME:JOB...``: the jobs of the store's remotes pulled, checked, into a
    private temporary store (``store`` is not written) and scored as :func:`rescore` scores
    them (``options`` are its keyword arguments but ``store``)."""
    with remote_jobs(check_store(store), arguments.names(jobs, "jobs")) as (pulled, ids):
        return rescore(ids, pulled, **options)
