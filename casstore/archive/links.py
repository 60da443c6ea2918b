"""The symbolic-link rule, shared by the packager (source tree) and the reader (archive).

A link is kept only when its target is relative and, following every link on the way, resolves
to an existing entry inside the task directory that is not an ancestor of the link itself (that
would make the tree infinite when followed). Absolute, escaping, dangling and cyclic links are
refused, and so is a link standing where Harbor expects a real file or directory (``PROTECTED``).

Resolution is purely lexical over a *tree view* (``lookup``), never the disk's own
``realpath``: the packager's view is its scan of the source, the reader's is the archive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from casstore.errors import SymlinkError

__all__ = ["Lookup", "Node", "check_link", "is_protected"]

Node = tuple[Literal["dir", "file", "symlink", "special"], str]
"""What a tree view knows of one path: its kind and, for a symlink, its target."""

Lookup = Callable[[tuple[str, ...]], Node | None]
"""Maps a path (components below the task root) to its node, or None when absent."""

_MAX_HOPS = 40  # as the kernel's MAXSYMLINKS


def is_protected(parts: tuple[str, ...]) -> bool:
    """Whether a link at ``parts`` (below the task root) stands where Harbor needs a real
    entry: ``task.toml``, ``instruction.md``, ``.gitignore``, ``steps``, a step directory
    ``steps/<name>`` or a step's ``instruction.md``."""
    if len(parts) == 1:
        return parts[0] in {"task.toml", "instruction.md", ".gitignore", "steps"}
    if parts[0] != "steps":
        return False
    return len(parts) == 2 or (len(parts) == 3 and parts[2] == "instruction.md")


def check_link(path: str, parts: tuple[str, ...], target: str, lookup: Lookup) -> tuple[str, ...]:
    """Check the link at ``parts`` (display name ``path``) pointing to ``target``.

    Returns the components of the entry it resolves to. Raises :class:`SymlinkError` naming
    ``path`` and the rule: protected location, empty or absolute target, escape from the task
    directory (also through another link), dangling, cyclic or pointing at its own ancestor.
    """
    if is_protected(parts):
        raise SymlinkError(path, "a symbolic link may not stand at a path Harbor reads itself")
    resolved = _resolve(path, parts, target, lookup)
    if parts[: len(resolved)] == resolved:
        raise SymlinkError(path, f"link to {target!r} points at its own ancestor (cycle)")
    return resolved


def _resolve(path: str, parts: tuple[str, ...], target: str, lookup: Lookup) -> tuple[str, ...]:
    current: list[str] = list(parts[:-1])
    pending = _components(path, target)
    hops = 0
    while pending:
        name = pending.pop(0)
        if name == "..":
            if not current:
                raise SymlinkError(path, f"link to {target!r} escapes the task directory")
            current.pop()
            continue
        current.append(name)
        node = lookup(tuple(current))
        if node is None or node[0] == "special":
            raise SymlinkError(path, f"link to {target!r} is dangling")
        if node[0] == "file" and pending:
            raise SymlinkError(path, f"link to {target!r} is dangling (file used as directory)")
        if node[0] == "symlink":
            hops += 1
            if hops > _MAX_HOPS or tuple(current) == parts:
                raise SymlinkError(path, f"link to {target!r} is cyclic")
            current.pop()
            pending = _components(path, node[1]) + pending
    return tuple(current)


def _components(path: str, target: str) -> list[str]:
    if not target:
        raise SymlinkError(path, "link target is empty")
    if target.startswith("/"):
        raise SymlinkError(path, f"link target {target!r} is absolute")
    return [name for name in target.split("/") if name not in ("", ".")]
