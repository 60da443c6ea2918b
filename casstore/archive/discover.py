"""Task discovery (README, §1 Task discovery): one task directory or a dataset directory → tasks.

Every discovered task was scanned with every packaging check
(:func:`casstore.archive.scan.scan_tree`, which validates ``task.toml`` with Harbor's own
``TaskConfig``) and carries its content digest, so that what was validated is what is published:
publication re-packs and fails with :class:`casstore.errors.SourceChangedError` when the source
changed in between.

Dataset rules, children visited in sorted order: ``task_template`` is skipped with a warning;
regular files and hidden (dot-named) real directories are skipped silently; a symlink, FIFO,
socket or device is an :class:`EntryTypeError`; a visible directory that is not a valid task
is a :class:`TaskFormatError` (malformed) naming it, unless it is a dataset itself (no
``task.toml``, a sub-directory with one): a :class:`UsageError` saying the path is a folder of
datasets (every child one; :func:`discover_datasets` reads those) or mixes tasks and
datasets; no task is a :class:`TaskFormatError` (empty dataset); two tasks with one native
id is a :class:`TaskFormatError` naming both.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from pydantic import BaseModel, ConfigDict

from casstore.archive.layout import TaskLayout
from casstore.archive.limits import Limits
from casstore.archive.modes import Modes
from casstore.archive.pack import write_archive
from casstore.archive.scan import SourceTree, scan_tree
from casstore.errors import EntryTypeError, SourceChangedError, TaskFormatError, UsageError

__all__ = [
    "DiscoveredTask",
    "DiscoveryWarning",
    "PlainTask",
    "TaskCollection",
    "discover",
    "discover_datasets",
    "discover_task",
    "normalize_instruction",
]

PRIMARY_METRIC = "reward"
TEMPLATE_DIR = "task_template"


class DiscoveryWarning(UserWarning):
    """A dataset child was skipped on purpose (e.g. ``task_template``)."""


class PlainTask(BaseModel):
    """A discovered task without ``source_dir``, for stores that reject the extra field.

    ``id`` and ``intent``: the native id; ``inputs``: ``{"instruction": str | None, "steps":
    [{"name", "instruction"}, ...]}``; ``metrics``: reward metric names, primary first;
    ``views``: declared views (possibly empty); ``content_digest``: ``blake3:<hex>`` of the
    canonical tar; ``dir_name``: the task directory's name (the archive's top directory).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    intent: str
    inputs: dict[str, Any]
    metrics: list[str]
    views: list[dict[str, Any]]
    content_digest: str
    dir_name: str


class DiscoveredTask(PlainTask):
    """A discovered task: :class:`PlainTask` plus ``source_dir`` (absolute path) and the
    ``modes`` rule it was packed with (publication packs it again with the same)."""

    source_dir: Path
    modes: Modes = "keep"

    def without_source_dir(self) -> PlainTask:
        """A :class:`PlainTask` copy (every field except ``source_dir`` and ``modes``)."""
        return PlainTask.model_validate(self.model_dump(exclude={"source_dir", "modes"}))


class TaskCollection(Sequence[DiscoveredTask]):
    """An immutable, re-iterable sequence of discovered tasks (sorted by directory name).

    Supports ``len``, iteration (any number of times), indexing and slicing (a slice is a
    :class:`TaskCollection`). ``warnings`` lists the messages of skipped children.
    """

    def __init__(self, tasks: Sequence[DiscoveredTask], warnings: Sequence[str] = ()) -> None:
        self._tasks = tuple(tasks)
        self.warnings: tuple[str, ...] = tuple(warnings)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[DiscoveredTask]:
        return iter(self._tasks)

    @overload
    def __getitem__(self, index: int) -> DiscoveredTask: ...

    @overload
    def __getitem__(self, index: slice) -> TaskCollection: ...

    def __getitem__(self, index: int | slice) -> DiscoveredTask | TaskCollection:
        if isinstance(index, slice):
            return TaskCollection(self._tasks[index], self.warnings)
        return self._tasks[index]

    def __repr__(self) -> str:
        return f"TaskCollection({[task.id for task in self._tasks]!r})"

    def without_source_dir(self) -> list[PlainTask]:
        """Plain copies of every task, without ``source_dir``."""
        return [task.without_source_dir() for task in self._tasks]


def normalize_instruction(raw: bytes, path: str) -> str:
    """UTF-8 text with the BOM removed, CRLF/CR → LF, trailing whitespace at the end removed.

    Raises :class:`TaskFormatError` naming ``path`` when ``raw`` is not UTF-8.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TaskFormatError(path, "instruction is not valid UTF-8") from error
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n").rstrip()


def discover(
    path: Path | str, limits: Limits | None = None, modes: Modes = "keep"
) -> TaskCollection:
    """Discover the task at ``path`` (holds ``task.toml``) or the tasks of a dataset ``path``,
    each packed with the ``modes`` rule (:mod:`casstore.archive.modes`).

    Raises :class:`UsageError` when ``path`` is not a directory, and the errors of the module
    docstring (each naming the offending path) for a bad dataset; the packaging check errors of
    :mod:`casstore.errors` for a bad task.
    """
    limits = limits or Limits()
    root = _directory(path)
    if _is_task(root):
        return TaskCollection([discover_task(root, limits, modes)])
    tasks: list[DiscoveredTask] = []
    skipped: list[str] = []
    for child in _children(root):
        if child.name == TEMPLATE_DIR:
            message = f"{child}: skipped (task template)"
            warnings.warn(message, DiscoveryWarning, stacklevel=2)
            skipped.append(message)
            continue
        try:
            tasks.append(discover_task(child, limits, modes))
        except TaskFormatError as error:
            if _holds_tasks(child):
                raise _nested_dataset(path, root, child) from None
            raise TaskFormatError(str(child), f"malformed task ({error})") from error
    if not tasks:
        raise TaskFormatError(str(root), "empty dataset: no task directory found")
    seen: dict[str, DiscoveredTask] = {}
    for task in tasks:
        if task.id in seen:
            first = seen[task.id].source_dir
            raise TaskFormatError(
                f"{first}, {task.source_dir}", f"two tasks have the native id {task.id!r}"
            )
        seen[task.id] = task
    return TaskCollection(tasks, skipped)


def discover_datasets(
    path: Path | str, limits: Limits | None = None, modes: Modes = "keep"
) -> list[tuple[Path, TaskCollection]]:
    """The datasets of the folder of datasets ``path`` (``publish --recursive``): each visible
    child directory, in sorted order, with its tasks (:func:`discover`); files and
    dot-directories are skipped as in a dataset. UsageError for a ``path`` that is no
    directory, a child that is a task, or no dataset at all."""
    root = _directory(path)
    found = []
    for child in _children(root):
        if _is_task(child):
            rule = f"a task, not a dataset (publish {path} without --recursive)"
            raise UsageError(str(child), rule)
        found.append((child, discover(child, limits, modes)))
    if not found:
        raise UsageError(str(path), "no dataset in this folder (--recursive)")
    return found


def _directory(path: Path | str) -> Path:
    """``path`` made absolute; UsageError when it is no directory."""
    root = Path(os.path.abspath(path))
    if not root.is_dir():
        raise UsageError(str(path), "not a directory" if root.exists() else "does not exist")
    return root


def _is_task(path: Path) -> bool:
    """Whether ``path`` holds a ``task.toml`` (a link counts: the scan refuses it)."""
    return os.path.lexists(path / "task.toml")


def _children(root: Path) -> Iterator[Path]:
    """The visible child directories of a dataset (or folder of datasets) ``root``, sorted:
    files and dot-directories skipped, an EntryTypeError for a link or special file."""
    for name in sorted(os.listdir(root)):
        child = root / name
        info = os.lstat(child)
        if stat.S_ISREG(info.st_mode):
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise EntryTypeError(str(child), "a dataset child must be a directory or a file")
        if not name.startswith("."):
            yield child


def _holds_tasks(path: Path) -> bool:
    """Whether ``path`` is a dataset rather than a task: no ``task.toml``, and a visible
    sub-directory that has one."""
    if _is_task(path):
        return False
    try:
        with os.scandir(path) as entries:
            return any(
                not e.name.startswith(".")
                and e.is_dir(follow_symlinks=False)
                and _is_task(Path(e.path))
                for e in entries
            )
    except OSError:
        return False


def _nested_dataset(path: Path | str, root: Path, child: Path) -> UsageError:
    """The error for the dataset ``child`` found where ``root`` (given as ``path``) should
    hold tasks: ``root`` a folder of datasets (every child one: ``--recursive`` publishes
    them), or a folder mixing tasks and datasets."""
    children = [c for c in _children(root) if c.name != TEMPLATE_DIR]
    datasets = [c.name for c in children if _holds_tasks(c)]
    if len(datasets) < len(children):
        return UsageError(str(child), f"a dataset, not a task ({path} mixes tasks and datasets)")
    shown = ", ".join(datasets[:5]) + (", …" if len(datasets) > 5 else "")
    rule = f"a folder of datasets ({shown}), not a dataset of tasks: "
    return UsageError(str(path), rule + "publish each, or all with --recursive")


def discover_task(
    path: Path, limits: Limits | None = None, modes: Modes = "keep"
) -> DiscoveredTask:
    """Scan, check and digest (its modes by ``modes``) one task directory; raises the
    packaging check errors."""
    limits = limits or Limits()
    tree = scan_tree(Path(path), limits, modes)
    result = write_archive(tree, None, "none", limits)
    return task_from_tree(tree, str(result.content_digest))


def task_from_tree(tree: SourceTree, content_digest: str) -> DiscoveredTask:
    """Build the :class:`DiscoveredTask` of a scanned ``tree`` with its content digest."""
    layout = tree.layout
    root_instruction = None
    if layout.has_root_instruction:
        root_instruction = _read_instruction(tree, ("instruction.md",))
    steps = [
        {"name": name, "instruction": _read_instruction(tree, ("steps", name, "instruction.md"))}
        for name in layout.steps
    ]
    return DiscoveredTask(
        id=layout.native_id,
        intent=layout.native_id,
        inputs={"instruction": root_instruction, "steps": steps},
        source_dir=tree.root,
        metrics=metrics_of(layout),
        views=views_of(layout),
        content_digest=content_digest,
        dir_name=tree.top,
        modes=tree.modes,
    )


def metrics_of(layout: TaskLayout) -> list[str]:
    """Reward metric names, primary first.

    The primary is Harbor's ``reward`` key unless ``[metadata] reward_key`` names another.
    Secondary keys come from ``[metadata] reward_keys`` (a list, in order) and from the keys
    of step ``min_reward`` tables, each once.
    """
    metadata = layout.config.metadata or {}
    primary = metadata.get("reward_key")
    names = [primary if isinstance(primary, str) and primary else PRIMARY_METRIC]
    declared = metadata.get("reward_keys")
    if isinstance(declared, list):
        names.extend(key for key in declared if isinstance(key, str))
    for step in layout.config.steps or ():
        if isinstance(step.min_reward, dict):
            names.extend(step.min_reward)
    return list(dict.fromkeys(names))


def views_of(layout: TaskLayout) -> list[dict[str, Any]]:
    """Declared views: ``[metadata] views`` (a list of tables), else empty."""
    views = (layout.config.metadata or {}).get("views")
    if isinstance(views, list):
        return [dict(view) for view in views if isinstance(view, dict)]
    return []


def _read_instruction(tree: SourceTree, parts: tuple[str, ...]) -> str:
    path = tree.root.joinpath(*parts)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SourceChangedError(tree.path_of(parts), f"cannot read: {error.strerror}") from error
    return normalize_instruction(raw, tree.path_of(parts))
