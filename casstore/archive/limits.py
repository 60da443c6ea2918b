"""Every bound the packager and the reader enforce, with its default (README, §2 Packager).

Override from the API (``Limits(max_entries=10)``, ``limits.with_overrides(...)``) or the CLI
(``--limit max_entries=10 --limit max_file_bytes=1MiB``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from casstore.bounds import shown
from casstore.errors import LimitError, UsageError

__all__ = ["MAX_LIMIT", "Limits", "parse_size"]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "kib": KiB, "mib": MiB, "gib": GiB}
_SIZE = re.compile(r"\s*([0-9]+)\s*([kmg]?i?b?)\s*", re.IGNORECASE)  # ASCII digits only


MAX_LIMIT = (1 << 63) - 1
"""The largest value of any limit: the largest file size or offset (``off_t``)."""
_RULE = f"a limit is a whole number from 1 to {MAX_LIMIT} (bytes or entries)"


class Limits(BaseModel):
    """Bounds on what one archive may hold. Sizes are bytes; all are ints from 1 to
    :data:`MAX_LIMIT` (anything else, or an unknown name, is a one-line :class:`UsageError`
    naming the limit and :data:`_RULE`).

    ``max_entries``: entries below and including the top-level directory.
    ``max_file_bytes``: size of one regular file.
    ``max_payload_bytes``: sum of regular-file sizes.
    ``max_expanded_bytes``: the uncompressed tar stream (headers, padding, data).
    ``max_archive_bytes``: the compressed stream as stored.
    ``max_metadata_bytes``: one PAX extended-header record set.
    ``max_path_bytes``: one entry name (UTF-8 bytes, top-level directory included).
    ``max_config_bytes``: task.toml, read in memory to validate it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    max_entries: int = Field(100_000, gt=0, le=MAX_LIMIT)
    max_file_bytes: int = Field(4 * GiB, gt=0, le=MAX_LIMIT)
    max_payload_bytes: int = Field(16 * GiB, gt=0, le=MAX_LIMIT)
    max_expanded_bytes: int = Field(17 * GiB, gt=0, le=MAX_LIMIT)
    max_archive_bytes: int = Field(17 * GiB, gt=0, le=MAX_LIMIT)
    max_metadata_bytes: int = Field(64 * KiB, gt=0, le=MAX_LIMIT)
    max_path_bytes: int = Field(4096, gt=0, le=MAX_LIMIT)
    max_config_bytes: int = Field(1 * MiB, gt=0, le=MAX_LIMIT)

    def __init__(self, **limits: int) -> None:
        """UsageError (one line, naming the limit) for an unknown limit or a value that is
        not a whole number from 1 to :data:`MAX_LIMIT`."""
        try:
            super().__init__(**limits)
        except ValidationError as error:
            raise _refused(error) from None

    def check(self, limit: str, value: int, path: str | None) -> None:
        """Raise :class:`LimitError` naming ``limit``, ``value`` and ``path`` if over."""
        bound = getattr(self, limit)
        if value > bound:
            raise LimitError(path, limit, value, bound)

    def with_overrides(self, assignments: list[str]) -> Limits:
        """A copy with ``["name=value", ...]`` applied; sizes accept KiB/MiB/GiB/k/M/G.

        Raises :class:`UsageError` for an unknown name or a malformed value, naming the
        assignment (its value cut as :func:`casstore.bounds.shown` cuts it) and, for a value
        out of bounds, the rule :class:`Limits` itself states.
        """
        updates: dict[str, int] = {}
        given: dict[str, str] = {}
        for assignment in assignments:
            name, sep, value = assignment.partition("=")
            name = name.strip().replace("-", "_")
            if not name.startswith("max_"):
                name = f"max_{name}"
            if not sep or name not in type(self).model_fields:
                known = ", ".join(type(self).model_fields)
                raise UsageError(assignment, f"a limit is NAME=VALUE with NAME one of {known}")
            given[name] = f"{assignment.partition('=')[0]}={shown(value)}"
            try:
                updates[name] = parse_size(value)
            except UsageError as error:
                raise UsageError(given[name], error.rule) from None
        try:
            return type(self).model_validate(self.model_dump() | updates)
        except UsageError as error:  # what __init__ makes of the ValidationError
            raise UsageError(given.get(error.path or "", error.path), error.rule) from None


def _refused(error: ValidationError) -> UsageError:
    """The first problem of a refused :class:`Limits`, as a one-line UsageError."""
    problem = error.errors()[0]
    name = ".".join(str(part) for part in problem["loc"])
    if problem["type"] == "extra_forbidden":
        return UsageError(name, f"not a limit (one of {', '.join(Limits.model_fields)})")
    value = problem["input"]
    if type(value) is int:
        return UsageError(name, f"{_RULE}, not {shown(value)}")
    return UsageError(name, f"{_RULE}, not {shown(repr(value))} ({type(value).__name__})")


def parse_size(text: str) -> int:
    """``"64KiB"`` → 65536, ``"4G"`` → 4e9, ``"100000"`` → 100000. Raises UsageError (a
    number of more digits than any limit has: :data:`_RULE`)."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else "?"
    if unit.endswith("b") and not unit.endswith("ib"):
        unit = unit[:-1]
    if match is None or unit not in _UNITS:
        raise UsageError(
            shown(text), "a size is a whole number with an optional unit (KiB, MiB, GiB, k, M, G)"
        )
    digits = match.group(1).lstrip("0")
    if len(digits) > len(str(MAX_LIMIT)):  # beyond the bound, maybe beyond int()'s 4300 digits
        raise UsageError(shown(text), f"{_RULE}, not {shown(digits)}")
    return int(match.group(1)) * _UNITS[unit]
