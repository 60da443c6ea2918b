"""Read a job's chunks of trial directories, in the calling process or with forked workers.

With workers, every process (the calling one too) takes the next chunk from a shared counter.
A worker writes each parsed chunk (msgpack) to a new in-memory file and passes the file on a
socket; the calling process reads the finished ones between its own chunks (no threads, no
pickling; each file freed once read) and hands the chunks on in order (so the store appends
trial records in key order). A chunk a dead worker took is parsed by the calling process; a
worker's exception is raised in the calling process.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import socket
import struct
from collections.abc import Callable
from typing import Any

from casstore.trials.chunk import Chunk, ChunkSink, cut, decode_chunk, encode_chunk, read_chunk
from casstore.trials.evidence import Evidence

__all__ = ["PARALLEL_MIN", "default_workers", "read_all"]

PARALLEL_MIN = 4000
"""Trial directories from which a job is read by several processes (one per usable core)."""
_MESSAGE = struct.Struct("<qq")  # chunk index, length (< 0: a pickled error); with a file

_Task = tuple[str, list[str], str]  # what read_chunk reads: job directory, names, reward key


def default_workers(n: int) -> int:
    """One process per usable core for a job of at least :data:`PARALLEL_MIN` trials, else 1
    (the calling process is one of them)."""
    if n < PARALLEL_MIN:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without it
        return max(1, os.cpu_count() or 1)


def read_all(
    job_dir: str,
    names: list[str],
    reward_key: str,
    evidence: Evidence,
    workers: int,
    progress: Callable[[str], None] | None,
    sink: ChunkSink | None = None,
) -> list[Chunk]:
    """Read and parse every trial directory ``names`` of ``job_dir``, one :class:`Chunk` per
    chunk of them (:func:`~casstore.trials.chunk.cut`), each handed to ``sink`` in order as
    soon as it and those before it are parsed, ``progress`` called per trial directory. With
    ``workers`` > 1, ``workers - 1`` forked processes and the calling one share the chunks."""
    tasks = [(job_dir, names[a:b], reward_key) for a, b in cut(names)]

    def done(chunk: Chunk, i: int) -> Chunk:
        if sink is not None:
            sink.add(chunk)
        if progress is not None:
            for name in tasks[i][1]:
                progress(name)
        return chunk

    if workers <= 1 or len(tasks) < 2 or not _can_fork_workers():
        return [done(read_chunk(task, evidence), i) for i, task in enumerate(tasks)]
    return _Pool(tasks, evidence, done).run(workers - 1)


def _can_fork_workers() -> bool:
    """Whether the worker pool works here (fork, in-memory files, descriptor passing)."""
    return (
        hasattr(os, "fork")
        and hasattr(os, "memfd_create")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "SOCK_SEQPACKET")
    )


class _Pool:
    """One parallel read (see the module docstring): ``run(workers)`` returns the chunks."""

    def __init__(
        self, tasks: list[_Task], evidence: Evidence, done: Callable[[Chunk, int], Chunk]
    ) -> None:
        import multiprocessing

        self.tasks, self.evidence, self.done = tasks, evidence, done
        self.context = multiprocessing.get_context("fork")
        self.bounds = self.context.RawArray("q", [0, len(tasks)])  # [next chunk to take, end]
        self.lock = self.context.Lock()
        self.parts: list[Chunk | None] = [None] * len(tasks)
        self.delivered = 0

    def run(self, workers: int) -> list[Chunk]:
        """Parse with ``workers`` forked processes and this one; the chunks in order."""
        n, parts = len(self.tasks), self.parts
        receive, send = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        processes = []
        try:
            with send:
                for _ in range(workers):
                    args = (self.tasks, self.evidence.dictionary, self.bounds, self.lock)
                    process = self.context.Process(
                        target=_worker_main, args=(*args, send, receive), daemon=True
                    )
                    process.start()
                    processes.append(process)
            while (i := _next_chunk(self.bounds, self.lock)) is not None:
                parts[i] = read_chunk(self.tasks[i], self.evidence)
                self._collect(receive, False)
            while self.delivered < n and self._collect(receive, True):
                pass
            for i, part in enumerate(parts):  # taken by a worker that died
                if part is None:
                    parts[i] = read_chunk(self.tasks[i], self.evidence)
            self._deliver()
        finally:
            for process in processes:
                if process.is_alive() and None in parts:
                    process.terminate()
                process.join()
            receive.close()
        return [part for part in parts if part is not None]

    def _deliver(self) -> None:
        """``done`` for the chunks parsed so far that follow the delivered ones."""
        parts = self.parts
        while self.delivered < len(parts) and (part := parts[self.delivered]) is not None:
            self.done(part, self.delivered)
            self.delivered += 1

    def _collect(self, receive: socket.socket, block: bool) -> bool:
        """Take the workers' finished chunks; False once every worker has exited."""
        receive.setblocking(block)
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(receive, _MESSAGE.size, 1)
            except BlockingIOError:
                break
            if not message:
                return False
            receive.setblocking(False)
            i, length = _MESSAGE.unpack(message)
            try:
                data = os.pread(fds[0], abs(length), 0)
            finally:
                for fd in fds:
                    os.close(fd)
            if length < 0:
                raise pickle.loads(data)
            self.parts[i] = decode_chunk(data)
        self._deliver()
        return True


def _next_chunk(bounds: Any, lock: Any) -> int | None:
    """Take the next chunk index from the shared ``bounds`` ([next, end]); None when none is
    left (the calling process takes from the front as the workers do)."""
    with lock:
        i = bounds[0]
        if i >= bounds[1]:
            return None
        bounds[0] = i + 1
        return i


def _worker_main(
    tasks: list[_Task],
    dictionary: bytes | None,
    bounds: Any,
    lock: Any,
    send: socket.socket,
    receive: socket.socket,
) -> None:
    """A worker process: parse the next chunk until none is left, each written (msgpack) to
    an in-memory file passed on ``send``; an exception is sent pickled. Ends with
    ``os._exit`` (nothing inherited from the parent is flushed or finalized). The calling
    process's end is closed here: if that process dies, sending fails and the worker ends."""
    receive.close()
    _end_with_parent()
    gc.disable()
    evidence = Evidence(dictionary)
    while (i := _next_chunk(bounds, lock)) is not None:
        try:
            data = encode_chunk(read_chunk(tasks[i], evidence))
            length = len(data)
        except BaseException as error:  # sent to the calling process
            data = _pickled(error)
            length = -len(data)
        fd = os.memfd_create("casstore-import-chunk", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            socket.send_fds(send, [_MESSAGE.pack(i, length)], [fd])
        except OSError:  # the calling process is gone: nothing to report to
            os._exit(1)
        finally:
            os.close(fd)
        if length < 0:
            break
    os._exit(0)


def _end_with_parent() -> None:
    """Have the kernel kill this worker when the calling process dies (Linux
    ``PR_SET_PDEATHSIG``), so no worker outlives an interrupted import."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # died before the request: end now
        os._exit(1)


def _pickled(error: BaseException) -> bytes:
    """``error`` pickled, or a RuntimeError with its traceback when it cannot be."""
    try:
        return pickle.dumps(error)
    except Exception:  # whatever made it unpicklable
        import traceback

        text = "".join(traceback.format_exception(error))
        return pickle.dumps(RuntimeError(f"import worker failed:\n{text}"))
