"""One rule for the destination of ``extract`` and ``checkout`` (issue 17, item 8).

``checkout`` into an existing empty directory succeeded while ``extract`` refused any existing
destination, and ``extract`` into a missing parent failed where ``checkout`` (and ``git
clone``) make it. Now both: ``DEST`` is missing (its missing parents are made) or an empty
directory, which is kept (its inode and mode: a mounted volume, a shell's working directory);
anything else is refused (exit 2) before anything is written; on a failure nothing is left,
the parents made removed again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import casstore
from casstore.errors import DigestMismatchError, UsageError
from tests.helpers import make_task, run_cli, snapshot

COMMANDS = ["extract", "checkout"]
WRONG = "sha256:" + "0" * 64
NOT_EMPTY = "the destination must not exist or be an empty directory; it is"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """``tmp_path`` with ``src/task``, its archive ``task.tgz`` and a store holding it."""
    task = make_task(tmp_path / "src", files={"tests/test.sh": "#!/bin/sh\n"})  # for Harbor
    casstore.pack(task, tmp_path / "task.tgz")
    with casstore.open_store(tmp_path / "store") as store:
        casstore.publish(store, task)
    return tmp_path


def _argv(work: Path, command: str, dest: Path | str) -> list[str]:
    if command == "extract":
        return ["extract", str(work / "task.tgz"), str(dest)]
    return ["--store", str(work / "store"), "checkout", "task", str(dest)]


def _api(work: Path, command: str) -> Callable[[Path | str], object]:
    if command == "extract":
        return lambda dest: casstore.extract(work / "task.tgz", dest)

    def checkout(dest: Path | str) -> object:
        with casstore.open_store(work / "store", create=False) as store:
            return casstore.checkout(store, "task", dest)

    return checkout


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_parents_are_made(work: Path, capsys, command: str) -> None:
    dest = work / "a" / "b" / "out"
    code, _, err = run_cli(capsys, *_argv(work, command, dest))
    assert (code, err) == (0, "")
    assert snapshot(dest / "task") == snapshot(work / "src" / "task")
    assert os.listdir(dest) == ["task"]
    _api(work, command)(work / "c" / "d" / "out")
    assert snapshot(work / "c" / "d" / "out") == snapshot(dest)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_directory_is_kept_and_filled(work: Path, capsys, command: str) -> None:
    for dest, run in [
        (work / "cli", lambda d: run_cli(capsys, *_argv(work, command, d))[::2]),
        (work / "api", _api(work, command)),
    ]:
        dest.mkdir(mode=0o750)
        os.chmod(dest, 0o2750)  # a setgid group directory stays one
        before = os.stat(dest)
        outcome = run(dest)
        assert outcome == (0, "") or dest.name == "api"
        after = os.stat(dest)
        assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
        assert os.listdir(dest) == ["task"]  # no staging directory left
        assert snapshot(dest / "task") == snapshot(work / "src" / "task")


@pytest.mark.parametrize("command", COMMANDS)
def test_the_working_directory_as_destination(work: Path, capsys, command: str) -> None:
    """``cd empty && casstore checkout REF .``: the directory a shell is in is filled, not
    replaced by another one."""
    here = work / "here"
    here.mkdir()
    previous = os.getcwd()
    os.chdir(here)
    try:
        code, _, err = run_cli(capsys, *_argv(work, command, "."))
        assert (code, err) == (0, "")
        assert os.listdir(".") == ["task"] and os.path.samefile(".", here)
    finally:
        os.chdir(previous)


def _refused(work: Path, how: str) -> tuple[Path, str]:
    """A destination made as ``how`` says, and the rule that refuses it."""
    dest = work / "dest"
    if how == "a directory that is not empty":
        dest.mkdir()
        (dest / "keep.txt").write_text("mine")
    elif how == "a regular file":
        dest.write_text("mine")
    elif how == "a symbolic link":
        (work / "empty").mkdir()
        dest.symlink_to("empty")  # to an empty directory: a link is never followed
    else:  # the parent a regular file
        (work / "file").write_text("mine")
        dest = work / "file" / "sub" / "dest"
        return dest, f"{work / 'file'} is not a directory"
    return dest, f"{NOT_EMPTY} {how}"


HOWS = ["a directory that is not empty", "a regular file", "a symbolic link", "parent"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("command", COMMANDS)
def test_anything_else_is_refused(work: Path, capsys, command: str, how: str) -> None:
    dest, rule = _refused(work, how)
    before = snapshot(work, reader_tables=False)
    code, out, err = run_cli(capsys, *_argv(work, command, dest))
    assert (code, out, err) == (2, "", f"casstore: {dest}: {rule}\n")
    with pytest.raises(UsageError) as caught:
        _api(work, command)(dest)
    assert str(caught.value) == f"{dest}: {rule}"
    assert snapshot(work, reader_tables=False) == before


def _failing(work: Path, command: str) -> Callable[[Path], None]:
    """``command`` into a destination, its archive failing a check."""
    if command == "extract":

        def extract(dest: Path) -> None:
            with pytest.raises(DigestMismatchError):
                casstore.extract(work / "task.tgz", dest, expect=WRONG)

        return extract
    archive = next((work / "store" / "filesets").rglob("task_archive"))
    os.chmod(archive, 0o644)
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))

    def checkout(dest: Path) -> None:
        with pytest.raises(casstore.CasstoreError):
            _api(work, command)(dest)

    return checkout


@pytest.mark.parametrize("command", COMMANDS)
def test_a_failure_leaves_nothing(work: Path, command: str) -> None:
    (work / "empty").mkdir()
    fail = _failing(work, command)
    before = snapshot(work, reader_tables=False)
    fail(work / "a" / "b" / "out")
    fail(work / "empty")
    assert snapshot(work, reader_tables=False) == before  # no parent made, the directory empty


@pytest.mark.parametrize("command", COMMANDS)
def test_the_help_states_the_rule(capsys, command: str) -> None:
    code, out, _ = run_cli(capsys, command, "--help")
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())
    assert code == 0
    assert "dest <path> A new directory (missing parents are made) or an empty one" in text


def test_a_destination_that_cannot_be_made_is_named_not_its_staging(work: Path, capsys) -> None:
    # /proc/self accepts no new entry: the error named the hidden staging directory
    archive = work / "task.tar.gz"
    assert run_cli(capsys, "pack", str(make_task(work)), "-o", str(archive))[0] == 0
    code, out, err = run_cli(capsys, "extract", str(archive), "/proc/self/x")
    assert (code, out) == (2, "")
    assert err.startswith("casstore: /proc/self/x: the destination cannot be made there: "), err
