"""casstore: a content-addressed archive store and metrics engine for Harbor.

The public Python API (every name of ``__all__``; the same operations as the ``casstore``
command)::

    import casstore

    tasks = casstore.discover_tasks("./mydataset")         # Harbor's tasks, checked
    with casstore.open_store(".casstore") as store:
        published = casstore.publish(store, tasks)        # pack, store, verify, register
        casstore.create_taskset(store, "suite", [p.name for p in published])
        casstore.checkout(store, "default/suite", "dataset")  # what a worker runs
        casstore.import_jobs(store, ["jobs/2026-05-10__01-23-57"])
    report = casstore.rescore(["2026-05-10__01-23-57"], store=".casstore")
    print(report.to_json()["resolve_rate"])

Names are loaded on first use, so ``import casstore`` costs nothing until one is used; the
modules ``casstore.errors``, ``casstore.names`` and ``casstore.digest`` are served too.

Glossary (one word per thing):

- **task**: a Harbor task directory (``task.toml``, ``instruction.md`` or ``steps/``);
  **dataset**: a directory of tasks; the **native id** is Harbor's name of a task.
- **archive**: the deterministic tar (gzip, zstd or none) of one task; to **pack** is to
  write one. Its **address** is ``sha256:<hex>`` of the archive's bytes; its **content
  digest** is ``blake3:<hex>`` of the uncompressed canonical tar (the same for every
  compression). A **digest** is ``<algorithm>:<64 hex>`` (:class:`casstore.digest.Digest`):
  addresses, content digests, revision digests, evidence keys and dictionary ids are digests.
- **store**: one directory holding an LMDB **index** and **filesets**: a fileset is a tree
  of immutable archive files (``<workspace>/<fileset>#<path>``, an **archive reference**).
- **revision**: one published state of a task (or a taskset's pins), named by the digest
  of its canonical record; a **reference** names a task or taskset: ``workspace/name``
  (latest revision) or ``workspace/name#<revision digest>``.
- **taskset**: a named, pinned list of task revisions.
- **job**: one ``harbor run`` output directory; **trial**: one attempt of one task in a job
  (one trial directory, one ``result.json``): trial and **attempt** name the same thing, a
  trial's ``attempt`` (its **attempt index**) numbers its task's trials from 0. The
  **verifier** writes the trial's **rewards**; the **reward key** selects the primary reward.
- **evidence**: the raw ``result.json`` bytes kept (zstd) in the store; an **evidence pack**
  holds the evidence of a chunk of trials, a **trial pack** the records of up to 500 trials
  (LMDB values, not archives).
- **reward table**: the columns (one row per trial) import writes and scoring reads
  (:mod:`casstore.table`); a **failure code** says why a trial is not cleanly scored
  (:class:`casstore.table.codes.FailureCode`); a trial's **status** (scored, partial,
  errored, no_verifier, invalid) is scoring's verdict on it (:mod:`scoring._rules`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from casstore.lazy import load_name

if TYPE_CHECKING:
    from casstore.api import (
        add_remote,
        check_run_options,
        checkout,
        checkout_remote,
        compare,
        create_taskset,
        discover_tasks,
        export_gage,
        extract,
        fsck,
        fsck_remote,
        gc,
        import_jobs,
        list_remotes,
        log,
        ls_remote,
        open_bundle,
        open_store,
        pack,
        pack_into,
        publish,
        pull,
        push,
        remove_remote,
        rename,
        replace_taskset,
        rescore,
        rescore_remote,
        rm,
        run_job,
        score_run,
        verify,
        verify_bundle,
        verify_each,
        write_bundle,
        write_report,
    )
    from casstore.archive.batch import Outcome
    from casstore.archive.discover import DiscoveredTask, TaskCollection
    from casstore.archive.limits import Limits
    from casstore.archive.pack import PackResult
    from casstore.archive.read import VerifyResult
    from casstore.bundle.read import Bundle
    from casstore.comparison.api import Comparison
    from casstore.errors import CasstoreError
    from casstore.progress import Progress
    from casstore.remote.config import Remote
    from casstore.remote.fsck import RemoteFsckReport
    from casstore.remote.pull import PullReport
    from casstore.remote.push import PushReport
    from casstore.report.api import ReportResult
    from casstore.run.api import RunOptions, RunResult
    from casstore.store import Store
    from casstore.store.checkout import CheckoutResult
    from casstore.store.fsck import FsckReport
    from casstore.store.gc import GcReport
    from casstore.store.history import NameLog
    from casstore.store.publish import PublishResult
    from casstore.store.registrations import Registration
    from casstore.store.tasksets import TasksetResult
    from casstore.table.columns import RewardTable
    from casstore.trials.jobstore import Jobs
    from casstore.trials.records import ImportReport, JobRecord, TrialRecord
    from scoring import ScoreReport, View

__all__ = [
    "Bundle",
    "CasstoreError",
    "CheckoutResult",
    "Comparison",
    "DiscoveredTask",
    "FsckReport",
    "GcReport",
    "ImportReport",
    "JobRecord",
    "Jobs",
    "Limits",
    "NameLog",
    "Outcome",
    "PackResult",
    "Progress",
    "PublishResult",
    "PullReport",
    "PushReport",
    "Registration",
    "Remote",
    "RemoteFsckReport",
    "ReportResult",
    "RewardTable",
    "RunOptions",
    "RunResult",
    "ScoreReport",
    "Store",
    "TaskCollection",
    "TasksetResult",
    "TrialRecord",
    "VerifyResult",
    "View",
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

_HOMES = {
    "Bundle": "casstore.bundle.read",
    "CasstoreError": "casstore.errors",
    "CheckoutResult": "casstore.store.checkout",
    "Comparison": "casstore.comparison.api",
    "DiscoveredTask": "casstore.archive.discover",
    "FsckReport": "casstore.store.fsck",
    "GcReport": "casstore.store.gc",
    "ImportReport": "casstore.trials.records",
    "NameLog": "casstore.store.history",
    "Registration": "casstore.store.registrations",
    "JobRecord": "casstore.trials.records",
    "Jobs": "casstore.trials.jobstore",
    "Limits": "casstore.archive.limits",
    "Outcome": "casstore.archive.batch",
    "PackResult": "casstore.archive.pack",
    "Progress": "casstore.progress",
    "PublishResult": "casstore.store.publish",
    "ReportResult": "casstore.report.api",
    "PullReport": "casstore.remote.pull",
    "PushReport": "casstore.remote.push",
    "Remote": "casstore.remote.config",
    "RemoteFsckReport": "casstore.remote.fsck",
    "RewardTable": "casstore.table.columns",
    "RunOptions": "casstore.run.api",
    "RunResult": "casstore.run.api",
    "ScoreReport": "scoring",
    "Store": "casstore.store",
    "TaskCollection": "casstore.archive.discover",
    "TasksetResult": "casstore.store.tasksets",
    "TrialRecord": "casstore.trials.records",
    "VerifyResult": "casstore.archive.read",
    "View": "scoring",
} | {name: "casstore.api" for name in __all__ if name[0].islower()}
_SUBMODULES = ("digest", "errors", "names")
"""Modules served as attributes too (``casstore.names.default_name``), not in ``__all__``."""


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` (imported from its module on first use), or a module of
    :data:`_SUBMODULES`."""
    if name in _SUBMODULES:
        return importlib.import_module(f"casstore.{name}")
    return load_name(globals(), _HOMES, name)


def __dir__() -> list[str]:
    """The public names: ``__all__`` and the modules of :data:`_SUBMODULES`."""
    return sorted([*__all__, *_SUBMODULES])
