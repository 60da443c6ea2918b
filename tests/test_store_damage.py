"""A damaged index never gives a wrong answer with exit 0 (issue 17, item 9).

A real store (the fixture suites published, the real Terminal-Bench job imported) has 64
bytes flipped at many offsets of its ``index/data.mdb``; after each flip every reading
command either gives the answer it gave before the flip (exit 0) or exits 1 with one line
(``corrupt_store``, or fsck's report of the damage), never a traceback, a signal or another
answer (a silent empty list is another answer). fsck fails whenever the flip touched a
byte LMDB reads (:mod:`tests.lmdb_layout`); a flip of bytes LMDB never reads (free pages,
the unused middle of a page) changes no answer at all.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CLI, ROOT, make_task, python_env, run_python, store_cli
from tests.lmdb_layout import F_SUBDATA, is_live, live_ranges, main_root

FLIP = 64
ISSUE_OFFSET = 20_000  # the flip of the issue: `ls tasksets` printed nothing, fsck crashed

# argv: pristine store, work dir, flip size. Reads one offset a line (-1: no flip), flips that
# many bytes (xor 0xff) of a fresh copy's data.mdb there, runs every command in this process and
# prints one JSON line: {command: [exit status, stdout, stderr, what it wrote]}.
WORKER = r"""
import contextlib, io, json, os, shutil, sys
from pathlib import Path
from cli.main import run

pristine, work, flip = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
COMMANDS = {
    "ls tasks": ["ls", "tasks", "--json"],
    "ls tasksets": ["ls", "tasksets", "--json"],
    "ls jobs": ["ls", "jobs", "--json"],
    "show taskset": ["show", "cookbook", "--json"],
    "show task": ["show", "default/simple-task", "--json"],
    "fsck": ["fsck", "--json"],
    "rescore": ["rescore", "tb2", "--json"],
    "export": ["export", "tb2", "-o", "OUT/trials.jsonl"],
    "checkout": ["checkout", "cookbook", "OUT/dataset"],
}

def command(store, out, argv):
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    stdout, stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    argv = [a.replace("OUT", str(out)) for a in argv]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = run(["--store", str(store), *argv])
        except BaseException as error:  # the test fails on it: keep what it was
            import traceback
            code, _ = -1, stderr.write("Traceback\n" + traceback.format_exc())
    stdout.flush()
    wrote = sorted(
        (str(p.relative_to(out)), p.read_text() if p.is_file() else "")
        for p in out.rglob("*")
    )
    text = stdout.buffer.getvalue().decode().replace(str(work), "WORK")
    return [code, text, stderr.getvalue().replace(str(work), "WORK"), wrote]

for line in sys.stdin:
    offset = int(line)
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(pristine, store)
    if offset >= 0:
        with (store / "index" / "data.mdb").open("r+b") as handle:
            handle.seek(offset)
            flipped = bytes(b ^ 0xFF for b in handle.read(flip))
            handle.seek(offset)
            handle.write(flipped)
    results = {name: command(store, work / "out", argv) for name, argv in COMMANDS.items()}
    print(json.dumps(results), flush=True)
"""


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> Path:
    """A store holding the cookbook and workshop suites (taskset ``cookbook``) and the
    real Terminal-Bench job (``tb2``), made by the CLI."""
    store = tmp_path_factory.mktemp("damage") / "store"
    tasks = fixtures_dir / "tasks"
    job = fixtures_dir / "jobs" / "tb2-haiku" / "jobs" / "2026-05-10__01-23-57"
    for argv in (
        ["publish", str(tasks / "harbor-cookbook"), "--taskset", "cookbook"],
        ["publish", str(tasks / "harbor-workshop")],
        ["import", str(job), "--name", "tb2"],
    ):
        done = _cli(store, *argv)
        assert done.returncode == 0, done.stderr
    return store


def _cli(store: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_python(CLI, "--store", str(store), *argv)


class Flipper:
    """The worker process (restarted after a crash, which is recorded): one offset in, the
    results of every command out."""

    def __init__(self, pristine: Path, work: Path) -> None:
        self.pristine, self.work = pristine, work
        self.process: subprocess.Popen[str] | None = None

    def run(self, offset: int) -> dict[str, list] | str:
        """Every command's ``[exit status, stdout, stderr, files written]`` after a flip at
        ``offset``, or a description of how the worker died."""
        if self.process is None:
            argv = [sys.executable, "-c", WORKER, str(self.pristine), str(self.work), str(FLIP)]
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=python_env(),
                cwd=ROOT,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{offset}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if line:
            return json.loads(line)
        code = self.process.wait()
        self.process = None
        return f"the process ended with status {code}"

    def close(self) -> None:
        if self.process is not None:
            self.process.communicate("")


def _offsets(data: Path, ranges: list[tuple[int, int]]) -> list[int]:
    """The offsets flipped: the issue's, one at random in every page, one at random in
    every live range (so that most flips land on bytes LMDB reads)."""
    rng = random.Random(17)
    size = data.stat().st_size
    offsets = {ISSUE_OFFSET} if size >= ISSUE_OFFSET + FLIP else set()
    page = 4096
    offsets |= {p + rng.randrange(page - FLIP) for p in range(0, size, page)}
    offsets |= {rng.randrange(max(a - FLIP + 1, 0), min(b, size - FLIP)) for a, b in ranges}
    return sorted(offsets)


def _refused(name: str, result: list, clean: list) -> bool:
    """Whether a command's result is a refusal: exit 1 and one ``casstore:`` line (with
    ``--json`` the error object of kind ``corrupt_store``), or fsck's report of problems."""
    code, out, err, _ = result
    if code != 1 or "Traceback" in err:
        return False
    if name == "fsck" and not err:
        return json.loads(out)["ok"] is False
    if not (err.startswith("casstore: ") and err.count("\n") == 1):
        return False
    return not out.strip() or json.loads(out)["error"]["kind"] == "corrupt_store"


@pytest.mark.realdata
@pytest.mark.slow
def test_flipped_bytes_never_give_a_wrong_answer(real_store: Path, tmp_path: Path) -> None:
    data = real_store / "index" / "data.mdb"
    ranges = live_ranges(data)
    flipper = Flipper(real_store, tmp_path)
    try:
        clean = flipper.run(-1)
        assert isinstance(clean, dict)
        assert all(result[0] == 0 for result in clean.values()), clean
        assert json.loads(clean["ls tasksets"][1]) and json.loads(clean["ls jobs"][1])
        wrong, detected, live = [], 0, 0
        for offset in _offsets(data, ranges):
            results = flipper.run(offset)
            assert isinstance(results, dict), (offset, results)  # a crash: SIGSEGV, SIGBUS
            touched = is_live(ranges, offset, offset + FLIP)
            live += touched
            for name, result in results.items():
                same = result[0] == 0 and result[1:] == clean[name][1:]
                if not (same or _refused(name, result, clean[name])):
                    wrong.append((offset, touched, name, result))
            fsck_failed = results["fsck"][0] == 1
            detected += touched and fsck_failed
            if touched and not fsck_failed:
                wrong.append((offset, touched, "fsck passed", results["fsck"][1]))
            if not touched and any(r[0] != 0 for r in results.values()):
                wrong.append((offset, touched, "a dead byte changed an answer", results))
    finally:
        flipper.close()
    assert wrong == []
    assert live >= 60 and detected == live, (live, detected)


def _damage_database_record(store: Path, db: bytes) -> None:
    """Damage the main tree's record of the named database ``db`` (LMDB's ``MDB_db``, after
    the node's header and key): bytes 1 to 3 of its ``md_pad`` flipped. LMDB refuses to open
    it (``mdb_dbi_open: MDB_INVALID``), which is damage, not a failure to write (the issue's
    flip at offset 258,003 of a real store: ``cannot write the index``, exit 1)."""
    data = store / "index" / "data.mdb"
    start, size = main_root(data)
    content = data.read_bytes()[start : start + size]
    node = struct.pack("<HHHH", 48, 0, F_SUBDATA, len(db)) + db
    assert content.count(node) == 1
    pad = content.find(node) + len(node) + 1
    with data.open("r+b") as handle:
        handle.seek(start + pad)
        handle.write(bytes(b ^ 0xFF for b in content[pad : pad + 3]))


@pytest.mark.parametrize("db", [b"tasks", b"revisions", b"jobs"])
def test_a_damaged_database_record_is_corrupt_store(tmp_path: Path, capsys, db: bytes) -> None:
    store = tmp_path / "store"
    code, _, err = store_cli(capsys, store, "publish", str(make_task(tmp_path / "src", "a")))
    assert code == 0, err
    _damage_database_record(store, db)
    index = store / "index"
    for argv in (["ls", "tasks"], ["ls", "tasksets"], ["show", "a"], ["fsck"]):
        code, report, err = store_cli(capsys, store, *argv, "--json")
        assert code == 1, argv
        assert report["error"]["kind"] == "corrupt_store", (argv, report)
        assert report["error"]["path"] == str(index / "data.mdb"), (argv, report)
        assert err.startswith(f"casstore: {index / 'data.mdb'}: the index is damaged: main DB")
        assert "named sub-DB md_pad" in err and err.count("\n") == 1, (argv, err)


def _damage_key(store: Path, key: bytes) -> None:
    """Change the last byte of ``key`` where LMDB reads it (a live page of data.mdb): a
    lookup of ``key`` then finds nothing and LMDB reports no error (the issue's flip at
    offset 20,306 of a real store: ``show cookbook`` said "no task of that name", exit 2)."""
    data = store / "index" / "data.mdb"
    content = data.read_bytes()
    ranges = live_ranges(data)
    [at] = [
        found
        for found in range(len(content))
        if content.startswith(key, found) and is_live(ranges, found, found + len(key))
    ]
    with data.open("r+b") as handle:
        handle.seek(at + len(key) - 1)
        handle.write(bytes([content[at + len(key) - 1] + 1]))


def test_a_name_damaged_in_its_key_is_not_unknown(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    for name in ("a", "b"):
        code, _, err = store_cli(capsys, store, "publish", str(make_task(tmp_path / "src", name)))
        assert code == 0, err
    assert store_cli(capsys, store, "taskset", "create", "pinned", "a")[0] == 0
    _damage_key(store, b"default/pinned")
    for argv in (["show", "pinned", "--json"], ["checkout", "pinned", str(tmp_path / "out")]):
        code, _, err = store_cli(capsys, store, *argv)
        assert code == 1, (argv, err)
        assert err == (
            "casstore: tasksets/default/pinnee: stored value does not decode: the record "
            "names default/pinned\n"
        ), argv
    assert not (tmp_path / "out").exists()
    _damage_key(store, b"default/b")
    code, _, err = store_cli(capsys, store, "show", "b")
    rule = "stored value does not decode: the record names default/b"
    assert (code, err) == (1, f"casstore: tasks/default/c: {rule}\n")


def test_a_root_page_that_lists_no_database_is_not_an_empty_store(tmp_path: Path, capsys) -> None:
    # The fresh tester's flip: the node count of the main tree's root page (the list of named
    # databases) set to none. LMDB then finds no database, and the store read as empty: `ls`
    # printed nothing with exit 0, and `gc --min-age 0` removed every archive.
    store = tmp_path / "store"
    code, _, err = store_cli(capsys, store, "publish", str(make_task(tmp_path / "src", "a")))
    assert code == 0, err
    data = store / "index" / "data.mdb"
    start, _ = main_root(data)
    with data.open("r+b") as handle:  # the page header: pgno 8, pad 2, flags 2, lower 2
        handle.seek(start + 12)
        handle.write(struct.pack("<H", 16))  # mp_lower at the header's end: no node
    archives = sorted(p for p in (store / "filesets").rglob("task_archive"))
    assert len(archives) == 1
    for argv in (["ls", "tasks"], ["ls", "jobs"], ["gc", "--min-age", "0"], ["show", "a"]):
        code, report, err = store_cli(capsys, store, *argv, "--json")
        assert code == 1, (argv, err)
        assert report["error"]["kind"] == "corrupt_store", (argv, report)
        assert err.startswith(f"casstore: {data}: the index is damaged: main DB"), (argv, err)
    code, _, err = store_cli(capsys, store, "publish", str(make_task(tmp_path / "src2", "b")))
    assert code == 1 and "the index is damaged" in err, err
    assert sorted(p for p in (store / "filesets").rglob("task_archive")) == archives


@pytest.mark.parametrize("db", ["evidence", "zstd_dicts"])
def test_a_damaged_evidence_key_is_not_an_orphan_gc_removes(
    tmp_path: Path, capsys, fixtures_dir: Path, db: str
) -> None:
    # A fresh tester's finding: a key damaged in the evidence (or dictionaries) database made
    # its value look orphaned, and `gc --min-age 0` removed what 89 trials reference, exit 0.
    import lmdb

    store = tmp_path / "store"
    job = fixtures_dir / "jobs/tb2-haiku/jobs/2026-05-10__01-23-57"
    code, _, err = store_cli(capsys, store, "import", str(job), "--name", "tb2")
    assert code == 0, err
    env = lmdb.open(str(store / "index"), max_dbs=32)
    with env.begin(write=True) as txn:  # the value moved under a key one byte off, as a flip
        handle = env.open_db(db.encode(), txn=txn)
        key, value = next(iter(txn.cursor(handle)))
        txn.delete(key, db=handle)
        txn.put(key[:-1] + bytes([key[-1] ^ 1]), value, db=handle)
    env.close()
    before = (store / "index" / "data.mdb").read_bytes()
    for argv in (["gc", "--dry-run", "--min-age", "0"], ["gc", "--min-age", "0"]):
        code, report, err = store_cli(capsys, store, *argv, "--json")
        assert code == 1, (argv, err)
        assert report["error"]["kind"] == "corrupt_store", (argv, report)
        assert "a damaged key: its bytes are sha256:" in err, err
    assert (store / "index" / "data.mdb").read_bytes() == before


@pytest.mark.parametrize("at", [16, 18, 12, 14])
def test_a_damaged_pointer_of_the_main_root_page_ends_no_process(tmp_path: Path, at: int) -> None:
    # A fresh tester's finding: a node pointer of the main tree's root page flipped made LMDB
    # read outside the page, and every command, fsck included, died of SIGBUS (exit 135).
    store = tmp_path / "store"
    assert _cli(store, "publish", str(make_task(tmp_path / "src", "a"))).returncode == 0
    data = store / "index" / "data.mdb"
    start, _ = main_root(data)
    with data.open("r+b") as handle:
        handle.seek(start + at)
        pair = handle.read(2)
        handle.seek(start + at)
        handle.write(bytes(b ^ 0xFF for b in pair))
    for argv in (["ls", "tasks"], ["fsck"], ["gc", "--min-age", "0"], ["show", "a"]):
        done = _cli(store, *argv)
        assert done.returncode == 1, (argv, done.returncode, done.stderr)
        assert done.stderr.startswith(f"casstore: {data}: the index is damaged: main DB root")
        assert done.stderr.count("\n") == 1, done.stderr
