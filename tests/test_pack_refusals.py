"""The packager's refusal rules (README, §2 Packager), one minimal source tree each.

Every test starts from a tiny valid task directory (``task.toml`` + ``instruction.md``), adds
one bad thing, and asserts the exact error class, the offending path in the message, and that
``pack_tree`` left neither the output file nor a temporary file behind. The accepted shapes
(in-tree links, hard links, empty directories, dotfiles, special mode bits) are packed, read
back with ``tarfile`` and verified with the reader. The quiescence rule is exercised
deterministically by changing the source from inside the packer's single read function.
"""

from __future__ import annotations

import io
import os
import socket
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

import casstore.archive.pack
import casstore.archive.tarbuild
from casstore.archive.limits import Limits
from casstore.archive.pack import pack_tree, write_archive
from casstore.archive.read import extract_archive, verify_archive
from casstore.archive.scan import scan_tree
from casstore.errors import (
    CheckError,
    EntryTypeError,
    LimitError,
    SourceChangedError,
    SymlinkError,
    TaskFormatError,
    UnsafePathError,
)
from tests.archive_builder import INSTRUCTION, MULTI_STEP_TOML, TASK_TOML


@pytest.fixture
def task(tmp_path: Path) -> Path:
    """``tmp_path/src/task``: a minimal valid task (``tmp_path/src/outside`` sits beside it)."""
    root = tmp_path / "src" / "task"
    root.mkdir(parents=True)
    (root / "task.toml").write_bytes(TASK_TOML)
    (root / "instruction.md").write_bytes(INSTRUCTION)
    (tmp_path / "src" / "outside").mkdir()
    (tmp_path / "src" / "outside" / "secret").write_text("secret\n")
    return root


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where the archive would go: ``tmp_path/out/task.tar.gz`` (the directory starts empty)."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out" / "task.tar.gz"


def refused(
    source: Path, out: Path, error: type[CheckError], path: str, rule: str, **options
) -> CheckError:
    """Pack ``source`` to ``out``: it must raise exactly ``error`` naming ``path`` (the whole
    ``error.path``) with ``rule`` in the message, and leave ``out``'s directory empty."""
    with pytest.raises(CheckError) as info:
        pack_tree(source, out, **options)
    err = info.value
    assert type(err) is error, f"{type(err).__name__}: {err}"
    assert err.path == path, str(err)
    assert str(err).startswith(f"{path}: ")
    assert rule in err.rule, str(err)
    assert os.listdir(out.parent) == []
    return err


def packed(source: Path, out: Path) -> tarfile.TarFile:
    """Pack ``source``, check the reader accepts the archive, and open it with ``tarfile``."""
    result = pack_tree(source, out)
    assert verify_archive(out, expect=result.address).content_digest == result.content_digest
    assert os.listdir(out.parent) == [out.name]
    return tarfile.open(out)


# --- symbolic links ----------------------------------------------------------------------


def _absolute(task: Path) -> str:
    os.symlink("/etc/passwd", task / "l")
    return "task/l"


def _escaping(task: Path) -> str:
    os.symlink("../outside/secret", task / "l")
    return "task/l"


def _escaping_from_subdir(task: Path) -> str:
    (task / "sub").mkdir()
    os.symlink("../../outside", task / "sub" / "l")
    return "task/sub/l"


def _escaping_through_chain(task: Path) -> str:
    os.symlink("l2", task / "l1")
    os.symlink("sub/l3", task / "l2")
    (task / "sub").mkdir()
    os.symlink("../../outside", task / "sub" / "l3")
    return "task/l1"


def _escaping_through_link_normpath(task: Path) -> str:
    # "a/j/../../x" is "x" to os.path.normpath, but a/j points at x (depth 1), so following
    # it the path climbs out of the task directory into src/x.
    (task / "a").mkdir()
    (task / "x").mkdir()
    os.symlink("../x", task / "a" / "j")
    os.symlink("a/j/../../x", task / "z")
    (task.parent / "x").mkdir()
    return "task/z"


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        pytest.param(_absolute, "is absolute", id="absolute"),
        pytest.param(_escaping, "escapes the task directory", id="escaping-dotdot"),
        pytest.param(_escaping_from_subdir, "escapes the task directory", id="escaping-subdir"),
        pytest.param(_escaping_through_chain, "escapes the task directory", id="through-chain"),
        pytest.param(
            _escaping_through_link_normpath, "escapes the task directory", id="through-link"
        ),
    ],
)
def test_escaping_links_are_refused(
    task: Path, out: Path, make: Callable[[Path], str], rule: str
) -> None:
    path = make(task)
    refused(task, out, SymlinkError, path, rule)


def test_dangling_link_is_refused(task: Path, out: Path) -> None:
    os.symlink("missing.txt", task / "l")
    refused(task, out, SymlinkError, "task/l", "dangling")


def test_link_through_a_file_is_refused(task: Path, out: Path) -> None:
    os.symlink("task.toml/x", task / "l")
    refused(task, out, SymlinkError, "task/l", "dangling (file used as directory)")


def test_link_to_a_fifo_is_refused_as_the_fifo(task: Path, out: Path) -> None:
    os.mkfifo(task / "pipe")
    os.symlink("pipe", task / "l")
    refused(task, out, EntryTypeError, "task/pipe", "FIFO")


def test_cyclic_links_are_refused(task: Path, out: Path) -> None:
    os.symlink("b", task / "a")
    os.symlink("a", task / "b")
    refused(task, out, SymlinkError, "task/a", "cyclic")


def test_self_link_is_refused(task: Path, out: Path) -> None:
    os.symlink("l", task / "l")
    refused(task, out, SymlinkError, "task/l", "cyclic")


@pytest.mark.parametrize(
    ("where", "target", "path"),
    [
        pytest.param("sub/l", "..", "task/sub/l", id="parent"),
        pytest.param("sub/l", ".", "task/sub/l", id="own-directory"),
        pytest.param("sub/deeper/l", "../..", "task/sub/deeper/l", id="root"),
        pytest.param("sub/deeper/l", "../../sub", "task/sub/deeper/l", id="grandparent"),
    ],
)
def test_link_to_its_own_ancestor_is_refused(
    task: Path, out: Path, where: str, target: str, path: str
) -> None:
    (task / "sub" / "deeper").mkdir(parents=True)
    os.symlink(target, task / where)
    refused(task, out, SymlinkError, path, "own ancestor")


def test_empty_link_target_is_refused(task: Path, out: Path, monkeypatch) -> None:
    # Linux refuses to create an empty link; the scanner must still refuse one it is shown.
    os.symlink("placeholder", task / "l")
    real = os.readlink
    monkeypatch.setattr(os, "readlink", lambda p: b"" if _is(p, task / "l") else real(p))
    refused(task, out, SymlinkError, "task/l", "empty")


def _is(path, expected: Path) -> bool:
    return os.fsdecode(path) == str(expected)


@pytest.mark.parametrize(
    ("link", "real"),
    [
        pytest.param("task.toml", "config.toml", id="task.toml"),
        pytest.param("instruction.md", "README.md", id="instruction.md"),
        pytest.param(".gitignore", "ignore.txt", id=".gitignore"),
    ],
)
def test_link_at_a_protected_file_is_refused(task: Path, out: Path, link: str, real: str) -> None:
    """The link points at a valid file in the task: only its location is wrong."""
    if (task / link).exists():
        (task / link).rename(task / real)
    else:
        (task / real).write_text("*.log\n")
    os.symlink(real, task / link)
    refused(task, out, SymlinkError, f"task/{link}", "Harbor reads itself")


def _multi_step(task: Path, steps: tuple[str, ...] = ("one", "two")) -> None:
    (task / "task.toml").write_bytes(MULTI_STEP_TOML)
    (task / "instruction.md").unlink()
    for step in steps:
        (task / "steps" / step).mkdir(parents=True)
        (task / "steps" / step / "instruction.md").write_text(f"Step {step}.\n")


def test_link_at_steps_is_refused(task: Path, out: Path) -> None:
    _multi_step(task)
    (task / "steps").rename(task / "real-steps")
    os.symlink("real-steps", task / "steps")
    refused(task, out, SymlinkError, "task/steps", "Harbor reads itself")


def test_link_at_a_step_directory_is_refused(task: Path, out: Path) -> None:
    _multi_step(task, ("two",))
    (task / "shared").mkdir()
    (task / "shared" / "instruction.md").write_text("Step one.\n")
    os.symlink("../shared", task / "steps" / "one")
    refused(task, out, SymlinkError, "task/steps/one", "Harbor reads itself")


def test_link_at_a_step_instruction_is_refused(task: Path, out: Path) -> None:
    _multi_step(task)
    step = task / "steps" / "one"
    (step / "instruction.md").rename(step / "text.md")
    os.symlink("text.md", step / "instruction.md")
    refused(task, out, SymlinkError, "task/steps/one/instruction.md", "Harbor reads itself")


def test_link_with_non_utf8_target_is_refused(task: Path, out: Path) -> None:
    os.symlink(b"bad\xff", os.fsencode(task / "l"))
    refused(task, out, UnsafePathError, "task/l", "not valid UTF-8")


# --- special files -------------------------------------------------------------------------


def test_fifo_is_refused(task: Path, out: Path) -> None:
    (task / "sub").mkdir()
    os.mkfifo(task / "sub" / "pipe")
    refused(task, out, EntryTypeError, "task/sub/pipe", "a FIFO cannot be archived")


def test_unix_socket_is_refused(task: Path, out: Path, monkeypatch) -> None:
    monkeypatch.chdir(task)  # bind a short relative name: AF_UNIX paths are limited to 108 bytes
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("sock")
        refused(task, out, EntryTypeError, "task/sock", "a socket cannot be archived")
    finally:
        server.close()


@pytest.mark.parametrize(
    ("kind", "device", "what"),
    [
        pytest.param(stat.S_IFCHR, (1, 3), "character device", id="char"),
        pytest.param(stat.S_IFBLK, (7, 0), "block device", id="block"),
    ],
)
def test_device_is_refused(task: Path, out: Path, kind: int, device, what: str) -> None:
    try:
        os.mknod(task / "dev", kind | 0o600, os.makedev(*device))
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    refused(task, out, EntryTypeError, "task/dev", f"a {what} cannot be archived")


# --- names ---------------------------------------------------------------------------------


def test_non_utf8_file_name_is_refused(task: Path, out: Path) -> None:
    fd = os.open(os.fsencode(task) + b"/bad\xff.txt", os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    refused(task, out, UnsafePathError, "task/bad\\xff.txt", "not valid UTF-8")


def test_non_utf8_directory_name_is_refused(task: Path, out: Path) -> None:
    os.mkdir(os.fsencode(task) + b"/dir\xfe")
    refused(task, out, UnsafePathError, "task/dir\\xfe", "not valid UTF-8")


def test_non_utf8_task_directory_name_is_refused(tmp_path: Path, task: Path, out: Path) -> None:
    bad = os.fsencode(tmp_path / "src") + b"/t\xffsk"
    os.rename(os.fsencode(task), bad)
    with pytest.raises(UnsafePathError, match="not valid UTF-8") as info:
        pack_tree(Path(os.fsdecode(bad)), out)
    assert info.value.path == os.fsdecode(bad)
    assert os.listdir(out.parent) == []


# --- limits --------------------------------------------------------------------------------


EXTRA = "task/" + "z" * 20  # sorts after task/instruction.md (19 bytes) and task/task.toml


@pytest.mark.parametrize(
    ("limit", "bound", "path", "value"),
    [
        # archive order: task, task/instruction.md, task/task.toml, EXTRA (61 bytes)
        pytest.param("max_entries", 3, EXTRA, 4, id="entries"),
        pytest.param("max_file_bytes", 60, EXTRA, 61, id="file-bytes"),
        pytest.param(
            "max_payload_bytes", 90, EXTRA, len(INSTRUCTION) + len(TASK_TOML) + 61, id="payload"
        ),
        pytest.param("max_path_bytes", 24, EXTRA, 25, id="path-bytes"),
        pytest.param(
            "max_config_bytes", len(TASK_TOML) - 1, "task/task.toml", len(TASK_TOML), id="config"
        ),
    ],
)
def test_limit_exceeded_names_limit_value_and_path(
    task: Path, out: Path, limit: str, bound: int, path: str, value: int
) -> None:
    (task.parent / EXTRA).write_bytes(b"z" * 61)
    limits = Limits(**{limit: bound})
    err = refused(task, out, LimitError, path, f"limit {limit} exceeded", limits=limits)
    assert isinstance(err, LimitError)
    assert (err.limit, err.value, err.bound) == (limit, value, bound)
    assert str(err) == f"{path}: limit {limit} exceeded: {value} > {bound}"


def test_path_limit_counts_utf8_bytes_of_the_whole_name(task: Path, out: Path) -> None:
    name = "task/é/" + "ü" * 8 + ".txt"  # 19 characters, 28 bytes
    (task / "é").mkdir()
    (task.parent / name).write_text("x")
    limits = Limits(max_path_bytes=27)
    err = refused(task, out, LimitError, name, "max_path_bytes", limits=limits)
    assert isinstance(err, LimitError)
    assert (err.value, err.bound) == (28, 27)


def test_path_limit_applies_to_link_targets(task: Path, out: Path) -> None:
    (task / "d" / "e").mkdir(parents=True)
    target = "./d/./e/../e/../../d/e/.."  # 25 bytes (longer than any entry name), resolves to d
    os.symlink(target, task / "l")
    limits = Limits(max_path_bytes=24)
    err = refused(task, out, LimitError, "task/l", "max_path_bytes", limits=limits)
    assert isinstance(err, LimitError)
    assert (err.value, err.bound) == (25, 24)
    assert pack_tree(task, out, limits=Limits(max_path_bytes=25)).entries == 6


def test_limits_at_the_bound_are_accepted(task: Path, out: Path) -> None:
    (task.parent / EXTRA).write_bytes(b"z" * 61)
    limits = Limits(
        max_entries=4,
        max_file_bytes=61,
        max_payload_bytes=len(INSTRUCTION) + len(TASK_TOML) + 61,
        max_path_bytes=25,
        max_config_bytes=len(TASK_TOML),
    )
    assert pack_tree(task, out, limits=limits).entries == 4


# --- Harbor task layout --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        pytest.param("task.toml", "a task needs a regular task.toml", id="task.toml"),
        pytest.param("instruction.md", "a regular instruction.md", id="instruction.md"),
    ],
)
@pytest.mark.parametrize("directory", [False, True], ids=["missing", "directory"])
def test_missing_or_directory_task_file_is_refused(
    task: Path, out: Path, name: str, rule: str, directory: bool
) -> None:
    (task / name).unlink()
    if directory:
        (task / name).mkdir()
    refused(task, out, TaskFormatError, f"task/{name}", rule)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(b'[verifier]\ntimeout_sec = "soon"\n', id="wrong-type"),
        pytest.param(b"[verifier\n", id="toml-syntax"),
        pytest.param(b"steps = 3\n", id="steps-not-a-list"),
        pytest.param(b"# \xff\n", id="not-utf8"),
    ],
)
def test_invalid_task_toml_is_refused(task: Path, out: Path, text: bytes) -> None:
    (task / "task.toml").write_bytes(text)
    refused(task, out, TaskFormatError, "task/task.toml", "task.toml is not valid for Harbor")


def test_step_named_but_missing_is_refused(task: Path, out: Path) -> None:
    _multi_step(task, ("one",))
    refused(task, out, TaskFormatError, "task/steps/two/instruction.md", "every step in task.toml")


def test_step_directory_not_named_is_refused(task: Path, out: Path) -> None:
    _multi_step(task, ("one", "two", "three"))
    refused(task, out, TaskFormatError, "task/steps/three", "not named in task.toml steps")


def test_step_directory_without_instruction_is_refused(task: Path, out: Path) -> None:
    _multi_step(task)
    (task / "steps" / "two" / "instruction.md").unlink()
    (task / "steps" / "two" / "notes.md").write_text("not the instruction\n")
    refused(task, out, TaskFormatError, "task/steps/two/instruction.md", "every step in task.toml")


def test_multi_step_without_root_instruction_is_accepted(task: Path, out: Path) -> None:
    _multi_step(task)
    result = pack_tree(task, out)
    assert result.layout.steps == ("one", "two")
    assert not result.layout.has_root_instruction
    assert verify_archive(out).layout.steps == ("one", "two")


# --- accepted shapes -----------------------------------------------------------------------


def test_in_tree_relative_links_are_kept(task: Path, out: Path) -> None:
    (task / "data").mkdir()
    (task / "data" / "file.txt").write_text("payload\n")
    os.symlink("data/file.txt", task / "to-file")
    os.symlink("data", task / "to-dir")
    os.symlink("to-file", task / "chain")  # chain -> to-file -> data/file.txt
    os.symlink("../to-dir/file.txt", task / "data" / "via-dir-link")
    with packed(task, out) as archive:
        links = {m.name: m.linkname for m in archive.getmembers() if m.issym()}
    assert links == {
        "task/chain": "to-file",
        "task/data/via-dir-link": "../to-dir/file.txt",
        "task/to-dir": "data",
        "task/to-file": "data/file.txt",
    }


def test_hard_links_are_stored_as_two_ordinary_files(task: Path, out: Path) -> None:
    data = b"shared bytes\n" * 100
    (task / "a.bin").write_bytes(data)
    os.link(task / "a.bin", task / "b.bin")
    assert os.stat(task / "b.bin").st_nlink == 2
    with packed(task, out) as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert not any(m.islnk() for m in members.values())
        for name in ("task/a.bin", "task/b.bin"):
            assert members[name].isreg() and members[name].size == len(data)
            assert archive.extractfile(members[name]).read() == data


def test_empty_dirs_dotfiles_and_ignored_files_are_kept(task: Path, out: Path) -> None:
    (task / ".gitignore").write_text("*.log\nbuild/\n")
    (task / "debug.log").write_text("ignored by git, kept by us\n")
    (task / "build").mkdir()
    (task / "build" / "out.o").write_bytes(b"\0\1")
    (task / "empty").mkdir()
    (task / ".hidden").mkdir()
    (task / ".hidden" / ".env").write_text("A=1\n")
    with packed(task, out) as archive:
        names = archive.getnames()
    assert names == [
        "task",
        "task/.gitignore",
        "task/.hidden",
        "task/.hidden/.env",
        "task/build",
        "task/build/out.o",
        "task/debug.log",
        "task/empty",
        "task/instruction.md",
        "task/task.toml",
    ]


def test_special_mode_bits_are_kept(task: Path, out: Path, tmp_path: Path) -> None:
    (task / "setuid").write_text("#!/bin/sh\n")
    os.chmod(task / "setuid", 0o4755)
    (task / "setgid").mkdir()
    os.chmod(task / "setgid", 0o2755)
    (task / "sticky").mkdir()
    os.chmod(task / "sticky", 0o1777)
    expected = {"task/setuid": 0o4755, "task/setgid": 0o2755, "task/sticky": 0o1777}
    with packed(task, out) as archive:
        modes = {m.name: m.mode for m in archive.getmembers() if m.name in expected}
    assert modes == expected
    extract_archive(out, tmp_path / "dest")
    for name, mode in expected.items():
        assert stat.S_IMODE(os.lstat(tmp_path / "dest" / name).st_mode) == mode


# --- quiescence ----------------------------------------------------------------------------


def _on_first_read_of(path: Path, change: Callable[[], None], monkeypatch) -> None:
    """Make ``casstore.archive.tarbuild._read_into`` call ``change`` right after its first read of
    ``path`` (matched by inode), so the file changes while it is being packed."""
    real = casstore.archive.tarbuild._read_into
    inode = os.stat(path).st_ino
    done: list[bool] = []

    def read_into(fd: int, view: memoryview) -> int:
        got = real(fd, view)
        if not done and os.fstat(fd).st_ino == inode:
            done.append(True)
            change()
        return got

    monkeypatch.setattr(casstore.archive.tarbuild, "_read_into", read_into)


def test_file_growing_while_read_is_refused(task: Path, out: Path, monkeypatch) -> None:
    target = task / "data.txt"
    target.write_bytes(b"x" * 100)

    def grow() -> None:
        with open(target, "ab") as handle:
            handle.write(b"more")

    _on_first_read_of(target, grow, monkeypatch)
    refused(task, out, SourceChangedError, "task/data.txt", "file grew while packing")


def test_file_shrinking_while_read_is_refused(task: Path, out: Path, monkeypatch) -> None:
    target = task / "big.bin"
    target.write_bytes(b"y" * (3 << 20))  # several reads
    _on_first_read_of(target, lambda: os.truncate(target, 0), monkeypatch)
    refused(task, out, SourceChangedError, "task/big.bin", "file shrank while packing")


def test_file_rewritten_in_place_while_read_is_refused(task: Path, out: Path, monkeypatch) -> None:
    target = task / "data.txt"
    target.write_bytes(b"x" * 100)

    def rewrite() -> None:  # same size, new content: only mtime tells
        with open(target, "r+b") as handle:
            handle.write(b"y" * 100)
        info = os.stat(target)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))

    _on_first_read_of(target, rewrite, monkeypatch)
    refused(task, out, SourceChangedError, "task/data.txt", "entry changed while packing")


def _keeping_mtime(directory: Path, change: Callable[[], None]) -> Callable[[], None]:
    """``change``, then restore ``directory``'s mtime, so that only the changed entry itself
    (not its parent directory, which is written first) can reveal the change."""

    def run() -> None:
        info = os.stat(directory)
        change()
        os.utime(directory, ns=(info.st_atime_ns, info.st_mtime_ns))

    return run


def _after_scan(change: Callable[[], None], monkeypatch) -> None:
    """Run ``change`` between the scan and the writing of the archive: the packer writes
    entries as its walk yields them, so the walk is made to list and stat every entry first,
    then ``change``, then yield them."""
    real = casstore.archive.pack.walk_tree

    def walk_then_change(start, limits):
        entries = list(real(start, limits))
        change()
        yield from entries

    monkeypatch.setattr(casstore.archive.pack, "walk_tree", walk_then_change)


def test_file_size_differing_from_the_scan_is_refused(task: Path, out: Path, monkeypatch) -> None:
    _after_scan(lambda: (task / "instruction.md").write_bytes(INSTRUCTION * 2), monkeypatch)
    refused(task, out, SourceChangedError, "task/instruction.md", "entry changed while packing")


def test_file_replaced_after_the_scan_is_refused(task: Path, out: Path, monkeypatch) -> None:
    def replace() -> None:
        (task / "new.md").write_bytes(INSTRUCTION)  # same size and content, new inode
        os.replace(task / "new.md", task / "instruction.md")

    _after_scan(_keeping_mtime(task, replace), monkeypatch)
    refused(task, out, SourceChangedError, "task/instruction.md", "entry changed while packing")


def test_file_vanishing_after_the_scan_is_refused(task: Path, out: Path, monkeypatch) -> None:
    (task / "sub").mkdir()
    (task / "sub" / "gone.txt").write_text("x")
    _after_scan(_keeping_mtime(task / "sub", (task / "sub" / "gone.txt").unlink), monkeypatch)
    refused(task, out, SourceChangedError, "task/sub/gone.txt", "cannot open file")


def test_directory_gaining_an_entry_before_it_is_written_is_refused(
    task: Path, out: Path, monkeypatch
) -> None:
    (task / "sub").mkdir()
    (task / "sub" / "a.txt").write_text("a")
    _after_scan(lambda: (task / "sub" / "late.txt").write_text("late"), monkeypatch)
    refused(task, out, SourceChangedError, "task/sub", "entry changed while packing")


def test_directory_gaining_an_entry_after_it_was_written_is_refused(
    task: Path, out: Path, monkeypatch
) -> None:
    (task / "sub").mkdir()
    (task / "sub" / "a.txt").write_text("a")
    _on_first_read_of(
        task / "sub" / "a.txt", lambda: (task / "sub" / "late.txt").write_text("late"), monkeypatch
    )
    refused(task, out, SourceChangedError, "task/sub", "entry changed while packing")


def test_link_retargeted_after_the_scan_is_refused(task: Path, out: Path, monkeypatch) -> None:
    (task / "d1").mkdir()
    (task / "d2").mkdir()
    os.symlink("d1", task / "l")

    def retarget() -> None:
        os.symlink("d2", task / "l.new")
        os.replace(task / "l.new", task / "l")

    _after_scan(_keeping_mtime(task, retarget), monkeypatch)
    refused(task, out, SourceChangedError, "task/l", "entry changed while packing")


def test_write_archive_refuses_a_file_changed_since_scan_tree(task: Path) -> None:
    tree = scan_tree(task, Limits())
    (task / "task.toml").write_bytes(TASK_TOML + b"# later\n")
    buffer = io.BytesIO()
    with pytest.raises(SourceChangedError) as info:
        write_archive(tree, buffer, "gzip", Limits())
    assert info.value.path == "task/task.toml"
    assert "entry changed while packing" in info.value.rule


def test_retry_after_the_source_settles_succeeds(task: Path, out: Path, monkeypatch) -> None:
    _after_scan(lambda: (task / "instruction.md").write_text("changed\n"), monkeypatch)
    refused(task, out, SourceChangedError, "task/instruction.md", "changed while packing")
    monkeypatch.undo()
    result = pack_tree(task, out)
    assert verify_archive(out, expect=result.address).entries == 3
