"""``casstore run``: a SOURCE through Harbor into the store, every attempt run once.

:func:`run_job` checks the options (:mod:`casstore.run.config`: the agent configuration checks
first), checks SOURCE (:mod:`casstore.run.source`) and ``--reward-key`` against the keys its
tasks declare, takes the job's lock (:mod:`casstore.run.lock`), checks out what SOURCE lacks,
applies the stamp's rules to the job directory
(:mod:`casstore.run.plan`, :mod:`casstore.run.identity`), reuses the store's attempts of the
same three digests (:mod:`casstore.run.cache`), launches Harbor for what is missing only
(:mod:`casstore.run.launcher`), imports the job, indexes its attempts and scores the attempts
of the run with the engine rescore uses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from casstore.errors import RunError, UsageError
from casstore.run.cache import cache_key, cached_pairs, index_job, usable, usable_records
from casstore.run.config import (
    CheckedOptions,
    RunOptions,
    check_options,
    check_reward_key,
    job_config,
)
from casstore.run.identity import (
    agent_digest,
    options_digest,
    remember_options_digest,
    remembered_options_digest,
    write_stamp,
)
from casstore.run.importcache import remembered_import
from casstore.run.launcher import LaunchOutcome, launch
from casstore.run.lock import job_lock
from casstore.run.plan import job_dir_state, parked, prepare_resume, write_resume_config
from casstore.run.source import RunTask, RunTasks, plan_source
from casstore.store.core import Store
from casstore.table.columns import RewardTable
from casstore.trials.jobstore import Jobs
from casstore.trials.records import ImportReport, TrialRecord
from casstore.trials.table import table_from_records
from scoring import ScoreReport, score

__all__ = ["RunOptions", "RunResult", "check_run_options", "run_job", "score_run"]


@dataclass
class RunResult:
    """What a run did: the job (``job_name``, ``job_id``: None when nothing was ever
    launched), ``cache`` (hit, incomplete, stale, forced or none), the attempts it ran and
    reused, the launch (None when Harbor was not started), the import report, ``trials``
    (every scored trial: job id → trial names) and ``table``, the reward table scored."""

    job_name: str
    job_dir: Path
    job_id: str | None
    cache: str
    attempts_run: int
    attempts_reused: int
    launcher: LaunchOutcome | None
    imported: ImportReport | None
    trials: dict[str, list[str]]
    table: RewardTable = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        """The ``run`` object of ``casstore run --json``."""
        return {
            "job_name": self.job_name,
            "job_dir": str(self.job_dir),
            "job_id": self.job_id,
            "cache": self.cache,
            "attempts_run": self.attempts_run,
            "attempts_reused": self.attempts_reused,
            "launcher": None if self.launcher is None else self.launcher.to_json(),
            "trials_from": {job: len(names) for job, names in self.trials.items()},
            "trials": self.trials,
        }


def check_run_options(options: RunOptions) -> None:
    """Run every check of ``options`` (the agent configuration checks included) and return:
    what ``casstore run`` does before it opens the store. UsageError naming the option."""
    _checked(options)


def _checked(options: RunOptions) -> CheckedOptions:
    """:func:`check_options`, Harbor's models skipped for inputs a run already checked."""
    jobs_dir = options.jobs_dir.resolve()
    return check_options(options, remembered=lambda i: remembered_options_digest(jobs_dir, i))


def score_run(result: RunResult, reward_key: str = "reward") -> ScoreReport:
    """The rescore report of a run's attempts (:func:`scoring.score` on its table, the
    defaults of ``casstore rescore``)."""
    return score(result.table, reward_key=reward_key)


def run_job(source: str, options: RunOptions, store: Store, grace: float = 30.0) -> RunResult:
    """Run ``source`` (a task or dataset directory, or a taskset/task reference of ``store``)
    as the module docstring says. Raises UsageError for bad options (before anything runs),
    RunError when another run holds the job or Harbor failed (after importing what the job
    holds), KeyboardInterrupt after a cancelled launch (after the same import)."""
    checked = _checked(options)
    agent = agent_digest(options.agent_dir)
    jobs_dir = options.jobs_dir.resolve()
    plan = plan_source(source, store, jobs_dir)  # a bad SOURCE: before any lock or job dir
    check_reward_key(options.reward_key, plan.tasks_declared())
    with job_lock(jobs_dir, checked.job_name) as lock:
        tasks = plan.tasks()
        launching = _Launching(grace, lock.fd)
        return _run_locked(checked, tasks, agent, jobs_dir / checked.job_name, store, launching)


class _Launching(NamedTuple):
    """How Harbor is launched: the grace period (seconds) and the job lock's descriptor,
    which Harbor's process inherits (:mod:`casstore.run.lock`)."""

    grace: float
    lock_fd: int


def _run_locked(
    checked: CheckedOptions,
    tasks: RunTasks,
    agent: str,
    job_dir: Path,
    store: Store,
    launching: _Launching,
) -> RunResult:
    """The run, its lock held."""
    options = checked.options
    digests = tasks.digests()
    opts = checked.remembered or options_digest(checked.base, checked.env.references)
    if options.job_name:  # (a default name is a new timestamp each run: nothing to reuse)
        remember_options_digest(job_dir.parent, checked.inputs, opts)
    state = job_dir_state(job_dir, opts, agent, digests, options.force_rerun)
    held = _import(store, job_dir, opts, agent, digests) if state == "kept" else None
    mine = _held(store, held, digests)
    reused = {}
    if not options.force_rerun:
        reused = _reusable(store, opts, agent, tasks, mine, options.attempts, held)
    need = {
        t.name: max(0, options.attempts - len(mine.get(t.name, [])) - len(reused.get(t.name, [])))
        for t in tasks.tasks
    }
    outcome = None
    if any(need.values()):
        outcome = _launch(checked, tasks, need, job_dir, state, opts, agent, launching)
        held = _import(store, job_dir, opts, agent, digests)
        _check_outcome(outcome, job_dir)
        mine = _held(store, held, digests)
    elif state != "kept":
        write_stamp(job_dir, opts, agent, digests)
    cache = _cache_state(state, bool(outcome))
    chosen = [r for name in digests for r in mine.get(name, [])]
    chosen += [r for name in digests for r in reused.get(name, [])]
    table = table_from_records(chosen, options.reward_key) if chosen else _no_trials(job_dir)
    by_job: dict[str, list[str]] = {}
    for record in chosen:
        by_job.setdefault(record.job_id, []).append(record.trial_name)
    run_count = sum(need.values()) if outcome else 0
    return RunResult(
        checked.job_name,
        job_dir,
        held.job if held else None,
        cache,
        run_count,
        sum(len(records) for records in reused.values()),
        outcome,
        held,
        by_job,
        table,
    )


def _cache_state(state: str, launched: bool) -> str:
    """The ``cache`` word of a run: the job directory's state, ``kept`` told apart."""
    if state == "kept":
        return "incomplete" if launched else "hit"
    return state


def _import(
    store: Store, job_dir: Path, opts: str, agent: str, digests: dict[str, str]
) -> ImportReport | None:
    """Import ``job_dir`` (what it holds, if it holds a job) and index its attempts; an
    unchanged job directory is not imported again (:mod:`casstore.run.importcache`)."""
    if not ((job_dir / "config.json").exists() or (job_dir / "result.json").exists()):
        return None

    def import_job() -> ImportReport:
        (report,) = Jobs(store).import_jobs([job_dir])
        index_job(store, report.job, opts, agent, digests)
        return report

    return remembered_import(store, job_dir, (opts, agent, digests), import_job)


def _held(
    store: Store, held: ImportReport | None, digests: dict[str, str]
) -> dict[str, list[TrialRecord]]:
    """Task → the usable attempts the run's own job holds of it."""
    found: dict[str, list[TrialRecord]] = {}
    if held is None:
        return found
    for record in Jobs(store).trial_records(held.job):
        if record.task_name in digests and usable(record):
            found.setdefault(record.task_name, []).append(record)
    return found


def _reusable(
    store: Store,
    opts: str,
    agent: str,
    tasks: RunTasks,
    mine: dict[str, list[TrialRecord]],
    attempts: int,
    held: ImportReport | None,
) -> dict[str, list[TrialRecord]]:
    """Task → the attempts of other jobs the run reuses (all three digests equal), as many
    as its own job lacks."""
    short = [t for t in tasks.tasks if len(mine.get(t.name, [])) < attempts]
    keys = {t.name: cache_key(opts, agent, t.content_digest) for t in short}
    pairs = cached_pairs(store, keys.values())
    own = held.job if held else None
    reused: dict[str, list[TrialRecord]] = {}
    for task in short:
        others = [pair for pair in pairs[keys[task.name]] if pair[0] != own]
        records = usable_records(store, others)
        lacking = attempts - len(mine.get(task.name, []))
        if records:
            reused[task.name] = records[:lacking]
    return reused


def _launch(
    checked: CheckedOptions,
    tasks: RunTasks,
    need: dict[str, int],
    job_dir: Path,
    state: str,
    opts: str,
    agent: str,
    launching: _Launching,
) -> LaunchOutcome:
    """Launch Harbor for the ``need``-ed attempts, resuming the job directory when kept."""
    by_name = {task.name: task for task in tasks.tasks}
    wanted = {name for name, count in need.items() if count}
    kept: Counter[str] = Counter()
    others: list[str] = []
    if state == "kept":
        kept, others = prepare_resume(job_dir, set(by_name))
        wanted |= set(kept)
    planned = _planned(by_name, wanted, kept, need)
    config = _absolute(job_config(checked, planned, tasks.dataset), job_dir)
    if state == "kept":
        write_resume_config(job_dir, config)
    else:
        write_stamp(job_dir, opts, agent, tasks.digests())
    with parked(job_dir, others):
        return launch(
            config.model_dump_json().encode(),
            job_dir,
            checked.env.values,
            checked.options.agent_dir.resolve() if checked.options.agent_dir else None,
            launching.grace,
            inherit_fds=(launching.lock_fd,),
        )


def _planned(
    by_name: dict[str, RunTask], wanted: set[str], kept: Counter[str], need: dict[str, int]
) -> list[tuple[RunTask, int]]:
    """Each task the job holds or runs, with its trials: those kept plus those needed."""
    return [(by_name[name], kept[name] + need.get(name, 0)) for name in sorted(wanted)]


def _absolute(config: Any, job_dir: Path) -> Any:
    """``config`` with its jobs folder the absolute parent of ``job_dir``."""
    return config.model_copy(update={"jobs_dir": job_dir.parent})


def _check_outcome(outcome: LaunchOutcome, job_dir: Path) -> None:
    """KeyboardInterrupt for a cancelled launch, RunError for a failed one (the job
    imported first)."""
    if outcome.outcome == "cancelled":
        raise KeyboardInterrupt
    if outcome.outcome == "failed":
        raise RunError(
            str(job_dir),
            f"launcher_failed: Harbor exited with {outcome.exit_status or outcome.signal}; "
            f"see {job_dir / 'launcher.log'}",
        )


def _no_trials(job_dir: Path) -> RewardTable:
    raise UsageError(str(job_dir), "the run holds no attempt to score")
