"""Registration names: the one rule for task, taskset, workspace and fileset names and for the
components of a fileset path prefix.

A name is 1 to 255 characters of ASCII letters, digits, ``_``, ``-`` and ``.``, and neither
``.`` nor ``..``. A task's default name is its native id (Harbor's ``org/name``) with ``/``
replaced by ``-``.
"""

from __future__ import annotations

import re

from casstore.errors import UsageError

__all__ = [
    "DEFAULT_FILESET",
    "DEFAULT_WORKSPACE",
    "NAME_RULE",
    "check_name",
    "check_prefix",
    "default_name",
    "is_name",
]

DEFAULT_WORKSPACE = "default"
"""The workspace of a reference that names none."""
DEFAULT_FILESET = "harbor-tasks"
"""The fileset tasks are published into unless one is named."""

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,255}")
NAME_RULE = "not a valid name (1 to 255 ASCII letters, digits, '_', '-', '.'; not '.' or '..')"
"""What :func:`check_name` says of a name that is not one."""


def is_name(text: str) -> bool:
    """Whether ``text`` is a valid name (see the module docstring)."""
    return _NAME.fullmatch(text) is not None and text not in {".", ".."}


def check_name(name: str) -> str:
    """``name`` when it is a valid name; else :class:`UsageError` naming it."""
    if not is_name(name):
        raise UsageError(name, NAME_RULE)
    return name


def default_name(native_id: str) -> str:
    """The default registration name of a task: the native id with ``/`` → ``-`` (checked)."""
    return check_name(native_id.replace("/", "-"))


def check_prefix(prefix: str) -> str:
    """A fileset path prefix: ``""`` or ``/``-separated names (outer ``/`` stripped); raises
    :class:`UsageError` naming it otherwise."""
    prefix = prefix.strip("/")
    for part in prefix.split("/") if prefix else ():
        if not is_name(part):
            raise UsageError(prefix, "a prefix is /-separated names of [A-Za-z0-9_.-]")
    return prefix
