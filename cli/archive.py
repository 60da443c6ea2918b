"""``casstore pack``, ``verify`` and ``extract``: one archive, no store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from casstore.archive.pack import pack_tree
from casstore.archive.read import extract_archive, verify_archive
from casstore.errors import CheckError
from cli.options import (
    CompressionOption,
    DestArgument,
    JsonOption,
    LimitOption,
    limits_from,
)
from cli.output import emit_json, fail, out_console

__all__ = ["register"]

ExpectOption = Annotated[
    str | None, typer.Option("--expect", metavar="ADDRESS", help="Required sha256:<hex> address.")
]


def pack(
    task_dir: Annotated[Path, typer.Argument(help="The Harbor task directory to pack.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Archive file to write.")],
    compression: CompressionOption = "gzip",
    limit: LimitOption = None,
    json: JsonOption = False,
) -> None:
    """Pack a task directory into a deterministic archive; print its address."""
    result = pack_tree(task_dir, output, compression, limits_from(limit))
    if json:
        emit_json(result.to_json())
        return
    out_console.print(f"{result.address}  {output}")
    out_console.print(
        f"content {result.content_digest}  entries {result.entries}  "
        f"payload {result.payload_bytes} B  archive {result.archive_bytes} B ({compression})"
    )


def verify(
    archive: Annotated[Path, typer.Argument(help="The archive file to check.")],
    expect: ExpectOption = None,
    limit: LimitOption = None,
    json: JsonOption = False,
) -> None:
    """Check an archive (address, bounds, names, links, layout, canonical form)."""
    limits = limits_from(limit)
    try:
        result = verify_archive(archive, expect, limits)
    except CheckError as error:
        if not json:
            raise
        emit_json(
            {
                "ok": False,
                "address": None,
                "content_digest": None,
                "entries": None,
                "error": error.to_json(),
            }
        )
        raise fail(str(error)) from None
    if json:
        emit_json(result.to_json())
        return
    out_console.print(f"ok {result.address}  {archive}")
    out_console.print(f"content {result.content_digest}  entries {result.entries}")


def extract(
    archive: Annotated[Path, typer.Argument(help="The archive file to extract.")],
    dest: DestArgument,
    expect: ExpectOption = None,
    limit: LimitOption = None,
    json: JsonOption = False,
) -> None:
    """Verify an archive while extracting it safely into DEST/<top directory>/."""
    result = extract_archive(archive, dest, expect, limits_from(limit))
    if json:
        emit_json(result.to_json() | {"dest": str(dest / result.top)})
        return
    out_console.print(f"ok {result.address}  → {dest / result.top}")


def register(app: typer.Typer) -> None:
    """Add the archive commands to ``app``."""
    app.command()(pack)
    app.command()(verify)
    app.command()(extract)
