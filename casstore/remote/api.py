"""The remote commands as functions (``casstore remote``, ``push``, ``pull``, ``checkout
NAME:REF``, ``ls --remote``, ``fsck --remote``, ``rescore NAME:JOB``); re-exported by
:mod:`casstore.api`.

A remote is named as the store records it (:mod:`casstore.remote.config`); a command given no
name uses the store's only remote. ``NAME:REF`` names REF on the remote NAME when NAME is one
of the store's remotes (a reference itself holds no ``:`` before its ``#``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from casstore.errors import UsageError
from casstore.names import is_name
from casstore.progress import NO_PROGRESS, Progress
from casstore.remote.checkout import checkout_remote as _checkout
from casstore.remote.client import Client, open_client
from casstore.remote.config import Remote, add_remote, get_remote, list_remotes, remove_remote
from casstore.remote.fsck import RemoteFsckReport
from casstore.remote.fsck import fsck_remote as _fsck
from casstore.remote.listing import list_remote
from casstore.remote.pull import PullReport
from casstore.remote.pull import pull as _pull
from casstore.remote.push import PushReport
from casstore.remote.push import push as _push
from casstore.store.checkout import CheckoutResult
from casstore.store.core import Store, check_store

__all__ = [
    "add_remote",
    "checkout_remote",
    "client_of",
    "fsck_remote",
    "list_remotes",
    "ls_remote",
    "pull",
    "pulled_jobs",
    "push",
    "remote_jobs",
    "remote_refs",
    "remove_remote",
    "split_remote_ref",
]


def client_of(store: Store, name: str | None) -> Client:
    """The client of the remote ``name`` of ``store`` (None: its only remote). UsageError
    when ``name`` is None and the store has no remote or several."""
    if name is None:
        remotes = list_remotes(store)
        if len(remotes) != 1:
            have = ", ".join(remote.name for remote in remotes) or "none"
            rule = f"name the remote (the store has {len(remotes)}: {have}; casstore remote add)"
            raise UsageError("--to/--from", rule)
        return open_client(remotes[0])
    return open_client(get_remote(store, name))


def split_remote_ref(store: Store, text: str) -> tuple[Remote, str] | None:
    """``(remote, REF)`` when ``text`` is ``NAME:REF`` and NAME one of ``store``'s remotes."""
    name, sep, ref = text.partition(":")
    if not sep or not ref or not is_name(name):
        return None
    found = [remote for remote in list_remotes(store) if remote.name == name]
    return (found[0], ref) if found else None


def _split(store: Store, text: str) -> tuple[Client, str]:
    found = split_remote_ref(store, text)
    if found is None:
        raise UsageError(text, "not NAME:REF with NAME one of the store's remotes")
    return open_client(found[0]), found[1]


def _refs(value: object) -> list[str]:
    """``value`` as a list of REFs (one ``str``, or a sequence of them); UsageError naming
    ``refs`` otherwise."""
    items = [value] if isinstance(value, str) else value
    if isinstance(items, list | tuple) and items and all(isinstance(i, str) for i in items):
        return list(items)
    raise UsageError("refs", f"expected REFs (str, or a list of them), not {value!r:.40}")


def push(
    store: Store, refs: list[str], to: str | None = None, progress: Progress = NO_PROGRESS
) -> PushReport:
    """``casstore push REF... [--to NAME]`` (:func:`casstore.remote.push.push`)."""
    checked = check_store(store)
    return _push(checked, client_of(checked, to), _refs(refs), progress)


def pull(
    store: Store, refs: list[str], from_: str | None = None, progress: Progress = NO_PROGRESS
) -> PullReport:
    """``casstore pull REF... [--from NAME]`` (:func:`casstore.remote.pull.pull`)."""
    checked = check_store(store)
    return _pull(checked, client_of(checked, from_), _refs(refs), progress)


def checkout_remote(
    store: Store, ref: str, dest: Path, progress: Progress = NO_PROGRESS
) -> CheckoutResult:
    """``casstore checkout NAME:REF DEST`` (:func:`casstore.remote.checkout.checkout_remote`)."""
    client, name = _split(store, ref)
    return _checkout(client, name, Path(dest), progress)


def ls_remote(store: Store, name: str, what: str) -> list[dict[str, Any]]:
    """``casstore ls tasks|tasksets|jobs --remote NAME`` (rows as ``ls`` prints them)."""
    return list_remote(client_of(store, name), what)


def fsck_remote(
    store: Store, name: str | None = None, progress: Progress = NO_PROGRESS
) -> RemoteFsckReport:
    """``casstore fsck --remote NAME`` (:func:`casstore.remote.fsck.fsck_remote`)."""
    return _fsck(client_of(store, name), progress)


def remote_refs(store: Store, texts: list[str]) -> list[tuple[Client, str]]:
    """The client and REF of each ``NAME:REF`` of ``texts`` (UsageError for any other)."""
    return [_split(store, text) for text in texts]


@contextmanager
def remote_jobs(store: Store, texts: list[str]) -> Iterator[tuple[Store, list[str]]]:
    """For ``rescore NAME:JOB...``: the jobs pulled, checked, into a private temporary store
    (removed afterwards; ``store`` is not written), and their ids, in order."""
    with pulled_jobs(remote_refs(store, texts)) as found:
        yield found


@contextmanager
def pulled_jobs(named: list[tuple[Client, str]]) -> Iterator[tuple[Store, list[str]]]:
    """:func:`remote_jobs` of clients and job names (:func:`remote_refs`)."""
    with (
        tempfile.TemporaryDirectory(prefix="casstore-rescore-") as scratch,
        Store(Path(scratch, "store")) as temporary,
    ):
        ids = []
        for client, job in named:
            report = _pull(temporary, client, [job], kinds=("jobs",))
            ids.append(str(report.refs[0]["ref"]))
        yield temporary, ids
