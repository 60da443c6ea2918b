"""``--modes``: the default keeps the modes on disk (so the umask of a checkout counts);
``--modes git`` records git's (files 0644 or 0755 by the owner's execute bit, directories
0755, links as they are), one address per tree under any umask."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import casstore
from casstore.archive.modes import archived_mode, check_modes
from casstore.errors import UsageError
from tests.helpers import run_cli

# A checkout as git makes one, under the umask given: plain files 0o666 & ~umask, files git
# records as executable 0o777 & ~umask, directories 0o777 & ~umask; one relative link.
_CHECKOUT = """
import os, sys
umask, root = int(sys.argv[1], 8), sys.argv[2]
os.umask(umask)
files = {
    "task.toml": ("[verifier]\\ntimeout_sec = 10.0\\n", False),
    "instruction.md": ("Do it.\\n", False),
    "tests/test.sh": ("#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n", True),
    "tests/data/input.txt": ("hello\\n", False),
    "solution/solve.sh": ("#!/bin/sh\\ntrue\\n", True),
}
for relative, (text, executable) in files.items():
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write(text)
    if executable:
        os.chmod(path, 0o777 & ~umask)
os.makedirs(os.path.join(root, "environment"))
os.symlink("data/input.txt", os.path.join(root, "tests", "input"))
"""

GIT_MODES = {
    "task": 0o755,
    "task/environment": 0o755,
    "task/instruction.md": 0o644,
    "task/solution": 0o755,
    "task/solution/solve.sh": 0o755,
    "task/task.toml": 0o644,
    "task/tests": 0o755,
    "task/tests/data": 0o755,
    "task/tests/data/input.txt": 0o644,
    "task/tests/input": 0o777,
    "task/tests/test.sh": 0o755,
}
"""Each member's mode in a ``--modes git`` archive of the checkout above, by hand."""


def checkout(root: Path, umask: int) -> Path:
    """The checkout above, written by a fresh interpreter under ``umask``, at ``root/task``."""
    task = root / "task"
    task.parent.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", _CHECKOUT, oct(umask), str(task)], check=True)
    return task


def member_modes(archive: Path) -> dict[str, int]:
    """Each member's mode, read back with the standard library's tarfile (not our reader)."""
    with tarfile.open(archive) as tar:
        return {member.name: member.mode for member in tar.getmembers()}


@pytest.fixture
def checkouts(tmp_path: Path) -> tuple[Path, Path]:
    return checkout(tmp_path / "022", 0o022), checkout(tmp_path / "077", 0o077)


def test_the_rule_entry_by_entry() -> None:
    assert archived_mode("file", stat.S_IFREG | 0o4750, "git") == 0o755  # owner may execute
    assert archived_mode("file", stat.S_IFREG | 0o640, "git") == 0o644
    assert archived_mode("file", stat.S_IFREG | 0o671, "git") == 0o644  # only others' x bits
    assert archived_mode("file", stat.S_IFREG | 0o400, "git") == 0o644  # read-only
    assert archived_mode("dir", stat.S_IFDIR | 0o700, "git") == 0o755
    assert archived_mode("dir", stat.S_IFDIR | 0o1777, "git") == 0o755
    assert archived_mode("symlink", stat.S_IFLNK | 0o777, "git") == 0o777
    assert archived_mode("file", stat.S_IFREG | 0o4750, "keep") == 0o4750
    assert archived_mode("dir", stat.S_IFDIR | 0o1777, "keep") == 0o1777
    assert check_modes("git") == "git"
    with pytest.raises(UsageError, match="'exact' is not keep or git"):
        check_modes("exact")


def test_umask_changes_the_default_address_and_not_the_git_one(
    checkouts: tuple[Path, Path], tmp_path: Path
) -> None:
    kept = [casstore.pack(task, tmp_path / f"kept-{i}.tar") for i, task in enumerate(checkouts)]
    assert kept[0].address != kept[1].address
    assert kept[0].content_digest != kept[1].content_digest
    assert member_modes(tmp_path / "kept-0.tar") == GIT_MODES  # umask 022 made git's modes
    assert member_modes(tmp_path / "kept-1.tar")["task/tests/test.sh"] == 0o700
    assert member_modes(tmp_path / "kept-1.tar")["task/task.toml"] == 0o600
    git = [
        casstore.pack(task, tmp_path / f"git-{i}.tar", modes="git")
        for i, task in enumerate(checkouts)
    ]
    assert git[0].address == git[1].address == kept[0].address  # the expectation by hand
    assert (tmp_path / "git-0.tar").read_bytes() == (tmp_path / "git-1.tar").read_bytes()
    assert member_modes(tmp_path / "git-1.tar") == GIT_MODES
    for compression in ("gzip", "zstd"):  # every compression, and the digests only
        one, two = (casstore.pack(t, None, compression, modes="git") for t in checkouts)
        assert one.address == two.address
        assert one.content_digest == git[0].content_digest


def test_cli_pack_and_pack_into(
    checkouts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide, narrow = checkouts
    code, out, err = run_cli(capsys, "pack", str(narrow), "-o", str(tmp_path / "n.tar.gz"))
    assert (code, err) == (0, "")
    kept = out.split()[0]
    code, out, _ = run_cli(
        capsys, "pack", str(narrow), "-o", str(tmp_path / "g.tar.gz"), "--modes", "git"
    )
    git = out.split()[0]
    expected = str(casstore.pack(wide, None, modes="git").address)
    assert code == 0 and git == expected != kept
    (outcome,) = casstore.pack_into([narrow], tmp_path / "api", modes="git")
    assert outcome.result is not None and str(outcome.result.address) == expected
    (tmp_path / "cli").mkdir()  # -o an existing folder: pack_into
    code, out, _ = run_cli(
        capsys, "pack", str(narrow), "-o", str(tmp_path / "cli"), "--modes", "git", "--json"
    )
    assert code == 0 and json.loads(out)["address"] == expected
    code, out, err = run_cli(capsys, "pack", str(narrow), "-o", str(tmp_path / "x"), "--modes", "x")
    assert code == 2 and "--modes" in err and out == ""


def test_publish_git_modes_one_revision_for_both_checkouts(
    checkouts: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide, narrow = checkouts
    store = str(tmp_path / "store")
    expected = str(casstore.pack(wide, None, modes="git").address)
    code, out, err = run_cli(
        capsys, "--store", store, "publish", str(narrow), "--modes", "git", "--long"
    )
    assert (code, err) == (0, "") and out.startswith("new ") and out.split()[-1] == expected
    code, out, _ = run_cli(
        capsys, "--store", store, "publish", str(wide), "--modes", "git", "--long"
    )
    assert code == 0 and out.startswith("reused ") and out.split()[-1] == expected
    code, out, _ = run_cli(
        capsys, "--store", store, "publish", str(narrow), "--long"
    )  # keep: 0o600...
    assert code == 0 and out.startswith("new ") and out.split()[-1] != expected
    with casstore.open_store(store, create=False) as opened:
        found = casstore.discover_tasks(wide, modes="git")
        assert found[0].modes == "git"
        (result,) = casstore.publish(opened, found)
        assert result.address == expected and not result.reused  # a revision after keep's
        with pytest.raises(UsageError, match="discovered with modes 'keep', not 'git'"):
            casstore.publish(opened, casstore.discover_tasks(wide), modes="git")
        (again,) = casstore.publish(opened, narrow, modes="git")
        assert again.address == expected and again.reused
