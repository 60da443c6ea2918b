"""Interrupted transfers against the loopback S3 server, in real subprocesses: a pull killed
half-way keeps the archives it placed and the bytes it received of the one it was receiving
(the next pull asks only for the rest, and ends byte-identical to a clean pull); SIGINT and
SIGTERM during a push or pull print one line and exit 130 / 143, a push moving no ref."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import casstore
from casstore.archive.limits import Limits
from casstore.digest import Digest
from casstore.remote import api as remote
from casstore.remote.client import Client
from casstore.remote.pull import PARTIAL_PREFIX
from tests.helpers import ROOT, make_task, python_env
from tests.remote_server import S3, s3, s3_server

__all__ = ["s3", "s3_server"]

MIB = 1 << 20
BIG = 8 * MIB

# The CLI in a subprocess, its transfers slowed (a pause after each block received, before
# each object sent, reported on stdout once sent) so that a signal lands half-way.
_SLOWED = """
import asyncio, sys, time
from casstore.remote.client import Client
delay = float(sys.argv[1])
chunks, put = Client.chunks, Client.put_new_async

def slow_chunks(self, key, result, size):
    for chunk in chunks(self, key, result, size):
        yield chunk
        time.sleep(delay)

async def slow_put(self, key, data):
    await asyncio.sleep(delay)
    done = await put(self, key, data)
    print("sent", key, flush=True)
    return done

Client.chunks, Client.put_new_async = slow_chunks, slow_put
from cli.main import main
main(sys.argv[2:])
"""


def _cli(s3: S3, delay: float, *argv: str) -> subprocess.Popen[str]:
    env = python_env() | {k: v for k, v in s3.env().items() if k.startswith("AWS_")}
    return subprocess.Popen(
        [sys.executable, "-c", _SLOWED, str(delay), *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    """Wait for ``condition`` while ``process`` runs (it must not end first)."""
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _partials(root: Path) -> list[Path]:
    return sorted(root.rglob(f"{PARTIAL_PREFIX}*"))


def _received(root: Path) -> int:
    """The bytes the partial files below ``root`` hold (0 while there is none)."""
    total = 0
    for path in _partials(root):
        with contextlib.suppress(FileNotFoundError):  # placed meanwhile
            total += path.stat().st_size
    return total


def _placed(root: Path) -> list[Path]:
    return sorted(root.rglob("task_archive"))


def _published(tmp_path: Path, s3: S3) -> casstore.Store:
    """Store ``a``: three small tasks and ``big`` (an 8 MiB file of random bytes, stored
    uncompressed), the taskset ``all`` pinning them, pushed to the prefix ``r``."""
    store = casstore.open_store(tmp_path / "a")
    remote.add_remote(store, "origin", s3.url("r"))
    for name in ("t1", "t2", "t3"):
        casstore.publish(store, make_task(tmp_path / "src", name, {"n.txt": name}))
    big = make_task(tmp_path / "src", "big")
    (big / "blob.bin").write_bytes(os.urandom(BIG))
    casstore.publish(store, big, compression="none")
    casstore.create_taskset(store, "all", ["t1", "t2", "t3", "big"])
    remote.push(store, ["all"])
    return store


def _empty(root: Path, s3: S3) -> Path:
    with casstore.open_store(root) as store:
        remote.add_remote(store, "origin", s3.url("r"))
    return root


def test_a_killed_pull_resumes_where_it_stopped(
    tmp_path: Path, s3: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _published(tmp_path, s3)
    big_key = f"filesets/{a.tasks.get('big')[1].archive_ref}"
    b = _empty(tmp_path / "b", s3)
    pull = _cli(s3, 0.2, "--store", str(b), "pull", "all")
    _until(lambda: len(_placed(b)) == 3 and _received(b) >= 3 * MIB, pull)
    pull.send_signal(signal.SIGKILL)
    pull.wait(timeout=60)
    [partial] = _partials(b)
    held = partial.stat().st_size
    assert 3 * MIB <= held < BIG

    gets: list[tuple[str, int]] = []
    received: list[int] = []
    open_async, chunks, body_async = Client.open_async, Client.chunks, Client.body_async

    async def counted_open(self: Client, key: str, offset: int = 0) -> object:
        gets.append((key, offset))
        return await open_async(self, key, offset)

    def counted_chunks(self: Client, key: str, result: object, size: int):
        for chunk in chunks(self, key, result, size):
            received.append(len(chunk))
            yield chunk

    async def counted_body(self: Client, key: str, result: object) -> bytes:
        data = await body_async(self, key, result)
        received.append(len(data))
        return data

    with monkeypatch.context() as patch, casstore.open_store(b) as store:
        patch.setattr(Client, "open_async", counted_open)
        patch.setattr(Client, "chunks", counted_chunks)
        patch.setattr(Client, "body_async", counted_body)
        report = remote.pull(store, ["all"])
        assert report.archives == 1  # the three placed before the kill are not fetched again
        assert gets == [(big_key, held)]  # only the rest of the one being received
        size = a.filesets.path_of(a.tasks.get("big")[1].archive_ref).stat().st_size
        assert sum(received) == size - held
        assert store.filesets.temporaries() == []
        resumed = {ref: path.read_bytes() for ref, path in store.filesets.archives()}
        names = store.tasks.list()
    with casstore.open_store(_empty(tmp_path / "c", s3)) as clean:
        remote.pull(clean, ["all"])
        assert {ref: path.read_bytes() for ref, path in clean.filesets.archives()} == resumed
        assert clean.tasks.list() == names
    assert len(resumed) == 4


def test_a_resumed_pull_whose_kept_bytes_are_damaged_fetches_again(tmp_path: Path, s3: S3) -> None:
    a = _published(tmp_path, s3)
    _, big = a.tasks.get("big")
    with casstore.open_store(_empty(tmp_path / "b", s3)) as store:
        folder = store.filesets.path_of(big.archive_ref).parent.parent
        folder.mkdir(parents=True)
        kept = folder / f"{PARTIAL_PREFIX}{Digest.parse(big.address).hex}"
        kept.write_bytes(b"\0" * (2 * MIB))  # not the archive's first bytes
        assert remote.pull(store, ["all"]).archives == 4
        assert store.filesets.intact(big, Limits())
        path = store.filesets.path_of(big.archive_ref)
        assert path.read_bytes() == a.filesets.path_of(big.archive_ref).read_bytes()
        assert store.filesets.temporaries() == []


INTERRUPTED = re.compile(r"casstore: interrupted: (\d+) of (\d+) (\w+ \w+); rerun to resume\n")


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_pull_says_so_and_registers_nothing(
    tmp_path: Path, s3: S3, signum: int, status: int
) -> None:
    _published(tmp_path, s3)
    b = _empty(tmp_path / "b", s3)
    pull = _cli(s3, 0.2, "--store", str(b), "pull", "all")
    _until(lambda: _received(b) >= 2 * MIB, pull)
    pull.send_signal(signum)
    _, err = pull.communicate(timeout=60)
    assert pull.returncode == status
    found = INTERRUPTED.fullmatch(err)
    assert found, err
    done, total, what = found.groups()
    assert what == "tasks fetched" and int(total) == 4 and int(done) < 4
    assert _partials(b)  # kept for the next pull
    placed = len(_placed(b))
    with casstore.open_store(b) as store:
        assert store.tasks.list() == [] and store.tasksets.list() == []
        assert remote.pull(store, ["all"]).archives == 4 - placed


def test_an_interrupted_push_says_so_and_moves_no_ref(tmp_path: Path, s3: S3) -> None:
    root = tmp_path / "a"
    with casstore.open_store(root) as store:
        remote.add_remote(store, "origin", s3.url("p"))
        names = []
        for n in range(40):
            task = make_task(tmp_path / "src", f"t{n:02d}", {"n.txt": str(n)})
            names += [p.name for p in casstore.publish(store, task)]
        casstore.create_taskset(store, "all", names)
    push = _cli(s3, 0.5, "--store", str(root), "push", "all")
    assert push.stdout is not None
    assert push.stdout.readline().startswith("sent ")  # some objects are on the remote
    push.send_signal(signal.SIGINT)
    _, err = push.communicate(timeout=60)
    assert push.returncode == 130
    found = INTERRUPTED.fullmatch(err)
    assert found, err
    done, total, what = found.groups()
    assert what == "objects sent" and int(total) == 81 and 1 <= int(done) < 81
    with casstore.open_store(root) as store:
        report = remote.fsck_remote(store)
        assert report.ok and report.refs == 0 and report.orphans
        again = remote.push(store, ["all"])
        assert again.refs[0]["moved"] and again.sent < 81
        assert remote.fsck_remote(store).orphans == []
