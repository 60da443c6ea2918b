"""The Harbor process of ``casstore run``: ``python -m casstore.run.child`` reads a JSON
``JobConfig`` on stdin and runs Harbor's own ``Job`` with it (``await Job.create(config)``,
then ``run()``), nothing else.

Exit status: 0 when the job ran to its end, 130 when an interrupt (SIGINT, which Harbor's
trials meet as a cancellation and record) ended it, 1 when Harbor raised (its traceback on
stderr, which the launcher keeps in the job's ``launcher.log``).
"""

from __future__ import annotations

import asyncio
import sys

__all__ = ["main"]


def main() -> int:
    """Run the job read on stdin; the exit status of the module docstring."""
    from harbor.job import Job
    from harbor.models.job.config import JobConfig

    config = JobConfig.model_validate_json(sys.stdin.buffer.read())

    async def run() -> None:
        job = await Job.create(config)
        await job.run()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
