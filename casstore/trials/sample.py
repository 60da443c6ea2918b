"""Sample a list evenly: the trials a zstd dictionary is trained on and the ones Harbor's own
models check for schema drift."""

from __future__ import annotations

__all__ = ["sample"]


def sample[T](items: list[T], n: int) -> list[T]:
    """``items`` when there are at most ``n`` of them, else ``n`` of them evenly spaced (the
    first one included), in order."""
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]
