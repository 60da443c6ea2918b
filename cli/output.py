"""How every command reports: data on stdout (text or ``--json``), one-line errors on stderr."""

from __future__ import annotations

import sys
from typing import Any

import orjson
import typer
from rich.console import Console

__all__ = ["emit_json", "err_console", "fail", "out_console"]

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(payload: Any) -> None:
    """Write ``payload`` as indented JSON (orjson) to stdout."""
    sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``casstore: <message>`` on stderr; return the ``typer.Exit`` to raise."""
    print(f"casstore: {message}", file=sys.stderr)
    return typer.Exit(code)
