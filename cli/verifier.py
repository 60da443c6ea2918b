"""``casstore verifier init``: a ``tests/test.sh`` shim that runs a task's Python verifier."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from casstore.verifier.init import DEFAULT_VERIFIER, init_verifier
from cli.options import JsonOption
from cli.output import emit_json, out_console

__all__ = ["verifier_app"]

verifier_app = typer.Typer(
    help="Python verifiers for Harbor tasks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@verifier_app.command("init")
def init(
    task_dir: Annotated[Path, typer.Argument(help="The Harbor task directory.")],
    verifier: Annotated[
        str, typer.Option("--verifier", help="The verifier module, relative to the task.")
    ] = DEFAULT_VERIFIER,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a tests/test.sh not written by this command.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Write tests/test.sh and vendor the verifier runner and helpers under tests/.ng/.

    Prints the files written, relative to the task directory, one per line (or, with --json,
    an object with task_dir, verifier and written). The shim reads CASSTORE_REWARD_DIR
    (default /logs/verifier), CASSTORE_WORKSPACE (default: the current folder) and
    CASSTORE_PYTHON (default python3).
    """
    written = [
        path.relative_to(task_dir).as_posix()
        for path in init_verifier(task_dir, verifier, force=force)
    ]
    if as_json:
        emit_json({"task_dir": str(task_dir), "verifier": verifier, "written": written})
        return
    for name in written:
        out_console.print(name, markup=False)
