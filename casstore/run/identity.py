"""Cache identity: what makes two runs' attempts interchangeable (the seed's rules).

Three digests name a run's attempts:

* **options**: ``sha256:`` of the canonical JSON of the result-affecting fields of Harbor's own
  ``JobConfig`` (agent name or import path, model, kwargs, the agent's environment — literals
  by value, secrets by reference, never by value —, environment, verifier, timeouts,
  artifacts, ...). Left out: what does not change an attempt's result — the job's name and
  folder, ``n_attempts`` (compared as counts), ``n_concurrent_trials``, ``quiet``, ``debug``,
  the job's ``metrics`` (scoring) and ``retry`` (Harbor's retries within one run never reopen
  a cached errored attempt) — and the tasks (each has its own digest). The reward key is no
  Harbor field: it never enters.
* **agent**: ``blake3:`` of the ``--agent-dir`` tree (:func:`agent_digest`), or ``<none>``.
* **task**: each task's content digest, the store's BLAKE3 of its canonical tar.

The **stamp** (:data:`STAMP_NAME` in the job directory, JSON) holds ``version``
(:data:`STAMP_VERSION`, must match exactly), ``options``, ``agent`` and ``tasks`` (native id →
content digest). It matches a request when the version, options and agent are equal and every
requested task is there with its digest (extra tasks are ignored: cached A, B, C serve A).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from casstore.digest import new_hasher
from casstore.errors import UsageError
from casstore.run.statcache import CACHE_FOLDER, code_rows, read_entry, write_entry

if TYPE_CHECKING:
    from harbor.models.job.config import JobConfig

__all__ = [
    "NO_AGENT",
    "STAMP_NAME",
    "STAMP_VERSION",
    "Stamp",
    "agent_digest",
    "options_digest",
    "read_stamp",
    "remember_options_digest",
    "remembered_options_digest",
    "write_stamp",
]

STAMP_NAME = ".casstore-run.json"
STAMP_VERSION = 1
NO_AGENT = "<none>"
_EXCLUDED = {
    "job_name",
    "jobs_dir",
    "n_attempts",
    "n_concurrent_trials",
    "quiet",
    "debug",
    "metrics",
    "retry",
    "tasks",
    "datasets",
}
"""The JobConfig fields that are no part of the options digest (module docstring)."""
_SKIPPED_NAMES = frozenset({"__pycache__"})


def options_digest(config: JobConfig, secret_references: Mapping[str, str]) -> str:
    """``sha256:<hex>`` of the result-affecting fields of ``config`` (Harbor's JobConfig, its
    agents' ``env`` holding ``${NAME}`` for each secret) with ``secret_references`` (NAME →
    REF) beside them: a secret counts by reference, so rotating its value keeps the digest."""
    fields = config.model_dump(mode="json", exclude=_EXCLUDED)
    fields["env_secrets"] = dict(sorted(secret_references.items()))
    canonical = msgspec.json.encode(_sorted(fields))
    return f"sha256:{hashlib.sha256(canonical).hexdigest()}"


class _Remembered(msgspec.Struct, forbid_unknown_fields=True):
    inputs: str
    """The inputs it was recorded for: an entry copied or renamed to another key is unused."""
    code: list[list[int]]
    options: str


def _remembered_place(jobs_dir: Path, inputs: str) -> Path:
    return jobs_dir / CACHE_FOLDER / "options" / f"{inputs.partition(':')[2]}.json"


def _options_code() -> list[list[int]]:
    """The code the options digest comes from: Harbor's models, pydantic, casstore.run."""
    return code_rows(
        "harbor/models", "harbor/models/job", "harbor/models/trial", "pydantic", "casstore/run"
    )


def remembered_options_digest(jobs_dir: Path, inputs: str) -> str | None:
    """The options digest recorded (:func:`remember_options_digest`) for the checked inputs
    ``inputs`` (:attr:`casstore.run.config.CheckedOptions.inputs`) under ``jobs_dir``, when
    the code it came from is unchanged (same files by ``lstat``); else None. A hit means
    these inputs passed Harbor's models and make this digest: neither is redone."""
    entry = read_entry(_remembered_place(jobs_dir, inputs), _Remembered)
    if entry is None or entry.inputs != inputs or entry.code != _options_code():
        return None
    return entry.options


def remember_options_digest(jobs_dir: Path, inputs: str, options: str) -> None:
    """Record ``options``, the digest Harbor's models gave for ``inputs``."""
    place = _remembered_place(jobs_dir, inputs)
    entry = _Remembered(inputs, _options_code(), options)
    if read_entry(place, _Remembered) != entry:
        write_entry(place, entry)


def _sorted(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (canonical JSON)."""
    if isinstance(value, dict):
        return {str(key): _sorted(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def agent_digest(agent_dir: Path | None) -> str:
    """``blake3:<hex>`` of the tree at ``agent_dir`` (every entry by path bytes: directories,
    files with their mode's executable bit and contents, links with their targets;
    ``__pycache__`` directories and ``.pyc`` files left out, as importing the agent writes
    them), or :data:`NO_AGENT` when None. UsageError when it is not a directory; an entry
    other than a file, directory or link is refused too."""
    if agent_dir is None:
        return NO_AGENT
    if not agent_dir.is_dir():
        raise UsageError(f"--agent-dir {agent_dir}", "not a directory")
    hasher = new_hasher("blake3")
    for relative, kind, data in _tree(agent_dir):
        hasher.update(msgspec.msgpack.encode([relative, kind, len(data)]))
        hasher.update(data)
    return str(hasher.digest())


def _tree(root: Path) -> list[tuple[bytes, str, bytes]]:
    """``(path bytes, kind, data)`` of every entry under ``root``, sorted by path bytes."""
    found: list[tuple[bytes, str, bytes]] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [name for name in dirs if name not in _SKIPPED_NAMES]
        base = Path(folder)
        for name in [*dirs, *files]:
            path = base / name
            relative = os.fsencode(path.relative_to(root))
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found.append((relative, "link", os.fsencode(os.readlink(path))))
            elif stat.S_ISDIR(mode):
                found.append((relative, "dir", b""))
            elif stat.S_ISREG(mode):
                if name.endswith(".pyc"):
                    continue
                kind = "exec" if mode & 0o111 else "file"
                found.append((relative, kind, path.read_bytes()))
            else:
                raise UsageError(f"--agent-dir {path}", "neither a file, a directory nor a link")
    return sorted(found)


class Stamp(msgspec.Struct, forbid_unknown_fields=True):
    """The cache stamp beside a job (module docstring)."""

    version: int
    options: str
    agent: str
    tasks: dict[str, str]

    def matches(self, options: str, agent: str, tasks: Mapping[str, str]) -> bool:
        """Whether this stamp serves a request (version, options, agent, every task)."""
        if self.version != STAMP_VERSION or self.options != options or self.agent != agent:
            return False
        return all(self.tasks.get(name) == digest for name, digest in tasks.items())


@dataclass(frozen=True)
class StampState:
    """A job directory's stamp as read: ``stamp`` (None when there is none) and ``usable``
    (False when it is missing, malformed or of another version)."""

    stamp: Stamp | None
    usable: bool


def read_stamp(job_dir: Path) -> StampState:
    """The stamp of ``job_dir``: unusable when missing, not a regular file, malformed, or of
    another :data:`STAMP_VERSION`."""
    path = job_dir / STAMP_NAME
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return StampState(None, False)
        stamp = msgspec.json.decode(path.read_bytes(), type=Stamp)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return StampState(None, False)
    return StampState(stamp, stamp.version == STAMP_VERSION)


def write_stamp(job_dir: Path, options: str, agent: str, tasks: Mapping[str, str]) -> Stamp:
    """Write the stamp of ``job_dir`` (a temporary file renamed over it) and return it."""
    stamp = Stamp(STAMP_VERSION, options, agent, dict(sorted(tasks.items())))
    job_dir.mkdir(parents=True, exist_ok=True)
    temporary = job_dir / f".{STAMP_NAME}.tmp-{os.getpid()}"
    temporary.write_bytes(msgspec.json.format(msgspec.json.encode(stamp)) + b"\n")
    os.replace(temporary, job_dir / STAMP_NAME)
    return stamp
