"""Parallel transfers: many requests at once on one event loop (obstore's async client),
each reported to a :class:`~casstore.progress.Progress` as it ends.

The first failure cancels the transfers still running and is raised; what finished stays
done (objects are written whole or not at all, so a later run moves only what is missing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from casstore.progress import NO_PROGRESS, Progress

__all__ = ["PARALLEL", "run_parallel"]

PARALLEL = 32
"""Requests in flight at once."""


def run_parallel[T](
    work: Sequence[tuple[str, Callable[[], Awaitable[T]]]],
    progress: Progress = NO_PROGRESS,
    parallel: int = PARALLEL,
) -> list[T]:
    """Run every ``(label, start)`` of ``work`` (``start()`` gives the awaitable), at most
    ``parallel`` at once; their results in ``work``'s order. ``progress``: ``start(len)``,
    then ``advance(label)`` as each ends."""
    progress.start(len(work))
    if not work:
        return []
    return asyncio.run(_run(work, progress, parallel))


async def _run[T](
    work: Sequence[tuple[str, Callable[[], Awaitable[T]]]], progress: Progress, parallel: int
) -> list[T]:
    # The threads of asyncio.to_thread wait on the disk (fsync) or the network: as many as
    # the transfers in flight, not the default executor's few (cores + 4).
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(parallel))
    gate = asyncio.Semaphore(parallel)

    async def one(label: str, start: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            result = await start()
        progress.advance(label)
        return result

    tasks = [asyncio.ensure_future(one(label, start)) for label, start in work]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
