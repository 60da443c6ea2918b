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

from casstore.errors import CasstoreError, UsageError, failed_os_call, printable
from cli import archive, bundle, compare, demo, jobs, names, remote, report, rescore, store
from cli import run as run_command
from cli.coerce import light_coercion
from cli.help import prepare_help, shows_help, tidy_help
from cli.options import GlobalOptions
from cli.output import emit_json, error_json, fail
from cli.verifier import verifier_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="casstore",
    help="Content-addressed archive store and metrics engine for Harbor task suites.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (typer's, for each shell)
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    """``--version``: one line, the installed versions read from their metadata (Harbor is
    not imported)."""
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    python = ".".join(map(str, sys.version_info[:3]))
    print(f"casstore {installed('casstore')} (Harbor {installed('harbor')}, Python {python})")
    raise typer.Exit(0)


@app.callback()
def _global_options(
    ctx: typer.Context,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            envvar="CASSTORE_HOME",
            metavar="DIR",
            help="Store directory (default ./.casstore; env CASSTORE_HOME); before or after "
            "the command.",
        ),
    ] = ".casstore",
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the versions of casstore, Harbor and Python, and exit.",
        ),
    ] = False,
) -> None:
    """Content-addressed archive store and metrics engine for Harbor task suites."""
    if not store.strip():
        raise UsageError(None, "--store (or CASSTORE_HOME) must name a directory, not ''")
    ctx.obj = GlobalOptions(store=Path(store))


archive.register(app)
store.register(app)
names.register(app)
jobs.register(app)
rescore.register(app)
compare.register(app)
report.register(app)
bundle.register(app)
remote.register(app)
demo.register(app)
run_command.register(app)
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
    try:
        args = global_options_first(args)
        command = typer.main.get_command(app)  # what app(...) runs, with light conversions
        light_coercion(command)
        if shows_help(args):
            prepare_help()
            tidy_help(command)
        result = command(args=args, prog_name="casstore", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except ClickException as error:
        lines = error.format_message().strip().splitlines()
        if not lines:
            return error.exit_code
        message = " ".join(line.strip() for line in lines if line.strip())
        # typer converts through pydantic, whose wording of a refused value it passes on
        message = message.replace(": Value error, ", ": ", 1)
        return _failed(args, UsageError(None, message), error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        return fail("interrupted", 130).exit_code
    except CasstoreError as error:
        return _failed(args, error, error.exit_code)
    except OSError as error:
        return _failed(args, failed_os_call(error), 1)
    return result if isinstance(result, int) else 0


_GLOBAL_VALUES = ("--store",)
"""Global options that take a value, accepted after the command too."""
_GLOBAL_FLAGS = ("--json",)
"""Options of every command that produces output, accepted before the command too."""


def global_options_first(args: list[str]) -> list[str]:
    """``args`` with ``--store DIR`` (or ``--store=DIR``) given after the command moved before
    it, and ``--json`` given before the command moved after it: ``casstore ls tasks --store S``
    is ``casstore --store S ls tasks``, ``casstore --json ls tasks`` is ``casstore ls tasks
    --json``. Nothing after ``--`` moves."""
    start = 0
    while start < len(args) and args[start].startswith("-") and args[start] != "--":
        start += 2 if args[start] in _GLOBAL_VALUES else 1
    head, tail = list(args[:start]), list(args[start:])
    if not tail or {"--install-completion", "--show-completion"} & set(head):
        return list(args)
    end = tail.index("--") if "--" in tail else len(tail)
    rest, moved, i = [], [], 0
    while i < end:
        item = tail[i]
        if item in _GLOBAL_VALUES:
            if i + 1 >= end:
                raise UsageError(item, "needs a value (the store directory)")
            moved += tail[i : i + 2]
            i += 2
            continue
        if item.partition("=")[0] in _GLOBAL_VALUES:
            moved.append(item)
        else:
            rest.append(item)
        i += 1
    flags = [item for item in head if item in _GLOBAL_FLAGS]
    head = [item for item in head if item not in _GLOBAL_FLAGS]
    return head + moved + rest + flags + tail[end:]


def _failed(args: list[str], error: CasstoreError, code: int) -> int:
    if "--json" in args:
        emit_json({"ok": False, "error": error_json(error)})
    return fail(str(error), code).exit_code
