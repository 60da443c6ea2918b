"""Names of a package loaded from their modules on first use (a module ``__getattr__``, PEP
562), so that importing the package costs nothing more (README, "Start-up")."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["load_name"]


def load_name(namespace: dict[str, Any], homes: Mapping[str, str], name: str) -> Any:
    """``name`` imported from its module ``homes[name]`` and kept in ``namespace`` (the
    package's globals: the next use is a plain lookup); AttributeError, naming the package,
    for a name ``homes`` does not know."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = namespace[name] = getattr(importlib.import_module(home), name)
    return value
