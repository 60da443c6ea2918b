"""Task discovery (README, §1 Task discovery): every dataset rule, on small generated trees."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from casstore.archive.discover import (
    DiscoveredTask,
    DiscoveryWarning,
    PlainTask,
    TaskCollection,
    discover,
    normalize_instruction,
)
from casstore.archive.pack import pack_tree
from casstore.errors import EntryTypeError, TaskFormatError, UsageError
from casstore.names import check_name, default_name
from tests.conftest import FIXTURES


def write_task(
    root: Path,
    name: str,
    *,
    native: str | None = None,
    instruction: bytes | None = b"Do the thing.\n",
    steps: dict[str, bytes] | None = None,
    metadata: str = "",
    extra: dict[str, bytes] | None = None,
) -> Path:
    """Write a small valid Harbor task at ``root/name``; return its directory.

    Shared by the store tests (imported as ``from test_discovery import write_task``).
    """
    task = root / name
    task.mkdir(parents=True)
    toml = 'schema_version = "1.1"\n'
    if native is not None:
        toml += f'[task]\nname = "{native}"\n'
    if metadata:
        toml += f"[metadata]\n{metadata}\n"
    for step in steps or {}:
        toml += f'[[steps]]\nname = "{step}"\n'
    (task / "task.toml").write_text(toml)
    if instruction is not None:
        (task / "instruction.md").write_bytes(instruction)
    for step, text in (steps or {}).items():
        (task / "steps" / step).mkdir(parents=True)
        (task / "steps" / step / "instruction.md").write_bytes(text)
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    os.chmod(task / "tests" / "test.sh", 0o755)
    for rel, data in (extra or {}).items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_bytes(data)
    return task


def test_single_task_directory(tmp_path: Path) -> None:
    task_dir = write_task(tmp_path, "alpha", instruction=b"\xef\xbb\xbfHello\r\nworld\r  \n\n")
    tasks = discover(task_dir)
    assert len(tasks) == 1
    task = tasks[0]
    assert task.id == task.intent == "alpha"
    assert task.inputs == {"instruction": "Hello\nworld", "steps": []}
    assert task.source_dir == task_dir.resolve() and task.source_dir.is_absolute()
    assert task.metrics == ["reward"]
    assert task.views == []
    assert task.dir_name == "alpha"
    assert task.content_digest == str(pack_tree(task_dir, None, "none").content_digest)
    assert task.content_digest == str(pack_tree(task_dir, None, "gzip").content_digest)
    assert task.content_digest.startswith("blake3:")


def test_native_id_from_task_table(tmp_path: Path) -> None:
    tasks = discover(write_task(tmp_path, "dir", native="org/hello"))
    assert tasks[0].id == "org/hello"
    assert tasks[0].dir_name == "dir"
    assert default_name(tasks[0].id) == "org-hello"


def test_multi_step_without_root_instruction(tmp_path: Path) -> None:
    task_dir = write_task(
        tmp_path, "ms", instruction=None, steps={"one": b"First\r\n", "two": b"Second  \n"}
    )
    task = discover(task_dir)[0]
    assert task.inputs == {
        "instruction": None,
        "steps": [
            {"name": "one", "instruction": "First"},
            {"name": "two", "instruction": "Second"},
        ],
    }


def test_metrics_primary_first_and_views(tmp_path: Path) -> None:
    metadata = (
        'reward_keys = ["speed", "reward", "style"]\nviews = [{name = "v", reducer = "mean"}]'
    )
    task = discover(write_task(tmp_path, "m", metadata=metadata))[0]
    assert task.metrics == ["reward", "speed", "style"]
    assert task.views == [{"name": "v", "reducer": "mean"}]
    task = discover(write_task(tmp_path, "p", metadata='reward_key = "score"'))[0]
    assert task.metrics == ["score"]


def test_dataset_order_and_skips(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_task(data, "b")
    write_task(data, "a")
    write_task(data, "task_template")
    (data / ".hidden").mkdir()
    (data / ".hidden" / "junk").write_text("x")
    (data / "README.md").write_text("readme")
    with pytest.warns(DiscoveryWarning, match="task_template"):
        tasks = discover(data)
    assert [task.id for task in tasks] == ["a", "b"]
    assert len(tasks.warnings) == 1 and "task_template" in tasks.warnings[0]


def test_collection_reiterable_indexable_sliceable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for name in ("a", "b", "c"):
        write_task(data, name)
    tasks = discover(data)
    assert [t.id for t in tasks] == [t.id for t in tasks] == ["a", "b", "c"]
    assert tasks[-1].id == "c"
    part = tasks[1:]
    assert isinstance(part, TaskCollection) and [t.id for t in part] == ["b", "c"]
    plain = tasks.without_source_dir()
    assert all(type(p) is PlainTask for p in plain)
    assert "source_dir" not in plain[0].model_dump() and "modes" not in plain[0].model_dump()
    assert plain[0].model_dump() == tasks[0].model_dump(exclude={"source_dir", "modes"})
    with pytest.raises(ValueError):
        PlainTask.model_validate(tasks[0].model_dump())
    assert isinstance(tasks[0], DiscoveredTask)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "socket"])
def test_special_dataset_entry_is_error(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    write_task(data, "a")
    special = data / "z"
    if kind == "symlink":
        special.symlink_to("a")
    elif kind == "fifo":
        os.mkfifo(special)
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(special))
        sock.close()
    with pytest.raises(EntryTypeError) as info:
        discover(data)
    assert info.value.path == str(special)


def test_hidden_symlink_is_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_task(data, "a")
    (data / ".link").symlink_to("a")
    with pytest.raises(EntryTypeError, match=r"\.link"):
        discover(data)


def test_malformed_child_is_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_task(data, "a")
    (data / "broken").mkdir()
    (data / "broken" / "instruction.md").write_text("x")
    with pytest.raises(TaskFormatError) as info:
        discover(data)
    assert info.value.path == str(data / "broken")
    assert "malformed" in info.value.rule


def test_invalid_task_toml_is_malformed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    task = write_task(data, "a")
    (task / "task.toml").write_text("steps = 3\n")
    with pytest.raises(TaskFormatError, match="malformed"):
        discover(data)


def test_empty_dataset_is_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("x")
    (data / ".git").mkdir()
    with pytest.raises(TaskFormatError, match="empty dataset"):
        discover(data)


def test_only_template_is_empty(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_task(data, "task_template")
    with pytest.warns(DiscoveryWarning), pytest.raises(TaskFormatError, match="empty"):
        discover(data)


def test_duplicate_native_id_names_both(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_task(data, "one", native="org/same")
    write_task(data, "two", native="org/same")
    with pytest.raises(TaskFormatError) as info:
        discover(data)
    assert str(data / "one") in str(info.value) and str(data / "two") in str(info.value)
    assert "org/same" in str(info.value)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        discover(tmp_path / "missing")


def test_normalize_instruction() -> None:
    assert normalize_instruction(b"\xef\xbb\xbfa\r\nb\rc \t\n\n", "x") == "a\nb\nc"
    assert normalize_instruction(b"  keep leading", "x") == "  keep leading"
    with pytest.raises(TaskFormatError):
        normalize_instruction(b"\xff", "x")


def test_registration_names() -> None:
    assert check_name("a.b_c-9") == "a.b_c-9"
    assert check_name("x" * 255) == "x" * 255
    for bad in ["", "x" * 256, "a/b", "a b", "é", ".", ".."]:
        with pytest.raises(UsageError):
            check_name(bad)
    with pytest.raises(UsageError):
        default_name("org/bad name")


@pytest.mark.realdata
def test_real_suites_discover() -> None:
    suites = sorted((FIXTURES / "tasks").iterdir())
    assert suites
    for suite in suites:
        tasks = discover(suite)
        assert len(tasks) == len([p for p in suite.iterdir() if p.is_dir()])
        for task in tasks:
            assert task.metrics[0] == "reward"
            assert task.inputs["instruction"] or task.inputs["steps"]
    multi = discover(FIXTURES / "tasks" / "harbor-cookbook" / "multi-step")[0]
    assert multi.id == "harbor/hello-multi-step-full"
    assert multi.inputs["instruction"] is None
    assert [s["name"] for s in multi.inputs["steps"]] == ["scaffold", "implement", "document"]
