"""``casstore demo``: the main job on an embedded example, start to finish."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from casstore.errors import CheckError
from casstore.example import write_example_task
from casstore.pack import pack_tree
from casstore.read import extract_archive, verify_archive
from cli.options import JsonOption
from cli.output import emit_json, out_console

__all__ = ["register"]


def demo(
    directory: Annotated[
        Path, typer.Option("--dir", help="Working folder for the demo (created if needed).")
    ] = Path("casstore-demo"),
    json: JsonOption = False,
) -> None:
    """Write an example Harbor task, pack it (gzip and zstd), verify, extract, re-pack."""
    started = time.perf_counter()
    task = write_example_task(directory / "tasks", steps=True)
    archives = directory / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    rows = []
    for compression, suffix in (("gzip", "tar.gz"), ("zstd", "tar.zst")):
        archive = archives / f"{task.name}.{suffix}"
        packed = pack_tree(task, archive, compression)
        verified = verify_archive(archive, packed.address)
        extracted = directory / "extracted" / compression
        shutil.rmtree(extracted, ignore_errors=True)
        extracted.parent.mkdir(parents=True, exist_ok=True)
        extract_archive(archive, extracted, packed.address)
        repacked = pack_tree(extracted / verified.top, None, compression)
        if repacked.address != packed.address:
            raise CheckError(str(extracted), "re-packing the extracted task changed its address")
        _load_with_harbor(extracted / verified.top)
        rows.append(packed.to_json() | {"archive": str(archive), "extracted": str(extracted)})
    seconds = round(time.perf_counter() - started, 3)
    if json:
        emit_json({"task": str(task), "archives": rows, "seconds": seconds})
        return
    _print(task, rows, seconds)


def _load_with_harbor(path: Path) -> None:
    from harbor.models.task.task import Task

    Task(path)


def _print(task: Path, rows: list[dict], seconds: float) -> None:
    table = Table(title=f"casstore demo: {task}")
    for column in ("compression", "address", "entries", "payload B", "archive B"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["compression"],
            row["address"][:23] + "…",
            str(row["entries"]),
            str(row["payload_bytes"]),
            str(row["archive_bytes"]),
        )
    out_console.print(table)
    out_console.print(
        f"verified, extracted, re-packed to the same address and loaded with Harbor's Task "
        f"in {seconds} s; archives in {rows[0]['archive'].rsplit('/', 1)[0]}"
    )


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command()(demo)
