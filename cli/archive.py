"""``casstore pack``, ``verify`` and ``extract``: archives, no store.

``verify`` takes several files and ``pack`` several task directories (into a folder) in one
process (:mod:`casstore.archive.batch`): one line, or one JSON Lines object, per input.
The packer and the reader are imported in the command bodies, for start-up time: every
command imports this module (README, "Start-up").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from casstore.archive.formats import Compression
from casstore.errors import CheckError
from cli.options import DestArgument, JsonOption, LimitOption, ModesOption, limits_from
from cli.output import emit_json, fail, out_console, print_lines, printable_values

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from casstore.archive.batch import Outcome
    from casstore.archive.limits import Limits
    from casstore.archive.modes import Modes
    from casstore.archive.pack import PackResult
    from casstore.archive.read import VerifyResult

__all__ = ["register"]

PackCompressionOption = Annotated[
    Compression | None,
    typer.Option(
        "--compression",
        "-c",
        help="gzip, zstd, or none (plain tar). Default: the one -o FILE's name says, else "
        "gzip; with -o OUTDIR gzip.",
    ),
]
ExpectOption = Annotated[
    str | None,
    typer.Option(
        "--expect", metavar="ADDRESS", help="Required sha256:<hex> address (one FILE only)."
    ),
]


def pack(
    task_dirs: Annotated[
        list[Path], typer.Argument(metavar="TASK_DIR", help="The Harbor task directories.")
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Archive file to write; with several TASK_DIRs (or an existing directory) "
            "the folder receiving <task dir name>.tar.gz (.tar.zst, .tar).",
        ),
    ],
    compression: PackCompressionOption = None,
    modes: ModesOption = "keep",
    limit: LimitOption = None,
    json: JsonOption = False,
) -> None:
    """Pack task directories into deterministic archives; print each address.

    -o FILE: the compression its name says, else gzip; -c may not contradict it.
    .tar.gz .tgz .gz gzip, .tar.zst .tzst .zst zstd, .tar none; .xz .bz2 .zip etc. refused.
    -o OUTDIR: the compression -c says, default gzip."""
    if len(task_dirs) > 1 or output.is_dir():
        chosen = compression or "gzip"
        limits = limits_from(limit)
        raise typer.Exit(_pack_many(task_dirs, output, chosen, limits, modes, json))
    from casstore.archive.formats import output_compression
    from casstore.archive.pack import pack_tree  # here: for start-up time

    task_dir = task_dirs[0]
    compression = output_compression(output, compression)
    result = pack_tree(task_dir, output, compression, limits_from(limit), modes)
    if json:
        emit_json(result.to_json())
        return
    out_console.print(f"{result.address}  {output}")
    out_console.print(
        f"content {result.content_digest}  entries {result.entries}  "
        f"payload {result.payload_bytes} B  archive {result.archive_bytes} B ({compression})"
    )


def verify(
    archives: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="The archive files to check.")
    ],
    expect: ExpectOption = None,
    limit: LimitOption = None,
    json: JsonOption = False,
) -> None:
    """Check archives (address, bounds, names, links, layout, canonical form)."""
    from casstore.archive.read import verify_archive  # here: for start-up time

    limits = limits_from(limit)
    if len(archives) > 1:
        raise typer.Exit(_verify_many(archives, expect, limits, json))
    archive = archives[0]
    try:
        result = verify_archive(archive, expect, limits)
    except CheckError as error:
        if json:
            blank = {"address": None, "content_digest": None, "entries": None}
            emit_json({"ok": False, **blank, "error": error.to_json()})
        raise fail(error.naming(str(archive)), error.exit_code) from None
    if json:
        emit_json(result.to_json())
        return
    out_console.print(f"ok {result.address}  {archive}")
    out_console.print(f"content {result.content_digest}  entries {result.entries}")


def _verify_many(archives: list[Path], expect: str | None, limits: Limits, json: bool) -> int:
    """``verify`` of several archives: one line (or JSON object) each, in order; returns the
    exit status of the worst."""
    from casstore.archive.batch import verify_each  # here: for start-up time
    from casstore.errors import UsageError

    if expect is not None:
        raise UsageError("--expect", f"one address checks one FILE, and {len(archives)} were given")

    def line(outcome: Outcome[VerifyResult], result: VerifyResult) -> str:
        return (
            f"ok {result.address}  content {result.content_digest}  entries {result.entries}  "
            f"{outcome.archive}"
        )

    def named(outcome: Outcome[VerifyResult]) -> dict[str, object]:
        return {"archive": str(outcome.archive)}

    blank: dict[str, object] = {"address": None, "content_digest": None, "entries": None}
    return _report_each(verify_each(archives, limits), named, blank, line, json)


def _pack_many(
    task_dirs: list[Path],
    folder: Path,
    compression: Compression,
    limits: Limits,
    modes: Modes,
    json: bool,
) -> int:
    """``pack`` into the folder ``folder``: one line (or JSON object) per task, in order;
    returns the exit status of the worst."""
    from casstore.archive.batch import pack_into  # here: for start-up time

    def line(outcome: Outcome[PackResult], result: PackResult) -> str:
        return (
            f"{result.address}  content {result.content_digest}  entries {result.entries}  "
            f"payload {result.payload_bytes} B  archive {result.archive_bytes} B  "
            f"{outcome.archive}"
        )

    def named(outcome: Outcome[PackResult]) -> dict[str, object]:
        return {"source": str(outcome.source), "archive": str(outcome.archive)}

    packed = pack_into(task_dirs, folder, compression, limits, modes)
    return _report_each(packed, named, {}, line, json)


def _report_each[R: (PackResult, VerifyResult)](
    outcomes: Iterator[Outcome[R]],
    named: Callable[[Outcome[R]], dict[str, object]],
    blank: dict[str, object],
    line: Callable[[Outcome[R], R], str],
    json: bool,
) -> int:
    """Report each input of several as it is done: a failure as its error line on stderr, a
    success as its ``line`` on stdout; with ``--json`` each as one JSON Lines object on stdout
    (``named`` first, then ``ok``; a failure's ``blank`` fields before its error). Returns the
    worst exit status: 2 over 1 over 0."""
    codes = []
    for outcome in outcomes:
        codes.append(outcome.exit_code)
        if outcome.error is not None:
            fail(outcome.message(), outcome.exit_code)
            failed = {"ok": False, **blank, "error": outcome.error.to_json()}
            if json:
                _print_line(_json_line(named(outcome) | failed))
        elif outcome.result is not None and json:
            _print_line(_json_line(named(outcome) | {"ok": True} | outcome.result.to_json()))
        elif outcome.result is not None:
            _print_line(line(outcome, outcome.result))
    return max(codes, default=0)


def _json_line(payload: dict[str, object]) -> str:
    """``payload`` as one line of compact JSON (JSON Lines), its texts printable anywhere."""
    import json

    return json.dumps(printable_values(payload), ensure_ascii=False, separators=(",", ":"))


def _print_line(line: str) -> None:
    """Write one line on stdout (:func:`~cli.output.print_lines`) at once, as it is done."""
    print_lines([line])
    sys.stdout.flush()


def extract(
    archive: Annotated[Path, typer.Argument(help="The archive file to extract.")],
    dest: DestArgument,
    expect: ExpectOption = None,
    limit: LimitOption = None,
    json: JsonOption = False,
) -> None:
    """Verify an archive while extracting it safely into DEST/<top directory>/."""
    from casstore.archive.read import extract_archive  # here: for start-up time

    try:
        result = extract_archive(archive, dest, expect, limits_from(limit))
    except CheckError as error:  # names the archive first, as verify does
        if json:
            emit_json({"ok": False, "error": error.to_json()})
        raise fail(error.naming(str(archive)), error.exit_code) from None
    if json:
        emit_json(result.to_json() | {"dest": str(dest / result.top)})
        return
    out_console.print(f"ok {result.address}  → {dest / result.top}")


def register(app: typer.Typer) -> None:
    """Add the archive commands to ``app``."""
    app.command()(pack)
    app.command()(verify)
    app.command()(extract)
