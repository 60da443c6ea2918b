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
from casstore.archive.modes import Modes, check_modes
from casstore.archive.pack import PackResult, pack_tree
from casstore.archive.read import VerifyResult, extract_archive, verify_archive
from casstore.bundle import (
    Manifest,
    Scoring,
    canonical,
    check_destination,
    open_bundle,
    taskset_pins,
    verify_files,
    write_bundle,
)
from casstore.bundle.gage import write_gage
from casstore.comparison.api import compare
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
from casstore.report.api import write_report
from casstore.run.api import RunOptions, RunResult, check_run_options, run_job, score_run  # noqa: F401
from casstore.sources import StoreArgument, check_taskset, load_trials, taskset_views
from casstore.store import DEFAULT_WORKSPACE, Store
from casstore.store.checkout import CheckoutResult
from casstore.store.core import check_store
from casstore.store.fsck import FsckReport
from casstore.store.gc import GcReport
from casstore.store.history import NameLog
from casstore.store.history import log as name_log
from casstore.store.publish import PublishResult
from casstore.store.registrations import Kind, Registration, remove
from casstore.store.registrations import rename as rename_name
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
    "check_run_options",
    "checkout",
    "checkout_remote",
    "compare",
    "create_taskset",
    "discover_tasks",
    "export_gage",
    "extract",
    "fsck",
    "fsck_remote",
    "gc",
    "import_jobs",
    "list_remotes",
    "log",
    "ls_remote",
    "open_bundle",
    "open_store",
    "pack",
    "pack_into",
    "publish",
    "pull",
    "push",
    "remove_remote",
    "rename",
    "replace_taskset",
    "rescore",
    "rescore_remote",
    "rm",
    "run_job",
    "score_run",
    "verify",
    "verify_bundle",
    "verify_each",
    "write_bundle",
    "write_report",
]


def discover_tasks(
    path: Path | str, limits: Limits | None = None, modes: Modes = "keep"
) -> TaskCollection:
    """The Harbor tasks at ``path``: one task directory, or a dataset directory of them (``casstore
    publish`` discovers the same way). Every task is scanned with every packaging check and carries
    its content digest, its modes recorded by ``modes`` (``keep`` or ``git``:
    :mod:`casstore.archive.modes`; publication packs it the same way). Raises
    :class:`~casstore.errors.UsageError` for a path that is not a directory, the check errors of
    :mod:`casstore.errors` for a bad task or dataset."""
    path, limits = arguments.path(path, "path"), arguments.limits(limits)
    return discover(path, limits, check_modes(modes))


def pack(
    source: Path | str,
    out: Path | str | BinaryIO | None,
    compression: Compression | None = None,
    limits: Limits | None = None,
    modes: Modes = "keep",
) -> PackResult:
    """Pack the task directory ``source`` into the archive ``out`` (a path, a binary file, or None
    for the digests only), its modes recorded by ``modes`` (``keep``: as on disk; ``git``:
    :mod:`casstore.archive.modes`); see :func:`casstore.archive.pack.pack_tree`. ``compression``
    defaults to the one a path's name says (``.tar.gz``/``.tgz``, ``.tar.zst``, ``.tar``), else
    gzip; UsageError for one other than gzip, zstd or none, or one the name contradicts
    (:func:`casstore.archive.formats.output_compression`)."""
    source, out, modes = arguments.path(source, "source"), arguments.output(out), check_modes(modes)
    if compression is not None:
        compression = check_compression(compression)
    if isinstance(out, Path):
        compression = output_compression(out, compression)
    return pack_tree(source, out, compression or "gzip", arguments.limits(limits), modes)


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
    modes: Modes = "keep",
) -> Iterator[Outcome[PackResult]]:
    """Pack each task directory of ``sources`` into the folder ``out_dir`` (made when missing) as
    ``<task dir name>.tar.gz`` (``.tar.zst``, ``.tar``): one
    :class:`~casstore.archive.batch.Outcome` per task, in order, as the iterator is consumed; a task
    that fails does not stop the others; ``modes`` as :func:`pack` takes it. Two tasks that would
    get the same file name, or a folder that cannot be made, are a
    :class:`~casstore.errors.UsageError` before any work. See
    :func:`casstore.archive.batch.pack_into`; ``casstore pack DIR... -o OUTDIR`` runs it."""
    paths = [Path(item) for item in arguments.paths(sources, "sources")]
    folder = arguments.path(out_dir, "out_dir")
    compression, modes = check_compression(compression), check_modes(modes)
    return batch.pack_into(paths, folder, compression, arguments.limits(limits), modes)


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
    modes: Modes | None = None,
    **options: Any,
) -> list[PublishResult]:
    """Publish ``tasks`` (one discovered task, several, or a task / dataset directory
    discovered first, its modes recorded by ``modes``: :func:`discover_tasks`) into
    ``store``, each under its default name (``name`` for a single task) with ``options`` as
    :meth:`Store.publish` takes them (``workspace``, ``fileset``, ``prefix``,
    ``compression``, ``create``, ``limits``); identical content returns the existing
    revision. One :class:`PublishResult` per task, in order. Raises as
    :meth:`Store.publish`, and :class:`~casstore.errors.UsageError` for ``name`` with
    several tasks or a ``modes`` other than the one a task given was discovered with."""
    store = check_store(store)
    found = _publishable(tasks, None if modes is None else check_modes(modes))
    if name is not None and len(found) != 1:
        given = f"{len(found)} tasks were given" if found else "no task was given"
        raise UsageError("name", f"{name!r} names a single task, and {given}")
    progress.start(len(found))
    results = []
    for task in found:
        results.append(store.publish(task, name, **options))
        progress.advance(task.id)
    return results


def _publishable(
    tasks: Path | str | DiscoveredTask | Iterable[DiscoveredTask], modes: Modes | None
) -> Sequence[DiscoveredTask]:
    """The tasks :func:`publish` publishes: ``tasks`` discovered (a path) or checked."""
    if arguments.is_path(tasks):
        return discover(Path(tasks), None, modes or "keep")
    found = arguments.tasks(tasks)
    for task in found:
        if modes is not None and task.modes != modes:
            rule = f"{task.id} was discovered with modes {task.modes!r}, not {modes!r}"
            raise UsageError("modes", f"{rule} (discover_tasks(..., modes={modes!r}))")
    return found


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
    bundle: Path | str | None = None,
) -> ScoreReport:
    """Score the trials of ``sources`` (one or several job directories, saved-trials files,
    bundles, ids or names of jobs imported in ``store``: an open :class:`Store`, left open,
    or the root of one), as ``casstore rescore`` does. ``views``: a view file or views; with
    ``taskset`` the trials are checked against that taskset and the views its task revisions
    declare apply too (``views`` win on a name). ``progress``: the trial directories of the
    job directories given, as they are read. ``bundle``: also write the run bundle there
    (:mod:`casstore.bundle`; missing or an empty directory). The other options as
    :func:`scoring.score` takes them, checked before any source is read;
    :mod:`scoring.report` documents the report."""
    found = arguments.paths(sources, "sources")
    opened = store if isinstance(store, Store) else arguments.path(store, "store")
    group_by = arguments.names(group_by, "group_by")
    options = arguments.score_options(ks, threshold, metrics, metric_timeout)
    check_options(**options)
    chosen = arguments.views(views)
    declared = list(load_views(chosen) if isinstance(chosen, Path) else chosen or [])
    dest = None if bundle is None else arguments.path(bundle, "bundle")
    if dest is not None:
        check_destination(dest)
    table, origins, details = load_trials(
        found, opened, reward_key, progress, details=dest is not None
    )
    pins = None
    if taskset is not None:
        names = {view.name for view in declared}
        items = check_taskset(table, opened, arguments.text(taskset, "taskset"))
        declared += [view for view in taskset_views(items) if view.name not in names]
        pins = taskset_pins(taskset, items)
    if dest is None:
        return score(
            table,
            reward_key=reward_key,
            group_by=group_by,
            views=declared,
            origins=origins,
            **options,
        )
    table = canonical(table)  # the same rows in the same order: origins still apply
    report = score(
        table,
        reward_key=reward_key,
        group_by=group_by,
        views=declared,
        origins=origins,
        **options,
    )
    definition = Scoring(
        table.reward_key,
        threshold=options["threshold"],
        ks=None if options["ks"] is None else [int(k) for k in options["ks"]],
        group_by=list(group_by),
        metrics=[str(metric) for metric in options["metrics"]],
        metric_timeout=options["metric_timeout"],
        views=declared,
    )
    sources_given = [str(source) for source in found]
    write_bundle(
        dest,
        report,
        definition,
        details=details,
        sources=sources_given,
        origins=origins,
        taskset=pins,
    )
    return report


def export_gage(
    job: Path | str,
    dest: Path | str,
    store: StoreArgument = ".casstore",
    reward_key: str | None = None,
) -> ScoreReport:
    """Write the GAGE export of ``job`` (an imported job's id or name, a job directory or a
    bundle) to the folder ``dest`` (missing or empty), scored with rescore's defaults, as
    ``casstore export JOB --format gage -o DIR`` does (:mod:`casstore.bundle.gage`); returns
    the report the export's numbers come from."""
    source = arguments.path(job, "job")
    opened = store if isinstance(store, Store) else arguments.path(store, "store")
    folder = arguments.path(dest, "dest")
    check_destination(folder)
    table, _, details = load_trials([source], opened, reward_key)
    report = score(canonical(table))
    paths = [d.result_path for d in details or [] if d.result_path]
    job_dir = str(Path(paths[0]).parent.parent) if paths else None
    write_gage(folder, report, details or [], job_dir)
    return report


def verify_bundle(path: Path | str) -> Manifest:
    """Check every file of the bundle ``path`` against its manifest (``casstore
    verify-bundle``); raises the error naming the first file that fails."""
    return verify_files(arguments.path(path, "path"))


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


def log(store: Store, name: str, kind: Kind | None = None) -> NameLog:
    """The revision history of the taskset (tried first) or task ``name``, newest first,
    with what changed from each revision to the next (``casstore log``; see
    :mod:`casstore.store.history`); ``kind`` (``"task"``, ``"taskset"``) to choose."""
    return name_log(check_store(store), arguments.text(name, "name"), kind)


def rm(store: Store, name: str, kind: Kind | None = None) -> Registration:
    """Remove the task or taskset name ``name`` (``casstore rm``); its revisions and archives
    stay until :func:`gc`, which keeps those a named taskset pins."""
    return remove(check_store(store), arguments.text(name, "name"), kind)


def rename(store: Store, old: str, new: str, kind: Kind | None = None) -> Registration:
    """Rename the task or taskset ``old`` to ``new`` in its workspace, its history kept
    (``casstore rename``); refused when ``new`` is a name already."""
    return rename_name(
        check_store(store), arguments.text(old, "old"), arguments.text(new, "new"), kind
    )


def rescore_remote(store: Store, jobs: Sequence[str], **options: Any) -> ScoreReport:
    """``casstore rescore NAME:JOB...``: the jobs of the store's remotes pulled, checked, into a
    private temporary store (``store`` is not written) and scored as :func:`rescore` scores
    them (``options`` are its keyword arguments but ``store``)."""
    with remote_jobs(check_store(store), arguments.names(jobs, "jobs")) as (pulled, ids):
        return rescore(ids, pulled, **options)
