"""Options shared by several commands (one definition each).

Every command module imports this one when the CLI starts: it imports typer and light
modules only (the compression names, not the codecs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from casstore.archive.formats import Compression
from casstore.archive.limits import Limits
from casstore.archive.modes import Modes
from casstore.bounds import decimal

__all__ = [
    "CompressionOption",
    "DestArgument",
    "GlobalOptions",
    "JsonOption",
    "LimitOption",
    "LongOption",
    "ModesOption",
    "decimal_option",
    "limits_from",
]


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """Options given before the command (``casstore --store DIR ...``); in ``ctx.obj``."""

    store: Path


JsonOption = Annotated[bool, typer.Option("--json", help="Print a JSON object on stdout.")]
LongOption = Annotated[
    bool,
    typer.Option(
        "--long", "-l", help="Print digests whole (text output cuts them to 12 hex digits)."
    ),
]


def decimal_option(name: str, help: str) -> typer.models.OptionInfo:
    """A float option written as an ASCII decimal (:func:`casstore.bounds.decimal`), its
    value shown as ``FLOAT`` in ``--help``."""
    return typer.Option(name, help=help, parser=partial(decimal, name), metavar="FLOAT")


CompressionOption = Annotated[
    Compression,
    typer.Option("--compression", "-c", help="gzip (default), zstd, or none (plain tar)."),
]
ModesOption = Annotated[
    Modes,
    typer.Option(
        "--modes",
        help="The mode bits archived: keep (as on disk: a checkout's umask counts) or git "
        "(files 0644, or 0755 when the owner may execute; directories 0755).",
    ),
]
DestArgument = Annotated[
    Path,
    typer.Argument(
        help="A new directory (missing parents are made) or an empty one (kept, then filled)."
    ),
]
"""``extract``'s and ``checkout``'s DEST: one rule (:mod:`casstore.archive.destination`)."""
LimitOption = Annotated[
    list[str] | None,
    typer.Option(
        "--limit",
        metavar="NAME=VALUE",
        help="Override a bound, e.g. --limit max_entries=1000 --limit max_file_bytes=64MiB.",
    ),
]


def limits_from(assignments: list[str] | None) -> Limits:
    """The default :class:`Limits` with ``--limit`` assignments applied (UsageError if bad)."""
    return Limits().with_overrides(assignments or [])
