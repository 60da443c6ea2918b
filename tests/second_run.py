"""A second run of a job's tasks, made with casstore's own code (``read_job`` records with
other rewards, written by ``write_trials_jsonl``): what the compare and report tests set
against the real job."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec

from casstore.trials import write_trials_jsonl

__all__ = ["TB2", "primary", "second_run"]

TB2 = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")


def primary(record) -> float:
    """The record's primary reward as scoring takes it (missing: 0.0)."""
    value = (record.rewards or {}).get("reward")
    return 0.0 if value is None else float(value)


def second_run(records, out: Path, *, seed: int, attempts: int = 1, drop: int = 3, binary=True):
    """Another run of the tasks of ``records``: a new job id, rewards drawn anew (0/1, or in
    [0, 1]), ``attempts`` trials per task, the first ``drop`` tasks (by name) left out."""
    rng = random.Random(seed)
    tasks = sorted({record.task_name for record in records})
    dropped = set(tasks[:drop])
    made = []
    for record in records:
        if record.task_name in dropped:
            continue
        for attempt in range(attempts):
            value = float(rng.random() < 0.5) if binary else round(rng.random(), 3)
            made.append(
                msgspec.structs.replace(
                    record,
                    job_id="second-run",
                    trial_name=f"{record.trial_name}-{attempt}",
                    attempt=attempt,
                    rewards={"reward": value},
                    kinds={"reward": 1},
                    has_verifier=True,
                    valid=True,
                    exception_type=None,
                    failure=None,
                )
            )
    write_trials_jsonl(made, out)
    return made, dropped
