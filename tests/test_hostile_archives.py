"""Hostile archives: every shape the reader must refuse, built byte by byte.

Each case changes one thing in the canonical archive of a minimal task (the positive control
proves the untouched archive verifies and extracts). For each case ``verify_archive`` raises
exactly the expected error class naming the offending entry and the rule, ``extract_archive``
raises the same, the destination does not exist afterwards, and nothing at all changed below
the test's directory: not the sentinel directory that escape attempts aim at
(``tmp_path/outside``), and no temporary directory is left behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from casstore.archive.limits import Limits
from casstore.archive.read import extract_archive, verify_archive
from casstore.archive.tarformat import BLOCK, Member, encode_header
from casstore.errors import (
    CheckError,
    CorruptArchiveError,
    DigestMismatchError,
    EntryTypeError,
    LimitError,
    NotCanonicalError,
    SymlinkError,
    TaskFormatError,
    UnsafePathError,
)
from tests.archive_builder import (
    INSTRUCTION,
    TASK_TOML,
    canonical_tar,
    compress,
    directory,
    file,
    gnu_long_name,
    multi_step_entries,
    pax_header,
    pax_record,
    raw_header,
    symlink,
    tar,
    task_entries,
)
from tests.helpers import snapshot

MiB = 1 << 20
WRONG_ADDRESS = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Ctx:
    """What a case builder knows: the absolute sentinel directory escapes aim at."""

    outside: str


@dataclass(frozen=True)
class Case:
    """One hostile archive: ``build`` returns its bytes; the reader must raise ``error``
    whose ``path`` contains ``path`` (``None``: an error about the stream, not an entry) and
    whose rule contains ``rule``. ``limits``/``expect`` are passed to the reader; ``check``
    runs extra assertions on the error."""

    id: str
    build: Callable[[Ctx], bytes]
    error: type[CheckError]
    path: str | None
    rule: str
    limits: Limits | None = None
    expect: str | None = None
    check: Callable[[CheckError], None] | None = None
    marks: tuple = field(default=())


def gz(data: bytes) -> bytes:
    return compress(data, "gzip")


def with_task(*extra: tuple[str, bytes], base: dict[str, bytes] | None = None) -> bytes:
    """gzip of the minimal task plus ``extra`` ``(name, entry)`` pairs, in canonical order."""
    entries = dict(task_entries() if base is None else base)
    entries.update(extra)
    return gz(canonical_tar(entries))


def appended(*raw: bytes, compression: str = "gzip") -> bytes:
    """The minimal task's entries, then ``raw`` bytes as they are (no reordering), then the
    end of archive."""
    base = task_entries()
    return compress(tar(*base.values(), *raw), compression)


def replaced(name: str, raw: bytes) -> bytes:
    """The minimal task with the entry ``name`` replaced by ``raw`` bytes."""
    entries = task_entries()
    entries[name] = raw
    return gz(canonical_tar(entries))


def instruction_header(**changes) -> bytes:
    """``task/instruction.md`` with a hand-made header (``raw_header`` keyword changes)."""
    options = {"size": len(INSTRUCTION), "mode": 0o644} | changes
    return raw_header("task/instruction.md", **options) + _padded(INSTRUCTION)


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def limit_is(limit: str, value: int | None = None, bound: int | None = None):
    def check(error: CheckError) -> None:
        assert isinstance(error, LimitError)
        assert error.limit == limit
        if value is not None:
            assert error.value == value
        if bound is not None:
            assert error.bound == bound
        assert error.value > error.bound

    return check


# --- builders for the longer shapes --------------------------------------------------------

LONG_DIR = "d" * 247  # as in CPython's regression test for CVE-2025-4517
STEPS = "abcdefghijklmnop"


def cve_2025_4517_tree() -> dict[str, bytes]:
    """Sixteen nested directories with 247-byte names (the deepest path is 3,972 bytes), and
    in each level a one-letter link to the next level: ``a/b/.../p`` names the deepest
    directory through sixteen links, a path whose expansion exceeds PATH_MAX once the
    extraction directory is prepended (where ``os.path.realpath`` stops resolving)."""
    entries = task_entries()
    path = "task"
    for letter in STEPS:
        entries[f"{path}/{LONG_DIR}"] = directory(f"{path}/{LONG_DIR}")
        entries[f"{path}/{letter}"] = symlink(f"{path}/{letter}", LONG_DIR)
        path = f"{path}/{LONG_DIR}"
    return entries


def cve_realpath_overflow(ctx: Ctx) -> bytes:
    """The link ``escape`` goes down the sixteen links and up seventeen levels: one above the
    task directory (the extraction directory), then into ``outside``."""
    entries = cve_2025_4517_tree()
    target = "/".join(STEPS) + "/" + "../" * (len(STEPS) + 2) + "outside"
    entries["task/escape"] = symlink("task/escape", target)
    return gz(canonical_tar(entries))


def cve_entry_through_link_chain(ctx: Ctx) -> bytes:
    """As CPython's PoC: a link *named through* the chain (``a/b/.../p/lll``) pointing back up,
    then an escape through it."""
    entries = cve_2025_4517_tree()
    through = "task/" + "/".join(STEPS) + "/" + "l" * 254
    entries[through] = symlink(through, "/".join([".."] * len(STEPS)))
    entries["task/escape"] = symlink("task/escape", through[5:] + "/../../outside")
    return gz(canonical_tar(entries))


def bomb(compression: str) -> Callable[[Ctx], bytes]:
    """A task with a declared 32 MiB file of zeros: a few KiB compressed."""

    def build(ctx: Ctx) -> bytes:
        entries = task_entries()
        entries["task/zeros"] = file("task/zeros", bytes(32 * MiB))
        return compress(canonical_tar(entries), compression)

    return build


def gzip_with_mtime(ctx: Ctx) -> bytes:
    data = bytearray(gz(canonical_tar(task_entries())))
    data[4:8] = struct.pack("<I", 1_700_000_000)
    return bytes(data)


def corrupt_gzip_trailer(offset: int) -> Callable[[Ctx], bytes]:
    def build(ctx: Ctx) -> bytes:
        data = bytearray(gz(canonical_tar(task_entries())))
        data[offset] ^= 0xFF
        return bytes(data)

    return build


def corrupt_zstd_checksum(ctx: Ctx) -> bytes:
    data = bytearray(compress(canonical_tar(task_entries()), "zstd"))
    data[-1] ^= 0xFF
    return bytes(data)


def truncated(compression: str, keep: float) -> Callable[[Ctx], bytes]:
    def build(ctx: Ctx) -> bytes:
        data = compress(canonical_tar(task_entries()), compression)
        return data[: int(len(data) * keep)]

    return build


def two_gzip_members(ctx: Ctx) -> bytes:
    return gz(canonical_tar(task_entries())) + gz(b"more")


def trailing(compression: str, extra: bytes) -> Callable[[Ctx], bytes]:
    def build(ctx: Ctx) -> bytes:
        return compress(canonical_tar(task_entries()), compression) + extra

    return build


def trailing_inside_gzip(ctx: Ctx) -> bytes:
    return gz(canonical_tar(task_entries()) + b"garbage")


def lone_zero_block(ctx: Ctx) -> bytes:
    base = task_entries()
    body = base["task"] + bytes(BLOCK) + base["task/instruction.md"] + base["task/task.toml"]
    return gz(tar(body))


def end_not_padded(ctx: Ctx) -> bytes:
    return gz(b"".join(task_entries().values()) + bytes(2 * BLOCK))


def missing_end_blocks(ctx: Ctx) -> bytes:
    return gz(b"".join(task_entries().values()))


def truncated_header(ctx: Ctx) -> bytes:
    return gz(b"".join(task_entries().values()) + file("task/zz", b"data")[:300])


def truncated_data(ctx: Ctx) -> bytes:
    head = encode_header(Member("task/zz", "file", 0o644, 1000))
    return gz(b"".join(task_entries().values()) + head + b"only ten b")


def non_canonical_order(ctx: Ctx) -> bytes:
    base = task_entries()
    return gz(tar(base["task"], base["task/task.toml"], base["task/instruction.md"]))


def two_tops(ctx: Ctx) -> bytes:
    other = task_entries("zother")
    return gz(tar(*task_entries().values(), *other.values()))


def pax_then_end(ctx: Ctx) -> bytes:
    return appended(pax_header([("path", "task/" + "x" * 120)]))


def empty_archive(ctx: Ctx) -> bytes:
    return gz(tar())


def top_is_file(ctx: Ctx) -> bytes:
    return gz(tar(file("task", b"x")))


def sparse_pax(ctx: Ctx) -> bytes:
    records = [
        ("GNU.sparse.major", "1"),
        ("GNU.sparse.minor", "0"),
        ("GNU.sparse.name", "task/sparse"),
        ("GNU.sparse.realsize", str(1 << 30)),
    ]
    data = b"1\n0\n512\n" + bytes(BLOCK - 8) + b"x" * BLOCK
    member = raw_header("task/GNUSparseFile.0/sparse", size=len(data))
    return appended(pax_header(records) + member + data)


def checksum_other_format(ctx: Ctx) -> bytes:
    """A correct checksum written as GNU tar does (``%07o\\0``), not as the packager."""
    header = bytearray(instruction_header()[:BLOCK])
    header[148:156] = b"%07o\0" % (sum(header[:148]) + 256 + sum(header[156:]))
    return replaced("task/instruction.md", bytes(header) + _padded(INSTRUCTION))


def header_fields_case(case_id: str, expected: type[CheckError], rule: str, **changes) -> Case:
    """A case where ``task/instruction.md``'s header is hand-made with ``changes``."""
    return Case(
        case_id,
        lambda ctx: replaced("task/instruction.md", instruction_header(**changes)),
        expected,
        "task/instruction.md",
        rule,
    )


def special(case_id: str, typeflag: bytes, what: str, **options) -> Case:
    def build(ctx: Ctx) -> bytes:
        return with_task(("task/zz", raw_header("task/zz", typeflag=typeflag, **options)))

    return Case(case_id, build, EntryTypeError, "task/zz", what)


def below_link(case_id: str, target: str, name: str, *extra: tuple[str, bytes]) -> Case:
    """The file ``name`` below the symbolic link ``task/l`` (to ``target``): refused."""

    def build(ctx: Ctx) -> bytes:
        link = ("task/l", symlink("task/l", target))
        return with_task(*extra, link, (name, file(name, b"x")))

    return Case(case_id, build, SymlinkError, name, "below a symbolic link")


def read_by_harbor(case_id: str, name: str, target: str, data: bytes | None = None) -> Case:
    """The file ``name`` Harbor reads, a symbolic link to ``target`` (a file holding ``data``
    beside it, unless None): refused."""

    def build(ctx: Ctx) -> bytes:
        beside = f"task/{target}"
        extra = [] if data is None else [(beside, file(beside, data))]
        return with_task(*extra, (name, symlink(name, target)))

    return Case(case_id, build, SymlinkError, name, "Harbor reads itself")


def pax_size(value: str) -> Callable[[Ctx], bytes]:
    def build(ctx: Ctx) -> bytes:
        member = raw_header("task/zz", size=4) + _padded(b"data")
        return appended(pax_header([("size", value)]) + member)

    return build


def pax_payload(payload: bytes) -> Callable[[Ctx], bytes]:
    def build(ctx: Ctx) -> bytes:
        return appended(pax_header(payload) + file("task/zz", b"data"))

    return build


def steps_case(steps: tuple[str, ...], *extra: tuple[str, bytes]) -> Callable[[Ctx], bytes]:
    def build(ctx: Ctx) -> bytes:
        return with_task(*extra, base=multi_step_entries(steps=steps))

    return build


def linked_steps(ctx: Ctx) -> bytes:
    base = multi_step_entries(steps=())
    del base["task/steps"]
    extra = {"task/real": directory("task/real"), "task/steps": symlink("task/steps", "real")}
    for step in ("one", "two"):
        extra[f"task/real/{step}"] = directory(f"task/real/{step}")
        name = f"task/real/{step}/instruction.md"
        extra[name] = file(name, b"Step.\n")
    return with_task(*extra.items(), base=base)


def linked_step(ctx: Ctx) -> bytes:
    base = multi_step_entries(steps=("two",))
    extra = {
        "task/shared": directory("task/shared"),
        "task/shared/instruction.md": file("task/shared/instruction.md", b"Step.\n"),
        "task/steps/one": symlink("task/steps/one", "../shared"),
    }
    return with_task(*extra.items(), base=base)


CASES: list[Case] = [
    # --- names --------------------------------------------------------------------------
    Case(
        "name-dotdot-inside",
        lambda ctx: with_task(("task/../evil", file("task/../evil", b"x"))),
        UnsafePathError,
        "task/../evil",
        "'..' component",
    ),
    Case(
        "name-dotdot-leading",
        lambda ctx: appended(file("../outside/pwned", b"x")),
        UnsafePathError,
        "../outside/pwned",
        "'..' component",
    ),
    Case(
        "name-absolute",
        lambda ctx: appended(file(f"{ctx.outside}/pwned", b"x")),
        UnsafePathError,
        "/outside/pwned",
        "absolute entry name",
    ),
    Case(
        "name-absolute-top",
        lambda ctx: gz(tar(directory(ctx.outside), file(f"{ctx.outside}/pwned", b"x"))),
        UnsafePathError,
        "/outside",
        "absolute entry name",
    ),
    Case(
        "name-dot-component",
        lambda ctx: appended(file("task/./zz", b"x")),
        UnsafePathError,
        "task/./zz",
        "'.' component",
    ),
    Case(
        "name-empty-component",
        lambda ctx: appended(file("task//zz", b"x")),
        UnsafePathError,
        "task//zz",
        "'empty' component",
    ),
    Case(
        "name-not-utf8",
        lambda ctx: appended(raw_header(b"task/\xffzz", size=1) + _padded(b"x")),
        UnsafePathError,
        "task/\udcffzz",
        "not valid UTF-8",
    ),
    Case(
        "name-component-over-name-max",
        lambda ctx: with_task(("task/" + "n" * 300, file("task/" + "n" * 300, b"x"))),
        UnsafePathError,
        "task/nnnn",
        "255",
    ),
    # --- symbolic links -----------------------------------------------------------------
    Case(
        "symlink-absolute",
        lambda ctx: with_task(("task/l", symlink("task/l", ctx.outside))),
        SymlinkError,
        "task/l",
        "is absolute",
    ),
    Case(
        "symlink-dotdot-escape",
        lambda ctx: with_task(("task/l", symlink("task/l", "../../outside"))),
        SymlinkError,
        "task/l",
        "escapes the task directory",
    ),
    Case(
        "symlink-chain-escape",
        lambda ctx: with_task(
            ("task/l1", symlink("task/l1", "l2")),
            ("task/l2", symlink("task/l2", "sub/l3")),
            ("task/sub", directory("task/sub")),
            ("task/sub/l3", symlink("task/sub/l3", "../../../outside")),
        ),
        SymlinkError,
        "task/l1",
        "escapes the task directory",
    ),
    Case(
        # "a/j/../../x" normalizes to "x" lexically, but a/j is a link to ../x (depth 1), so
        # following it lands one level above the task directory.
        "symlink-escape-through-link-normpath-trick",
        lambda ctx: with_task(
            ("task/a", directory("task/a")),
            ("task/a/j", symlink("task/a/j", "../x")),
            ("task/x", directory("task/x")),
            ("task/z", symlink("task/z", "a/j/../../x")),
        ),
        SymlinkError,
        "task/z",
        "escapes the task directory",
    ),
    Case(
        "symlink-dangling",
        lambda ctx: with_task(("task/l", symlink("task/l", "nowhere"))),
        SymlinkError,
        "task/l",
        "dangling",
    ),
    Case(
        "symlink-file-used-as-directory",
        lambda ctx: with_task(("task/l", symlink("task/l", "task.toml/x"))),
        SymlinkError,
        "task/l",
        "dangling",
    ),
    Case(
        "symlink-cycle",
        lambda ctx: with_task(
            ("task/a", symlink("task/a", "b")), ("task/b", symlink("task/b", "a"))
        ),
        SymlinkError,
        "task/a",
        "cyclic",
    ),
    Case(
        "symlink-own-ancestor",
        lambda ctx: with_task(
            ("task/sub", directory("task/sub")), ("task/sub/l", symlink("task/sub/l", ".."))
        ),
        SymlinkError,
        "task/sub/l",
        "own ancestor",
    ),
    Case(
        "symlink-empty-target",
        lambda ctx: with_task(("task/l", symlink("task/l", ""))),
        SymlinkError,
        "task/l",
        "empty",
    ),
    Case(
        "symlink-target-over-path-limit",
        lambda ctx: with_task(("task/l", symlink("task/l", "a/" * 2100 + "b"))),
        LimitError,
        "task/l",
        "max_path_bytes",
        check=limit_is("max_path_bytes", 4201, 4096),
    ),
    Case(
        "symlink-target-at-path-max",
        lambda ctx: with_task(("task/l", symlink("task/l", "./" * 2047 + "zz"))),
        UnsafePathError,
        "task/l",
        "longer than 4095 bytes",
    ),
    below_link("write-below-escaping-symlink", "../../outside", "task/l/pwned"),
    below_link("write-below-inside-symlink", "d", "task/l/x", ("task/d", directory("task/d"))),
    below_link("write-two-levels-below-symlink", "../../outside", "task/l/sub/pwned"),
    Case(
        "cve-2025-4517-realpath-overflow",
        cve_realpath_overflow,
        SymlinkError,
        "task/escape",
        "escapes the task directory",
    ),
    Case(
        "cve-2025-4517-entry-through-link-chain",
        cve_entry_through_link_chain,
        SymlinkError,
        "task/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/lll",
        "below a symbolic link",
    ),
    read_by_harbor("link-at-task-toml", "task/task.toml", "config.toml", TASK_TOML),
    read_by_harbor("link-at-instruction-md", "task/instruction.md", "README.md", INSTRUCTION),
    read_by_harbor("link-at-gitignore", "task/.gitignore", "task.toml"),
    Case("link-at-steps", linked_steps, SymlinkError, "task/steps", "Harbor reads itself"),
    Case("link-at-step-dir", linked_step, SymlinkError, "task/steps/one", "Harbor reads itself"),
    # --- entry types --------------------------------------------------------------------
    special("hard-link", b"1", "hard link", linkname="task/task.toml"),
    special("hard-link-outside", b"1", "hard link", linkname="/etc/passwd"),
    special("character-device", b"3", "character device", mode=0o666),
    special("block-device", b"4", "block device", mode=0o660),
    special("fifo", b"6", "FIFO"),
    special("contiguous-file", b"7", "contiguous file"),
    special("sparse-typeflag", b"S", "sparse"),
    special("unknown-typeflag", b"Z", "unknown entry type"),
    special("pax-global-header", b"g", "PAX global header"),
    special("old-gnu-dump-dir", b"D", "dump directory"),
    Case("sparse-pax-records", sparse_pax, EntryTypeError, "@PaxHeader", "sparse"),
    Case(
        "gnu-long-name",
        lambda ctx: appended(
            gnu_long_name("../outside/pwned") + raw_header("task/zz", size=1) + _padded(b"x")
        ),
        EntryTypeError,
        "././@LongLink",
        "GNU long-name",
    ),
    Case(
        "gnu-long-link",
        lambda ctx: appended(
            gnu_long_name("../../outside", b"K") + raw_header("task/zz", typeflag=b"2")
        ),
        EntryTypeError,
        "././@LongLink",
        "GNU long-link",
    ),
    # --- PAX headers --------------------------------------------------------------------
    Case(
        "pax-path-outside",
        lambda ctx: appended(
            pax_header([("path", "../outside/pwned")]) + raw_header("task/zz", size=1)
        ),
        UnsafePathError,
        "../outside/pwned",
        "'..' component",
    ),
    Case(
        "pax-path-absolute",
        lambda ctx: appended(
            pax_header([("path", f"{ctx.outside}/pwned")]) + raw_header("task/zz", size=1)
        ),
        UnsafePathError,
        "/outside/pwned",
        "absolute entry name",
    ),
    Case(
        "pax-path-into-other-top",
        lambda ctx: appended(pax_header([("path", "zother/" + "y" * 120)]) + raw_header("task/zz")),
        UnsafePathError,
        "zother/yyy",
        "outside the top-level directory",
    ),
    Case(
        "pax-linkpath-escape",
        lambda ctx: with_task(("task/zz", symlink("task/zz", "../" * 40 + "outside"))),
        SymlinkError,
        "task/zz",
        "escapes the task directory",
    ),
    Case(
        "pax-linkpath-hidden-behind-ustar-field",
        lambda ctx: appended(
            pax_header([("linkpath", "../" * 40 + "outside")])
            + raw_header("task/zz", typeflag=b"2", mode=0o777, linkname="task.toml")
        ),
        NotCanonicalError,
        "task/zz",
        "canonical encoding",
    ),
    Case(
        "pax-linkpath-nul",
        lambda ctx: appended(
            pax_header([("linkpath", "task.toml\0../../outside")])
            + raw_header("task/zz", typeflag=b"2", mode=0o777, linkname="task.toml")
        ),
        UnsafePathError,
        "task/zz",
        "NUL byte in link target",
    ),
    Case(
        "pax-path-nul",
        lambda ctx: appended(
            pax_header([("path", "task/zz\0../../outside/pwned")]) + raw_header("task/zz")
        ),
        UnsafePathError,
        "task/zz",
        "NUL byte in entry name",
    ),
    Case(
        "linkname-on-regular-file",
        lambda ctx: appended(raw_header("task/zz", linkname="../../outside")),
        NotCanonicalError,
        "task/zz",
        "only a symbolic link entry carries a link target",
    ),
    Case(
        "pax-short-name-needs-no-pax",
        lambda ctx: appended(pax_header([("path", "task/zz")]) + file("task/zz", b"x")),
        NotCanonicalError,
        "task/zz",
        "canonical encoding",
    ),
    Case(
        "pax-empty-header",
        pax_payload(b""),
        NotCanonicalError,
        "task/zz",
        "canonical encoding",
    ),
    Case(
        "pax-zero-length-record",
        pax_payload(b"0 path=task/zz\n"),
        CorruptArchiveError,
        "@PaxHeader",
        "malformed PAX record length",
    ),
    Case(
        "pax-record-without-equals",
        pax_payload(b"8 pathx\n"),
        CorruptArchiveError,
        "@PaxHeader",
        "malformed",
    ),
    Case(
        "pax-record-length-past-end",
        pax_payload(b"99 path=task/zz\n"),
        CorruptArchiveError,
        "@PaxHeader",
        "malformed",
    ),
    Case(
        "pax-record-oversized",
        pax_payload(pax_record("path", "task/" + "a" * 70_000)),
        LimitError,
        "@PaxHeader",
        "max_metadata_bytes",
        check=limit_is("max_metadata_bytes", len(pax_record("path", "task/" + "a" * 70_000))),
    ),
    Case(
        "pax-oversized-vs-small-limit",
        pax_payload(pax_record("path", "task/" + "a" * 200)),
        LimitError,
        "@PaxHeader",
        "max_metadata_bytes",
        limits=Limits(max_metadata_bytes=128),
        check=limit_is("max_metadata_bytes", len(pax_record("path", "task/" + "a" * 200)), 128),
    ),
    Case(
        "pax-declared-8gib",
        lambda ctx: appended(pax_header(b"", size=8 << 30)),
        LimitError,
        "@PaxHeader",
        "max_metadata_bytes",
        check=limit_is("max_metadata_bytes", 8 << 30),
    ),
    Case(
        "pax-unknown-record",
        pax_payload(pax_record("mtime", "1700000000")),
        NotCanonicalError,
        "@PaxHeader",
        "'mtime'",
    ),
    Case(
        "pax-repeated-record",
        pax_payload(pax_record("path", "task/zz") * 2),
        NotCanonicalError,
        "@PaxHeader",
        "repeated",
    ),
    Case(
        "pax-two-headers",
        lambda ctx: appended(
            pax_header([("path", "task/" + "a" * 120)])
            + pax_header([("path", "task/" + "b" * 120)])
            + raw_header("task/zz")
        ),
        NotCanonicalError,
        "@PaxHeader",
        "two PAX headers",
    ),
    Case(
        "pax-then-end-of-archive",
        pax_then_end,
        CorruptArchiveError,
        None,
        "PAX header is not followed by a member",
    ),
    Case(
        "pax-size-negative",
        pax_size("-4"),
        CorruptArchiveError,
        "task/zz",
        "not a decimal number",
    ),
    Case(
        "pax-size-unicode-digit",
        pax_size("\u00b2"),
        CorruptArchiveError,
        "task/zz",
        "not a decimal number",
    ),
    Case(
        "pax-size-5000-digits",
        pax_size("9" * 5000),
        CorruptArchiveError,
        "task/zz",
        "out of range",
    ),
    Case(
        "pax-size-beyond-file-limit",
        pax_size(str(1 << 40)),
        LimitError,
        "task/zz",
        "max_file_bytes",
        check=limit_is("max_file_bytes", 1 << 40, 4 << 30),
    ),
    # --- numeric fields -----------------------------------------------------------------
    Case(
        "size-base256-negative",
        lambda ctx: appended(raw_header("task/zz", fields={"size": b"\xff" * 12})),
        CorruptArchiveError,
        "task/zz",
        "base-256",
    ),
    Case(
        "size-base256-huge",
        lambda ctx: appended(
            raw_header("task/zz", fields={"size": b"\x80\0\0\0" + (10**18).to_bytes(8)})
        ),
        CorruptArchiveError,
        "task/zz",
        "base-256",
    ),
    Case(
        "size-octal-8gib",
        lambda ctx: appended(raw_header("task/zz", fields={"size": b"77777777777\0"})),
        LimitError,
        "task/zz",
        "max_file_bytes",
        check=limit_is("max_file_bytes", 8**11 - 1, 4 << 30),
    ),
    Case(
        "size-twelve-octal-digits",
        lambda ctx: appended(raw_header("task/zz", fields={"size": b"777777777777"})),
        LimitError,
        "task/zz",
        "max_file_bytes",
        check=limit_is("max_file_bytes", 8**12 - 1),
    ),
    Case(
        "size-not-octal",
        lambda ctx: appended(raw_header("task/zz", fields={"size": b"0000000009\0"})),
        CorruptArchiveError,
        "task/zz",
        "not an octal number",
    ),
    Case(  # int() reads "-1"; the canonical "%011o" of -1 is these very bytes
        "size-negative",
        lambda ctx: appended(raw_header("task/zz", fields={"size": b"-0000000001\0"})),
        CorruptArchiveError,
        "task/zz",
        "size field is not an octal number",
    ),
    Case(
        "size-on-directory",
        lambda ctx: appended(raw_header("task/zz/", typeflag=b"5", size=4) + _padded(b"data")),
        NotCanonicalError,
        "task/zz",
        "carries data",
    ),
    Case(
        "mode-not-octal",
        lambda ctx: appended(raw_header("task/zz", fields={"mode": b"rwxr-xr\0"})),
        CorruptArchiveError,
        "task/zz",
        "mode field",
    ),
    # --- truncation ---------------------------------------------------------------------
    Case("truncated-file-data", truncated_data, CorruptArchiveError, "task/zz", "truncated"),
    Case("truncated-header", truncated_header, CorruptArchiveError, None, "header expected"),
    Case("missing-end-blocks", missing_end_blocks, CorruptArchiveError, None, "header expected"),
    Case("truncated-gzip", truncated("gzip", 0.6), CorruptArchiveError, None, "truncated"),
    Case("truncated-zstd", truncated("zstd", 0.6), CorruptArchiveError, None, "zstd"),
    # --- checksums and compression ------------------------------------------------------
    header_fields_case(
        "bad-header-checksum", CorruptArchiveError, "checksum mismatch", checksum=b"0001234\0"
    ),
    header_fields_case(
        "header-checksum-not-octal",
        CorruptArchiveError,
        "header checksum field is not an octal number",
        checksum=b"zzzzzz\0 ",
    ),
    Case("bad-gzip-crc", corrupt_gzip_trailer(-8), CorruptArchiveError, None, "CRC-32"),
    Case("bad-gzip-length", corrupt_gzip_trailer(-1), CorruptArchiveError, None, "length"),
    Case("bad-zstd-checksum", corrupt_zstd_checksum, CorruptArchiveError, None, "zstd"),
    Case("gzip-header-with-mtime", gzip_with_mtime, NotCanonicalError, None, "gzip header"),
    # --- trailing garbage ---------------------------------------------------------------
    Case(
        "trailing-after-tar-end",
        trailing("none", b"garbage"),
        CorruptArchiveError,
        None,
        "trailing data after the end-of-archive",
    ),
    Case(
        "trailing-after-tar-end-inside-gzip",
        trailing_inside_gzip,
        CorruptArchiveError,
        None,
        "trailing data after the end-of-archive",
    ),
    Case(
        "trailing-after-gzip-member",
        trailing("gzip", b"garbage"),
        CorruptArchiveError,
        None,
        "trailing bytes after the gzip stream",
    ),
    Case(
        "second-gzip-member",
        two_gzip_members,
        CorruptArchiveError,
        None,
        "trailing bytes after the gzip stream",
    ),
    Case(
        "trailing-after-zstd-frame",
        trailing("zstd", b"garbage"),
        CorruptArchiveError,
        None,
        "trailing bytes after the zstd frame",
    ),
    Case(
        "second-zstd-frame",
        trailing("zstd", compress(b"more", "zstd")),
        CorruptArchiveError,
        None,
        "trailing bytes after the zstd frame",
    ),
    # --- decompression bombs and limits -------------------------------------------------
    Case(
        "gzip-bomb-declared-file",
        bomb("gzip"),
        LimitError,
        "task/zeros",
        "max_expanded_bytes",
        limits=Limits(max_expanded_bytes=2 * MiB),
        check=limit_is("max_expanded_bytes", bound=2 * MiB),
    ),
    Case(
        "zstd-bomb-declared-file",
        bomb("zstd"),
        LimitError,
        "task/zeros",
        "max_expanded_bytes",
        limits=Limits(max_expanded_bytes=2 * MiB),
        check=limit_is("max_expanded_bytes", bound=2 * MiB),
    ),
    Case(
        "gzip-bomb-of-zeros",
        lambda ctx: gz(bytes(64 * MiB)),
        CorruptArchiveError,
        None,
        "trailing data after the end-of-archive",
        limits=Limits(max_expanded_bytes=4 * MiB),
    ),
    Case(
        "archive-bytes-limit",
        bomb("gzip"),
        LimitError,
        None,
        "max_archive_bytes",
        limits=Limits(max_archive_bytes=4096),
        check=limit_is("max_archive_bytes", bound=4096),
    ),
    Case(
        "file-bytes-limit",
        lambda ctx: with_task(("task/zz", file("task/zz", b"z" * 41))),
        LimitError,
        "task/zz",
        "max_file_bytes",
        limits=Limits(max_file_bytes=40),
        check=limit_is("max_file_bytes", 41, 40),
    ),
    Case(
        "entries-limit",
        lambda ctx: with_task(("task/zz", file("task/zz", b"x"))),
        LimitError,
        "task/zz",
        "max_entries",
        limits=Limits(max_entries=3),
        check=limit_is("max_entries", 4, 3),
    ),
    Case(
        "path-bytes-limit",
        lambda ctx: with_task(("task/zz" + "z" * 30, file("task/zz" + "z" * 30, b"x"))),
        LimitError,
        "task/zzzz",
        "max_path_bytes",
        limits=Limits(max_path_bytes=20),
        check=limit_is("max_path_bytes", 37, 20),
    ),
    Case(
        "config-bytes-limit",
        lambda ctx: gz(canonical_tar(task_entries(toml=TASK_TOML + b"#" * 100 + b"\n"))),
        LimitError,
        "task/task.toml",
        "max_config_bytes",
        limits=Limits(max_config_bytes=64),
        check=limit_is("max_config_bytes", len(TASK_TOML) + 101, 64),
    ),
    # --- address ------------------------------------------------------------------------
    Case(
        "digest-mismatch",
        lambda ctx: gz(canonical_tar(task_entries())),
        DigestMismatchError,
        "archive.tgz",
        "expected " + WRONG_ADDRESS,
        expect=WRONG_ADDRESS,
    ),
    # --- order, duplicates, placement ---------------------------------------------------
    Case(
        "duplicate-name",
        lambda ctx: appended(file("task/task.toml", TASK_TOML)),
        UnsafePathError,
        "task/task.toml",
        "duplicate entry",
    ),
    Case(
        "same-name-two-types",
        lambda ctx: appended(directory("task/instruction.md")),
        UnsafePathError,
        "task/instruction.md",
        "duplicate entry",
    ),
    Case(
        "non-canonical-order",
        non_canonical_order,
        NotCanonicalError,
        "task/instruction.md",
        "canonical (depth-first) order",
    ),
    Case(
        "parent-not-archived",
        lambda ctx: with_task(("task/sub/zz", file("task/sub/zz", b"x"))),
        NotCanonicalError,
        "task/sub/zz",
        "parent directory is not archived",
    ),
    Case(
        "entry-below-regular-file",
        lambda ctx: appended(file("task/task.toml/zz", b"x")),
        UnsafePathError,
        "task/task.toml/zz",
        "below a regular file",
    ),
    Case(
        "two-top-level-directories",
        two_tops,
        UnsafePathError,
        "zother",
        "outside the top-level directory",
    ),
    Case(
        "entry-outside-top",
        lambda ctx: appended(file("zz-outside.txt", b"x")),
        UnsafePathError,
        "zz-outside.txt",
        "outside the top-level directory",
    ),
    Case(
        "top-is-a-file",
        top_is_file,
        UnsafePathError,
        "task",
        "must start with its top-level directory",
    ),
    Case("empty-archive", empty_archive, UnsafePathError, None, "no top-level directory"),
    # --- non-canonical headers and padding ----------------------------------------------
    header_fields_case("header-mtime", NotCanonicalError, "canonical encoding", mtime=1),
    header_fields_case("header-uid", NotCanonicalError, "canonical encoding", uid=1000),
    header_fields_case("header-gid", NotCanonicalError, "canonical encoding", gid=1000),
    header_fields_case("header-uname", NotCanonicalError, "canonical encoding", uname=b"root"),
    header_fields_case("header-gname", NotCanonicalError, "canonical encoding", gname=b"root"),
    header_fields_case(
        "header-mode-file-type-bits", NotCanonicalError, "canonical encoding", mode=0o100644
    ),
    header_fields_case(
        "header-devmajor", NotCanonicalError, "canonical encoding", fields={"devmajor": b"1"}
    ),
    header_fields_case(
        "header-gnu-magic", NotCanonicalError, "canonical encoding", magic=b"ustar  \0"
    ),
    header_fields_case(
        "header-old-regular-typeflag", NotCanonicalError, "canonical encoding", typeflag=b"\0"
    ),
    header_fields_case(
        "header-size-written-with-spaces",
        NotCanonicalError,
        "canonical encoding",
        fields={"size": b"%11o " % len(INSTRUCTION)},
    ),
    Case(
        "header-checksum-other-format",
        checksum_other_format,
        NotCanonicalError,
        "task/instruction.md",
        "canonical encoding",
    ),
    Case(
        "header-prefix-field",
        lambda ctx: replaced(
            "task/instruction.md",
            raw_header("instruction.md", prefix="task", size=len(INSTRUCTION))
            + _padded(INSTRUCTION),
        ),
        NotCanonicalError,
        "task/instruction.md",
        "canonical encoding",
    ),
    Case(
        "header-directory-without-slash",
        lambda ctx: with_task(("task/sub", raw_header("task/sub", typeflag=b"5", mode=0o755))),
        NotCanonicalError,
        "task/sub",
        "canonical encoding",
    ),
    Case(
        "nonzero-padding",
        lambda ctx: replaced(
            "task/instruction.md",
            encode_header(Member("task/instruction.md", "file", 0o644, len(INSTRUCTION)))
            + INSTRUCTION
            + b"\x01" * (-len(INSTRUCTION) % BLOCK),
        ),
        NotCanonicalError,
        "task/instruction.md",
        "non-zero padding",
    ),
    Case("lone-zero-block", lone_zero_block, NotCanonicalError, None, "lone zero block"),
    Case("end-not-padded-to-record", end_not_padded, NotCanonicalError, None, "10,240"),
    # --- Harbor task structure ----------------------------------------------------------
    Case(
        "missing-task-toml",
        lambda ctx: gz(tar(directory("task"), file("task/instruction.md", INSTRUCTION))),
        TaskFormatError,
        "task/task.toml",
        "regular task.toml",
    ),
    Case(
        "task-toml-is-directory",
        lambda ctx: replaced("task/task.toml", directory("task/task.toml")),
        TaskFormatError,
        "task/task.toml",
        "regular task.toml",
    ),
    Case(
        "invalid-task-toml",
        lambda ctx: gz(canonical_tar(task_entries(toml=b'[verifier]\ntimeout_sec = "soon"\n'))),
        TaskFormatError,
        "task/task.toml",
        "not valid for Harbor",
    ),
    Case(
        "task-toml-syntax-error",
        lambda ctx: gz(canonical_tar(task_entries(toml=b"[verifier\n"))),
        TaskFormatError,
        "task/task.toml",
        "not valid for Harbor",
    ),
    Case(
        "task-toml-not-utf8",
        lambda ctx: gz(canonical_tar(task_entries(toml=b"# \xff\xfe\n"))),
        TaskFormatError,
        "task/task.toml",
        "not valid for Harbor",
    ),
    Case(
        "missing-instruction-md",
        lambda ctx: gz(tar(directory("task"), file("task/task.toml", TASK_TOML))),
        TaskFormatError,
        "task/instruction.md",
        "regular instruction.md",
    ),
    Case(
        "step-directory-missing",
        steps_case(("one",)),
        TaskFormatError,
        "task/steps/two/instruction.md",
        "every step in task.toml",
    ),
    Case(
        "step-without-instruction",
        steps_case(("one",), ("task/steps/two", directory("task/steps/two"))),
        TaskFormatError,
        "task/steps/two/instruction.md",
        "every step in task.toml",
    ),
    Case(
        "extra-step-directory",
        steps_case(("one", "two"), ("task/steps/three", directory("task/steps/three"))),
        TaskFormatError,
        "task/steps/three",
        "not named in task.toml",
    ),
]


# --- harness -------------------------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path: Path) -> Ctx:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("sentinel\n")
    return Ctx(str(outside))


def _assert_error(error: CheckError, case: Case, archive: Path) -> None:
    assert type(error) is case.error, f"{type(error).__name__}: {error}"
    assert error.kind == case.error.kind
    assert case.rule in error.rule, str(error)
    if case.path is None:  # a stream-level failure names the archive file itself
        assert error.path == str(archive), str(error)
    else:
        assert error.path is not None and case.path in error.path, str(error)
        assert str(error).startswith(f"{error.path}: ")
    if case.check is not None:
        case.check(error)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_hostile_archive_is_refused(case: Case, sandbox: Ctx, tmp_path: Path) -> None:
    archive = tmp_path / "archive.tgz"
    archive.write_bytes(case.build(sandbox))
    dest = tmp_path / "dest"
    before = snapshot(tmp_path)

    with pytest.raises(CheckError) as verified:
        verify_archive(archive, expect=case.expect, limits=case.limits)
    _assert_error(verified.value, case, archive)
    assert snapshot(tmp_path) == before

    with pytest.raises(CheckError) as extracted:
        extract_archive(archive, dest, expect=case.expect, limits=case.limits)
    _assert_error(extracted.value, case, archive)
    assert str(extracted.value) == str(verified.value)
    assert not os.path.lexists(dest)
    assert snapshot(tmp_path) == before


def test_there_are_many_distinct_cases() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)) >= 30


# --- positive controls ---------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_untouched_builder_archive_verifies_and_extracts(
    compression: str, sandbox: Ctx, tmp_path: Path
) -> None:
    archive = tmp_path / "archive.tgz"
    archive.write_bytes(compress(canonical_tar(task_entries()), compression))
    address = "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    before = snapshot(tmp_path)
    result = verify_archive(archive, expect=address)
    assert (result.top, result.entries, result.compression) == ("task", 3, compression)
    assert result.payload_bytes == len(TASK_TOML) + len(INSTRUCTION)

    extract_archive(archive, tmp_path / "dest", expect=address)
    after = snapshot(tmp_path)
    assert {key: value for key, value in after.items() if key in before} == before
    added = {key: value for key, value in after.items() if key not in before}
    assert added == {
        "dest": ("dir", 0o777 & ~_umask()),
        "dest/task": ("dir", 0o755),
        "dest/task/instruction.md": ("file", 0o644, len(INSTRUCTION), _sha256(INSTRUCTION)),
        "dest/task/task.toml": ("file", 0o644, len(TASK_TOML), _sha256(TASK_TOML)),
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def deep_tree() -> dict[str, bytes]:
    """Directories 255 bytes long nested until the deepest name is exactly 4,096 bytes (the
    default ``max_path_bytes``), the deepest with the sticky bit: beyond PATH_MAX once the
    extraction directory is prepended."""
    entries = task_entries()
    path = "task"
    while len(path) + 1 + 255 < 4096:
        path += "/" + "d" * 255
        entries[path] = directory(path, 0o2755)
    path += "/" + "e" * (4096 - len(path) - 1)
    entries[path] = directory(path, 0o1777)
    return entries


CONTROLS: dict[str, Callable[[], dict[str, bytes]]] = {
    "multi-step": multi_step_entries,
    "cve-2025-4517-tree-without-escape": cve_2025_4517_tree,
    "deep-tree-4096-byte-name": deep_tree,
    "long-utf8-name-via-pax": lambda: (
        task_entries() | {"task/" + "é" * 127: file("task/" + "é" * 127, b"x")}
    ),
    "long-in-tree-link-target-via-pax": lambda: (
        task_entries() | {"task/l": symlink("task/l", "./" * 100 + "task.toml")}
    ),
    "in-tree-link-chain": lambda: (
        task_entries()
        | {
            "task/d": directory("task/d"),
            "task/d/f": file("task/d/f", b"x", 0o4755),
            "task/l1": symlink("task/l1", "l2"),
            "task/l2": symlink("task/l2", "d/../d/f"),
        }
    ),
    "declared-32mib-file-within-default-limits": lambda: (
        task_entries() | {"task/zeros": file("task/zeros", bytes(32 * MiB))}
    ),
}


@pytest.mark.parametrize("name", list(CONTROLS))
def test_control_without_the_one_change_verifies_and_extracts(name: str, tmp_path: Path) -> None:
    """The shapes the hostile cases start from are accepted, so each case's one change is
    what fails it; extraction recreates every entry with its archived mode."""
    entries = CONTROLS[name]()
    archive = tmp_path / "archive.tgz"
    archive.write_bytes(gz(canonical_tar(entries)))
    assert verify_archive(archive).entries == len(entries)
    extract_archive(archive, tmp_path / "dest")
    tree = snapshot(tmp_path / "dest")
    assert sorted(tree) == sorted(entries)
    for key, raw in entries.items():
        if tree[key][0] != "link":
            assert tree[key][1] == _archived_mode(raw), key


def _archived_mode(raw: bytes) -> int:
    """The mode field of an entry's ustar block (after its PAX header, if it has one)."""
    if raw[156:157] == b"x":
        size = int(raw[124:135], 8)
        raw = raw[BLOCK + size + (-size % BLOCK) :]
    return int(raw[100:107], 8)


def test_snapshot_sees_leftovers_and_paths_beyond_path_max(tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(20):  # 20 * 256 bytes: beyond PATH_MAX
            os.mkdir("x" * 255, dir_fd=fd)
            inner = os.open("x" * 255, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("leftover", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    after = snapshot(tmp_path)
    assert after != before
    assert any(key.endswith("/leftover") and len(key) > 4096 for key in after)
    shutil.rmtree(tmp_path / ("x" * 255))


def test_builder_raw_header_equals_the_canonical_encoder() -> None:
    for member in (
        Member("task/instruction.md", "file", 0o644, 13),
        Member("task/sub", "dir", 0o2755),
        Member("task/l", "symlink", 0o777, 0, "sub/x"),
    ):
        typeflag = {"file": b"0", "dir": b"5", "symlink": b"2"}[member.kind]
        raw = raw_header(
            member.header_name,
            typeflag=typeflag,
            size=member.size,
            mode=member.mode,
            linkname=member.linkname,
        )
        assert raw == encode_header(member)
    long = Member("task/" + "é" * 80, "file", 0o644, 1)
    ascii_name = "task/" + "?" * 80  # what the ustar name field holds for a PAX name
    assert pax_header([("path", long.name)]) + raw_header(ascii_name, size=1) == encode_header(long)
