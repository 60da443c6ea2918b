"""The Harbor task layout rule (README, §1 Task discovery), over any tree view: disk or archive.

A task holds a ``task.toml`` that Harbor's own ``TaskConfig`` accepts, and ``instruction.md``;
a multi-step task (``steps`` in task.toml) holds ``steps/<name>/instruction.md`` for every
named step, no other directory under ``steps/``, and may lack the root ``instruction.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from casstore.archive import config_cache
from casstore.archive.config_cache import TaskFacts
from casstore.errors import TaskFormatError

if TYPE_CHECKING:
    from harbor.models.task.config import TaskConfig

__all__ = [
    "TaskLayout",
    "check_config",
    "check_layout",
    "check_tree_layout",
    "facts_of",
    "parse_task_config",
    "task_facts",
]


@dataclass(frozen=True, slots=True)
class TaskLayout:
    """A checked task: ``native_id`` (``[task] name`` or the directory name, as Harbor
    decides), ``steps`` (names, in task.toml order; empty for one step), whether a root
    ``instruction.md`` exists, and task.toml (``config_path``, ``config_text``), which
    Harbor accepted; ``config`` is its Harbor ``TaskConfig`` (Harbor is imported on first
    use: only discovery reads it)."""

    native_id: str
    steps: tuple[str, ...]
    has_root_instruction: bool
    config_path: str
    config_text: bytes
    _config: list[TaskConfig] = field(default_factory=list, init=False, compare=False, repr=False)

    @property
    def config(self) -> TaskConfig:
        """Harbor's ``TaskConfig`` of task.toml (validated once per layout)."""
        if not self._config:
            self._config.append(parse_task_config(self.config_path, self.config_text))
        return self._config[0]


def parse_task_config(path: str, text: bytes) -> TaskConfig:
    """Validate task.toml bytes with Harbor's ``TaskConfig``; TaskFormatError names ``path``."""
    import tomllib  # here, with Harbor and pydantic: for start-up time (README, "Start-up")

    from harbor.models.task.config import TaskConfig
    from pydantic import ValidationError

    try:
        return TaskConfig.model_validate_toml(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TaskFormatError(path, f"task.toml is not valid for Harbor: {first}") from error


def facts_of(config: TaskConfig) -> TaskFacts:
    """What the layout needs of a ``TaskConfig``: ``[task] name`` and the step names."""
    name = config.task.name if config.task is not None else None
    return TaskFacts(name, tuple(step.name for step in config.steps or ()))


_ACCEPTED: dict[str, TaskFacts] = {}
"""This process's accepted task.toml bytes (by SHA-256): a pack checks task.toml twice."""


def task_facts(path: str, text: bytes) -> TaskFacts:
    """Harbor's verdict on task.toml bytes ``text``, as the layout needs it: from this
    process's memory, else from the validation cache (:mod:`casstore.archive.config_cache`),
    else from Harbor's ``TaskConfig`` (an acceptance is then filed in the cache). Raises
    :class:`TaskFormatError` naming ``path`` when Harbor refuses the bytes."""
    digest = hashlib.sha256(text).hexdigest()
    facts = _ACCEPTED.get(digest)
    if facts is None:
        facts = config_cache.lookup(text)
        if facts is None:
            facts = facts_of(parse_task_config(path, text))
            config_cache.remember(text, facts)
        if len(_ACCEPTED) >= 1024:
            _ACCEPTED.clear()
        _ACCEPTED[digest] = facts
    return facts


def check_config(top: str, config_text: bytes | None) -> TaskFacts:
    """Harbor's verdict on the task's task.toml bytes (None: absent or not a regular file).
    Raises :class:`TaskFormatError` naming ``top/task.toml``."""
    if config_text is None:
        raise TaskFormatError(f"{top}/task.toml", "a task needs a regular task.toml file")
    return task_facts(f"{top}/task.toml", config_text)


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
    facts = check_config(top, config_text)
    steps = facts.steps
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
    native_id = facts.name if facts.name is not None else top
    text = config_text or b""  # not None: check_config refused it
    return TaskLayout(native_id, steps, has_root, f"{top}/task.toml", text)


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
