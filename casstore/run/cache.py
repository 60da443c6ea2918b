"""The trial cache in the store: attempts by (task content digest, agent digest, options
digest), whatever job ran them.

Database ``trial_cache`` (schema 5): key ``<options digest>/<agent digest>/<task content
digest>``, value the msgpack list of ``[job id, trial name]`` pairs of the attempts imported
under it, in import order. An entry is a pointer: :func:`usable_records` reads each trial's
record from its job and keeps only those still stored whose result Harbor holds valid and that
were not cancelled, so an entry left over (a job re-imported without a trial) costs nothing.
Reuse needs all three digests equal: the key is the three of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from casstore.errors import UnknownReferenceError
from casstore.store.core import Store
from casstore.store.txn import Txn
from casstore.trials.jobstore import Jobs
from casstore.trials.records import TrialRecord

__all__ = ["CANCELLED_ERROR", "cache_key", "cached_pairs", "index_job", "usable", "usable_records"]

CANCELLED_ERROR = "CancelledError"
"""Harbor's exception type of a cancelled trial: such an attempt is never reused."""
_DB = "trial_cache"


def cache_key(options: str, agent: str, task: str) -> str:
    """The key of the attempts of ``task`` (content digest) under ``options`` and ``agent``."""
    return f"{options}/{agent}/{task}"


def usable(record: TrialRecord) -> bool:
    """Whether an attempt counts as done: Harbor holds its result valid (an errored one
    too) and it was not cancelled."""
    return record.valid and record.exception_type != CANCELLED_ERROR


def index_job(store: Store, job: str, options: str, agent: str, tasks: Mapping[str, str]) -> int:
    """Index the usable attempts of the imported ``job`` whose task is one of ``tasks``
    (native id → content digest); returns how many pairs were added."""
    by_key: dict[str, list[list[str]]] = {}
    for record in Jobs(store).trial_records(job):
        digest = tasks.get(record.task_name)
        if digest is not None and usable(record):
            key = cache_key(options, agent, digest)
            by_key.setdefault(key, []).append([record.job_id, record.trial_name])

    def new_pairs(txn: Txn) -> bool:
        return any(
            {tuple(pair) for pair in pairs} - {tuple(p) for p in txn.get(_DB, key) or []}
            for key, pairs in by_key.items()
        )

    def body(txn: Txn) -> int:
        added = 0
        for key, pairs in by_key.items():
            held = [list(pair) for pair in txn.get(_DB, key) or []]
            known = {tuple(pair) for pair in held}
            new = [pair for pair in pairs if tuple(pair) not in known]
            if new:
                txn.put(_DB, key, held + new)
                added += len(new)
        return added

    if not by_key or not store.index.read(new_pairs):  # (no write transaction: a rerun)
        return 0
    return store.index.write(body)


def cached_pairs(store: Store, keys: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """Key → the ``(job id, trial name)`` pairs indexed under it (none: absent)."""
    wanted = list(keys)

    def body(txn: Txn) -> dict[str, list[tuple[str, str]]]:
        return {key: [(str(j), str(t)) for j, t in txn.get(_DB, key) or []] for key in wanted}

    return store.index.read(body)


def usable_records(store: Store, pairs: Iterable[tuple[str, str]]) -> list[TrialRecord]:
    """The stored, usable records of ``pairs``, in the order given (each job read once)."""
    pairs = list(pairs)
    jobs = Jobs(store)
    records: dict[tuple[str, str], TrialRecord] = {}
    for job in dict.fromkeys(job for job, _ in pairs):
        try:
            held = jobs.trial_records(job)
        except UnknownReferenceError:
            continue
        records.update(((r.job_id, r.trial_name), r) for r in held)
    found = (records.get(pair) for pair in pairs)
    return [record for record in found if record is not None and usable(record)]
