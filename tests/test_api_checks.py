"""What the public Python API refuses, and how: every wrong argument is a casstore error naming
it (never AttributeError, TypeError or a pydantic error), the CLI's rules hold for the API too,
and a store is closed as soon as nothing references it."""

from __future__ import annotations

import pytest

import casstore
from casstore.archive.pack import pack_tree
from casstore.errors import UsageError
from tests.helpers import make_task


@pytest.mark.parametrize("compression", ["bzip2", "GZIP", "", None, "xz"])
def test_unknown_compression_is_refused(tmp_path, compression) -> None:
    task = make_task(tmp_path)
    out = tmp_path / "x.tar"
    with pytest.raises(UsageError, match="is not gzip, zstd or none") as raised:
        casstore.pack(task, out, compression)
    assert str(raised.value) == f"compression: {compression!r} is not gzip, zstd or none"
    assert not out.exists()
    with pytest.raises(UsageError, match="is not gzip, zstd or none"):
        pack_tree(task, None, compression)  # the encoder itself refuses it
    with casstore.open_store(tmp_path / "store") as store:
        with pytest.raises(UsageError, match="is not gzip, zstd or none"):
            casstore.publish(store, task, compression=compression)
        assert store.tasks.list() == []
        casstore.publish(store, task)  # stored: a reused revision is refused as well
        with pytest.raises(UsageError, match="is not gzip, zstd or none"):
            store.tasks.replace("task", casstore.discover_tasks(task)[0], compression=compression)
