"""How every command reports: data on stdout (text or ``--json``), one-line errors on stderr.

Every text line and table cell written here is :func:`~casstore.errors.printable` (one rule
for untrusted names: control characters, DEL and lone surrogates escaped, so a task named with
an ESC sequence, a tab or a newline neither acts on the terminal nor breaks a line or a
column); JSON output keeps names as they are.

rich is imported only when a command prints a table, styled or unusual text, or draws a
progress bar on a terminal: JSON output, errors and plain lines need none of it (README,
"Start-up").
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, cast

import typer

from casstore.errors import CasstoreError, printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

__all__ = [
    "emit_json",
    "empty_listing",
    "err_console",
    "error_json",
    "fail",
    "out_console",
    "print_lines",
    "print_table",
    "printable_values",
    "progress_bar",
    "shown",
]


_PLAIN = re.compile(r"[^\x00-\x1f\x7f-\x9f\[\ud800-\udfff]*")
"""Text rich prints as it is: no markup, control character, tab or lone surrogate."""


class _LazyConsole:
    """A rich ``Console`` made, and rich imported, on the first use of any of its attributes
    other than a plain :meth:`print` (README, "Start-up")."""

    def __init__(self, **options: Any) -> None:
        self._options = options

    def print(self, *objects: Any, **options: Any) -> None:
        """``Console.print``, every text :func:`printable`; one plain line of text
        (:data:`_PLAIN`: nothing rich would change) is written directly, without rich."""
        objects = tuple(printable(o) if type(o) is str else o for o in objects)
        text = objects[0] if len(objects) == 1 and not options else None
        if type(text) is str and _PLAIN.fullmatch(text):
            stream = sys.stderr if self._options.get("stderr") else sys.stdout
            stream.write(text + "\n")
            return
        self._console.print(*objects, **options)

    @cached_property
    def _console(self) -> Console:
        from rich.console import Console  # here: for start-up time

        return Console(**self._options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._console, name)


# No emoji codes: a path or a label holding ``:cd:`` or ``:100:`` prints as it is (and rich's
# table of emoji codes, a fifth of its import time, is never loaded).
out_console = cast("Console", _LazyConsole(highlight=False, soft_wrap=True, emoji=False))
"""The rich console of stdout."""
err_console = cast(
    "Console", _LazyConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)
)
"""The rich console of stderr."""


def shown(text: object, long: bool = False) -> str:
    """``text`` as human output prints it: its digests cut short
    (:func:`casstore.digest.short`, 12 hex digits), or whole with ``--long``."""
    from casstore.digest import short

    return str(text) if long else short(str(text))


def print_lines(lines: Iterable[str]) -> None:
    """Write ``lines`` to stdout as they are (no markup, no rich), each made printable: for
    listings of many lines, where a console would cost more than the listing."""
    sys.stdout.write("".join(f"{printable(line)}\n" for line in lines))


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    left: int = 1,
    fold: Collection[str] = (),
) -> None:
    """A table on stdout. On a terminal rich draws it (the first ``left`` columns aligned
    left, the others right; ``fold`` columns wrap instead of being cut). Anywhere else (a
    pipe, a file) it is plain text that never wraps: a line with the title, a line with the
    column names, then one line per row, cells separated by tabs (README, "Commands")."""
    if not sys.stdout.isatty():
        title = printable(title)
        lines = [title, *("\t".join(map(printable, row)) for row in (columns, *rows))]
        sys.stdout.write("".join(f"{line}\n" for line in lines))  # each cell printable
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(printable(title)), title_justify="left")
    for index, column in enumerate(columns):
        justify: Literal["left", "right"] = "left" if index < left else "right"
        table.add_column(
            Text(printable(column)),
            justify=justify,
            overflow="fold" if column in fold else "ellipsis",
        )
    for row in rows:
        table.add_row(*(Text(printable(cell)) for cell in row))
    out_console.print(table)


def empty_listing(what: str, options: Any) -> None:
    """``ls`` of nothing: stdout stays empty (a listing has no line), and one note on stderr
    says so, naming the store (``options``: the global options)."""
    hint = "import a job directory" if what == "jobs" else "publish a task or dataset"
    sys.stderr.write(f"no {what} in the store {options.store} ({hint} first)\n")


def emit_json(payload: Any) -> None:
    """Write ``payload`` to stdout as :func:`casstore.jsontext.json_text` writes it
    (indented; NaN and infinity as ``null``; an integer beyond 64 bits exact)."""
    from casstore.jsontext import json_text  # here: for start-up time

    sys.stdout.buffer.write(json_text(payload))
    sys.stdout.flush()


def error_json(error: CasstoreError) -> dict[str, object]:
    """``{"kind", "path", "message"}`` of ``error``, its texts printable anywhere."""
    fields: dict[str, object] = dict(error.to_json())
    return printable_values(fields)


def printable_values[V](value: V) -> V:
    """``value`` with every text in it, in dicts at any depth, :func:`printable`."""
    if isinstance(value, str):
        return cast("V", printable(value))
    if isinstance(value, dict):
        return cast("V", {key: printable_values(item) for key, item in value.items()})
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    # rich enters its console as a context manager: the real one, not the lazy stand-in
    console = cast("_LazyConsole", err_console)._console
    with Progress(*columns, console=console, transient=True) as progress:
        bar = _Bar(progress, description, every)
        yield bar
        bar.flush()
