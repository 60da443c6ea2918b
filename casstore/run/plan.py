"""What a run must do with its job directory and which attempts it still needs.

:func:`job_dir_state` applies the seed's cache rules to ``<jobs dir>/<job name>``: ``forced``
(``--force-rerun``) and ``stale`` (no usable stamp, or one that does not match the request)
delete the directory; ``none`` when there is none; otherwise the stamp matches and the job's
attempts count (``hit`` or ``incomplete`` once the attempts are counted).

:func:`prepare_resume` readies a kept job directory for Harbor's resume: trial directories
whose ``result.json`` Harbor's ``TrialResult`` refuses, or that were cancelled, are removed
(they are rerun; their evidence is in the store already), those of tasks this run does not ask
for are set aside until Harbor has ended (:func:`parked`: Harbor refuses to resume a job
holding trials it did not plan), ``config.json`` is written as Harbor writes it for the new
config (Harbor resumes only a job whose config.json equals its config) and ``lock.json``
removed (Harbor writes it anew).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from casstore.errors import UsageError
from casstore.run.cache import CANCELLED_ERROR
from casstore.run.identity import STAMP_NAME, read_stamp

if TYPE_CHECKING:
    from harbor.models.job.config import JobConfig

__all__ = ["job_dir_state", "parked", "prepare_resume", "write_resume_config"]

PARKED_SUFFIX = ".casstore-parked"


def job_dir_state(
    job_dir: Path, options: str, agent: str, tasks: Mapping[str, str], force: bool
) -> str:
    """``forced``, ``stale``, ``none`` or ``kept`` (module docstring); deletes the job
    directory when forced or stale."""
    if not job_dir.exists() and not job_dir.is_symlink():
        return "forced" if force else "none"
    _check_job_dir(job_dir)
    state = read_stamp(job_dir)
    if force or not (state.usable and state.stamp and state.stamp.matches(options, agent, tasks)):
        shutil.rmtree(job_dir)
        return "forced" if force else "stale"
    return "kept"


def _check_job_dir(job_dir: Path) -> None:
    """UsageError unless ``job_dir`` is a directory a run may delete: empty, or holding a
    run's stamp or a Harbor job's ``config.json`` (a task, a dataset or any other folder of
    the job's name is never deleted as a stale job)."""
    if job_dir.is_symlink() or not job_dir.is_dir():
        raise UsageError(str(job_dir), "is no directory: remove it or choose another --job-name")
    marks = (job_dir / STAMP_NAME, job_dir / "config.json")
    if any(mark.is_file() for mark in marks) or not any(job_dir.iterdir()):
        return
    raise UsageError(
        str(job_dir),
        f"is no job directory (no {STAMP_NAME}, no Harbor config.json) and a run would "
        "delete it: remove it or choose another --job-name",
    )


def prepare_resume(job_dir: Path, wanted: set[str]) -> tuple[Counter[str], list[str]]:
    """Ready the trial directories of ``job_dir`` for Harbor's resume (module docstring).
    Returns the trials each task of ``wanted`` holds there that Harbor will keep, and the
    trial directory names of other tasks, to set aside while Harbor runs."""
    from harbor.models.trial.result import TrialResult
    from pydantic import ValidationError

    kept: Counter[str] = Counter()
    others: list[str] = []
    for entry in sorted(os.scandir(job_dir), key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            result = TrialResult.model_validate_json((path / "result.json").read_bytes())
        except (OSError, ValidationError):
            shutil.rmtree(path)  # no result Harbor accepts: run again
            continue
        info = result.exception_info
        if info is not None and info.exception_type == CANCELLED_ERROR:
            shutil.rmtree(path)
        elif result.task_name in wanted:
            kept[result.task_name] += 1
        else:
            others.append(entry.name)
    return kept, others


def write_resume_config(job_dir: Path, config: JobConfig) -> None:
    """``config.json`` as Harbor writes it for ``config``; no ``lock.json``."""
    (job_dir / "config.json").write_text(config.model_dump_json(indent=4, exclude_defaults=True))
    (job_dir / "lock.json").unlink(missing_ok=True)


@contextmanager
def parked(job_dir: Path, names: list[str]) -> Iterator[None]:
    """Move the trial directories ``names`` out of ``job_dir`` while the block runs, and back
    afterwards (however the block ends)."""
    if not names:
        yield
        return
    aside = job_dir.with_name(job_dir.name + PARKED_SUFFIX)
    aside.mkdir(exist_ok=True)
    moved = []
    try:
        for name in names:
            os.rename(job_dir / name, aside / name)
            moved.append(name)
        yield
    finally:
        for name in moved:
            os.rename(aside / name, job_dir / name)
        aside.rmdir()
