"""Every real task directory in ../shared/fixtures packs, verifies and extracts to itself."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from harbor.models.task.task import Task

from casstore.archive.pack import pack_tree
from casstore.archive.read import extract_archive, verify_archive
from tests.conftest import real_task_dirs
from tests.helpers import snapshot

pytestmark = pytest.mark.realdata
TASKS = real_task_dirs()


def test_the_fixture_suites_are_all_there(fixtures_dir):
    suites = {p.parent.name for p in real_task_dirs()}
    assert suites == {"harbor-cookbook", "harbor-workshop", "terminal-bench-qc"}
    assert len(real_task_dirs()) == 22


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
@pytest.mark.parametrize("task", TASKS, ids=[f"{p.parent.name}/{p.name}" for p in TASKS])
def test_real_task_round_trip(task: Path, compression, tmp_path):
    archive = tmp_path / "archive"
    packed = pack_tree(task, archive, compression)
    verified = verify_archive(archive, packed.address)
    assert (verified.content_digest, verified.entries) == (packed.content_digest, packed.entries)
    assert verified.top == task.name
    assert verified.layout.native_id == Task(task).name
    extract_archive(archive, tmp_path / "out", packed.address)
    assert snapshot(tmp_path / "out" / task.name) == snapshot(task)
    assert pack_tree(tmp_path / "out" / task.name, None, compression).address == packed.address
    assert Task(tmp_path / "out" / task.name).name == Task(task).name


def test_real_multi_step_task_keeps_its_steps(fixtures_dir, tmp_path):
    task = fixtures_dir / "tasks/harbor-cookbook/multi-step"
    packed = pack_tree(task, tmp_path / "a")
    assert packed.layout.steps == ("scaffold", "implement", "document")
    assert packed.layout.native_id == "harbor/hello-multi-step-full"
    assert not packed.layout.has_root_instruction


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar is not installed")
def test_gnu_tar_and_tarfile_read_our_archives_identically(fixtures_dir, tmp_path):
    task = fixtures_dir / "tasks/harbor-cookbook/multi-step"
    pack_tree(task, tmp_path / "a.tar.gz")
    listing = subprocess.run(
        ["tar", "-tzf", str(tmp_path / "a.tar.gz")], capture_output=True, text=True, check=True
    ).stdout.split()
    with tarfile.open(tmp_path / "a.tar.gz") as archive:
        members = archive.getmembers()
    assert listing == [m.name + ("/" if m.isdir() else "") for m in members]
    assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members)
    (tmp_path / "gnu").mkdir()
    subprocess.run(
        ["tar", "-xzpf", str(tmp_path / "a.tar.gz"), "-C", str(tmp_path / "gnu")], check=True
    )
    assert snapshot(tmp_path / "gnu" / task.name) == snapshot(task)
