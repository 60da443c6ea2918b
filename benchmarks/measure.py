"""How every benchmark times a function: ``benchmark.pedantic`` with the page cache synced
before each round, and the load other processes put on the machine meanwhile recorded
(``extra_info["other_load"]``, read by :mod:`benchmarks.report`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

__all__ = ["cpu_seconds", "measure"]


def measure(benchmark, target: Callable, rounds: int, args=(), setup=None, **kwargs):
    """``benchmark.pedantic`` with an ``os.sync()`` before every round, outside the timing.

    Without it a round pays for the data earlier rounds or tests left dirty in the page cache
    (the baselines never fsync; ext4's journal commit behind our fsync can write it out), so
    a measurement would depend on what ran before it.
    """

    def synced_setup():
        if not benchmark.disabled:  # a smoke run does not measure; sync can take a while
            os.sync()
        return setup() if setup is not None else (args, {})

    before = cpu_seconds()
    result = benchmark.pedantic(target, rounds=rounds, iterations=1, setup=synced_setup, **kwargs)
    after = cpu_seconds()
    wall, others = after[0] - before[0], (after[1] - before[1]) - (after[2] - before[2])
    if wall > 0:  # clock-tick rounding can make a quiet machine's figure slightly negative
        benchmark.extra_info["other_load"] = round(max(others, 0.0) / wall, 2)
    return result


def cpu_seconds() -> tuple[float, float, float]:
    """(monotonic time, CPU seconds all processes were busy per /proc/stat, CPU seconds of
    this process and its waited-for children): their deltas tell how much of the machine
    other processes took during a measurement (``extra_info["other_load"]``, in cores)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:9]]
    except OSError:
        return time.monotonic(), 0.0, 0.0
    busy = sum(ticks[0:3]) + sum(ticks[5:8])  # user nice system, irq softirq steal
    own = os.times()
    mine = own.user + own.system + own.children_user + own.children_system
    return time.monotonic(), busy / os.sysconf("SC_CLK_TCK"), mine
