"""Names of a package loaded from their modules on first use (a module ``__getattr__``, PEP
562), so that importing the package costs nothing more (README, "Start-up")."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["DeferredMethod", "load_name"]


def load_name(namespace: dict[str, Any], homes: Mapping[str, str], name: str) -> Any:
    """``name`` imported from its module ``homes[name]`` and kept in ``namespace`` (the
    package's globals: the next use is a plain lookup); AttributeError, naming the package,
    for a name ``homes`` does not know."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = namespace[name] = getattr(importlib.import_module(home), name)
    return value


class DeferredMethod:
    """A function of another module, taking the instance first, bound as a method and
    imported on first use: in a class body, ``publish = DeferredMethod("casstore.store.publish",
    "publish")``. The first lookup puts the function itself on the class (later lookups are
    plain methods, with its signature and docstring)."""

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name, self._attribute = module, name, name

    def __set_name__(self, owner: type, attribute: str) -> None:
        self._attribute = attribute

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        function = getattr(importlib.import_module(self._module), self._name)
        if owner is not None:
            setattr(owner, self._attribute, function)
        return function if instance is None else function.__get__(instance, owner)
