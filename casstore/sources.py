"""Where trials come from: job directories, ``trials.jsonl`` files, imported jobs, tasksets.

:func:`load_sources` turns ``casstore rescore SOURCE...`` arguments into one
:class:`~casstore.table.columns.RewardTable` and, beside it, where each row came from (its
``origins``, what ``--group-by job,source`` groups by: :mod:`casstore.origins`), as a
:class:`Loaded`:

* an existing directory: the Harbor job directories in it (``casstore.trials.find_jobs``),
  each parsed directly (``read_job``) with ``reward_key`` (default ``reward``);
* an existing ``.jsonl`` that is no directory: saved trials (``read_trials_jsonl``; their
  recorded reward key; a FIFO, a device or a socket refused as not a regular file);
* a bundle directory (``casstore rescore --bundle DIR`` wrote it: :mod:`casstore.bundle`):
  its samples, every file checked against its manifest first;
* anything else: the id or name of a job imported in the store
  (``Jobs(store).reward_table``): an open :class:`~casstore.store.Store`, or its root,
  opened once, for the first such source.

A SOURCE that looks like a path (holds ``/`` or ends with ``.jsonl``) but does not exist is a
:class:`UsageError` ("no such file or directory") unless it is the name of an imported job; so
is an existing file that is no imported job's name either, saying it holds no trials (and
naming a Terminal-Bench 1 ``results.json`` as such: ``casstore.trials.find.not_a_job_file``).

All sources must agree on the primary reward key (:func:`casstore.table.concat.concat_tables`
refuses a mix). Each trial (job id + trial name) may be given once: the same trial reached
twice (the same job directory named twice, an imported job plus its own job directory or
exported trials.jsonl, a trials file holding a line twice) is a :class:`ScoringError` naming
the trial and both sources, never silently counted twice nor silently dropped.

:func:`check_taskset` matches the trials against a taskset's tasks (``Store.resolve``): a
trial whose task is not in the taskset, or a taskset task without trials, is an error naming
them; :func:`taskset_views` returns the views declared by the taskset's task revisions.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np

from casstore.bundle.read import Bundle, is_bundle, open_bundle
from casstore.bundle.samples import Details
from casstore.errors import ScoringError, UnknownReferenceError, UsageError
from casstore.inputs import not_regular
from casstore.origins import Origins
from casstore.progress import NO_PROGRESS, Progress
from casstore.store import Store, TaskRevision
from casstore.table.columns import RewardTable
from casstore.table.concat import concat_tables
from casstore.trials import (
    Jobs,
    TrialRecord,
    find_jobs,
    read_job,
    read_trials_jsonl,
    table_from_records,
)
from casstore.trials.find import not_a_job_file, subdir_names
from scoring import View, parse_views

__all__ = [
    "Loaded",
    "StoreArgument",
    "check_taskset",
    "load_sources",
    "load_trials",
    "open_store",
    "taskset_views",
]


type StoreArgument = Store | Path | str
"""A store as the functions here take it: an open :class:`Store` (used, left open) or the
root of an existing one (opened, and closed again)."""


def open_store(root: Path | str) -> Store:
    """Open an existing store (never create one for reading); UsageError when there is none."""
    return Store(root, create=False)


@contextmanager
def _opened(store: StoreArgument) -> Iterator[Store]:
    """``store`` itself when it is open (left open), else the store at that root, closed
    after."""
    if isinstance(store, Store):
        yield store
        return
    with open_store(store) as opened:
        yield opened


class Loaded(NamedTuple):
    """The trials of the sources: one ``table``; the ``origins`` of its rows
    (``{"source": (codes, labels), "job": (codes, labels)}``, codes int32[n]; ``job`` absent
    when a job directory or imported job held several jobs) for :func:`scoring.score`; and,
    when asked for, each row's ``details`` (else None)."""

    table: RewardTable
    origins: dict[str, tuple[np.ndarray, list[str]]]
    details: list[Details] | None = None


def load_sources(
    sources: Sequence[str | Path],
    store: StoreArgument,
    reward_key: str | None = None,
    progress: Progress = NO_PROGRESS,
) -> Loaded:
    """The trials of every source, as one table with its rows' origins (see the module
    docstring); ``store`` is read
    only for imported jobs (a root is opened once, for the first of them). ``progress``:
    ``start(trial directories of the job directories given)``, then ``advance`` per trial
    directory read (imported jobs, trials files and bundles are read whole, unreported).

    Raises ScoringError when a trial (job id + trial name) is given twice, UsageError when a
    path-like source does not exist.
    """
    return load_trials(sources, store, reward_key, progress, details=False)


def load_trials(
    sources: Sequence[str | Path],
    store: StoreArgument,
    reward_key: str | None = None,
    progress: Progress = NO_PROGRESS,
    *,
    details: bool = True,
) -> Loaded:
    """:func:`load_sources`' table and origins and, with ``details``, each row's
    :data:`~casstore.bundle.samples.Details`, its trial record or bundle sample (job,
    exception message, timings, tokens, evidence and trace references: what a bundle's samples
    say beyond the table); else None.
    """
    tables: list[RewardTable] = []
    rows: list[Sequence[Details]] = []
    origins = Origins()
    trials = _TrialSources()
    listings = _listings(sources)
    if listings:
        progress.start(sum(len(names) for names in listings.values()))
    with ExitStack() as stack:
        opened = None
        for source in sources:
            path = Path(source)
            if path.is_dir() and is_bundle(path):
                bundle = _bundle(path, trials, details)
                table, found = bundle.table, list[Details](bundle.details)
                origins.add(
                    str(source), table, None, row_jobs=bundle.job_ids, row_labels=bundle.labels
                )
            elif path.is_dir():
                for job, table, found in _job_directories(
                    path, reward_key, trials, listings, progress, details
                ):
                    origins.add(str(source), table, job.name)
                    tables.append(table)
                    rows.append(found)
                continue
            elif path.suffix == ".jsonl" and path.exists():  # a FIFO too: refused as one
                table, records, found = _trials_file(path, trials, details)
                origins.add(str(source), table, None, records)
            else:
                with _lookup(source, (UsageError, UnknownReferenceError)):
                    if opened is None:
                        opened = stack.enter_context(_opened(store))
                    table, name, found = _imported_job(opened, str(source), trials, details)
                    origins.add(str(source), table, name)
            tables.append(table)
            rows.append(found)
    every = [d for found in rows for d in found] if details else None
    return Loaded(concat_tables(tables), origins.columns(), every)


def _listings(sources: Sequence[str | Path]) -> dict[Path, list[str]]:
    """The trial directories of every job directory found in the directory ``sources``."""
    jobs = [
        job
        for source in sources
        if Path(source).is_dir() and not is_bundle(source)
        for job in find_jobs([source])
    ]
    return {job: subdir_names(job) for job in jobs}


def _job_directories(
    path: Path,
    reward_key: str | None,
    trials: _TrialSources,
    listings: dict[Path, list[str]],
    progress: Progress,
    details: bool,
) -> Iterator[tuple[Path, RewardTable, list[Details]]]:
    """Every Harbor job directory at ``path`` with its table (and details; parsed
    directly)."""
    for job in find_jobs([path]):
        parsed = read_job(
            job, reward_key or "reward", trial_dirs=listings.get(job), progress=progress.advance
        )
        table = parsed.table
        trials.add(str(job), _by_job(table))
        yield job, table, _details(table, parsed.trials, str(job)) if details else []


def _bundle(path: Path, trials: _TrialSources, details: bool) -> Bundle:
    """The bundle at ``path`` (checked against its manifest; with its details or none), its
    trials noted."""
    bundle = open_bundle(path, details)
    table = bundle.table
    by_job: dict[str, list[str]] = {}
    for name, job in zip(table.trials, bundle.job_ids, strict=True):
        by_job.setdefault(job, []).append(name)
    trials.add(f"bundle {path}", by_job, unique=False)
    return bundle


def _trials_file(
    path: Path, trials: _TrialSources, details: bool
) -> tuple[RewardTable, list[TrialRecord], list[Details]]:
    """The table of the saved trials in ``path`` (a ``trials.jsonl``; their reward key), the
    records, and the details."""
    key, records = read_trials_jsonl(path)
    by_job: dict[str, list[str]] = {}
    for record in records:
        by_job.setdefault(record.job_id, []).append(record.trial_name)
    trials.add(str(path), by_job, unique=False)
    table = table_from_records(records, key)
    return table, records, _details(table, records, str(path)) if details else []


def _imported_job(
    store: Store, source: str, trials: _TrialSources, details: bool
) -> tuple[RewardTable, str, list[Details]]:
    """The table of the job imported in ``store`` under the id or name ``source``, the job's
    registered name, and the details."""
    jobs = Jobs(store)
    table = jobs.reward_table(source)
    trials.add(f"imported job {source}", _by_job(table))
    name = jobs.get(source).name
    if not details:
        return table, name, []
    return table, name, _details(table, jobs.trial_records(source), f"imported job {source}")


def _details(table: RewardTable, records: Sequence[TrialRecord], source: str) -> list[Details]:
    """The trial record of each row of ``table``, from the ``records`` it was built from (rows
    are by task, then job, attempt and trial name); ScoringError when they do not match."""
    position = {name: i for i, name in enumerate(table.tasks)}
    order = sorted(
        records,
        key=lambda r: (position.get(r.task_name, -1), r.job_id, r.attempt, r.trial_name),
    )
    names = list(table.trials)
    if len(order) != len(names) or any(
        r.trial_name != name for r, name in zip(order, names, strict=False)
    ):
        raise ScoringError(source, "the trial records do not match the reward table's rows")
    return list(order)


@contextmanager
def _lookup(
    source: str | Path, not_found: type[Exception] | tuple[type[Exception], ...]
) -> Iterator[None]:
    """Looking ``source`` up in the store, where ``not_found`` means it is not there (no
    store, or no job of that name): a ``source`` that looks like a path (holds ``/`` or ends
    with ``.jsonl``) and names nothing is reported as a missing path instead, an existing
    file as a file that holds no trials (:func:`~casstore.trials.find.not_a_job_file`), and a
    FIFO, device or socket as not a regular file."""
    try:
        yield
    except not_found:
        text = str(source)
        if Path(source).is_file():
            raise not_a_job_file(source) from None
        try:
            mode = os.stat(source).st_mode
        except OSError:
            mode = None
        problem = None if mode is None or stat.S_ISDIR(mode) else not_regular(mode)
        if problem:  # a FIFO or a device: named as one, never looked up as a job name
            raise UsageError(text, problem) from None
        if ("/" in text or text.endswith(".jsonl")) and not Path(source).exists():
            raise UsageError(text, "no such file or directory") from None
        raise


def _by_job(table: RewardTable) -> dict[str, Sequence[str]]:
    """``{job id: trial names}`` of a table built from one job (every directory or imported
    table); a table of several jobs without a per-row job keeps its trials under all of them
    joined (still catches the same table given twice)."""
    return {"+".join(table.jobs): table.trials}


class _TrialSources:
    """Which source gave each trial: refuses the same (job id, trial name) twice.

    Trial names are only compared within a job id given by more than one source (sources of
    different jobs cost nothing); ``unique=False`` also checks one source's own trials (a
    trials file may repeat a line; a job directory or an imported job cannot).
    """

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[str, Sequence[str]]]] = {}

    def add(self, source: str, by_job: Mapping[str, Sequence[str]], *, unique: bool = True) -> None:
        """Record the trials ``source`` gives (``{job id: trial names}``); ScoringError naming
        a trial given twice and both of its sources."""
        for job, names in by_job.items():
            if not unique:
                _check_repeats(job, names, source)
            earlier = self._seen.setdefault(job, [])
            if earlier:
                _check_given_once(job, names, source, earlier)
            earlier.append((source, names))


def _check_given_once(
    job: str, names: Sequence[str], source: str, earlier: list[tuple[str, Sequence[str]]]
) -> None:
    """ScoringError when one of the trial ``names`` of ``job`` came from an ``earlier`` source."""
    given = set(names)
    for other, other_names in earlier:
        common = given.intersection(other_names)
        if common:
            where = f"{source} is given twice" if other == source else f"by {other} and by {source}"
            raise ScoringError(
                f"{job}/{min(common)}",
                f"trial given twice, {where} ({len(common)} repeated trial(s)); "
                "pass each trial once",
            )


def _check_repeats(job: str, names: Sequence[str], source: str) -> None:
    """ScoringError when ``source`` itself gives one of the trial ``names`` of ``job`` twice."""
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    if twice:
        raise ScoringError(
            f"{job}/{min(twice)}",
            f"trial given twice by {source} ({len(twice)} repeated trial(s)); pass each trial once",
        )


def _resolve(store: StoreArgument, ref: str) -> list[tuple[str, TaskRevision]]:
    """The ``(task key, revision)`` pairs of taskset (or task) ``ref``."""
    with _opened(store) as opened:
        return opened.resolve(ref)[1]


def _identities(key: str, revision: TaskRevision) -> set[str]:
    """The names a trial may give task ``key``: its key, name, native id and directory name."""
    names = {key, key.rsplit("/", 1)[-1]}
    for value in (revision.native_id, revision.dir_name):
        if value:
            names.add(value)
    return names


def check_taskset(
    table: RewardTable, store: StoreArgument, ref: str
) -> list[tuple[str, TaskRevision]]:
    """Check ``table`` against the taskset ``ref`` of ``store`` (open, or its root); returns
    its ``(task key, revision)`` pairs.

    A trial task matches a taskset task by the task's key, name, native id or directory name.
    """
    items = _resolve(store, ref)
    identities = [(key, _identities(key, revision)) for key, revision in items]
    known = set().union(*(ids for _, ids in identities)) if identities else set()
    counts = np.bincount(table.task, minlength=len(table.tasks))
    used = {name for name, count in zip(table.tasks, counts.tolist(), strict=True) if count}
    unknown = sorted(used - known)
    if unknown:
        raise ScoringError(
            ref,
            f"{len(unknown)} trial task(s) not in the taskset: {_first_ten(unknown)}",
        )
    missing = [key for key, ids in identities if not ids & used]
    if missing:
        raise ScoringError(
            ref,
            f"{len(missing)} taskset task(s) without trials: {_first_ten(missing)}",
        )
    return items


def _first_ten(names: list[str]) -> str:
    """The first ten ``names``, comma-separated, with `` …`` when there are more."""
    return ", ".join(names[:10]) + (" …" if len(names) > 10 else "")


def taskset_views(items: Sequence[tuple[str, TaskRevision]]) -> list[View]:
    """The views declared by the task revisions (first declaration of a name wins)."""
    views: dict[str, View] = {}
    for key, revision in items:
        declared = revision.views
        if declared:
            for view in parse_views(list(declared), key):
                views.setdefault(view.name, view)
    return list(views.values())
