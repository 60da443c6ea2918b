"""Entry point of the ``casstore`` console script.

Exit status: 0 ok, 1 a check failed, 2 bad usage. Every error is one line on stderr, never a
traceback.

Start-up (README, "Start-up"): every command module is imported to register its command, and
each imports only typer and light modules at its top; the work (the packer, the store, NumPy,
scoring, Harbor's models) is imported inside the command that uses it.
"""

from __future__ import annotations

import signal
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

try:  # typer >= 0.24 vendors click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer uses click itself
    from click.exceptions import ClickException  # type: ignore[assignment]  # same class, older home

from casstore.errors import CasstoreError, UsageError, printable
from cli import archive, demo, jobs, rescore, store
from cli.coerce import light_coercion
from cli.help import prepare_help, shows_help
from cli.options import GlobalOptions
from cli.output import as_casstore_error, emit_json, error_json, fail
from cli.verifier import verifier_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="casstore",
    help="Content-addressed archive store and metrics engine for Harbor task suites.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            envvar="CASSTORE_HOME",
            help="Store directory (default ./.casstore; env CASSTORE_HOME).",
        ),
    ] = ".casstore",
) -> None:
    """Content-addressed archive store and metrics engine for Harbor task suites."""
    if not store.strip():
        raise UsageError(None, "--store (or CASSTORE_HOME) must name a directory, not ''")
    ctx.obj = GlobalOptions(store=Path(store))


archive.register(app)
store.register(app)
jobs.register(app)
rescore.register(app)
demo.register(app)
app.add_typer(verifier_app, name="verifier")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); exit with its status. SIGTERM and
    SIGHUP (a closed terminal or SSH session) unwind like an interrupt (status 143, 129), so
    no temporary file is left behind; warnings print as one ``casstore:`` line."""
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGHUP, _terminated)
    warnings.showwarning = _warning_line
    code = run(argv)
    sys.exit(code)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """A warning (e.g. a skipped ``task_template``) as one line ``casstore: <message>`` on
    stderr, as errors are printed (not Python's two lines naming a source line)."""
    sys.stderr.write(f"casstore: {printable(str(message))}\n")


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit status instead of exiting.

    A failure prints one line on stderr; with ``--json`` it also prints
    ``{"ok": false, "error": {"kind", "path", "message"}}`` on stdout (unless the command
    already reported it).
    """
    args = sys.argv[1:] if argv is None else argv
    if shows_help(args):
        prepare_help()
    try:
        command = typer.main.get_command(app)  # what app(...) runs, with light conversions
        light_coercion(command)
        result = command(args=args, prog_name="casstore", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except ClickException as error:
        lines = error.format_message().strip().splitlines()
        if not lines:
            return error.exit_code
        message = " ".join(line.strip() for line in lines if line.strip())
        return _failed(args, UsageError(None, message), error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        return fail("interrupted", 130).exit_code
    except CasstoreError as error:
        return _failed(args, error, error.exit_code)
    except OSError as error:
        return _failed(args, as_casstore_error(error), 1)
    return result if isinstance(result, int) else 0


def _failed(args: list[str], error: CasstoreError, code: int) -> int:
    if "--json" in args:
        emit_json({"ok": False, "error": error_json(error)})
    return fail(str(error), code).exit_code
