"""How every command reports: data on stdout (text or ``--json``), one-line errors on stderr."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from casstore.errors import printable

__all__ = ["emit_json", "err_console", "fail", "out_console", "progress_bar"]

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(payload: Any) -> None:
    """Write ``payload`` as indented JSON (orjson) to stdout; NaN and infinity as ``null``.

    An integer beyond 64 bits (an exact Harbor Sum of huge integer rewards), which orjson
    refuses, is written exactly by the standard library instead."""
    try:
        data = orjson.dumps(payload, option=orjson.OPT_INDENT_2)
    except TypeError:
        data = json.dumps(_finite(payload), indent=2, ensure_ascii=False).encode()
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (as orjson writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``casstore: <message>`` on stderr; return the ``typer.Exit`` to raise."""
    print(f"casstore: {printable(message)}", file=sys.stderr)
    return typer.Exit(code)


class _Silent:
    """Progress that shows nothing (stderr is not a terminal)."""

    def start(self, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass


class _Bar:
    """A rich progress bar: ``start(total)``, ``advance(label)``; redraws every ``every``."""

    def __init__(self, progress: Progress, description: str, every: int) -> None:
        self._progress = progress
        self._task = progress.add_task(description, total=None)
        self._every = every
        self._pending = 0

    def start(self, total: int) -> None:
        self._progress.update(self._task, total=total)

    def advance(self, label: str) -> None:
        self._pending += 1
        if self._pending >= self._every:
            self.flush(label)

    def flush(self, label: str | None = None) -> None:
        description = label[:40] if label else None  # None keeps the current description
        self._progress.update(self._task, advance=self._pending, description=description)
        self._pending = 0


@contextmanager
def progress_bar(description: str, every: int = 1) -> Iterator[_Bar | _Silent]:
    """A transient progress bar on stderr when it is a terminal; otherwise no output at all.
    Yields an object with ``start(total)`` and ``advance(label)``."""
    if not err_console.is_terminal:
        yield _Silent()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        bar = _Bar(progress, description, every)
        yield bar
        bar.flush()
