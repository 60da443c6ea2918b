"""The Harbor task layout rule (README, §1 Task discovery), over any tree view: disk or archive.

A task holds a ``task.toml`` that Harbor's own ``TaskConfig`` accepts, and ``instruction.md``;
a multi-step task (``steps`` in task.toml) holds ``steps/<name>/instruction.md`` for every
named step, no other directory under ``steps/``, and may lack the root ``instruction.md``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from casstore.errors import TaskFormatError

if TYPE_CHECKING:
    from harbor.models.task.config import TaskConfig

__all__ = [
    "TaskLayout",
    "check_config",
    "check_layout",
    "check_tree_layout",
    "parse_task_config",
]


@dataclass(frozen=True, slots=True)
class TaskLayout:
    """A checked task: its Harbor ``config``, ``native_id`` (``[task] name`` or the directory
    name, as Harbor decides), ``steps`` (names, in task.toml order; empty for one step) and
    whether a root ``instruction.md`` exists."""

    config: TaskConfig
    native_id: str
    steps: tuple[str, ...]
    has_root_instruction: bool


def parse_task_config(path: str, text: bytes) -> TaskConfig:
    """Validate task.toml bytes with Harbor's ``TaskConfig``; TaskFormatError names ``path``."""
    from harbor.models.task.config import TaskConfig

    try:
        return TaskConfig.model_validate_toml(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TaskFormatError(path, f"task.toml is not valid for Harbor: {first}") from error


def check_config(top: str, config_text: bytes | None) -> TaskConfig:
    """The task's Harbor config from task.toml bytes (None: absent or not a regular file).
    Raises :class:`TaskFormatError` naming ``top/task.toml``."""
    if config_text is None:
        raise TaskFormatError(f"{top}/task.toml", "a task needs a regular task.toml file")
    return parse_task_config(f"{top}/task.toml", config_text)


def check_layout(
    top: str,
    config_text: bytes | None,
    files: Collection[tuple[str, ...]],
    step_dirs: Collection[str],
) -> TaskLayout:
    """Check the layout of the task named ``top``.

    ``config_text`` is task.toml's bytes (None when absent or not a regular file); ``files``
    the regular files' paths below the task root; ``step_dirs`` the names of directories
    directly under ``steps/``. Raises :class:`TaskFormatError` naming the missing or extra path.
    """
    config = check_config(top, config_text)
    steps = tuple(step.name for step in config.steps or ())
    has_root = ("instruction.md",) in files
    if not steps and not has_root:
        raise TaskFormatError(f"{top}/instruction.md", "a task needs a regular instruction.md")
    for name in steps:
        if ("steps", name, "instruction.md") not in files:
            raise TaskFormatError(
                f"{top}/steps/{name}/instruction.md", "every step in task.toml needs this file"
            )
    extra = sorted(set(step_dirs) - set(steps))
    if extra:
        raise TaskFormatError(f"{top}/steps/{extra[0]}", "directory not named in task.toml steps")
    native_id = config.task.name if config.task is not None else top
    return TaskLayout(config, native_id, steps, has_root)


def check_tree_layout(
    top: str, config_text: bytes | None, kinds: Iterable[tuple[tuple[str, ...], str]]
) -> TaskLayout:
    """:func:`check_layout` over a tree given as ``(parts below the root, kind)`` pairs."""
    files: set[tuple[str, ...]] = set()
    step_dirs: list[str] = []
    for parts, kind in kinds:
        if kind == "file":
            files.add(parts)
        elif kind == "dir" and len(parts) == 2 and parts[0] == "steps":
            step_dirs.append(parts[1])
    return check_layout(top, config_text, files, step_dirs)
