"""The launcher: Harbor in a child process of its own process group, and its outcome.

:func:`launch` starts ``python -m casstore.run.child`` (:mod:`casstore.run.child`) in a new
session (its own process group, no controlling terminal: a Ctrl-C reaches ``casstore run``
only), hands it the ``JobConfig`` on stdin, the secrets in its environment only, its output
in ``<job dir>/launcher.log``, and waits. SIGINT, SIGTERM or SIGHUP to ``casstore run`` while
it waits: SIGINT to Harbor (its trials are cancelled and record it), then SIGKILL to the
whole group after ``grace`` seconds (at once on a second signal); when Harbor has ended,
whatever is left of its group is killed too. The outcome goes to ``launcher_result.json`` in
the job directory (``exit_status``, ``signal``, ``outcome``: completed, failed or cancelled,
``forced``, ``started_at``, ``finished_at``, ``pid``); a cancellation also writes
``cancelled.json`` (``signal``, ``requested_at``, ``forced``, ``grace_seconds``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import msgspec

__all__ = ["CANCELLED_NAME", "RESULT_NAME", "LaunchOutcome", "launch"]

RESULT_NAME = "launcher_result.json"
CANCELLED_NAME = "cancelled.json"
LOG_NAME = "launcher.log"
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_POLL = 0.05


@dataclass
class LaunchOutcome:
    """What became of one launch (the fields of ``launcher_result.json``)."""

    pid: int
    started_at: str
    finished_at: str
    exit_status: int | None
    signal: str | None
    outcome: str
    forced: bool = False

    def to_json(self) -> dict[str, object]:
        """The fields as a JSON object."""
        return asdict(self)


@dataclass
class _Interrupt:
    """The signals received while Harbor runs."""

    received: list[int]
    at: str | None = None


def launch(
    config_json: bytes,
    job_dir: Path,
    secrets: Mapping[str, str],
    python_path: Path | None = None,
    grace: float = 30.0,
    inherit_fds: tuple[int, ...] = (),
) -> LaunchOutcome:
    """Run Harbor on ``config_json`` (a JobConfig) for ``job_dir`` (module docstring).
    ``secrets`` join the child's environment only; ``python_path`` (``--agent-dir``) is put
    first on its ``PYTHONPATH``; ``inherit_fds`` stay open in the child (the job lock).
    Returns the outcome, written to ``launcher_result.json``."""
    job_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **secrets)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(python_path), *filter(None, [env.get("PYTHONPATH")])]
        )
    started = _now()
    interrupt = _Interrupt([])
    with open(job_dir / LOG_NAME, "ab") as log, _forwarding(interrupt):
        child = subprocess.Popen(
            [sys.executable, "-m", "casstore.run.child"],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            pass_fds=inherit_fds,
        )
        assert child.stdin is not None
        try:
            child.stdin.write(config_json)
            child.stdin.close()
        except BrokenPipeError:
            pass
        forced = _wait(child, interrupt, grace)
    outcome = _outcome(child, interrupt, started, forced)
    _write_json(job_dir / RESULT_NAME, outcome.to_json())
    if interrupt.received:
        cancelled = {
            "signal": signal.Signals(interrupt.received[0]).name,
            "requested_at": interrupt.at,
            "forced": forced,
            "grace_seconds": grace,
        }
        _write_json(job_dir / CANCELLED_NAME, cancelled)
    return outcome


@contextmanager
def _forwarding(interrupt: _Interrupt) -> Iterator[None]:
    """While the block runs, SIGINT/SIGTERM/SIGHUP are recorded in ``interrupt`` instead of
    unwinding this process; the previous handlers come back afterwards."""

    def record(signum: int, frame: FrameType | None) -> None:
        interrupt.received.append(signum)
        interrupt.at = interrupt.at or _now()

    previous = {signum: signal.signal(signum, record) for signum in _SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _wait(child: subprocess.Popen[bytes], interrupt: _Interrupt, grace: float) -> bool:
    """Wait for Harbor to end; on an interrupt, stop it as the module docstring says. Returns
    whether the group had to be killed. Whatever is left of the group is killed at the end."""
    asked_at: float | None = None
    forced = False
    while child.poll() is None:
        if interrupt.received and asked_at is None:
            asked_at = time.monotonic()
            _signal_process(child.pid, signal.SIGINT)
        if asked_at is not None and (
            len(interrupt.received) > 1 or time.monotonic() - asked_at > grace
        ):
            forced = True
            _kill_group(child.pid)
            child.wait()
            break
        time.sleep(_POLL)
    _kill_group(child.pid)
    return forced


def _signal_process(pid: int, signum: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signum)


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group ``pgid`` (none left: nothing to do)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _outcome(
    child: subprocess.Popen[bytes], interrupt: _Interrupt, started: str, forced: bool
) -> LaunchOutcome:
    """The launch's outcome from the child's return code and the signals received."""
    code = child.returncode
    status, killed = (code, None) if code >= 0 else (None, signal.Signals(-code).name)
    outcome = "completed" if code == 0 else "failed"
    if interrupt.received:
        outcome = "cancelled"
    return LaunchOutcome(child.pid, started, _now(), status, killed, outcome, forced)


def _write_json(path: Path, value: object) -> None:
    """Write ``value`` as JSON to ``path`` through a temporary file renamed over it."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_bytes(msgspec.json.format(msgspec.json.encode(value)) + b"\n")
    os.replace(temporary, path)


def _now() -> str:
    return datetime.now(UTC).isoformat()
