"""Run one entering command: its output in a file, its process group killed on timeout.

The output goes to a file, not a pipe, so a daemon the command leaves behind (holding the
descriptors) cannot keep the call waiting; stderr joins stdout in that file, as Harbor's
Docker environment returns them. The command runs in a new session on the host: a timeout or
a cancellation kills that whole process group (what the command started and did not detach).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

__all__ = ["run_entering"]

POLL = 0.05
"""Seconds between reads of the output file while a callback streams it."""

Emit = Callable[[str, Literal["stdout", "stderr"]], Awaitable[None]]


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _stream(process: asyncio.subprocess.Process, output: Path, emit: Emit) -> None:
    """Feed ``emit`` the new text of ``output`` until the process ends."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with output.open("rb") as reader:
        while True:
            done = process.returncode is not None
            chunk = reader.read()
            if chunk:
                await emit(decoder.decode(chunk), "stdout")
            if done:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(process.wait()), timeout=POLL)


async def run_entering(
    argv: list[str],
    *,
    env: dict[str, str],
    output: Path,
    stdin: Path | None = None,
    timeout: float | None = None,
    emit: Emit | None = None,
) -> int:
    """Run ``argv`` with exactly ``env``, stdout and stderr into ``output``, stdin from the
    file ``stdin`` (else nothing); the exit status (negative: killed by that signal).
    TimeoutError after ``timeout`` seconds, the group killed first."""
    with output.open("wb") as sink, stdin.open("rb") if stdin else open(os.devnull, "rb") as source:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=source,
            stdout=sink,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        waiting = _stream(process, output, emit) if emit else process.wait()
        await asyncio.wait_for(waiting, timeout=timeout)
    except TimeoutError:
        _kill_group(process)
        await process.wait()
        raise TimeoutError(f"Command timed out after {timeout} seconds") from None
    except BaseException:
        _kill_group(process)
        await asyncio.shield(process.wait())
        raise
    return process.returncode if process.returncode is not None else await process.wait()
