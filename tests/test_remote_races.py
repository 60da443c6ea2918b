"""Remotes under concurrency and interruption, against the loopback S3 server: two processes
pushing revisions of one task at once lose none, and a push killed at any moment leaves a
remote that passes fsck and a next push that completes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import casstore
from casstore.remote import api as remote
from casstore.remote.refs import read_ref
from tests.helpers import ROOT, make_task, python_env
from tests.remote_server import S3, s3, s3_server

__all__ = ["s3", "s3_server"]

REVISIONS = 50  # per process: 100 in all

_PUSHER = """
import json, sys, time
from pathlib import Path
import casstore
from casstore.remote import api
root, source, url, tag, count, go = sys.argv[1:]
store = casstore.open_store(root)
api.add_remote(store, "origin", url)
task = Path(source)
while not Path(go).exists():
    time.sleep(0.005)
pushed = []
for i in range(int(count)):
    (task / "instruction.md").write_text(f"{tag} revision {i}\\n")
    [published] = casstore.publish(store, casstore.discover_tasks(task), "t")
    report = api.push(store, ["t"])
    assert report.refs == [{"ref": "default/t", "revision": published.revision, "moved": True}]
    pushed.append(published.revision)
print(json.dumps(pushed))
"""


def _env(s3: S3) -> dict[str, str]:
    return python_env() | {k: v for k, v in s3.env().items() if k.startswith("AWS_")}


def test_two_processes_pushing_one_task_lose_no_revision(tmp_path: Path, s3: S3) -> None:
    go = tmp_path / "go"
    pushers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _PUSHER,
                str(tmp_path / f"store-{tag}"),
                str(make_task(tmp_path / f"src-{tag}", "t")),
                s3.url("race"),
                tag,
                str(REVISIONS),
                str(go),
            ],
            cwd=ROOT,
            env=_env(s3),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("left", "right")
    ]
    time.sleep(1.0)  # both started and waiting: then they run at once
    go.touch()
    outputs = [pusher.communicate(timeout=120) for pusher in pushers]
    assert [p.returncode for p in pushers] == [0, 0], [err for _, err in outputs]
    left, right = (json.loads(out) for out, _ in outputs)
    assert len(set(left) | set(right)) == 2 * REVISIONS

    with casstore.open_store(tmp_path / "reader") as store:
        remote.add_remote(store, "origin", s3.url("race"))
        client = remote.client_of(store, "origin")
        found = read_ref(client, "tasks", "default/t")
        assert found is not None
        history = [entry.digest for entry in found[0].history]
        assert sorted(history) == sorted(left + right)  # every revision, exactly once
        for pushed in (left, right):  # each in the order its pushes won
            assert [digest for digest in history if digest in set(pushed)] == pushed
        assert history[-1] in (left[-1], right[-1])
        report = remote.fsck_remote(store)
        assert report.ok and report.orphans == [] and report.revisions == 2 * REVISIONS


_KILLED_PUSHER = """
import sys
import casstore
from casstore.remote import api
from casstore.remote import push, pull, fsck, checkout  # every module a push loads, loaded now
store = casstore.open_store(sys.argv[1])
print("ready", flush=True)
api.push(store, ["all"], sys.argv[2])
"""


def _push_process(store: Path, name: str, s3: S3) -> subprocess.Popen[str]:
    """A push of the taskset ``all`` to ``name`` in a fresh interpreter, which prints
    ``ready`` once everything is imported (the kill then lands in the push itself)."""
    argv = [sys.executable, "-c", _KILLED_PUSHER, str(store), name]
    push = subprocess.Popen(
        argv, cwd=ROOT, env=_env(s3), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert push.stdout is not None and push.stdout.readline() == "ready\n"
    return push


def test_a_push_killed_at_any_moment_leaves_a_sound_remote(tmp_path: Path, s3: S3) -> None:
    root = tmp_path / "a"
    with casstore.open_store(root) as store:
        tasks = [make_task(tmp_path / "src", f"t{n:03d}", {"n.txt": str(n)}) for n in range(60)]
        names = [p.name for task in tasks for p in casstore.publish(store, task)]
        casstore.create_taskset(store, "all", names)
        for run in range(21):
            remote.add_remote(store, f"r{run}", s3.url(f"kill-{run}"))
    full = _push_process(root, "r20", s3)
    started = time.monotonic()
    assert full.wait(timeout=120) == 0, full.communicate()
    span = time.monotonic() - started  # a whole push: the kills spread over it
    outcomes = {"before": 0, "partial": 0, "after": 0}
    for run in range(20):
        push = _push_process(root, f"r{run}", s3)
        time.sleep(span * run / 20)
        push.send_signal(signal.SIGKILL)
        push.wait(timeout=60)
        with casstore.open_store(root) as store:
            report = remote.fsck_remote(store, f"r{run}")
            assert report.ok, report.problems
            kind = "after" if report.refs else ("partial" if report.orphans else "before")
            outcomes[kind] += 1
            done = remote.push(store, ["all"], f"r{run}")
            assert done.refs[0]["revision"] == store.tasksets.get("all")[1].digest
            again = remote.fsck_remote(store, f"r{run}")
            assert again.ok and again.orphans == [] and again.archives == 60
            held = len(report.orphans) + (report.revisions + report.archives if report.refs else 0)
            # only what was missing moves (a killed process's last requests may still land)
            assert done.sent <= done.objects - held
            assert remote.push(store, ["all"], f"r{run}").sent == 0
    print("killed", outcomes, f"push {span:.2f} s", file=sys.stderr)
