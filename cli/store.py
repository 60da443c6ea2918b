"""``casstore publish``, ``ls``, ``taskset``, ``checkout``, ``fsck`` and ``gc`` (``show``,
``log``, ``rm`` and ``rename``: :mod:`cli.names`).

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
from cli.options import (
    CompressionOption,
    DestArgument,
    GlobalOptions,
    JsonOption,
    LongOption,
    ModesOption,
    decimal_option,
)
from cli.output import emit_json, empty_listing, out_console, print_lines, progress_bar, shown

if TYPE_CHECKING:
    from casstore.store import PublishResult, Store, TaskRevision, TasksetResult, TasksetRevision
    from casstore.store.fileset import Temporary
    from casstore.store.records import NamedRecord, RevisionEntry

__all__ = ["plural", "register", "store_of"]

WorkspaceOption = Annotated[str, typer.Option("--workspace", "-w", help="Workspace of the names.")]
RemoteOption = Annotated[
    str | None, typer.Option("--remote", help="Of the remote NAME (casstore remote add).")
]


def store_of(ctx: typer.Context, create: bool = False) -> Store:
    """The ``--store`` store; an existing one unless ``create`` (UsageError if missing)."""
    from casstore.store import Store  # here: for start-up time

    options: GlobalOptions = ctx.obj
    return Store(options.store, create=create)


def plural(n: int, noun: str) -> str:
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
    modes: ModesOption = "keep",
    long: LongOption = False,
    json: JsonOption = False,
) -> None:
    """Discover and publish tasks (one task or a dataset); identical content is reused."""
    from casstore import api
    from cli.publishing import Continued, check_distinct, check_names, datasets_of, published_json

    datasets = datasets_of(path, name, taskset, recursive, modes)
    for _, tasks, named in datasets:
        check_names(tasks, name, workspace, fileset, prefix, named)
    check_distinct([task for _, tasks, _ in datasets for task in tasks], name, workspace)
    published = []
    with store_of(ctx, create=True) as store, progress_bar("publish") as bar:
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
        _print_published(results, made, long)


def _print_published(results: list[PublishResult], made: TasksetResult | None, long: bool) -> None:
    """The lines of one published dataset: a line per task, then its taskset's, if any."""
    for r in results:
        state = "repaired" if r.repaired else "reused" if r.reused else "new"
        line = f"{state:6} {r.workspace}/{r.name}#{r.revision}  {r.address}"
        out_console.print(shown(line, long))
    if made is not None:
        tasks = plural(len(made.tasks), "task")
        state = "reused" if made.reused else "new revision, pinning exactly these"
        out_console.print(shown(f"taskset {made.ref}#{made.revision}  {tasks} ({state})", long))


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
    every: Annotated[
        bool,
        typer.Option(
            "--all", "-a", help="Every revision of each name, newest first, with its time."
        ),
    ] = False,
    remote: RemoteOption = None,
    long: LongOption = False,
    json: JsonOption = False,
) -> None:
    """List tasks or tasksets with their latest revision (--all: every revision), or
    imported Harbor jobs (of a remote: --remote NAME)."""
    if remote is not None:
        from cli.remote import remote_rows

        rows = remote_rows(ctx, what.value, remote)
        return _print_rows(ctx, what, rows, json, every=False, long=long, remote=remote)
    if what is Listing.jobs:
        from cli.jobs import ls_jobs

        return ls_jobs(ctx.obj, json)
    with store_of(ctx) as store:
        names: Any = store.tasks if what is Listing.tasks else store.tasksets
        if every:
            listed = names.every_revision(workspace)
        else:
            listed = [(record, revision, None) for record, revision in names.list(workspace)]
    rows = [_ls_row(record, revision, entry) for record, revision, entry in listed]
    _print_rows(ctx, what, rows, json, every=every, long=long)


def _print_rows(
    ctx: typer.Context,
    what: Listing,
    rows: list[dict[str, Any]],
    json: bool,
    *,
    every: bool,
    long: bool,
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
    print_lines(shown(_ls_line(row, every), long) for row in rows)


def _ls_row(
    record: NamedRecord, revision: TaskRevision | TasksetRevision, entry: RevisionEntry | None
) -> dict[str, Any]:
    """One row of ``ls`` (``--json``): the name, the revision, what it holds; with ``--all``
    (``entry``: the history entry) also when the revision became the name's latest
    (``created``) and whether this entry is the latest (``latest``)."""
    from casstore.store.records import TaskRevision  # the store is loaded: ``ls`` read it

    row: dict[str, Any] = {"ref": f"{record.workspace}/{record.name}"}
    if isinstance(revision, TaskRevision):
        row |= {"id": revision.native_id, "revision": revision.digest}
        row["address"] = revision.address
    else:
        row |= {"revision": revision.digest, "tasks": len(revision.tasks)}
    row["revisions"] = len(record.history)
    if entry is not None:
        row |= {"created": entry.created, "latest": entry is record.history[-1]}
    return row


def _ls_line(row: dict[str, Any], every: bool) -> str:
    """``<ref>#<revision>  <native id or task count>``; with ``--all`` the time the revision
    became latest instead of the native id (a line fits 100 columns), and ``latest``."""
    if "job" in row:  # a remote's job (``ls jobs --remote``)
        return f"{row['name']}  {row['job']}  {row['trials']} trials"
    if not every:
        detail = row["id"] if "id" in row else plural(row["tasks"], "task")
        return f"{row['ref']}#{row['revision']}  {detail}"
    when = row["created"][:19].replace("T", " ")
    detail = "" if "id" in row else f"  {plural(row['tasks'], 'task')}"
    latest = "  latest" if row["latest"] else ""
    return f"{row['ref']}#{row['revision']}{detail}  {when}{latest}"


taskset_app = typer.Typer(help="Create or replace tasksets (pinned task revisions).")


TasksArgument = Annotated[list[str], typer.Argument(help="Task names or references.")]


def _taskset_command(create: bool) -> Callable[..., None]:
    """``taskset create`` (``create``: the name must be new) or ``taskset replace``."""

    def command(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="Taskset name.")],
        tasks: TasksArgument,
        workspace: WorkspaceOption = DEFAULT_WORKSPACE,
        long: LongOption = False,
        json: JsonOption = False,
    ) -> None:
        with store_of(ctx) as store:
            write = store.tasksets.create if create else store.tasksets.replace
            result = write(name, tasks, workspace)
        if json:
            emit_json(result.to_json())
            return
        state = "reused" if result.reused else "new"
        pinned = plural(len(result.tasks), "task")
        out_console.print(shown(f"{state} {result.ref}#{result.revision}  {pinned}", long))

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

    with store_of(ctx) as store, progress_bar("checkout") as bar:
        result = checkout_result(store, ref, dest, bar)
    if json:
        emit_json(result.model_dump())
        return
    out_console.print(f"ok {plural(len(result.tasks), 'task')} → {result.dest}")


def fsck(ctx: typer.Context, remote: RemoteOption = None, json: JsonOption = False) -> None:
    """Re-verify every archive and reference, and the imported jobs' records, reward tables
    and evidence (never modifies; --remote NAME: every object of that remote); exit 1 on
    problems."""
    from casstore import api

    if remote is not None:
        from cli.remote import fsck_remote

        return fsck_remote(ctx, remote, json)
    with store_of(ctx) as store, progress_bar("fsck") as bar:
        report = api.fsck(store, bar)
    if json:
        emit_json(report.model_dump())
    else:
        for problem in report.problems:
            out_console.print(f"{problem['kind']}: {problem['ref']}: {problem['message']}")
        for orphan in report.orphans:
            out_console.print(f"orphan (info): {orphan}")
        for ref in report.unreachable:
            out_console.print(f"unreachable (info): {ref} (no name reaches it: gc removes it)")
        for temporary in report.temporaries:
            out_console.print(f"temporary (info): {_temporary(temporary)}")
        status = "ok" if report.ok else plural(len(report.problems), "problem")
        counts = f"{plural(report.revisions, 'revision')}, {plural(report.archives, 'archive')}"
        if jobs := report.count("jobs"):
            counts += f", {plural(jobs, 'job')}, {plural(report.count('trials'), 'trial')}"
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

    with store_of(ctx) as store:
        report = api.gc(store, dry_run=dry_run, min_age=min_age)
    if json:
        emit_json(report.model_dump())
        return
    verb = "would remove" if dry_run else "removed"
    for ref in report.revisions:  # db/digest: shown as the revision's kind and digest
        db, _, digest = ref.partition("/")
        kind = "taskset revision" if db == "taskset_revisions" else "revision"
        out_console.print(f"{verb} {kind} {digest}")
    for ref in report.removed:
        out_console.print(f"{verb} {ref}")
    for temporary in report.temporaries:
        out_console.print(f"{verb} temporary {_temporary(temporary)}")
    for ref in report.job_data:
        out_console.print(f"{verb} {ref}")
    if report.job_data:
        out_console.print(f"{verb} {plural(len(report.job_data), 'orphaned job value')}")
    removed = plural(len(report.removed), "archive")
    if report.revisions:
        removed = f"{plural(len(report.revisions), 'revision')}, {removed}"
    if report.temporaries:
        removed += f", {plural(len(report.temporaries), 'temporary file')}"
    out_console.print(f"{verb} {removed}, {plural(report.freed_bytes, 'byte')}")
    young = [
        plural(len(report.kept_young), "unreferenced archive") if report.kept_young else "",
        plural(len(report.kept_young_temporaries), "temporary file")
        if report.kept_young_temporaries
        else "",
    ]
    if any(young):
        kept = " and ".join(part for part in young if part)
        out_console.print(f"kept {kept} younger than {min_age:g} s (--min-age 0 to include)")


def _temporary(temporary: Temporary) -> str:
    """``<path> (<bytes> bytes, <age> old)`` of a leftover temporary file."""
    size = plural(temporary.bytes, "byte")
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
    app.add_typer(taskset_app, name="taskset")
    app.command()(checkout)
    app.command()(fsck)
    app.command()(gc)
