"""Packing while the tree is walked (a path or no output): entries are written as the walk
yields them, yet every failure is the one a packer that scans the whole tree first would raise,
naming the same path, and no output file is left.

Each task holds a few MiB of files before the bad entry, so the archive is well under way (files
read, blocks compressed, bytes in the temporary file) when the failure is discovered; a spy on
the packer's single read function shows which files were read.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pytest

import casstore.archive.output
import casstore.archive.tarbuild
from casstore.archive.compress import STREAM_BLOCK
from casstore.archive.limits import Limits
from casstore.archive.pack import pack_tree, write_archive
from casstore.archive.read import verify_archive
from casstore.archive.scan import scan_tree
from casstore.errors import (
    CheckError,
    EntryTypeError,
    LimitError,
    SourceChangedError,
    SymlinkError,
    UsageError,
)
from cli.main import run
from tests.helpers import make_task

DATA_FILES = 3  # files of 2 MiB + 1 in task/a/: more than one stream block each


@pytest.fixture
def task(tmp_path: Path) -> Path:
    """A valid task: task.toml, instruction.md and ``a/data-<i>.bin`` (random, 2 MiB + 1)."""
    task = make_task(tmp_path / "src")
    (task / "a").mkdir()
    rng = random.Random(7)
    for index in range(DATA_FILES):
        (task / "a" / f"data-{index}.bin").write_bytes(rng.randbytes(2 * STREAM_BLOCK + 1))
    return task


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where the archive would go; its directory starts empty."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out" / "task.tar.zst"


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """The inode of every file the packer reads from, once per read call, in order."""
    seen: list[int] = []
    real = casstore.archive.tarbuild._read_into

    def spy(fd: int, buffers) -> int:
        seen.append(os.fstat(fd).st_ino)
        return real(fd, buffers)

    monkeypatch.setattr(casstore.archive.tarbuild, "_read_into", spy)
    return seen


def _inode(path: Path) -> int:
    return os.lstat(path).st_ino


def _refused(
    task: Path,
    out: Path,
    error: type[CheckError],
    path: str,
    rule: str,
    compression="zstd",
    **options,
):
    """Pack ``task`` to ``out``: exactly ``error`` naming ``path``, ``rule`` in its message,
    and ``out``'s directory left empty (no archive, no temporary file)."""
    with pytest.raises(CheckError) as info:
        pack_tree(task, out, compression, **options)
    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    assert (info.value.path, str(info.value).startswith(f"{path}: ")) == (path, True)
    assert rule in info.value.rule, str(info.value)
    assert os.listdir(out.parent) == []
    return info.value


def _scan_first_error(task: Path, limits: Limits | None = None) -> CheckError:
    """The error of the scan-first path (a file object receives nothing before the scan)."""
    buffer = io.BytesIO()
    with pytest.raises(CheckError) as info:
        pack_tree(task, buffer, "zstd", limits)
    assert buffer.getvalue() == b""
    return info.value


def _same_error(first: CheckError, second: CheckError) -> None:
    assert (type(first), first.path, str(first)) == (type(second), second.path, str(second))


def test_dangling_link_in_the_last_directory_leaves_no_file(task, out, reads) -> None:
    (task / "z").mkdir()
    os.symlink("../nowhere", task / "z" / "link")
    error = _refused(task, out, SymlinkError, "task/z/link", "dangling")
    assert _inode(task / "a" / f"data-{DATA_FILES - 1}.bin") in reads  # written before
    _same_error(error, _scan_first_error(task))


def test_fifo_in_the_last_directory_leaves_no_file(task, out, reads) -> None:
    (task / "z").mkdir()
    os.mkfifo(task / "z" / "pipe")
    error = _refused(task, out, EntryTypeError, "task/z/pipe", "FIFO")
    assert _inode(task / "a" / f"data-{DATA_FILES - 1}.bin") in reads
    _same_error(error, _scan_first_error(task))


def test_payload_limit_passed_by_the_last_file_leaves_no_file_and_skips_its_read(
    task, out, reads
) -> None:
    last = task / "z.bin"
    last.write_bytes(b"z" * 1000)
    payload = sum(os.lstat(p).st_size for p in task.rglob("*") if p.is_file())
    limits = Limits(max_payload_bytes=payload - 1)
    error = _refused(task, out, LimitError, "task/z.bin", "max_payload_bytes", limits=limits)
    assert isinstance(error, LimitError)
    assert (error.limit, error.value, error.bound) == ("max_payload_bytes", payload, payload - 1)
    assert _inode(task / "a" / "data-0.bin") in reads
    assert _inode(last) not in reads  # refused by its size before a byte of it is read
    _same_error(error, _scan_first_error(task, limits))


def test_entry_limit_passed_at_the_end_leaves_no_file(task, out) -> None:
    (task / "z").mkdir()
    (task / "z" / "last.txt").write_text("last\n")
    entries = 4 + DATA_FILES + 2  # task, a, a/*, instruction.md, task.toml, z, z/last.txt
    limits = Limits(max_entries=entries - 1)
    error = _refused(task, out, LimitError, "task/z/last.txt", "max_entries", limits=limits)
    _same_error(error, _scan_first_error(task, limits))
    assert pack_tree(task, out, "zstd", Limits(max_entries=entries)).entries == entries


def test_a_scan_error_found_later_wins_over_an_oversized_file_read_earlier(
    task, out, reads
) -> None:
    """An early file breaks max_file_bytes and a later link dangles: as for a packer that
    scans first, the link error (checked before the size limits) is reported; the oversized
    file is never read."""
    os.symlink("nowhere", task / "z-link")
    limits = Limits(max_file_bytes=2 * STREAM_BLOCK)
    error = _refused(task, out, SymlinkError, "task/z-link", "dangling", limits=limits)
    assert _inode(task / "a" / "data-0.bin") not in reads
    _same_error(error, _scan_first_error(task, limits))


def _change_on_first_read(target: Path, monkeypatch) -> None:
    """Truncate ``target`` right after the packer's first read of it."""
    real = casstore.archive.tarbuild._read_into
    inode, done = _inode(target), []

    def read_into(fd: int, buffers) -> int:
        got = real(fd, buffers)
        if not done and os.fstat(fd).st_ino == inode:
            done.append(True)
            os.truncate(target, 0)
        return got

    monkeypatch.setattr(casstore.archive.tarbuild, "_read_into", read_into)


def test_a_file_changed_while_packing_is_refused_naming_it(task, out, monkeypatch) -> None:
    _change_on_first_read(task / "a" / "data-0.bin", monkeypatch)
    _refused(task, out, SourceChangedError, "task/a/data-0.bin", "file shrank while packing")


def test_a_scan_error_found_later_wins_over_a_file_changed_earlier(task, out, monkeypatch) -> None:
    (task / "z").mkdir()
    os.mkfifo(task / "z" / "pipe")
    _change_on_first_read(task / "a" / "data-0.bin", monkeypatch)
    _refused(task, out, EntryTypeError, "task/z/pipe", "FIFO")


def test_a_scan_error_found_later_wins_over_the_archive_limit(task, out) -> None:
    """The background thread fails on the archive limit with the stream's first block (``none``
    writes blocks as they are); the later dangling link is still what is reported."""
    os.symlink("nowhere", task / "z-link")
    limits = Limits(max_archive_bytes=STREAM_BLOCK // 2)
    _refused(task, out, SymlinkError, "task/z-link", "dangling", "none", limits=limits)
    os.unlink(task / "z-link")
    with pytest.raises(LimitError) as info:
        pack_tree(task, out, "none", limits)
    assert (info.value.limit, info.value.value, info.value.path) == (
        "max_archive_bytes",
        STREAM_BLOCK,
        None,
    )
    assert os.listdir(out.parent) == []


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_walking_and_scanning_first_give_the_same_archive(task, out, compression) -> None:
    os.symlink("a/data-1.bin", task / "link")
    (task / "empty").mkdir()
    to_path = pack_tree(task, out, compression)
    buffer = io.BytesIO()
    to_buffer = write_archive(scan_tree(task, Limits()), buffer, compression, Limits())
    digests = pack_tree(task, None, compression)
    assert out.read_bytes() == buffer.getvalue()
    assert to_path == to_buffer == digests
    assert verify_archive(out, expect=to_path.address).entries == to_path.entries == 9


def test_cli_pack_failing_late_exits_1_with_one_line_and_no_file(task, out, capsys) -> None:
    (task / "z").mkdir()
    os.symlink("../nowhere", task / "z" / "link")
    code = run(["pack", str(task), "-o", str(out), "-c", "zstd"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (1, "")
    assert captured.err == "casstore: task/z/link: link to '../nowhere' is dangling\n"
    assert os.listdir(out.parent) == []


def test_output_that_is_not_a_regular_file_is_refused_untouched(task: Path, out: Path) -> None:
    # replacing a device such as /dev/null by the archive would destroy it: refused instead
    os.mkfifo(out)
    with pytest.raises(UsageError, match="not a regular file"):
        pack_tree(task, out, "zstd")
    assert out.is_fifo() and os.listdir(out.parent) == [out.name]


class _FullDisk(io.RawIOBase):
    """A raw file that takes ``room`` bytes, then fails every write with ENOSPC."""

    def __init__(self, fd: int, room: int) -> None:
        self._fd, self.room = fd, room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(28, "No space left on device")
        self.room -= len(data)
        return os.write(self._fd, data)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def _full_disk(monkeypatch, room: int) -> None:
    def fdopen(fd: int, mode: str) -> io.BufferedWriter:
        return io.BufferedWriter(_FullDisk(fd, room))

    monkeypatch.setattr(casstore.archive.output.os, "fdopen", fdopen)


def test_disk_full_names_the_output_and_never_hides_a_scan_error(
    task: Path, out: Path, monkeypatch
) -> None:
    _full_disk(monkeypatch, room=3 * STREAM_BLOCK)
    with pytest.raises(OSError) as full:
        pack_tree(task, out, "none")
    assert full.value.errno == 28 and full.value.filename == str(out)
    assert os.listdir(out.parent) == []
    # a dangling link met after the disk filled: the scan's error is the one raised, even
    # though closing the temporary file (flushing what is left) fails again
    (task / "zz").symlink_to("nothere")
    with pytest.raises(SymlinkError, match="zz"):
        pack_tree(task, out, "none")
    assert os.listdir(out.parent) == []


def test_expanded_limit_names_the_entry_being_written(task: Path, out: Path) -> None:
    # data-0.bin (2 MiB + 1 and its header) fits in 3 MiB of tar stream; data-1.bin breaks it
    with pytest.raises(LimitError, match="max_expanded_bytes") as over:
        pack_tree(task, out, "zstd", Limits(max_expanded_bytes=3 * STREAM_BLOCK))
    assert over.value.path is not None and over.value.path.endswith("a/data-1.bin")
    assert os.listdir(out.parent) == []
