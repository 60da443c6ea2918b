"""Every file casstore reads from a path it is given must be a regular file (issue 17, item
3): a FIFO, a device, a directory or a socket is refused at once, naming the path and the
rule ``not a regular file (a FIFO)``, by the CLI (exit 2, one line) and by the Python API.

A FIFO used to hang ``casstore verify`` forever: the CLI runs in a subprocess with a timeout
here, and the in-process calls under :func:`_no_hang` (an alarm that breaks a blocked open).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import casstore
from casstore.errors import TaskFormatError, UsageError
from casstore.inputs import open_regular, read_regular
from casstore.trials import read_job, read_trials_jsonl
from casstore.verifier.init import init_verifier
from scoring import load_views
from tests.helpers import make_task, run_cli
from tests.trials_builder import make_job, trial_json, trial_result

CASSTORE = Path(sys.executable).with_name("casstore")
KINDS = {
    "fifo": "a FIFO",
    "null": "a character device",
    "zero": "a character device",
    "directory": "a directory",
    "socket": "a socket",
}


@contextmanager
def _no_hang(seconds: int = 20) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block is still blocked after
    ``seconds``: the alarm interrupts a blocking open or read."""

    def alarm(signum: int, frame: object) -> None:
        raise AssertionError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path (a socket's path must fit in 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="cs-in-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _special(kind: str, path: Path) -> Path:
    """A file of ``kind`` at ``path`` (the devices as links to them: the name keeps its
    suffix, and the link is followed as a user's path is)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()  # the socket file stays
    else:
        path.symlink_to(f"/dev/{kind}")
    return path


def _job(root: Path) -> Path:
    trials = {f"t__{i}": trial_json(trial_result("t", f"t__{i}", {"reward": 1.0})) for i in (1, 2)}
    return make_job(root / "job", trials)


def _commands(root: Path, path: Path) -> dict[str, list[str]]:
    """Every command reading a file the user names, with ``path`` in that place."""
    job = str(_job(root) if not (root / "job").exists() else root / "job")
    store = ["--store", str(root / "store")]
    return {
        "verify": ["verify", str(path)],
        "extract": ["extract", str(path), str(root / "out")],
        "views": ["rescore", job, "--views", str(path)],
        "metric": ["rescore", job, "--metric", str(path)],
        "rescore": [*store, "rescore", str(path)],
        "import": [*store, "import", str(path)],
    }


SUFFIX = {"verify": ".tgz", "extract": ".tgz", "views": ".toml", "metric": ".py"}
SUFFIX |= {"rescore": ".jsonl", "import": ".jsonl"}


@pytest.mark.parametrize("command", sorted(SUFFIX))
def test_the_cli_refuses_a_fifo_at_once(short_dir: Path, command: str) -> None:
    fifo = _special("fifo", short_dir / f"input{SUFFIX[command]}")
    argv = _commands(short_dir, fifo)[command]
    done = subprocess.run(
        [str(CASSTORE), *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (2, f"casstore: {fifo}: not a regular file (a FIFO)\n")
    assert not (short_dir / "out").exists()


def _cases(names: list[str], kinds: list[str]) -> list[tuple[str, str]]:
    """Every (name, kind) but a directory given to rescore or import (a job directory)."""
    pairs = [(name, kind) for name in names for kind in kinds]
    return [(n, k) for n, k in pairs if not (k == "directory" and n in ("rescore", "import"))]


@pytest.mark.parametrize(
    ("command", "kind"), _cases(sorted(SUFFIX), ["null", "zero", "directory", "socket"])
)
def test_the_cli_refuses_devices_directories_and_sockets(
    short_dir: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    path = _special(kind, short_dir / f"input{SUFFIX[command]}")
    argv = _commands(short_dir, path)[command]
    with _no_hang():
        code, _, err = run_cli(capsys, *argv)
    assert (code, err) == (2, f"casstore: {path}: not a regular file ({KINDS[kind]})\n")
    assert not (short_dir / "out").exists()


def _api_calls(root: Path, path: Path) -> dict[str, object]:
    job = _job(root)
    store_root = root / "store"
    calls = {
        "verify": lambda: casstore.verify(path),
        "extract": lambda: casstore.extract(path, root / "out"),
        "views": lambda: casstore.rescore([job], views=path),
        "metric": lambda: casstore.rescore([job], metrics=[path]),
        "rescore": lambda: casstore.rescore([path], store=store_root),
        "load_views": lambda: load_views(path),
        "read_trials_jsonl": lambda: read_trials_jsonl(path),
        "read_regular": lambda: read_regular(path),
    }

    def import_jobs() -> object:
        with casstore.open_store(store_root) as store:
            return casstore.import_jobs(store, [path])

    calls["import"] = import_jobs
    return calls


API_CALLS = [
    *("verify", "extract", "views", "metric", "rescore", "import"),
    *("load_views", "read_trials_jsonl", "read_regular"),
]


@pytest.mark.parametrize(("call", "kind"), _cases(API_CALLS, sorted(KINDS)))
def test_the_api_refuses_special_files(short_dir: Path, call: str, kind: str) -> None:
    path = _special(kind, short_dir / "input.jsonl")
    with _no_hang(), pytest.raises(UsageError) as caught:
        _api_calls(short_dir, path)[call]()  # type: ignore[operator]
    assert str(caught.value) == f"{path}: not a regular file ({KINDS[kind]})"
    assert not (short_dir / "out").exists()


def test_the_descriptor_is_checked_not_the_path(short_dir: Path) -> None:
    """A regular file's descriptor is returned, opened non-blocking and close-on-exec; a link
    to a regular file is followed unless ``follow=False``."""
    target = short_dir / "a.txt"
    target.write_bytes(b"data")
    (short_dir / "link").symlink_to(target)
    fd = open_regular(short_dir / "link")
    try:
        assert os.get_inheritable(fd) is False
        assert os.read(fd, 10) == b"data"
    finally:
        os.close(fd)
    with pytest.raises(UsageError) as caught:
        open_regular(short_dir / "link", follow=False)
    assert str(caught.value) == f"{short_dir / 'link'}: not a regular file (a symbolic link)"
    with pytest.raises(UsageError) as caught:
        open_regular(short_dir / "missing", "cannot read views")
    assert str(caught.value) == (
        f"{short_dir / 'missing'}: cannot read views: No such file or directory"
    )


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket"])
def test_pack_and_publish_refuse_a_special_task_toml(short_dir: Path, kind: str) -> None:
    task = make_task(short_dir)
    (task / "task.toml").unlink()
    _special(kind, task / "task.toml")
    rule = "task/task.toml: a task needs a regular task.toml file"  # named inside the task
    with _no_hang():
        with pytest.raises(TaskFormatError) as caught:
            casstore.pack(task, short_dir / "out.tgz")
        assert str(caught.value) == rule
        with pytest.raises(TaskFormatError) as caught:
            casstore.discover_tasks(task)
        assert str(caught.value) == rule
    assert not (short_dir / "out.tgz").exists()


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("workers", [1, 2])
def test_a_special_trial_result_is_unreadable_naming_its_kind(
    short_dir: Path, kind: str, workers: int
) -> None:
    job_dir = _job(short_dir)
    result = job_dir / "t__2" / "result.json"
    result.unlink()
    _special(kind, result)
    with _no_hang():
        job = read_job(job_dir, workers=workers)
    assert job.n_trials == 1 and job.failure_codes == {"result_unreadable": 1}
    (unreadable,) = [d for d in job.diagnostics if d["code"] == "result_unreadable"]
    reason = f"result.json not a regular file ({KINDS[kind]})"
    assert unreadable["trials"] == [{"trial_dir": "t__2", "reason": reason}]


@pytest.mark.parametrize("where", ["tests/test.sh", "tests/verifier.py"])
def test_verifier_init_refuses_a_fifo_in_the_task(short_dir: Path, where: str) -> None:
    task = make_task(short_dir, files={"tests/verifier.py": "def verify():\n    return 1.0\n"})
    if where == "tests/verifier.py":
        (task / where).unlink()
    _special("fifo", task / where)
    with _no_hang(), pytest.raises(UsageError) as caught:
        init_verifier(task)
    assert str(caught.value) == f"{task / where}: not a regular file (a FIFO)"
    assert not (task / "tests" / ".ng").exists()


@pytest.mark.parametrize("name", ["result.json", "lock.json", "config.json"])
def test_a_special_job_file_is_never_read(short_dir: Path, name: str) -> None:
    """A job-level file that is no regular file is never opened for reading (a FIFO would
    block): the import goes on as if it were missing, the job result's absence counted."""
    trials = {f"t__{i}": trial_json(trial_result("t", f"t__{i}", {"reward": 1.0})) for i in (1, 2)}
    job_dir = make_job(short_dir / "job", trials, expected=2)
    (job_dir / name).unlink()
    os.mkfifo(job_dir / name)
    argv = [str(CASSTORE), "--store", str(short_dir / "store"), "import", str(job_dir), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    report = json.loads(done.stdout)
    missing = {"job_result_missing_partial": 1} if name == "result.json" else {}
    assert (report["trials"], report["failure_codes"]) == (2, missing)
    # said as a trial's result.json is (casstore.inputs.not_regular), never "missing"
    said = {
        "code": "job_file_unreadable",
        "file": name,
        "message": f"{name}: not a regular file (a FIFO)",
    }
    expected = [said]
    if name == "result.json":
        message = "job result.json unreadable; trial files imported"
        expected.insert(0, {"code": "job_result_missing_partial", "message": message})
    assert [d for d in report["diagnostics"] if d["code"] != "harbor_schema_drift"] == expected


def test_a_job_file_that_cannot_be_opened_is_said(short_dir: Path) -> None:
    """A job-level file there but that cannot be opened (a socket) is said by its kind; a
    missing one is no diagnostic."""
    trials = {"t__1": trial_json(trial_result("t", "t__1", {"reward": 1.0}))}
    job_dir = make_job(short_dir / "job", trials)
    (job_dir / "lock.json").unlink()
    _special("socket", job_dir / "lock.json")
    (job_dir / "config.json").unlink()
    job = read_job(job_dir, check_harbor=False)
    assert job.diagnostics == [
        {
            "code": "job_file_unreadable",
            "file": "lock.json",
            "message": "lock.json: not a regular file (a socket)",
        }
    ]
