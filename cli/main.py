"""Entry point of the ``casstore`` console script.

Exit status: 0 ok, 1 a check failed, 2 bad usage. Every error is one line on stderr, never a
traceback.
"""

from __future__ import annotations

import sys

import click
import typer

from casstore.errors import CasstoreError
from cli import archive
from cli.output import fail
from cli.verifier import verifier_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="casstore",
    help="Content-addressed archive store and metrics engine for Harbor task suites.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
archive.register(app)
app.add_typer(verifier_app, name="verifier")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); exit with its status."""
    code = run(argv)
    sys.exit(code)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit status instead of exiting."""
    try:
        result = app(args=argv, prog_name="casstore", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as error:
        return fail(error.format_message().splitlines()[0], 2).exit_code
    except click.exceptions.Abort:
        return fail("interrupted", 130).exit_code
    except CasstoreError as error:
        return fail(str(error), error.exit_code).exit_code
    except OSError as error:
        return fail(f"{error.filename or ''}: {error.strerror or error}", 1).exit_code
    return result if isinstance(result, int) else 0
