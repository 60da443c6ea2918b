"""Find Harbor job directories, and list the trial directories of one.

A **job directory** is what ``harbor run`` writes: job-level ``config.json`` (with
``job_name``), ``lock.json``, ``result.json`` and one sub-directory per trial holding the
trial's ``result.json``. A directory holding trial directories but no job-level files (e.g.
copied trials) is a job directory too. Every visible sub-directory of a job directory is a
trial directory, as Harbor itself reads it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from casstore.errors import UsageError
from casstore.trials.files import decode_json, read_bytes

__all__ = ["find_jobs", "not_a_job_file", "subdir_names"]

_JSON = msgspec.json.Decoder()
_NOT_A_JOB = "not a Harbor job directory (nor a directory of job directories)"
_TB1_RUN = {"results", "n_resolved", "n_unresolved", "accuracy"}
"""Fields of Terminal-Bench 1's run ``results.json`` (its ``BenchmarkResults``)."""
_TB1_TRIAL = {"trial_name", "task_id", "is_resolved", "parser_results"}
"""Fields of Terminal-Bench 1's trial ``results.json`` (its ``TrialResults``)."""
_OLDER = "an older Terminal-Bench format; casstore reads Harbor job directories"


def find_jobs(paths: Sequence[Path | str]) -> list[Path]:
    """The job directories among ``paths``, in order, without duplicates.

    Each path must be exactly one of:

    * a job directory: it holds a job ``config.json`` (with ``job_name``) or ``lock.json``, or
      trial directories (a ``result.json``/``config.json`` with ``trial_name``), e.g. trials
      copied out of a job;
    * a directory of job directories (Harbor's ``jobs/`` folder): every visible
      sub-directory is a job directory (there is at least one).

    Nothing deeper is searched: ``/tmp`` is not a source of jobs because some job lies
    somewhere below it. Raises :class:`UsageError` ``<path>: not a Harbor job directory (nor
    a directory of job directories)`` for anything else (with a hint for a trial directory
    or a folder mixing job directories with other ones; a Terminal-Bench 1 run directory is
    named as such).
    """
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise UsageError(str(path), "not a directory (expected a Harbor job directory)")
        for job in _jobs_at(path):
            key = job.resolve()
            if key not in seen:
                seen.add(key)
                found.append(job)
    return found


def not_a_job_file(path: Path | str) -> UsageError:
    """The error for a file given where a Harbor job directory or a trials ``.jsonl`` is
    expected (``rescore``, ``import``): a ``results.json`` Terminal-Bench 1 wrote (a run's or
    a trial's, recognised by its fields) is named as such, any other file as a file."""
    if _is_tb1_results(Path(path), _TB1_RUN, _TB1_TRIAL):
        return UsageError(str(path), f"a Terminal-Bench 1 results.json, {_OLDER}")
    return UsageError(str(path), "a file, neither a Harbor job directory nor a trials .jsonl file")


def _is_tb1_results(path: Path, *shapes: set[str]) -> bool:
    """Whether ``path`` is a JSON object holding every field of one of ``shapes``."""
    data = decode_json(read_bytes(path))
    return isinstance(data, dict) and any(data.keys() >= shape for shape in shapes)


def subdir_names(path: Path | str) -> list[str]:
    """Names of the visible sub-directories of ``path`` (not following links), sorted: the
    trial directories of a job directory."""
    try:
        with os.scandir(path) as entries:  # the file types come with the listing (no stat)
            names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:  # unlistable, or an entry that needs a stat vanished: one by one
        return [child.name for child in _subdirs(Path(path))]
    names = [name for name in names if name[0] != "."]
    names.sort()
    return names


def _jobs_at(path: Path) -> list[Path]:
    """``[path]`` for a job directory, its sub-directories for a directory of job directories;
    UsageError otherwise."""
    if _is_job_dir(path):
        return [path]
    if _is_trial_dir(path):
        raise UsageError(str(path), f"{_NOT_A_JOB}; a trial directory: give its job directory")
    children = _subdirs(path)
    others = [child.name for child in children if not _is_job_dir(child)]
    if children and not others:
        return children
    if _is_tb1_results(path / "results.json", _TB1_RUN):
        raise UsageError(str(path), f"a Terminal-Bench 1 run directory, {_OLDER}")
    hint = ""
    if others and len(others) < len(children):
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        hint = f"; not job directories: {shown}"
    raise UsageError(str(path), _NOT_A_JOB + hint)


def _load_json(path: Path) -> Any:
    data = read_bytes(path)  # a regular file only, opened without blocking
    try:
        return None if data is None else _JSON.decode(data)
    except msgspec.DecodeError:
        return None


def _is_trial_dir(path: Path) -> bool:
    for name in ("config.json", "result.json"):
        file = path / name
        if file.is_file():
            data = _load_json(file)
            if isinstance(data, dict) and "trial_name" in data:
                return True
    return False


def _is_job_dir(path: Path) -> bool:
    config = _load_json(path / "config.json") if (path / "config.json").is_file() else None
    if isinstance(config, dict) and "job_name" in config:
        return True
    if (path / "lock.json").is_file() and not _is_trial_dir(path):
        return True
    if _is_trial_dir(path):
        return False
    return any(_is_trial_dir(child) for child in _subdirs(path)[:8])


def _subdirs(path: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                found.append(Path(entry.path))
        except OSError:
            continue
    return found
