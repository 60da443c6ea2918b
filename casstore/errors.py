"""Every error casstore raises, in one place.

Each class is one kind of failure; ``kind`` is its stable machine name (the ``error.kind`` of
``--json`` output). Every error names the entry it is about (``path``) and the rule it broke
(``rule``); ``str(error)`` is ``"<path>: <rule>"``, one line.

Hierarchy::

    CasstoreError
    ├── UsageError               bad input from the caller (missing path, bad option); CLI exit 2
    │   └── AmbiguousPrefixError a digest prefix that several stored digests start with
    ├── CheckError               a check failed; CLI exit 1
    │   ├── UnsafePathError      absolute, ``..``, empty or non-UTF-8 names, duplicates, too deep
    │   ├── SymlinkError         absolute, escaping, dangling, cyclic or protected links
    │   ├── EntryTypeError       hard links, devices, FIFOs, sockets, sparse or unknown entries
    │   ├── LimitError           a bound of ``Limits`` exceeded (names limit, value and path)
    │   ├── NotCanonicalError    order, headers or padding differ from what the packager writes
    │   ├── CorruptArchiveError  bad checksum, truncated data, bad compression, trailing garbage
    │   ├── DigestMismatchError  the bytes do not hash to the expected address
    │   ├── SourceChangedError   the source tree changed while it was being packed
    │   ├── TaskFormatError      not a Harbor task: task.toml, instruction.md or steps rules
    │   ├── RewardKeyError       saved trials lack or disagree on their primary reward key
    │   └── SandboxError         the host sandbox cannot honour a task's environment or failed
    ├── StoreError               the store's index or filesets refuse an operation
    │   ├── UnknownReferenceError  no task/taskset/revision by that reference; CLI exit 2
    │   ├── PublicationError       failed after the archive was stored; carries ``prepared``
    │   ├── CorruptStoreError      a stored value does not decode, or the index file is short
    │   └── RemoteError            a remote store refuses or fails a request (names the key)
    │       └── CorruptRemoteError an object read from a remote fails its digest or checks
    ├── ScoringError             trials cannot be scored as asked (mixed keys, taskset mismatch)
    │   └── MetricScriptError    a custom metric.py failed, hung or wrote no JSON object
    └── RunError                 ``casstore run``: the job is busy, Harbor could not be launched
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "AmbiguousPrefixError",
    "CasstoreError",
    "CheckError",
    "CorruptArchiveError",
    "CorruptRemoteError",
    "CorruptStoreError",
    "DigestMismatchError",
    "EntryTypeError",
    "LimitError",
    "MetricScriptError",
    "NotCanonicalError",
    "PublicationError",
    "RemoteError",
    "RewardKeyError",
    "RunError",
    "SandboxError",
    "ScoringError",
    "SourceChangedError",
    "StoreError",
    "SymlinkError",
    "TaskFormatError",
    "UnknownReferenceError",
    "UnsafePathError",
    "UsageError",
    "blocking_file",
    "failed_os_call",
    "is_text",
    "missing_folder",
    "printable",
    "unknown_reference",
]


class CasstoreError(Exception):
    """Base of every casstore error: ``path`` is the entry, ``rule`` the broken rule."""

    kind = "error"
    exit_code = 1

    def __init__(self, path: str | None, rule: str) -> None:
        self.path = path
        self.rule = rule
        # an empty argument is named as '' (else the line would start with the rule)
        super().__init__(rule if path is None else f"{path or repr('')}: {rule}")

    def located(self, path: str) -> CasstoreError:
        """Name ``path`` (e.g. the archive file) when the error named no entry; returns self."""
        if self.path is None:
            self.path = path
            self.args = (f"{path}: {self.rule}",)
        return self

    def naming(self, source: str) -> str:
        """This error's one line naming ``source`` (the input it came from: an archive file, a
        task directory) first, ``"<source>: <entry>: <rule>"``; the line itself when it
        names ``source`` already."""
        text = str(self)
        return text if text.startswith(f"{source}: ") else f"{source}: {text}"

    def to_json(self) -> dict[str, str | None]:
        """``{"kind", "path", "message"}`` as the CLI's ``--json`` output reports it."""
        return {"kind": self.kind, "path": self.path, "message": str(self)}


class UsageError(CasstoreError):
    """The caller asked for something impossible: a missing path, a malformed option."""

    kind = "usage"
    exit_code = 2


class AmbiguousPrefixError(UsageError):
    """A digest prefix that several stored digests start with: ``candidates`` holds the
    first of them (at most :data:`SHOWN_CANDIDATES`, as the message lists them), ``count``
    how many there are."""

    kind = "ambiguous_prefix"
    SHOWN_CANDIDATES = 10

    def __init__(self, prefix: str, what: str, candidates: list[str], count: int) -> None:
        self.candidates = candidates[: self.SHOWN_CANDIDATES]
        self.count = count
        more = count - len(self.candidates)
        listed = ", ".join(self.candidates) + (f" and {more} more" if more > 0 else "")
        rule = f"ambiguous: {count} {what} start with it ({listed}); give more digits"
        super().__init__(prefix, rule)


class CheckError(CasstoreError):
    """A verification or packaging check failed."""

    kind = "check"


class UnsafePathError(CheckError):
    """A name is absolute, holds ``..``/``.``/empty components, is not UTF-8, or repeats."""

    kind = "unsafe_path"


class SymlinkError(CheckError):
    """A symbolic link is absolute, escapes the task, dangles, loops, or is protected."""

    kind = "symlink"


class EntryTypeError(CheckError):
    """An entry is neither a directory, a regular file nor a symbolic link."""

    kind = "entry_type"


class LimitError(CheckError):
    """A bound of :class:`casstore.archive.limits.Limits` was exceeded."""

    kind = "limit"

    def __init__(self, path: str | None, limit: str, value: int, bound: int) -> None:
        self.limit = limit
        self.value = value
        self.bound = bound
        super().__init__(path, f"limit {limit} exceeded: {value} > {bound}")


class NotCanonicalError(CheckError):
    """The archive is well formed but not byte for byte what the packager writes."""

    kind = "not_canonical"


class CorruptArchiveError(CheckError):
    """The archive cannot be decoded: checksum, truncation, compression or trailing bytes."""

    kind = "corrupt"


class DigestMismatchError(CheckError):
    """The archive's bytes do not hash to the expected address."""

    kind = "digest_mismatch"


class SourceChangedError(CheckError):
    """The source tree changed while it was packed (the caller may retry)."""

    kind = "source_changed"


class TaskFormatError(CheckError):
    """The tree is not a Harbor task (task.toml, instruction.md, steps rules)."""

    kind = "task_format"


class RewardKeyError(CheckError):
    """Saved trials lack ``metadata["harbor_primary_reward_key"]`` or disagree on it (the
    message says how to rebuild the file from its job directory)."""

    kind = "reward_key"


class SandboxError(CheckError):
    """The host sandbox (``casstore.sandbox``) cannot honour a task's environment (a
    Dockerfile line, a feature it lacks) or failed to start, enter or transfer files."""

    kind = "sandbox"


class StoreError(CasstoreError):
    """The store refuses an operation (unknown reference, existing name, broken index)."""

    kind = "store"


class UnknownReferenceError(StoreError):
    """A reference names no task, taskset or revision: the caller's input is wrong (exit 2)."""

    kind = "unknown_reference"
    exit_code = 2


def failed_os_call(error: OSError) -> CheckError:
    """An OSError no check caught (a disk full, a folder that cannot be read) as the failed
    check it is: exit 1, naming its file."""
    return CheckError(error.filename and str(error.filename), error.strerror or str(error))


def unknown_reference(ref: str, what: str, by: str = "name") -> UnknownReferenceError:
    """The one wording of a reference that names nothing, for every command:
    ``<ref>: no <what> of that <by>``; ``what`` names every kind the command looked for
    (``task``, ``taskset``, ``taskset or task``, ``imported job``), ``by`` what it matched
    (``name``; ``id or name`` for a job)."""
    return UnknownReferenceError(ref, f"no {what} of that {by}")


class PublicationError(StoreError):
    """Publishing failed after the archive was stored and verified.

    ``prepared`` (a :class:`casstore.store.PreparedTask`: name, archive reference, address,
    digests) lets ``Store.retry(prepared)`` register the task without writing the archive again.
    """

    kind = "publication"

    def __init__(self, path: str | None, rule: str, prepared: object) -> None:
        self.prepared = prepared
        super().__init__(path, rule)


class CorruptStoreError(StoreError):
    """The store is damaged: a stored value (job record, trial record, reward table, any
    index entry) does not decode or fails its checks, or the index's ``data.mdb`` is shorter
    than LMDB's own bookkeeping says. ``path`` names the database and key (``db/key``) or the
    file."""

    kind = "corrupt_store"


class RemoteError(StoreError):
    """A remote store (S3-compatible object storage) refused or failed a request, or lacks an
    object a reference names. ``path`` names the object, ``s3://bucket/prefix/key``."""

    kind = "remote"


class CorruptRemoteError(RemoteError):
    """An object read from a remote does not hash to its digest, does not decode, or fails
    the checks its local copy would (an archive's structure, a reward table's CRC-32s); or a
    reference names an object the remote does not hold. Nothing read is used."""

    kind = "corrupt_remote"


class ScoringError(CasstoreError):
    """Trials cannot be scored as asked: mixed reward keys, a taskset mismatch, a bad view."""

    kind = "scoring"


class MetricScriptError(ScoringError):
    """A custom ``metric.py`` failed, hung past its timeout or wrote no JSON object."""

    kind = "metric_script"


class RunError(CasstoreError):
    """``casstore run`` cannot go on: another run holds the job, Harbor failed to launch."""

    kind = "run"


def blocking_file(path: Path | str) -> Path | None:
    """The nearest of ``path`` and its ancestors that exists, when it is no directory: what
    keeps ``path`` from being (or becoming) a directory, to name in a one-line error instead of
    the ``File exists`` or ``Not a directory`` met deep inside; None when there is none."""
    for candidate in (Path(path), *Path(path).parents):
        if os.path.lexists(candidate):
            return None if candidate.is_dir() else candidate
    return None


def missing_folder(out: Path | str) -> str:
    """Why an output file ``out`` cannot be written, its folder being no directory: the file
    in the way when there is one (``afile is not a directory``), else the folder missing."""
    blocker = blocking_file(Path(out).parent)
    return f"{blocker} is not a directory" if blocker else "the output's folder does not exist"


def is_text(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no undecodable bytes held as surrogates, no lone
    surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""A C0 or C1 control character or DEL: what a terminal acts on instead of showing."""

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` as text output shows an untrusted name (a task, a path, a trace's words):
    what is not Unicode text (a path's undecodable bytes, a lone surrogate) written as
    ``\\udcNN`` escapes, and each control character (C0, C1, DEL) as ``\\t``, ``\\n``,
    ``\\r`` or ``\\xNN``, so that it neither acts on the terminal nor breaks a line or a
    tab-separated column; it prints and encodes as JSON anywhere."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode()
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or f"\\x{ord(char):02x}"
