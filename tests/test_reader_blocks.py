"""``verify_blocks``: the reader over an archive given as blocks as they arrive (a pull's
streamed GET) is the reader over the file: same result, same errors, wherever the blocks cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from casstore.archive.read import verify_archive, verify_blocks
from casstore.errors import CorruptArchiveError, DigestMismatchError
from tests.archive_builder import canonical_tar, compress, file, task_entries

CUTS = [1, 7, 511, 512, 513, 4096, 1 << 20]


def _archive(compression: str) -> bytes:
    entries = task_entries()
    entries["task/data.bin"] = file("task/data.bin", bytes(range(256)) * 5000)
    return compress(canonical_tar(entries), compression)


def _blocks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
@pytest.mark.parametrize("size", CUTS)
def test_blocks_give_the_file_result(tmp_path: Path, compression: str, size: int) -> None:
    data = _archive(compression)
    path = tmp_path / "a"
    path.write_bytes(data)
    whole = verify_archive(path)
    got = verify_blocks(_blocks(data, size), "remote/a", whole.address)
    assert got == whole
    assert got.archive_bytes == len(data)
    assert got.compression == compression


@pytest.mark.parametrize("size", [1, 512, 1 << 20])
def test_a_flipped_byte_is_an_error_naming_where(size: int) -> None:
    data = bytearray(_archive("none"))
    address = verify_blocks([bytes(data)], "remote/a").address
    data[2000] ^= 1  # in task/data.bin's data: only the address shows it
    with pytest.raises(DigestMismatchError) as caught:
        verify_blocks(_blocks(bytes(data), size), "remote/a", address)
    assert caught.value.path == "remote/a"
    assert f"expected {address}" in caught.value.rule


def test_a_truncated_stream_is_an_error() -> None:
    data = _archive("zstd")
    with pytest.raises(CorruptArchiveError) as caught:
        verify_blocks(_blocks(data[: len(data) // 2], 4096), "remote/a")
    assert "truncated" in caught.value.rule


def test_an_error_of_the_blocks_passes_through() -> None:
    class Gone(Exception):
        pass

    def failing() -> Iterator[bytes]:
        data = _archive("none")
        yield data[:4096]
        raise Gone("connection reset")

    with pytest.raises(Gone):
        verify_blocks(failing(), "remote/a")
