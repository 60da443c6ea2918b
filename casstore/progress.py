"""What long operations report to: a protocol the CLI's progress bars (and tests) implement."""

from __future__ import annotations

from typing import Protocol

__all__ = ["NO_PROGRESS", "Progress"]


class Progress(Protocol):
    """``start(total)`` once, then ``advance(label)`` per item done."""

    def start(self, total: int) -> None: ...

    def advance(self, label: str) -> None: ...


class _NoProgress:
    """A :class:`Progress` that reports nowhere."""

    def start(self, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass

    def __repr__(self) -> str:
        return "NO_PROGRESS"  # as signatures show the default


NO_PROGRESS: Progress = _NoProgress()
"""The default: progress reported nowhere."""
