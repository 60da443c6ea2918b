"""``casstore remote add|ls|rm``, ``casstore push`` and ``casstore pull``: remote stores on
S3-compatible object storage (README, "Remotes").

``remote add NAME s3://bucket[/prefix] [--endpoint-url URL]`` records a remote in the store
(making the store when there is none, as a clone would); ``push REF... [--to NAME]`` sends
tasks, tasksets and imported jobs with everything they reference; ``pull REF... [--from
NAME]`` brings them into the store. Without ``--to``/``--from`` the store's only remote is
used. ``checkout NAME:REF``, ``rescore NAME:JOB``, ``ls --remote`` and ``fsck --remote`` live
with their commands (:func:`remote_sources` tells ``rescore`` a remote job).

Exit status: 0 ok; 1 a failed check or request (an object failing its digest, a remote that
refused); 2 bad usage (an unknown remote or reference); 130 (SIGINT), 143 (SIGTERM), 129
(SIGHUP) a push or pull interrupted, said on one line (how far it got; a rerun resumes).
Progress bars on stderr count the objects moved, on a terminal only. The remote package is
imported in the command bodies.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, fail, out_console, print_lines, progress_bar

if TYPE_CHECKING:
    from casstore.store import Store

__all__ = [
    "checkout_result",
    "fsck_remote",
    "register",
    "remote_jobs",
    "remote_rows",
]

remote_app = typer.Typer(
    help="Remote stores on S3-compatible object storage: add, ls, rm.", no_args_is_help=True
)
RefsArgument = Annotated[
    list[str], typer.Argument(help="Tasks, tasksets (references) or imported jobs (id or name).")
]


def _store(ctx: typer.Context, create: bool = False) -> Store:
    from casstore.store import Store

    options: GlobalOptions = ctx.obj
    return Store(options.store, create=create)


@remote_app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The remote's name in this store.")],
    url: Annotated[str, typer.Argument(help="s3://bucket[/prefix]")],
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            "--endpoint-url", help="An S3-compatible endpoint (default: AWS_ENDPOINT_URL, AWS)."
        ),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Record a remote (the store is made when missing)."""
    from casstore.remote.config import add_remote

    with _store(ctx, create=True) as store:
        remote = add_remote(store, name, url, endpoint_url)
    if json:
        emit_json(remote.to_json())
    else:
        out_console.print(f"added {remote.name}  {remote.url}")


@remote_app.command("ls")
def ls(ctx: typer.Context, json: JsonOption = False) -> None:
    """List the store's remotes."""
    from casstore.remote.config import list_remotes

    with _store(ctx) as store:
        remotes = list_remotes(store)
    if json:
        emit_json([remote.to_json() for remote in remotes])
        return
    lines = [
        f"{r.name}  {r.url}" + (f"  {r.endpoint_url}" if r.endpoint_url else "") for r in remotes
    ]
    print_lines(lines)


@remote_app.command("rm")
def rm(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The remote to forget.")],
    json: JsonOption = False,
) -> None:
    """Forget a remote (nothing on it is touched)."""
    from casstore.remote.config import remove_remote

    with _store(ctx) as store:
        remote = remove_remote(store, name)
    if json:
        emit_json(remote.to_json())
    else:
        out_console.print(f"removed {remote.name}  {remote.url}")


def push(
    ctx: typer.Context,
    refs: RefsArgument,
    to: Annotated[
        str | None, typer.Option("--to", help="The remote (default: the only one).")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Send REFs and everything they reference to a remote: missing objects only, in
    parallel, then the refs (conditional writes)."""
    from casstore.remote import api

    with _store(ctx) as store, progress_bar("push") as bar, _interrupted(bar, "objects sent") as n:
        report = api.push(store, refs, to, n)
    if json:
        emit_json(report.model_dump())
        return
    for ref in report.refs:
        state = "moved" if ref["moved"] else "up to date"
        out_console.print(f"{ref['ref']}#{ref['revision']}  {state}")
    sent = f"sent {report.sent} of {report.objects} objects ({report.sent_bytes} bytes)"
    out_console.print(f"{sent} to {report.remote}")


def pull(
    ctx: typer.Context,
    refs: RefsArgument,
    from_: Annotated[
        str | None, typer.Option("--from", help="The remote (default: the only one).")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Bring REFs from a remote into the store, every object checked before it is kept."""
    from casstore.remote import api

    with _store(ctx) as store, progress_bar("pull") as bar, _interrupted(bar, "tasks fetched") as n:
        report = api.pull(store, refs, from_, n)
    if json:
        emit_json(report.model_dump())
        return
    for ref in report.refs:
        state = "updated" if ref["moved"] else "up to date"
        out_console.print(f"{ref['kind']} {ref['ref']}#{ref['revision']}  {state}")
    out_console.print(
        f"fetched {report.archives} archives, {report.job_values} job values from {report.remote}"
    )


class _Counted:
    """A progress counting what it passes on to ``bar``: ``done`` of ``total``."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.total = self.done = 0

    def start(self, total: int) -> None:
        self.total = total
        self.bar.start(total)

    def advance(self, label: str) -> None:
        self.done += 1
        self.bar.advance(label)


@contextmanager
def _interrupted(bar: Any, what: str) -> Iterator[_Counted]:
    """Run a transfer reporting to ``bar``; interrupted (SIGINT; SIGTERM, SIGHUP, which
    :func:`cli.main.main` turns into ``SystemExit(128 + N)``), it prints one line, ``casstore:
    interrupted: N of M <what>; rerun to resume``, and exits with the status of the signal
    (130, 143, 129). What finished stays done: push moves no ref before every object is
    sent, pull registers nothing before every archive is in."""
    counted = _Counted(bar)
    try:
        yield counted
    except KeyboardInterrupt:
        code = 130
    except SystemExit as stop:
        if not isinstance(stop.code, int) or stop.code <= 128:
            raise
        code = stop.code
    else:
        return
    raise fail(f"interrupted: {counted.done} of {counted.total} {what}; rerun to resume", code)


@contextmanager
def remote_jobs(options: GlobalOptions, sources: list[str]) -> Iterator[tuple[Any, list[str]]]:
    """``rescore``'s store and SOURCEs: as given, or, when they are jobs on remotes
    (``NAME:JOB``, NAME a remote of the store, none an existing path), a temporary store
    they were pulled into (checked) and their ids. UsageError when they mix remote jobs and
    other sources."""
    from casstore.store.core import is_store

    candidates = [s for s in sources if ":" in s and not Path(s).exists()]
    if not candidates or not is_store(options.store):
        yield options.store, sources
        return
    from casstore.errors import UsageError
    from casstore.remote.api import pulled_jobs, remote_refs, split_remote_ref
    from casstore.store.core import Store

    with Store(options.store, create=False) as store:  # closed before rescore opens it
        remote = [s for s in sources if split_remote_ref(store, s) is not None]
        named = remote_refs(store, remote) if len(remote) == len(sources) else []
    if not remote:
        yield options.store, sources
        return
    if not named:
        rule = "remote jobs (NAME:JOB) are rescored without other sources"
        raise UsageError(remote[0], rule)
    with pulled_jobs(named) as found:
        yield found


def checkout_result(store: Store, ref: str, dest: Path, progress: Any) -> Any:
    """``checkout``: REF of the store, or ``NAME:REF`` straight from the remote NAME."""
    from casstore.names import is_name
    from casstore.remote.api import checkout_remote, split_remote_ref
    from casstore.remote.config import get_remote

    if split_remote_ref(store, ref) is not None:
        return checkout_remote(store, ref, dest, progress)
    name, sep, rest = ref.partition(":")
    if sep and rest and is_name(name):  # no local name holds ':' outside its '#digest'
        get_remote(store, name)  # UnknownReferenceError: no remote of that name
    return store.checkout(ref, dest, progress)


def remote_rows(ctx: typer.Context, what: str, name: str) -> list[dict[str, Any]]:
    """``ls WHAT --remote NAME``: the rows ``ls`` prints."""
    from casstore.remote.api import ls_remote

    with _store(ctx) as store:
        return ls_remote(store, name, what)


def fsck_remote(ctx: typer.Context, name: str, json: bool) -> None:
    """``fsck --remote NAME``: every problem on a line, then the counts; exit 1 on any."""
    from casstore.remote import api

    with _store(ctx) as store, progress_bar("fsck") as bar:
        report = api.fsck_remote(store, name, bar)
    if json:
        emit_json(report.model_dump())
    else:
        for problem in report.problems:
            out_console.print(f"{problem['kind']}: {problem['key']}: {problem['message']}")
        for orphan in report.orphans:
            out_console.print(f"orphan (info): {orphan}")
        n = len(report.problems)
        status = "ok" if report.ok else f"{n} problem{'s' if n != 1 else ''}"
        counts = (
            f"{report.refs} refs, {report.revisions} revisions, {report.archives} archives, "
            f"{report.jobs} job snapshots"
        )
        out_console.print(f"{status}: {counts} ({report.remote})")
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``remote``, ``push`` and ``pull`` to ``app``."""
    app.add_typer(remote_app, name="remote")
    app.command()(push)
    app.command()(pull)
