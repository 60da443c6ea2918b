"""What ``casstore publish`` decides before it opens the store, and its ``--recursive`` JSON.

Every name it would register or use is checked first (:func:`check_names`), the datasets of
``--recursive`` found (:func:`datasets_of`) and their task names compared
(:func:`check_distinct`), so that a refusal creates nothing. Imported by the command's body,
for start-up time (README, "Start-up").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from casstore.errors import UsageError

if TYPE_CHECKING:
    from casstore.archive.discover import DiscoveredTask, TaskCollection
    from casstore.archive.modes import Modes
    from casstore.progress import Progress
    from casstore.store import PublishResult, TasksetResult

    type Dataset = tuple[Path, TaskCollection, str | None]
    """A directory, its tasks, and the taskset to pin them in (or None)."""
    type Published = tuple[Path, list[PublishResult], TasksetResult | None]
    """A directory, its tasks as published, and their taskset (or None)."""

__all__ = ["Continued", "check_distinct", "check_names", "datasets_of", "published_json"]


def datasets_of(
    path: Path, name: str | None, taskset: str | None, recursive: bool, modes: Modes = "keep"
) -> list[Dataset]:
    """What ``publish`` publishes: the tasks of ``path`` (pinned in ``taskset``, if any), or
    with ``recursive`` each dataset of the folder ``path`` (pinned in a taskset named after
    its directory); discovered with the ``modes`` rule."""
    from casstore.archive.discover import discover, discover_datasets

    if not recursive:
        tasks = discover(path, None, modes)
        if name is not None and len(tasks) != 1:
            raise UsageError(str(path), "--name needs a single task")
        return [(path, tasks, taskset)]
    if taskset is not None:
        raise UsageError("--taskset", "--recursive names a taskset after each dataset")
    if name is not None:
        raise UsageError("--name", "--recursive publishes datasets, --name a single task")
    found = discover_datasets(path, None, modes)
    return [(directory, tasks, directory.name) for directory, tasks in found]


def check_distinct(tasks: Sequence[DiscoveredTask], name: str | None, workspace: str) -> None:
    """UsageError when two of ``tasks`` (of several datasets) would register one task name:
    the second would silently become the first's latest revision."""
    from casstore.names import default_name

    if name is not None:
        return
    first: dict[str, DiscoveredTask] = {}
    for task in tasks:
        key = f"{workspace}/{default_name(task.id)}"
        if key in first:
            rule = f"the task name {key} is also that of {first[key].source_dir}"
            raise UsageError(
                str(task.source_dir), f"{rule}; publish the datasets apart (--workspace)"
            )
        first[key] = task


class Continued:
    """The progress of one dataset among several: the total was given once, for all."""

    def __init__(self, bar: Progress) -> None:
        self._bar = bar

    def start(self, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        self._bar.advance(label)


def published_json(published: list[Published]) -> list[dict[str, Any]]:
    """``publish --recursive --json``: per dataset its directory, taskset and tasks."""
    return [
        {
            "dataset": str(directory),
            "taskset": made.to_json() | {"reused": made.reused} if made else None,
            "tasks": [r.to_json() for r in results],
        }
        for directory, results, made in published
    ]


def check_names(
    tasks: Sequence[DiscoveredTask],
    name: str | None,
    workspace: str,
    fileset: str,
    prefix: str,
    taskset: str | None,
) -> None:
    """Every name ``publish`` would register or use (the tasks' names, ``--workspace``,
    ``--fileset``, ``--prefix``, ``--taskset``), checked before the store is opened or made:
    a refusal creates nothing. A task's default name that is not a name suggests ``--name``."""
    from casstore.names import check_name, check_prefix, default_name

    for value in (name, workspace, fileset, taskset):
        if value is not None:
            check_name(value)
    check_prefix(prefix)
    if name is not None:
        return
    for task in tasks:
        try:
            default_name(task.id)
        except UsageError as error:
            alone = "" if len(tasks) == 1 else " alone"
            rule = f"{error.rule}; publish it{alone} with --name NAME"
            raise UsageError(error.path, rule) from None
