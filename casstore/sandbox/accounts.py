"""The sandbox's users: a private copy of ``/etc/passwd`` and ``/etc/group`` per trial.

The host's ``/etc`` is bound read-only, with these two files bound over it from the trial's
work directory. A user name the host does not know (a task's ``user = "agent"``, which a
Dockerfile would create with ``RUN useradd``) gets an entry: the first free uid from 1000, a
group of the same number and the home ``/home/<name>`` (made inside the sandbox by the
caller: ``Account.created``). A numeric
user needs no entry (``id -un`` then says it has no name, as in a container).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from casstore.errors import SandboxError

__all__ = ["Account", "Accounts"]

_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
FIRST_UID = 1000


@dataclass(frozen=True)
class Account:
    """Who a command runs as: ``name`` is None for a uid without an entry."""

    name: str | None
    uid: int
    gid: int
    home: str
    created: bool = False


def _entries(path: Path) -> list[list[str]]:
    return [line.split(":") for line in path.read_text().splitlines() if line.count(":") >= 2]


class Accounts:
    """The private ``passwd`` and ``group`` files of one sandbox (``etc`` holds them)."""

    def __init__(self, etc: Path) -> None:
        self.passwd = etc / "passwd"
        self.group = etc / "group"

    def create(self, host_etc: Path = Path("/etc")) -> None:
        """Copy the host's two files (before the sandbox starts)."""
        for name in ("passwd", "group"):
            source = host_etc / name
            text = source.read_text() if source.is_file() else ""
            if text and not text.endswith("\n"):
                text += "\n"
            (self.passwd.parent / name).write_text(text)

    def resolve(self, user: str | int | None) -> Account:
        """The account of ``user`` (name or uid; None is root), adding an entry for an
        unknown name; SandboxError for a name that cannot be a user name."""
        if user is None:
            user = 0
        if isinstance(user, int) or str(user).isdigit():
            uid = int(user)
            for entry in _entries(self.passwd):
                if len(entry) >= 6 and entry[2] == str(uid):
                    return Account(entry[0], uid, int(entry[3]), entry[5] or "/")
            return Account(None, uid, uid, "/")
        name = str(user)
        for entry in _entries(self.passwd):
            if entry[0] == name and len(entry) >= 6:
                return Account(name, int(entry[2]), int(entry[3]), entry[5] or "/")
        return self._add(name)

    def _add(self, name: str) -> Account:
        if not _NAME.fullmatch(name):
            raise SandboxError(name, "not a user name the sandbox can create")
        taken = {int(e[2]) for e in _entries(self.passwd) if e[2].isdigit()}
        taken |= {int(e[2]) for e in _entries(self.group) if e[2].isdigit()}
        uid = FIRST_UID
        while uid in taken:
            uid += 1
        home = f"/home/{name}"
        # appended in place: the bind mount inside the sandbox shows the same inode
        with self.passwd.open("a") as passwd:
            passwd.write(f"{name}:x:{uid}:{uid}::{home}:/bin/bash\n")
        if not any(entry[0] == name for entry in _entries(self.group)):
            with self.group.open("a") as group:
                group.write(f"{name}:x:{uid}:\n")
        return Account(name, uid, uid, home, created=True)
