"""The checks of the public API's arguments (:mod:`casstore.api`), in one place.

A value of the wrong type is a :class:`~casstore.errors.UsageError` naming the argument and
what it expected (``"ks: expected a sequence of integers, not str"``), never an
AttributeError or a TypeError from deep inside. Where a sequence of paths or names is
expected, a single path or name is a one-item sequence (a ``str`` is never iterated character
by character). The rules on the values themselves stay with the code that takes them (names,
digests, scoring's options): these checks are about types only.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, TypedDict, TypeGuard

from casstore.archive.discover import DiscoveredTask
from casstore.archive.limits import Limits
from casstore.digest import Digest
from casstore.errors import UsageError
from casstore.store.publish import check_task
from scoring import View

__all__ = [
    "ScoreOptions",
    "address",
    "expected",
    "is_path",
    "limits",
    "names",
    "number",
    "output",
    "path",
    "paths",
    "score_options",
    "sequence",
    "tasks",
    "text",
    "views",
]

type PathArgument = str | os.PathLike[str]


def expected(argument: str, what: str, value: object) -> UsageError:
    """The error for ``value`` given as ``argument`` where ``what`` was expected."""
    return UsageError(argument, f"expected {what}, not {type(value).__name__}")


def is_path(value: object) -> TypeGuard[PathArgument]:
    """Whether ``value`` is a path: a ``str`` or an ``os.PathLike`` (``Path``)."""
    return isinstance(value, str | os.PathLike)


def path(value: object, argument: str) -> Path:
    """``value`` as a :class:`Path`."""
    if not is_path(value):
        raise expected(argument, "a path (str or Path)", value)
    return Path(value)


def sequence(value: object, argument: str, what: str) -> list[Any]:
    """The items of ``value``, a sequence or other iterable that is no ``str`` or bytes;
    ``what`` names it in the error."""
    if isinstance(value, str | bytes | bytearray) or not isinstance(value, Iterable):
        raise expected(argument, what, value)
    return list(value)


def _one_or_many[T](
    value: object, argument: str, is_one: Callable[[object], TypeGuard[T]], one: str
) -> list[T]:
    """``[value]`` when ``value`` is one item (``is_one``), else the items of the sequence
    ``value``, each one item; ``one`` names an item in the errors."""
    if is_one(value):
        return [value]
    items = sequence(value, argument, f"{one} or a sequence of them")
    for item in items:
        if not is_one(item):
            raise expected(argument, f"items that are {one}", item)
    return items


def _is_str(value: object) -> TypeGuard[str]:
    return isinstance(value, str)


def paths(value: object, argument: str, one: str = "a path (str or Path)") -> list[str | Path]:
    """A path, or a sequence of paths, as a list (a ``str`` kept as given: it may also be a
    job id or a metric's name); ``one`` names a path in the errors."""
    items = _one_or_many(value, argument, is_path, one)
    return [item if isinstance(item, str | Path) else Path(item) for item in items]


def names(value: object, argument: str) -> list[str]:
    """A name (``str``), or a sequence of names, as a list."""
    return _one_or_many(value, argument, _is_str, "a name (str)")


def text(value: object, argument: str) -> str:
    """``value``, a ``str``."""
    if not isinstance(value, str):
        raise expected(argument, "a str", value)
    return value


def number(value: object, argument: str) -> float:
    """``value``, an ``int`` or a ``float`` (not a ``bool``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise expected(argument, "a number", value)
    return value


def address(value: object, argument: str = "expect") -> Digest | str | None:
    """An expected address: None, a :class:`Digest` or its text ``sha256:<hex>``."""
    if value is None or isinstance(value, Digest | str):
        return value
    raise expected(argument, "an address (str 'sha256:<hex>', a Digest or None)", value)


def limits(value: object) -> Limits | None:
    """``value``, a :class:`Limits` or None (the defaults)."""
    if value is None or isinstance(value, Limits):
        return value
    raise expected("limits", "a casstore.Limits or None", value)


def output(value: object) -> Path | BinaryIO | None:
    """Where an archive is written: a path, a binary file (anything with ``write(bytes)``)
    or None (the digests only)."""
    if value is None or isinstance(value, Path):
        return value
    if is_path(value):
        return Path(value)
    if isinstance(value, io.TextIOBase):
        raise UsageError("out", "expected a path, a binary file or None, not a text file")
    if not callable(getattr(value, "write", None)):
        raise expected("out", "a path, a binary file or None", value)
    return value  # type: ignore[return-value]  # a file object: BinaryIO's write is enough


def tasks(value: object) -> list[DiscoveredTask]:
    """Discovered tasks: one, or a sequence (a :class:`TaskCollection`) of them."""
    if isinstance(value, DiscoveredTask):
        return [value]
    items = sequence(value, "tasks", "a DiscoveredTask, tasks or a task or dataset path")
    return [check_task(item, "tasks") for item in items]


def _is_view(value: object) -> TypeGuard[View]:
    return isinstance(value, View)


def views(value: object) -> list[View] | Path | None:
    """Views: a view file's path, one or several :class:`scoring.View` (from
    :func:`scoring.parse_views`), or None."""
    if value is None or is_path(value):
        return None if value is None else Path(value)
    return _one_or_many(value, "views", _is_view, "a View (scoring.parse_views)")


class ScoreOptions(TypedDict):
    """The options of :func:`scoring.score` whose values :func:`scoring.check_options`
    checks, of the right types."""

    ks: list[int] | None
    threshold: float
    metrics: list[str | Path]
    metric_timeout: float


def score_options(
    ks: object, threshold: object, metrics: object, metric_timeout: object
) -> ScoreOptions:
    """rescore's scoring options, their types checked (a single metric is a one-item list)."""
    return {
        "ks": None if ks is None else sequence(ks, "ks", "a sequence of integers"),
        "threshold": number(threshold, "threshold"),
        "metrics": paths(metrics, "metrics", "a metric (a name or a metric.py path)"),
        "metric_timeout": number(metric_timeout, "metric_timeout"),
    }
