"""Registrations: ``rm`` and ``rename`` of a task or taskset name (README, "Store
management").

A name is one key of ``tasks`` or ``tasksets`` holding its history; removing or renaming it
is one write transaction on that key alone. The revisions and their archives stay: a taskset
pins task revisions, not names, so a task may be removed or renamed while a taskset pins it
(its pins keep the name they were made with), and ``gc`` removes only the revisions no name
and no pin of a named taskset reaches (:func:`casstore.store.gc.unreachable`), then the
archives no remaining revision references. A rename keeps the history (the revisions and the
times they became latest); it stays in its workspace.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from casstore.errors import UsageError, unknown_reference
from casstore.store.handle import StoreHandle
from casstore.store.index import Txn
from casstore.store.lookup import confirm_absent, read_name
from casstore.store.records import NamedRecord, Reference

__all__ = ["KINDS", "Kind", "Registration", "name_key", "registered_kind", "remove", "rename"]

Kind = Literal["task", "taskset"]
KINDS: dict[str, str] = {"task": "tasks", "taskset": "tasksets"}
"""Each kind of name and its database."""


class Registration(BaseModel):
    """A name removed or renamed: ``kind``, ``ref`` (``workspace/name``; after a rename the
    new one), ``was`` (the old one of a rename, else None) and ``revisions`` (its history's
    length: kept in the index until ``gc``)."""

    kind: Kind
    ref: str
    was: str | None = None
    revisions: int


def name_key(text: str, argument: str) -> Reference:
    """``[workspace/]name`` parsed; UsageError naming ``argument`` for a reference with a
    revision (a name is registered, or removed, with its whole history)."""
    ref = Reference.parse(text)
    if ref.digest is not None:
        raise UsageError(text, f"{argument} is a name, without #<revision>")
    return ref


def registered_kind(txn: Txn, ref: Reference, kind: Kind | None, *, reading: bool) -> Kind:
    """The kind of the name ``ref`` (``kind`` when given, and it must exist as one): a name
    registered as both a taskset and a task is the taskset when ``reading`` (as ``show``
    reads it), else bad usage asking for ``--kind``. UnknownReferenceError when no name of
    the kinds looked for exists (confirmed absent)."""
    kinds: list[Kind] = [kind] if kind else ["taskset", "task"]
    found = [one for one in kinds if txn.has(KINDS[one], ref.key)]
    if not found:
        for one in kinds:
            confirm_absent(txn, KINDS[one])
        raise unknown_reference(ref.key, " or ".join(kinds))
    if len(found) > 1 and not reading:
        rule = "both a taskset and a task have that name: say --kind taskset or --kind task"
        raise UsageError(ref.key, rule)
    return found[0]


def remove(store: StoreHandle, name: str, kind: Kind | None = None) -> Registration:
    """Remove the task or taskset name ``name`` (``[workspace/]name``; ``kind`` when both
    exist) from ``store``, in one write transaction; its revisions and archives stay until
    ``gc``. UnknownReferenceError when there is no such name, UsageError for a revision or
    a name of both kinds without ``kind``."""
    ref = name_key(name, "rm NAME")

    def body(txn: Txn) -> Registration:
        found = registered_kind(txn, ref, kind, reading=False)
        record = _record(txn, found, ref)
        txn.delete(KINDS[found], ref.key)
        return Registration(kind=found, ref=ref.key, revisions=len(record.history))

    return store.index.write(body)


def rename(store: StoreHandle, old: str, new: str, kind: Kind | None = None) -> Registration:
    """Rename the task or taskset ``old`` to ``new`` (same workspace), its history kept, in
    one write transaction. UnknownReferenceError when ``old`` is no name; UsageError (exit
    2, nothing changed) when ``new`` is a name already (a task's or a taskset's), is in
    another workspace, or either has a revision."""
    source, target = name_key(old, "rename OLD"), name_key(new, "rename NEW")
    if source.workspace != target.workspace:
        rule = f"a rename stays in its workspace ({source.workspace}, not {target.workspace})"
        raise UsageError(target.key, rule)

    def body(txn: Txn) -> Registration:
        found = registered_kind(txn, source, kind, reading=False)
        for other, db in KINDS.items():
            if txn.has(db, target.key):
                raise UsageError(target.key, f"a {other} of that name exists")
        record = _record(txn, found, source)
        moved = NamedRecord(workspace=target.workspace, name=target.name, history=record.history)
        txn.put(KINDS[found], target.key, moved.to_builtins())
        txn.delete(KINDS[found], source.key)
        return Registration(
            kind=found, ref=target.key, was=source.key, revisions=len(record.history)
        )

    return store.index.write(body)


def _record(txn: Txn, kind: Kind, ref: Reference) -> NamedRecord:
    """The name record of ``ref`` (it exists: :func:`registered_kind` found it), checked."""
    record = read_name(txn, KINDS[kind], ref.key)
    assert record is not None
    return record
