"""Messages a newcomer met: each failure names the right thing with the right rule."""

from __future__ import annotations

import os

import pytest

from casstore.archive.limits import Limits
from casstore.archive.pack import pack_tree
from casstore.archive.read import extract_archive, verify_archive
from casstore.errors import (
    CheckError,
    CorruptArchiveError,
    LimitError,
    TaskFormatError,
    UnsafePathError,
    UsageError,
)
from tests.helpers import make_task


@pytest.fixture
def task(tmp_path):
    return make_task(tmp_path, files={"tests/test.sh": "#!/bin/sh\n" + "echo 1\n" * 500})


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
@pytest.mark.parametrize("keep", [0.5, -1])
def test_truncated_archive_says_truncated(task, tmp_path, compression, keep):
    archive = tmp_path / "a"
    pack_tree(task, archive, compression)
    data = archive.read_bytes()
    archive.write_bytes(data[: int(len(data) * keep)] if keep > 0 else data[:-1])
    with pytest.raises(CheckError) as caught:
        verify_archive(archive)
    rule = caught.value.rule
    assert any(word in rule for word in ("truncated", "damaged", "not padded")), rule
    assert caught.value.path in (str(archive), "task/tests/test.sh")
    assert not rule.startswith("-")  # never "-630 trailing bytes after the zstd frame"


@pytest.mark.parametrize("content", [b"", b"hello, this is not an archive\n", bytes(600)])
def test_a_file_that_is_no_archive_says_so(tmp_path, content):
    archive = tmp_path / "x.tar.gz"
    archive.write_bytes(content)
    with pytest.raises(CorruptArchiveError) as caught:
        verify_archive(archive)
    assert str(caught.value) == f"{archive}: not an archive (neither gzip, zstd nor POSIX tar)"


def test_non_task_directory_fails_before_walking_it(tmp_path):
    big = tmp_path / "notask"
    (big / "deep").mkdir(parents=True)
    os.mkfifo(big / "deep" / "fifo")  # would be an entry_type error if the walk ran first
    with pytest.raises(TaskFormatError) as caught:
        pack_tree(big, None)
    assert str(caught.value) == "notask/task.toml: a task needs a regular task.toml file"


def _deep_tree(task, levels: int) -> None:
    """``levels`` nested 250-byte directory names, made with dir fds (beyond PATH_MAX)."""
    fd = os.open(task, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d" * 250, dir_fd=fd)
            child = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def test_path_limit_is_checked_before_the_path_is_touched(task):
    _deep_tree(task, 6)
    with pytest.raises(LimitError) as caught:
        pack_tree(task, None, limits=Limits(max_path_bytes=1000))
    assert (caught.value.limit, caught.value.bound) == ("max_path_bytes", 1000)
    assert caught.value.value == len("task/" + "/".join(["d" * 250] * 4))


def test_a_tree_deeper_than_path_max_is_one_clean_error(task):
    _deep_tree(task, 20)
    with pytest.raises((LimitError, UnsafePathError)) as caught:
        pack_tree(task, None)
    assert len(str(caught.value)) < 5000
    assert "Errno" not in str(caught.value)


def test_config_limit_reports_the_real_size(task):
    size = (task / "task.toml").stat().st_size
    with pytest.raises(LimitError) as caught:
        pack_tree(task, None, limits=Limits(max_config_bytes=10))
    assert (caught.value.value, caught.value.bound) == (size, 10)
    assert caught.value.path == "task/task.toml"


@pytest.mark.parametrize(
    ("where", "rule"),
    [
        ("folder", "output is a directory; name the archive file"),
        ("missing/x.tgz", "the output's folder does not exist"),
        ("task/self.tgz", "the output is inside the task directory being packed"),
    ],
)
def test_unwritable_output_is_bad_usage_naming_it(task, tmp_path, where, rule):
    (tmp_path / "folder").mkdir()
    out = tmp_path / where
    with pytest.raises(UsageError) as caught:
        pack_tree(task, out)
    assert str(caught.value) == f"{out}: {rule}"
    assert not (task / "self.tgz").exists()


def test_extract_below_a_file_says_so(task, tmp_path):
    """A missing folder is made (tests/test_destination.py); a file in the way is named."""
    archive = tmp_path / "a.tgz"
    pack_tree(task, archive)
    (tmp_path / "nope").write_text("a file")
    dest = tmp_path / "nope" / "deeper" / "out"
    with pytest.raises(UsageError) as caught:
        extract_archive(archive, dest)
    rule = f"{tmp_path / 'nope'} is not a directory"
    assert str(caught.value) == f"{dest}: {rule}"
    assert (tmp_path / "nope").read_text() == "a file"
