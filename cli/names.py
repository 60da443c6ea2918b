"""``casstore show``, ``log``, ``rm`` and ``rename``: one task or taskset name, its revisions
and its registration.

``show`` prints one revision (by reference, or by revision digest); ``log`` a name's history,
newest first, with what changed; ``rm`` and ``rename`` change the registration only (one
write transaction; revisions and archives stay until ``gc``). Digests print cut to 12 hex
digits, whole with ``--long`` and ``--json``. The store is imported in the command bodies,
for start-up time (README, "Start-up").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from cli.options import GlobalOptions, JsonOption, LongOption
from cli.output import emit_json, out_console, print_lines, shown
from cli.store import plural, store_of

if TYPE_CHECKING:
    from casstore.store import Store
    from casstore.store.history import LogEntry

__all__ = ["register"]

KindOption = Annotated[
    Literal["task", "taskset"] | None,
    typer.Option(
        "--kind", help="task or taskset: which one, when a task and a taskset share the name."
    ),
]


def show(
    ctx: typer.Context,
    ref: Annotated[
        str,
        typer.Argument(
            help="A taskset or task reference (workspace/name, optionally #digest), or a "
            "revision digest (sha256:<hex>; a unique prefix of 8+ hex digits will do); with "
            "--trace, JOB/TRIAL."
        ),
    ],
    trace: Annotated[
        bool, typer.Option("--trace", help="Show the agent trace of the trial JOB/TRIAL.")
    ] = False,
    long: LongOption = False,
    json: JsonOption = False,
) -> None:
    """Show a taskset (tried first) or task revision, by reference or by revision digest;
    with --trace, the agent trace of a trial of an imported job (REF is JOB/TRIAL)."""
    if trace:
        from cli.bundle import show_trace

        options: GlobalOptions = ctx.obj
        return show_trace(options.store, ref, json)
    with store_of(ctx) as store:
        if "#" not in ref and ":" in ref:  # no name holds ':': a revision digest
            payload = _revision_payload(store, ref)
        else:
            kind, _ = store.resolve(ref)
            names = store.tasksets if kind == "taskset" else store.tasks
            record, revision = names.get(ref)
            payload = {
                "kind": kind,
                "ref": f"{record.workspace}/{record.name}",
                "history": [entry.to_builtins() for entry in record.history],
                "revision": revision.to_builtins(),
            }
    if json:
        emit_json(payload)
        return
    digest = payload["revision"]["digest"]
    if "ref" in payload:
        out_console.print(shown(f"{payload['kind']} {payload['ref']}#{digest}", long))
    else:
        out_console.print(shown(f"{payload['kind']} revision {digest}", long))
        out_console.print(f"  names: {', '.join(payload['names']) or 'none'}")
    for key, value in payload["revision"].items():
        if key != "digest":
            _print_field(key, value, long)


def _revision_payload(store: Store, digest: str) -> dict[str, Any]:
    """``show DIGEST``: the kind, the names whose history holds the revision, the revision."""
    db, key, revision = store.revision_of(digest)
    kind = "taskset" if db == "taskset_revisions" else "task"
    names = store.names_holding(kind, key)
    return {"kind": kind, "names": names, "revision": revision.to_builtins()}


def _print_field(key: str, value: Any, long: bool) -> None:
    """One field of a revision, as ``show`` prints it."""
    if key == "tasks":
        out_console.print(f"  tasks: {len(value)}")
        for pin in value:
            out_console.print(shown(f"    {pin['task']}  {pin['revision']}", long))
    elif key == "metrics":
        out_console.print(f"  metrics: {', '.join(value)}")
    elif key == "views":
        import orjson

        views = orjson.dumps(value).decode() if value else "none"
        out_console.print(f"  views: {views}")
    else:
        out_console.print(shown(f"  {key}: {value}", long))


NameArgument = Annotated[
    str, typer.Argument(help="A task or taskset name (workspace/name, or name in default).")
]


def log(
    ctx: typer.Context,
    name: NameArgument,
    kind: KindOption = None,
    long: LongOption = False,
    json: JsonOption = False,
) -> None:
    """The revision history of a taskset (tried first) or task, newest first: each revision,
    when it became latest, and what changed from the one before (a task's address, content
    and files; a taskset's pins)."""
    from casstore import api

    with store_of(ctx) as store:
        history = api.log(store, name, kind)
    if json:
        emit_json(history.model_dump())
        return
    lines = [f"{history.kind} {history.ref}: {plural(len(history.entries), 'revision')}"]
    for index, entry in enumerate(history.entries):
        latest = "  (latest)" if index == 0 else ""
        lines.append(f"{entry.revision}  {entry.created[:19].replace('T', ' ')}{latest}")
        lines += [f"  {line}" for line in _changes(entry)]
    print_lines(shown(line, long) for line in lines)


def _changes(entry: LogEntry) -> list[str]:
    """The lines saying what changed in ``entry`` from the revision before it."""
    changes = entry.changes
    if changes is None:
        return ["first revision"]
    lines = [
        f"{field.replace('_', ' ')} {before} → {after}"
        for field in ("address", "content_digest")
        if field in changes
        for before, after in [changes[field]]
    ]
    if changes.get("scoring"):
        lines.append("scoring definition changed (metrics or views)")
    if "files" in changes:
        files = changes["files"]
        if files is None:
            lines.append(f"files not compared: {changes['unread']}")
        else:
            lines += [
                f"{how} {path}" for how in ("added", "removed", "changed") for path in files[how]
            ]
    for how in ("added", "removed"):
        lines += [f"{how} {task}  {revision}" for task, revision in changes.get(how, {}).items()]
    if isinstance(changes.get("changed"), dict):
        lines += [
            f"changed {task}  {before} → {after}"
            for task, (before, after) in changes["changed"].items()
        ]
    return lines or ["the same revision again"]


def rm(
    ctx: typer.Context,
    name: NameArgument,
    kind: KindOption = None,
    json: JsonOption = False,
) -> None:
    """Remove a task or taskset name; its revisions and archives stay until gc (which keeps
    those a taskset still pins)."""
    from casstore import api

    with store_of(ctx) as store:
        done = api.rm(store, name, kind)
    if json:
        emit_json(done.model_dump())
        return
    kept = plural(done.revisions, "revision")
    out_console.print(f"removed {done.kind} {done.ref} ({kept} kept until gc)")


def rename(
    ctx: typer.Context,
    old: Annotated[str, typer.Argument(help="A task or taskset name (workspace/name or name).")],
    new: Annotated[str, typer.Argument(help="Its new name (same workspace; must be free).")],
    kind: KindOption = None,
    json: JsonOption = False,
) -> None:
    """Rename a task or taskset, its history kept (tasksets' pins keep the name they were
    made with)."""
    from casstore import api

    with store_of(ctx) as store:
        done = api.rename(store, old, new, kind)
    if json:
        emit_json(done.model_dump())
        return
    count = plural(done.revisions, "revision")
    out_console.print(f"renamed {done.kind} {done.was} → {done.ref} ({count})")


def register(app: typer.Typer) -> None:
    """Add ``show``, ``log``, ``rm`` and ``rename`` to ``app``."""
    app.command()(show)
    app.command()(log)
    app.command()(rm)
    app.command()(rename)
