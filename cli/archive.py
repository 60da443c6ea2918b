"""``casstore pack``, ``verify`` and ``extract``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the archive commands to ``app``."""
