"""Many inputs in one process: the API (``casstore.verify_each``, ``casstore.pack_into``).

The API yields one Outcome per input, in order; its arguments are checked before any work.
"""

from __future__ import annotations

import pytest

import casstore
from casstore.archive.pack import pack_tree
from casstore.archive.read import verify_archive
from casstore.errors import UsageError
from tests.helpers import make_task


@pytest.fixture
def tasks(tmp_path):
    """Three valid tasks ``a``, ``b``, ``c`` under ``tmp_path/src``."""
    return [make_task(tmp_path / "src", name, {"tests/test.sh": name}) for name in "abc"]


@pytest.fixture
def archives(tasks, tmp_path):
    """The gzip archives of ``tasks``; the second one corrupted."""
    paths = []
    for task in tasks:
        path = tmp_path / f"{task.name}.tar.gz"
        pack_tree(task, path)
        paths.append(path)
    data = bytearray(paths[1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    return paths


# The Python API: the same batch, one Outcome per input


def test_api_verify_each_yields_an_outcome_per_archive_in_order(archives) -> None:
    outcomes = list(casstore.verify_each([str(a) for a in archives]))
    assert [o.archive for o in outcomes] == archives
    assert [o.ok for o in outcomes] == [True, False, True]
    assert [o.exit_code for o in outcomes] == [0, 1, 0]
    assert outcomes[0].result == verify_archive(archives[0])
    assert outcomes[1].result is None and outcomes[1].error is not None
    assert outcomes[1].error.kind == "corrupt"
    assert outcomes[1].message() == f"{archives[1]}: b/instruction.md: header checksum mismatch"
    (alone,) = casstore.verify_each(archives[0])  # a single path is a one-item list
    assert alone.result == outcomes[0].result


def test_api_pack_into_packs_each_task_into_the_folder(tasks, tmp_path) -> None:
    folder = tmp_path / "out"
    outcomes = casstore.pack_into(tasks, folder, "none")
    assert folder.is_dir()  # made before any packing
    assert list(folder.iterdir()) == []
    done = list(outcomes)
    assert [o.archive for o in done] == [folder / f"{t.name}.tar" for t in tasks]
    assert [o.result for o in done] == [pack_tree(t, None, "none") for t in tasks]


def test_api_batch_arguments_are_checked_before_any_work(tasks, tmp_path) -> None:
    cases = [
        (
            lambda: casstore.verify_each([1]),
            "archives: expected items that are a path (str or Path), not int",
        ),
        (
            lambda: casstore.verify_each(None),
            "archives: expected a path (str or Path) or a sequence of them, not NoneType",
        ),
        (
            lambda: casstore.pack_into(tasks, 3),
            "out_dir: expected a path (str or Path), not int",
        ),
        (
            lambda: casstore.pack_into(tasks, tmp_path / "o", "lzma"),
            "compression: 'lzma' is not gzip, zstd or none",
        ),
        (
            lambda: casstore.pack_into([tasks[0], tasks[0]], tmp_path / "o"),
            f"{tasks[0]}: its archive a.tar.gz would overwrite that of {tasks[0]}; pack them apart",
        ),
    ]
    for call, message in cases:
        with pytest.raises(UsageError) as raised:
            call()
        assert str(raised.value) == message
    assert not (tmp_path / "o").exists()
