"""The packer's tar stream byte for byte: what CPython's tarfile writes for the same normalized
members, whatever the file sizes (512-byte block and 1 MiB chunk boundaries) and however the
kernel splits the reads; a file that grows or shrinks under the read, and the expanded-size
limit, refused at the exact byte where the check fails."""

from __future__ import annotations

import gc
import io
import os
import random
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import casstore.archive.compress
import casstore.archive.tarbuild
from casstore.archive.compress import STREAM_BLOCK
from casstore.archive.limits import Limits
from casstore.archive.pack import pack_tree, write_archive
from casstore.archive.scan import scan_tree
from casstore.errors import CheckError, LimitError, SourceChangedError
from tests.helpers import make_task

# Sizes around the tar block and stream block boundaries; the small files between them move
# the offset at which each one starts, so some fit their stream block, some end exactly on it,
# some cross it.
SIZES = [0, 1, 511, 512, 513, 4096, STREAM_BLOCK - 1536, STREAM_BLOCK - 1024]
SIZES += [STREAM_BLOCK - 512, STREAM_BLOCK, STREAM_BLOCK + 1, 2 * STREAM_BLOCK + 100]


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A task with files of every size in ``SIZES``, 300 small files of random sizes, a long
    and a non-ASCII name (PAX headers), a link and an empty directory."""
    task = make_task(tmp_path_factory.mktemp("stream"))
    rng = random.Random(5)
    for index, size in enumerate(SIZES):
        (task / f"sized-{index:02d}.bin").write_bytes(rng.randbytes(size))
        for small in range(25):
            directory = task / f"sized-{index:02d}.d"
            directory.mkdir(exist_ok=True)
            (directory / f"{small:02d}").write_bytes(rng.randbytes(rng.randrange(0, 9000)))
    (task / ("long-" + "n" * 120)).write_bytes(b"long name\n")
    (task / "é.txt").write_bytes("é\n".encode())
    os.symlink("sized-01.bin", task / "link")
    (task / "empty").mkdir()
    return task


def _walk(directory: Path, name: str) -> Iterator[tuple[str, Path]]:
    """Archive order: depth first, a directory before its children, sorted by name bytes."""
    yield name, directory
    for raw in sorted(os.listdir(os.fsencode(directory))):
        path, child = directory / os.fsdecode(raw), f"{name}/{raw.decode()}"
        if path.is_dir() and not path.is_symlink():
            yield from _walk(path, child)
        else:
            yield child, path


def reference_tar(task: Path) -> bytes:
    """The canonical tar of ``task`` as written by ``tarfile`` (PAX format, normalized)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, path in _walk(task, task.name):
            info = tarfile.TarInfo(name)
            stat = path.lstat()
            info.mode, info.mtime, info.uid, info.gid = stat.st_mode & 0o7777, 0, 0, 0
            info.uname = info.gname = ""
            if path.is_symlink():
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                archive.addfile(info)
            elif path.is_dir():
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = stat.st_size
                with open(path, "rb") as data:
                    archive.addfile(info, data)
    return buffer.getvalue()


def packed_stream(task: Path, limits: Limits | None = None) -> bytes:
    buffer = io.BytesIO()
    pack_tree(task, buffer, "none", limits)
    return buffer.getvalue()


def _wrap_read(monkeypatch, wrapper: Callable) -> None:
    real = casstore.archive.tarbuild._read_into
    monkeypatch.setattr(
        casstore.archive.tarbuild, "_read_into", lambda fd, buffers: wrapper(real, fd, buffers)
    )


def test_stream_equals_tarfile(task: Path) -> None:
    assert packed_stream(task) == reference_tar(task)


@pytest.mark.parametrize("most", [1000, 65_537])
def test_short_reads_give_the_same_stream(task: Path, monkeypatch, most: int) -> None:
    """The kernel may return fewer bytes than asked (network and FUSE file systems do)."""
    reads: list[int] = []

    def short(real, fd, buffers):
        got = real(fd, [buffers[0][:most]] if len(buffers[0]) > most else buffers)
        reads.append(got)
        return got

    _wrap_read(monkeypatch, short)
    assert packed_stream(task) == reference_tar(task)
    assert max(reads) == most


def _on_first_read_of(path: Path, change: Callable[[], None], monkeypatch) -> None:
    """Run ``change`` just before the first read of ``path`` (once it is open): the reads
    notice it first."""
    inode = path.stat().st_ino
    done: list[bool] = []

    def changing(real, fd, buffers):
        if not done and os.fstat(fd).st_ino == inode:
            done.append(True)
            change()
        return real(fd, buffers)

    _wrap_read(monkeypatch, changing)


@pytest.mark.parametrize(
    "size", [100, 4096, STREAM_BLOCK - 600, STREAM_BLOCK + 1, 3 * STREAM_BLOCK]
)
def test_growth_seen_by_the_read_is_refused(tmp_path: Path, monkeypatch, size: int) -> None:
    task = make_task(tmp_path)
    target = task / "data.bin"
    target.write_bytes(b"d" * size)

    def grow() -> None:
        with open(target, "ab") as handle:
            handle.write(b"more")

    _on_first_read_of(target, grow, monkeypatch)
    with pytest.raises(SourceChangedError) as info:
        packed_stream(task)
    assert (info.value.path, info.value.rule) == (
        "task/data.bin",
        f"entry changed while packing: file grew while packing (beyond {size} bytes)",
    )


@pytest.mark.parametrize(
    "size", [100, 4096, STREAM_BLOCK - 600, STREAM_BLOCK + 1, 3 * STREAM_BLOCK]
)
def test_shrinking_seen_by_the_read_is_refused(tmp_path: Path, monkeypatch, size: int) -> None:
    task = make_task(tmp_path)
    target = task / "data.bin"
    target.write_bytes(b"d" * size)
    _on_first_read_of(target, lambda: os.truncate(target, size // 2), monkeypatch)
    with pytest.raises(SourceChangedError) as info:
        packed_stream(task)
    assert (info.value.path, info.value.rule) == (
        "task/data.bin",
        f"entry changed while packing: file shrank while packing ({size // 2}/{size} bytes)",
    )


def _limit_cases() -> list:
    """(bound, expected value): the stream offset after the piece (header, data, padding,
    end of archive) that first goes beyond the bound, for ``task/data.bin`` of 1000 bytes."""
    return [
        pytest.param(lambda m, total: m.offset + 100, lambda m, total: m.offset_data, id="header"),
        pytest.param(
            lambda m, total: m.offset_data + 10, lambda m, total: m.offset_data + 1000, id="data"
        ),
        pytest.param(
            lambda m, total: m.offset_data + 1001,
            lambda m, total: m.offset_data + 1024,
            id="padding",
        ),
        pytest.param(lambda m, total: total - 1, lambda m, total: total, id="end"),
    ]


@pytest.mark.parametrize(("bound", "value"), _limit_cases())
def test_expanded_limit_stops_at_the_piece_that_passes_it(
    tmp_path: Path, bound: Callable, value: Callable
) -> None:
    task = make_task(tmp_path)
    (task / "data.bin").write_bytes(b"d" * 1000)
    reference = reference_tar(task)
    with tarfile.open(fileobj=io.BytesIO(reference)) as archive:
        member = archive.getmember("task/data.bin")
    limit = bound(member, len(reference))
    with pytest.raises(LimitError) as info:
        packed_stream(task, Limits(max_expanded_bytes=limit))
    at_end = limit >= len(reference) - 1024  # the end-of-archive blocks: no entry
    assert (info.value.limit, info.value.value, info.value.bound, info.value.path) == (
        "max_expanded_bytes",
        value(member, len(reference)),
        limit,
        None if at_end else "task/data.bin",
    )
    assert packed_stream(task, Limits(max_expanded_bytes=len(reference))) == reference


def _packing_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name == "casstore-pack"]


def test_archive_limit_is_refused_after_the_block_that_passes_it(tmp_path: Path) -> None:
    """Blocks are hashed and compressed on a background thread: its error is the packer's,
    with the value of the sequential order ('none' writes each 1 MiB block as is)."""
    task = make_task(tmp_path)
    (task / "big.bin").write_bytes(random.Random(1).randbytes(3 * STREAM_BLOCK))
    with pytest.raises(LimitError) as info:
        packed_stream(task, Limits(max_archive_bytes=STREAM_BLOCK + 10))
    assert (info.value.limit, info.value.value, info.value.bound) == (
        "max_archive_bytes",
        2 * STREAM_BLOCK,
        STREAM_BLOCK + 10,
    )
    assert _packing_threads() == []


def test_a_failed_gzip_pack_leaves_no_deflate_thread(tmp_path: Path, monkeypatch) -> None:
    """The gzip encoder's threads end with the pack that fails midway (here: the archive
    limit, passed after several blocks went to the deflate threads)."""
    monkeypatch.setattr(casstore.archive.compress, "workers", lambda: 2)
    task = make_task(tmp_path)
    (task / "big.bin").write_bytes(random.Random(3).randbytes(8 * STREAM_BLOCK))
    for _ in range(3):
        with pytest.raises(LimitError):
            pack_tree(task, tmp_path / "out.tar.gz", "gzip", Limits(max_archive_bytes=3 << 20))
    gc.collect()
    left = [t for t in threading.enumerate() if t.name == "casstore-deflate"]
    for thread in left:
        thread.join(timeout=10)
    assert [t for t in left if t.is_alive()] == []
    assert not (tmp_path / "out.tar.gz").exists()


def test_the_temporary_file_is_new_private_and_never_an_existing_one(
    tmp_path: Path, monkeypatch
) -> None:
    """The archive is written to a new ``.<name>.<random>.tmp`` file (mode 0o600 while it is
    written) beside the output: a file already there under the drawn name is left alone and
    another name drawn."""
    task = make_task(tmp_path)
    out = tmp_path / "out.tar.gz"
    taken = tmp_path / f".out.tar.gz.{'00' * 6}.tmp"
    taken.write_bytes(b"keep")
    draws = iter([bytes(6), bytes(6), b"\x01" * 6])
    real_urandom = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: next(draws) if n == 6 else real_urandom(n))
    seen: list[tuple[str, int]] = []

    def look(real, fd, buffers):
        seen.extend(
            (p.name, p.stat().st_mode & 0o777)
            for p in tmp_path.iterdir()
            if p != taken and p.name.endswith(".tmp")
        )
        return real(fd, buffers)

    _wrap_read(monkeypatch, look)
    result = pack_tree(task, out, "gzip")
    assert set(seen) == {(f".out.tar.gz.{'01' * 6}.tmp", 0o600)}
    assert taken.read_bytes() == b"keep"
    assert out.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out.tar.gz", taken.name, task.name]
    )
    assert str(result.address).startswith("sha256:")


def test_an_error_of_earlier_blocks_comes_before_a_later_change(
    tmp_path: Path, monkeypatch
) -> None:
    """The archive limit is passed by the stream's second block; a file read after that block
    changes: the limit is reported, as a packer without a background thread would."""
    task = make_task(tmp_path)
    (task / "a.bin").write_bytes(random.Random(2).randbytes(2 * STREAM_BLOCK + 5000))
    target = task / "z.txt"
    for limits, error in [
        (None, SourceChangedError),
        (Limits(max_archive_bytes=STREAM_BLOCK + 10), LimitError),
    ]:
        target.write_bytes(b"z" * 100)
        _on_first_read_of(target, lambda: os.truncate(target, 0), monkeypatch)
        with pytest.raises(CheckError) as info:
            packed_stream(task, limits)
        assert type(info.value) is error
        assert _packing_threads() == []
    assert (info.value.limit, info.value.value) == ("max_archive_bytes", 2 * STREAM_BLOCK)


@pytest.mark.parametrize("replacement", ["directory", "fifo"])
def test_a_file_replaced_by_a_directory_or_a_fifo_after_the_scan_is_refused(
    tmp_path: Path, replacement: str
) -> None:
    """The open does not block on a FIFO (no writer) and a read error is the packer's error
    naming the path, not an OSError."""
    task = make_task(tmp_path)
    target = task / "data.txt"
    target.write_bytes(b"x" * 100)
    tree = scan_tree(task, Limits())
    stamp = os.stat(task)
    target.unlink()
    if replacement == "directory":
        target.mkdir()
    else:
        os.mkfifo(target)
    os.utime(task, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # only the entry itself tells
    errors: list[BaseException] = []

    def pack() -> None:
        try:
            write_archive(tree, io.BytesIO(), "none", Limits())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=pack, daemon=True)
    thread.start()
    thread.join(60)  # a guard against a blocked open, not a measurement
    assert errors, "packing blocked on the entry put in the file's place"
    assert type(errors[0]) is SourceChangedError, repr(errors[0])
    assert errors[0].path == "task/data.txt"
