"""Index records (msgspec Structs) and their canonical digests.

A revision's digest is ``sha256:`` of the canonical msgpack encoding (maps with sorted keys)
of its content fields; the creation time is stored beside it and is not part of the digest.
References: ``workspace/name`` (latest revision) and ``workspace/name#<digest>`` (a digest or a
unique prefix of one, ``sha256:`` optional: :class:`~casstore.digest.DigestPrefix`).

A record is stored as :meth:`Record.to_builtins` (a map of its fields in declaration order)
and read back through :func:`checked_name`/:func:`checked_revision`, which validate its shape
(``msgspec.convert``, strict: no coercion; revisions refuse unknown fields). Structs, not
pydantic models, for start-up time: ``ls`` reads every record (README, "Start-up").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import msgspec.msgpack

from casstore.digest import Digest, DigestPrefix
from casstore.names import DEFAULT_WORKSPACE, check_name

__all__ = [
    "DEFAULT_WORKSPACE",
    "NamedRecord",
    "Record",
    "Reference",
    "RevisionEntry",
    "TaskRevision",
    "TasksetRevision",
    "canonical_digest",
    "checked_name",
    "checked_revision",
    "now",
]


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively), lists kept in order."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    return value


_SORTED = msgspec.msgpack.Encoder(order="sorted")


def canonical_digest(fields: dict[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical msgpack encoding of ``fields``: the bytes of
    ``msgpack.packb(canonical(fields), use_bin_type=True)``, which msgspec's encoder with
    sorted keys writes ~7x faster (``ls`` checks every revision it reads). Raises
    ``TypeError`` for a key not a string, ``OverflowError`` for an integer beyond 64 bits."""
    return str(Digest.of(_SORTED.encode(fields)))


def now() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat()


class Record(msgspec.Struct, kw_only=True, frozen=True):
    """A record of the index: fields given by keyword, never reassigned (a name record's
    ``history`` list grows in place), stored as :meth:`to_builtins`."""

    def to_builtins(self) -> dict[str, Any]:
        """The fields as builtins (nested records as maps), in declaration order: the value
        the index stores."""
        value: dict[str, Any] = msgspec.to_builtins(self)
        return value


class TaskRevision(Record, frozen=True, forbid_unknown_fields=True):
    """One published state of a task.

    ``native_id``; ``dir_name`` (the archive's top directory); ``archive_ref``
    (``workspace/fileset#relative/path``); ``address`` (``sha256:`` of the archive bytes);
    ``content_digest`` (``blake3:`` of the canonical tar); ``compression``; ``entries``,
    ``payload_bytes``, ``archive_bytes``; ``metrics`` (primary first) and ``views`` (the
    scoring definition). ``digest`` covers every field but ``digest`` and ``created``.
    """

    native_id: str
    dir_name: str
    archive_ref: str
    address: str
    content_digest: str
    compression: str
    entries: int
    payload_bytes: int
    archive_bytes: int
    metrics: list[str]
    views: list[dict[str, Any]]
    digest: str = ""
    created: str = ""

    def content(self) -> dict[str, Any]:
        """The digested fields."""
        fields = self.to_builtins()
        del fields["digest"], fields["created"]
        return {"kind": "task-revision"} | fields

    def sealed(self) -> TaskRevision:
        """A copy with ``digest`` computed (and ``created`` set if empty)."""
        digest, created = canonical_digest(self.content()), self.created or now()
        return msgspec.structs.replace(self, digest=digest, created=created)

    def same_scoring(self, metrics: list[str], views: list[dict[str, Any]]) -> bool:
        """True when ``metrics`` and ``views`` equal this revision's scoring definition."""
        return self.metrics == metrics and canonical(self.views) == canonical(views)


class TasksetRevision(Record, frozen=True, forbid_unknown_fields=True):
    """One pinned state of a taskset: ``tasks`` = ``[{"name", "revision"}]`` (task name in the
    workspace and the pinned revision digest), sorted by name. ``digest`` covers ``tasks``."""

    workspace: str
    tasks: list[dict[str, str]]
    digest: str = ""
    created: str = ""

    def content(self) -> dict[str, Any]:
        """The digested fields."""
        return {"kind": "taskset-revision", "workspace": self.workspace, "tasks": self.tasks}

    def sealed(self) -> TasksetRevision:
        """A copy with ``digest`` computed (and ``created`` set if empty)."""
        digest, created = canonical_digest(self.content()), self.created or now()
        return msgspec.structs.replace(self, digest=digest, created=created)


class RevisionEntry(Record, frozen=True):
    """One entry of a name's history: the revision ``digest`` and when it became latest."""

    digest: str
    created: str


class NamedRecord(Record, frozen=True):
    """A task or taskset name: ``workspace``, ``name``, ``history`` (oldest first; the last
    entry is the latest revision)."""

    workspace: str
    name: str
    history: list[RevisionEntry]

    @property
    def latest(self) -> str:
        """The latest revision digest."""
        return self.history[-1].digest

    def has(self, digest: str) -> bool:
        """True when ``digest`` is one of this name's revisions."""
        return any(entry.digest == digest for entry in self.history)


class Reference(Record, frozen=True):
    """A parsed reference: ``workspace``, ``name`` and an optional revision ``digest``
    (``sha256:<hex>``, whole or the prefix given: :attr:`exact` tells)."""

    workspace: str
    name: str
    digest: str | None = None

    @classmethod
    def parse(cls, text: str, default_workspace: str = DEFAULT_WORKSPACE) -> Reference:
        """Parse ``[workspace/]name[#[sha256:]<hex>]``, the hex whole or a prefix of at least
        8 digits; raises :class:`UsageError` if malformed (a prefix too short says the
        rule)."""
        path, sep, digest = text.partition("#")
        workspace, slash, name = path.rpartition("/")
        if not slash:
            workspace = default_workspace
        check_name(workspace)
        check_name(name)
        if sep:
            digest = str(DigestPrefix.parse(digest, "sha256"))
        return cls(workspace=workspace, name=name, digest=digest if sep else None)

    @property
    def exact(self) -> bool:
        """Whether :attr:`digest` is a whole digest (not a prefix to look up)."""
        return self.digest is not None and Digest.is_digest(self.digest)

    @property
    def key(self) -> str:
        """The index key ``workspace/name``."""
        return f"{self.workspace}/{self.name}"

    def __str__(self) -> str:
        return self.key + (f"#{self.digest}" if self.digest else "")


def checked_name(key: str, raw: Any) -> NamedRecord:
    """The name record stored as ``raw`` at ``key`` (``workspace/name``). Raises ``ValueError``
    (``msgspec.ValidationError`` included) unless it validates, names ``key`` and has a
    revision: a damaged record never reads as another name's."""
    record = msgspec.convert(raw, NamedRecord)
    if f"{record.workspace}/{record.name}" != key:
        raise ValueError(f"the record names {record.workspace}/{record.name}")
    if not record.history:
        raise ValueError("the record has no revision")
    return record


def checked_revision[R: (TaskRevision, TasksetRevision)](model: type[R], key: str, raw: Any) -> R:
    """The revision of ``model`` stored as ``raw`` at its digest ``key``. Raises
    ``ValueError`` (``msgspec.ValidationError`` included) unless it validates and its
    content hashes to ``key``: revisions are
    content-addressed, so a damaged one never reads as valid (only ``created`` is not
    digested)."""
    revision = msgspec.convert(raw, model)
    digest = canonical_digest(revision.content())
    if revision.digest != key or digest != key:
        raise ValueError(f"the revision's content hashes to {digest}, not to its key")
    return revision
