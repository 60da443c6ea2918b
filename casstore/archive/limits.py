"""Every bound the packager and the reader enforce, with its default (README, §2 Packager).

Override from the API (``Limits(max_entries=10)``, ``limits.with_overrides(...)``) or the CLI
(``--limit max_entries=10 --limit max_file_bytes=1MiB``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from casstore.bounds import shown
from casstore.errors import LimitError, UsageError

__all__ = ["MAX_LIMIT", "Limits", "parse_size"]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "kib": KiB, "mib": MiB, "gib": GiB}
_SIZE = re.compile(r"\s*([0-9]+)\s*([kmg]?i?b?)\s*", re.IGNORECASE)  # ASCII digits only


MAX_LIMIT = (1 << 63) - 1
"""The largest value of any limit: the largest file size or offset (``off_t``)."""
_RULE = f"a limit is a whole number from 1 to {MAX_LIMIT} (bytes or entries)"


@dataclass(frozen=True, slots=True, init=False)
class Limits:
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

    A frozen dataclass, not a pydantic model: every command that packs or reads builds one,
    and pydantic's import alone would double their start-up time.
    """

    max_entries: int = 100_000
    max_file_bytes: int = 4 * GiB
    max_payload_bytes: int = 16 * GiB
    max_expanded_bytes: int = 17 * GiB
    max_archive_bytes: int = 17 * GiB
    max_metadata_bytes: int = 64 * KiB
    max_path_bytes: int = 4096
    max_config_bytes: int = 1 * MiB

    def __init__(self, **limits: int) -> None:
        """UsageError (one line, naming the limit) for a value that is not a whole number from
        1 to :data:`MAX_LIMIT` (checked in the order above, first), then for an unknown limit."""
        for name in _NAMES:
            value = limits.get(name, _DEFAULTS[name])
            if type(value) is not int or not 0 < value <= MAX_LIMIT:
                raise UsageError(name, _refused(value))
            object.__setattr__(self, name, value)
        for name in limits:
            if name not in _DEFAULTS:
                raise UsageError(name, f"not a limit (one of {', '.join(_NAMES)})")

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
            if not sep or name not in _DEFAULTS:
                known = ", ".join(_NAMES)
                raise UsageError(assignment, f"a limit is NAME=VALUE with NAME one of {known}")
            given[name] = f"{assignment.partition('=')[0]}={shown(value)}"
            try:
                updates[name] = parse_size(value)
            except UsageError as error:
                raise UsageError(given[name], error.rule) from None
        try:
            return Limits(**{name: getattr(self, name) for name in _NAMES} | updates)
        except UsageError as error:  # a value out of bounds, named as it was given
            raise UsageError(given.get(error.path or "", error.path), error.rule) from None


_NAMES = tuple(field.name for field in fields(Limits))
_DEFAULTS = {field.name: field.default for field in fields(Limits)}


def _refused(value: object) -> str:
    """The rule a refused limit value broke, showing the value (and its type unless an int)."""
    if type(value) is int:
        return f"{_RULE}, not {shown(value)}"
    return f"{_RULE}, not {shown(repr(value))} ({type(value).__name__})"


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
