"""``casstore publish``, ``ls``, ``show``, ``taskset``, ``checkout``, ``fsck`` and ``gc``.

Exit status: 0 ok; 1 a failed check (fsck problems, an archive that fails verification) or a
store refusal (name exists); 2 bad usage, including an unknown reference
(:class:`casstore.errors.UnknownReferenceError` has exit code 2: the user typed it) and a
missing store: only ``publish`` creates one. Progress bars are drawn only on a terminal.

The store, the API and discovery are imported in the command bodies, for start-up time: every
command imports this module (README, "Start-up").
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from casstore.names import DEFAULT_FILESET, DEFAULT_WORKSPACE
from cli.options import CompressionOption, DestArgument, GlobalOptions, JsonOption, decimal_option
from cli.output import emit_json, empty_listing, out_console, print_lines, progress_bar

if TYPE_CHECKING:
    from casstore.store import PublishResult, Store, TaskRevision, TasksetResult, TasksetRevision
    from casstore.store.fileset import Temporary

__all__ = ["register"]

WorkspaceOption = Annotated[str, typer.Option("--workspace", "-w", help="Workspace of the names.")]
RemoteOption = Annotated[
    str | None, typer.Option("--remote", help="Of the remote NAME (casstore remote add).")
]


def _store(ctx: typer.Context, create: bool = False) -> Store:
    """The ``--store`` store; an existing one unless ``create`` (UsageError if missing)."""
    from casstore.store import Store  # here: for start-up time

    options: GlobalOptions = ctx.obj
    return Store(options.store, create=create)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def publish(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="A task directory, a dataset directory or (--recursive) a folder of datasets."
        ),
    ],
    workspace: WorkspaceOption = DEFAULT_WORKSPACE,
    fileset: Annotated[str, typer.Option("--fileset", help="Fileset.")] = DEFAULT_FILESET,
    prefix: Annotated[str, typer.Option("--prefix", help="Path prefix in the fileset.")] = "",
    name: Annotated[
        str | None, typer.Option("--name", help="Registration name (a single task only).")
    ] = None,
    create: Annotated[bool, typer.Option("--create", help="Fail if a name exists.")] = False,
    taskset: Annotated[
        str | None, typer.Option("--taskset", help="Also create/replace this taskset.")
    ] = None,
    recursive: Annotated[
        bool,
        typer.Option(
            "--recursive",
            help="PATH is a folder of datasets: publish each, and create/replace a taskset "
            "named after it.",
        ),
    ] = False,
    compression: CompressionOption = "gzip",
    json: JsonOption = False,
) -> None:
    """Discover and publish tasks (one task or a dataset); identical content is reused."""
    from casstore import api
    from cli.publishing import Continued, check_distinct, check_names, datasets_of, published_json

    datasets = datasets_of(path, name, taskset, recursive)
    for _, tasks, named in datasets:
        check_names(tasks, name, workspace, fileset, prefix, named)
    check_distinct([task for _, tasks, _ in datasets for task in tasks], name, workspace)
    published = []
    with _store(ctx, create=True) as store, progress_bar("publish") as bar:
        bar.start(sum(len(tasks) for _, tasks, _ in datasets))
        for directory, tasks, named in datasets:
            results = api.publish(
                store,
                tasks,
                name,
                progress=Continued(bar),
                workspace=workspace,
                fileset=fileset,
                prefix=prefix,
                compression=compression,
                create=create,
            )
            made = None
            if named is not None:
                made = store.tasksets.replace(named, [r.name for r in results], workspace)
            published.append((directory, results, made))
    if json:
        plain = [r.to_json() for r in published[0][1]]
        emit_json(published_json(published) if recursive else plain)
        return
    for _, results, made in published:
        _print_published(results, made)


def _print_published(results: list[PublishResult], made: TasksetResult | None) -> None:
    """The lines of one published dataset: a line per task, then its taskset's, if any."""
    for r in results:
        state = "repaired" if r.repaired else "reused" if r.reused else "new"
        out_console.print(f"{state:6} {r.workspace}/{r.name}#{r.revision}  {r.address}")
    if made is not None:
        count = _count(len(made.tasks), "task")
        state = "reused" if made.reused else "new revision, pinning exactly these"
        out_console.print(f"taskset {made.ref}#{made.revision}  {count} ({state})")


class Listing(StrEnum):
    """What ``casstore ls`` lists."""

    tasks = "tasks"
    tasksets = "tasksets"
    jobs = "jobs"


def ls(
    ctx: typer.Context,
    what: Annotated[Listing, typer.Argument(help="What to list: tasks, tasksets or jobs.")],
    workspace: Annotated[
        str | None, typer.Option("--workspace", "-w", help="Only this workspace.")
    ] = None,
    remote: RemoteOption = None,
    json: JsonOption = False,
) -> None:
    """List tasks or tasksets with their latest revision, or imported Harbor jobs (of a
    remote: --remote NAME)."""
    if remote is not None:
        from cli.remote import remote_rows

        return _print_rows(ctx, what, remote_rows(ctx, what.value, remote), json, remote)
    if what is Listing.jobs:
        from cli.jobs import ls_jobs

        return ls_jobs(ctx.obj, json)
    with _store(ctx) as store:
        rows: list[dict[str, Any]]
        if what is Listing.tasks:
            rows = [
                {
                    "ref": f"{record.workspace}/{record.name}",
                    "id": revision.native_id,
                    "revision": revision.digest,
                    "address": revision.address,
                    "revisions": len(record.history),
                }
                for record, revision in store.tasks.list(workspace)
            ]
        else:
            rows = [
                {
                    "ref": f"{record.workspace}/{record.name}",
                    "revision": revision.digest,
                    "tasks": len(revision.tasks),
                    "revisions": len(record.history),
                }
                for record, revision in store.tasksets.list(workspace)
            ]
    _print_rows(ctx, what, rows, json)


def _print_rows(
    ctx: typer.Context,
    what: Listing,
    rows: list[dict[str, Any]],
    json: bool,
    remote: str | None = None,
) -> None:
    """The rows of ``ls`` (a remote's jobs as ``ls jobs`` prints a store's)."""
    if json:
        emit_json(rows)
        return
    if not rows and remote is not None:
        typer.echo(f"no {what.value} on the remote {remote} (push some first)", err=True)
        return
    if not rows:
        return empty_listing(what.value, ctx.obj)
    print_lines(map(_ls_line, rows))


def _ls_line(row: dict[str, Any]) -> str:
    if "job" in row:
        return f"{row['name']}  {row['job']}  {row['trials']} trials"
    detail = row["id"] if "id" in row else _count(row["tasks"], "task")
    return f"{row['ref']}#{row['revision']}  {detail}"


def show(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="workspace/name[#digest] of a taskset or task.")],
    json: JsonOption = False,
) -> None:
    """Show a taskset (tried first) or task revision."""
    with _store(ctx) as store:
        kind, _ = store.resolve(ref)
        revision: TaskRevision | TasksetRevision
        if kind == "taskset":
            record, revision = store.tasksets.get(ref)
        else:
            record, revision = store.tasks.get(ref)
    payload = {
        "kind": kind,
        "ref": f"{record.workspace}/{record.name}",
        "history": [entry.model_dump() for entry in record.history],
        "revision": revision.model_dump(),
    }
    if json:
        emit_json(payload)
        return
    out_console.print(f"{kind} {payload['ref']}#{revision.digest}")
    for key, value in revision.model_dump(exclude={"digest"}).items():
        if key == "tasks":
            out_console.print(f"  tasks: {len(value)}")
            for pin in value:
                out_console.print(f"    {pin['task']}  {pin['revision']}")
        elif key == "metrics":
            out_console.print(f"  metrics: {', '.join(value)}")
        elif key == "views":
            import orjson

            shown = orjson.dumps(value).decode() if value else "none"
            out_console.print(f"  views: {shown}")
        else:
            out_console.print(f"  {key}: {value}")


taskset_app = typer.Typer(help="Create or replace tasksets (pinned task revisions).")


TasksArgument = Annotated[list[str], typer.Argument(help="Task names or references.")]


def _taskset_command(create: bool) -> Callable[..., None]:
    """``taskset create`` (``create``: the name must be new) or ``taskset replace``."""

    def command(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="Taskset name.")],
        tasks: TasksArgument,
        workspace: WorkspaceOption = DEFAULT_WORKSPACE,
        json: JsonOption = False,
    ) -> None:
        with _store(ctx) as store:
            write = store.tasksets.create if create else store.tasksets.replace
            result = write(name, tasks, workspace)
        if json:
            emit_json(result.to_json())
            return
        state = "reused" if result.reused else "new"
        count = _count(len(result.tasks), "task")
        out_console.print(f"{state} {result.ref}#{result.revision}  {count}")

    return command


taskset_app.command(
    "create",
    help="Create a taskset pinning the current revision of each task (fails if it exists).",
)(_taskset_command(create=True))
taskset_app.command(
    "replace", help="Create a taskset or add a revision pinning the tasks' current revisions."
)(_taskset_command(create=False))


def checkout(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="Taskset or task reference; NAME:REF on a remote.")],
    dest: DestArgument,
    json: JsonOption = False,
) -> None:
    """Verify, extract and validate every task of REF into DEST/<task dir>/ (NAME:REF:
    straight from the remote NAME, nothing kept in the store)."""
    from cli.remote import checkout_result

    with _store(ctx) as store, progress_bar("checkout") as bar:
        result = checkout_result(store, ref, dest, bar)
    if json:
        emit_json(result.model_dump())
        return
    out_console.print(f"ok {_count(len(result.tasks), 'task')} → {result.dest}")


def fsck(ctx: typer.Context, remote: RemoteOption = None, json: JsonOption = False) -> None:
    """Re-verify every archive and reference, and the imported jobs' records, reward tables
    and evidence (never modifies; --remote NAME: every object of that remote); exit 1 on
    problems."""
    from casstore import api

    if remote is not None:
        from cli.remote import fsck_remote

        return fsck_remote(ctx, remote, json)
    with _store(ctx) as store, progress_bar("fsck") as bar:
        report = api.fsck(store, bar)
    if json:
        emit_json(report.model_dump())
    else:
        for problem in report.problems:
            out_console.print(f"{problem['kind']}: {problem['ref']}: {problem['message']}")
        for orphan in report.orphans:
            out_console.print(f"orphan (info): {orphan}")
        for temporary in report.temporaries:
            out_console.print(f"temporary (info): {_temporary(temporary)}")
        status = "ok" if report.ok else _count(len(report.problems), "problem")
        counts = f"{_count(report.revisions, 'revision')}, {_count(report.archives, 'archive')}"
        if jobs := report.count("jobs"):
            counts += f", {_count(jobs, 'job')}, {_count(report.count('trials'), 'trial')}"
        out_console.print(f"{status}: {counts}")
    if not report.ok:
        raise typer.Exit(1)


def gc(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list.")] = False,
    min_age: Annotated[
        float,
        decimal_option("--min-age", "Spare files younger than this (seconds, finite, >= 0)."),
    ] = 60.0,
    json: JsonOption = False,
) -> None:
    """Remove archive files no revision references, temporary files left by killed writes,
    older than --min-age, and imported jobs' data no job record references."""
    from casstore import api

    with _store(ctx) as store:
        report = api.gc(store, dry_run=dry_run, min_age=min_age)
    if json:
        emit_json(report.model_dump())
        return
    verb = "would remove" if dry_run else "removed"
    for ref in report.removed:
        out_console.print(f"{verb} {ref}")
    for temporary in report.temporaries:
        out_console.print(f"{verb} temporary {_temporary(temporary)}")
    for ref in report.job_data:
        out_console.print(f"{verb} {ref}")
    if report.job_data:
        out_console.print(f"{verb} {_count(len(report.job_data), 'orphaned job value')}")
    removed = _count(len(report.removed), "archive")
    if report.temporaries:
        removed += f", {_count(len(report.temporaries), 'temporary file')}"
    out_console.print(f"{verb} {removed}, {_count(report.freed_bytes, 'byte')}")
    young = [
        _count(len(report.kept_young), "unreferenced archive") if report.kept_young else "",
        _count(len(report.kept_young_temporaries), "temporary file")
        if report.kept_young_temporaries
        else "",
    ]
    if any(young):
        kept = " and ".join(part for part in young if part)
        out_console.print(f"kept {kept} younger than {min_age:g} s (--min-age 0 to include)")


def _temporary(temporary: Temporary) -> str:
    """``<path> (<bytes> bytes, <age> old)`` of a leftover temporary file."""
    size = _count(temporary.bytes, "byte")
    return f"{temporary.path} ({size}, {_age(temporary.age_seconds)} old)"


def _age(seconds: float) -> str:
    """An age in the largest unit that keeps it at least 1: ``42 s``, ``3 min``, ``5 h``,
    ``2 d``."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def register(app: typer.Typer) -> None:
    """Add the store commands to ``app``."""
    app.command()(publish)
    app.command()(ls)
    app.command()(show)
    app.add_typer(taskset_app, name="taskset")
    app.command()(checkout)
    app.command()(fsck)
    app.command()(gc)
