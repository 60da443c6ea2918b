"""Name a job directory: its job id, and the ids an import may have stored it under before.

Harbor names a job with a UUID it draws when the job starts (``Job.id``, kept on a resume)
and writes it in every trial's ``config.json`` (``job_id``) as the trial starts, in the
trial's ``result.json`` (``config.job_id``) as it ends, and in the job's ``result.json``
(``id``): Harbor 0.20 at the start of the run, before any trial; Harbor 0.6.4 (the fixtures'
version) only at its end. The job id is the first of these a job directory holds:

1. the job ``result.json``'s ``id``;
2. the ``job_id`` of its trials: the first trial directory (by name, among the first
   :data:`PROBED_TRIALS`) whose ``config.json`` names one, else whose ``result.json``
   ``config`` does;
3. else ``sha256:`` of the directory's name and its config.json bytes (no Harbor id at all).

For a job Harbor wrote, 1 and 2 are the same UUID: a job has one id whether it is imported
while it runs (its result.json not written yet), after it finished, or both. Each must be
usable as a key (:func:`~casstore.trials.records.job_id_problem`).

**Former ids** (:attr:`JobIdentity.former`) are the other ids an import may have given the
same directory: 3 with and without its config.json (casstore before schema 4 named a job
imported before its result.json existed so, as any version does a job no trial names yet),
and 2 when 1 differs from it. A job stored under a former id is this job when it was read from
this directory: the import adopts it then (:mod:`casstore.trials.adopt`), so that one Harbor
job stays one stored job.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from casstore.digest import Digest
from casstore.trials.files import decode_json, read_bytes, text_at
from casstore.trials.find import subdir_names
from casstore.trials.records import job_id_problem

__all__ = ["PROBED_TRIALS", "JobIdentity", "job_identity", "job_identity_at", "trials_job_id"]

PROBED_TRIALS = 16
"""Trial directories (the first by name) looked at for the job id Harbor gave its trials."""


class JobIdentity(NamedTuple):
    """A job directory's ``id`` and its ``former`` ids (see the module docstring), which
    exclude ``id``."""

    id: str
    former: tuple[str, ...]


def job_identity_at(path: Path, trial_dirs: list[str] | None = None) -> JobIdentity:
    """The identity of the job directory at ``path`` (``trial_dirs``: its sub-directories'
    names, sorted, when the caller listed them), as ``read_job`` reads it."""
    return job_identity(
        path,
        decode_json(read_bytes(path / "result.json")),
        read_bytes(path / "config.json"),
        subdir_names(path) if trial_dirs is None else trial_dirs,
    )


def job_identity(
    path: Path, result: Any, config_bytes: bytes | None, trial_dirs: list[str]
) -> JobIdentity:
    """The identity of the job directory at ``path`` whose job ``result.json`` decodes to
    ``result`` (None: none), whose config.json holds ``config_bytes`` and whose trial
    directories are ``trial_dirs`` (sorted)."""
    recorded = _usable(text_at(result, "id"))
    from_trials = trials_job_id(path, trial_dirs)
    digests = [_digest(path, config_bytes), _digest(path, b"")]
    found = [recorded, from_trials, *digests]
    job_id = next(i for i in found if i is not None)
    former = tuple(dict.fromkeys(i for i in found[1:] if i is not None and i != job_id))
    return JobIdentity(job_id, former)


def trials_job_id(path: Path, trial_dirs: list[str]) -> str | None:
    """The job id Harbor wrote in the job's trials (see the module docstring, 2), or None."""
    for name in trial_dirs[:PROBED_TRIALS]:
        config = decode_json(read_bytes(path / name / "config.json"))
        found = _usable(text_at(config, "job_id"))
        if found is None:
            result = decode_json(read_bytes(path / name / "result.json"))
            found = _usable(
                text_at(result.get("config") if isinstance(result, dict) else None, "job_id")
            )
        if found is not None:
            return found
    return None


def _usable(job_id: str | None) -> str | None:
    """``job_id`` when it can name a job in a store, else None."""
    return job_id if job_id is not None and job_id_problem(job_id) is None else None


def _digest(path: Path, config_bytes: bytes | None) -> str:
    """``sha256:`` of the job directory's name and ``config_bytes`` (None: no config.json)."""
    name = os.fsencode(path.resolve().name)
    return str(Digest.of(name + b"\0" + (config_bytes or b"")))
