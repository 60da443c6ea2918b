"""``--help`` without the two rich modules typer's help never uses (README, "Start-up").

typer draws help with ``typer.rich_utils``, which imports ``rich.markdown`` (markdown-it) and
``rich.traceback`` (pygments) at its top for two features casstore does not use: Markdown help
(``rich_markup_mode="markdown"``) and pretty tracebacks (``pretty_exceptions_enable=False``).
Those imports are half of the time ``casstore --help`` takes. :func:`prepare_help` imports
``typer.rich_utils`` with a stand-in for each of the two modules, then removes the stand-ins:
the help is byte for byte the same (tests/test_startup.py), and anything that later imports
``rich.markdown`` or ``rich.traceback`` gets the real module. The two names typer keeps from
them (``Markdown``, ``Traceback``) load the real class if typer ever uses them. If typer
changes what it imports, the stand-ins are dropped and ``typer.rich_utils`` is imported as is.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any

__all__ = ["prepare_help", "shows_help", "tidy_help"]

_UNUSED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}
_GROUPS = frozenset({"taskset", "verifier"})


def shows_help(args: list[str]) -> bool:
    """Whether ``casstore args`` prints help: ``--help`` or ``-h`` anywhere, no arguments at
    all, or a command group alone (``casstore verifier``)."""
    return not args or "--help" in args or "-h" in args or (len(args) == 1 and args[0] in _GROUPS)


def tidy_help(command: Any) -> None:
    """Make the help of ``command`` (a built typer group) read well: a flag shows no value
    type (typer writes ``<bool>`` beside every flag, which takes no value), and each paragraph
    of a command's text is one paragraph, rewrapped to the terminal (typer keeps the line
    breaks of the docstring, which then break sentences in the middle). A paragraph starting
    with ``\\b`` keeps its lines, as in click."""
    from cli.coerce import parameters

    for param in parameters(command):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in _commands(command):
        if sub.help:
            sub.help = "\n\n".join(
                part if part.startswith("\b") else " ".join(part.split())
                for part in inspect.cleandoc(sub.help).split("\n\n")
            )


def _commands(command: Any) -> Any:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _commands(sub)


class _Deferred(type):
    """The type of a stand-in class: calling it or reading an attribute loads the real one."""

    _module: str
    _name: str

    def _real(cls) -> Any:
        return getattr(importlib.import_module(cls._module), cls._name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(cls._real(), name)


def prepare_help() -> None:
    """Import ``typer.rich_utils`` with stand-ins for ``rich.markdown`` and
    ``rich.traceback`` (module docstring); nothing when it is already imported."""
    if "typer.rich_utils" in sys.modules:
        return
    installed: dict[str, types.ModuleType] = {}
    for module, name in _UNUSED.items():
        if module not in sys.modules:
            stand_in = types.ModuleType(module, "a stand-in (cli.help)")
            setattr(stand_in, name, _Deferred(name, (), {"_module": module, "_name": name}))
            sys.modules[module] = installed[module] = stand_in
    try:
        importlib.import_module("typer.rich_utils")
    except ImportError:  # typer now needs more of them: import it with the real modules
        sys.modules.pop("typer.rich_utils", None)
        _remove(installed)
        importlib.import_module("typer.rich_utils")
    finally:
        _remove(installed)


def _remove(installed: dict[str, types.ModuleType]) -> None:
    """Take the stand-ins out of ``sys.modules`` (and of their package, if put there)."""
    for module, stand_in in list(installed.items()):
        if sys.modules.get(module) is stand_in:
            del sys.modules[module]
        parent, _, child = module.rpartition(".")
        if getattr(sys.modules.get(parent), child, None) is stand_in:
            delattr(sys.modules[parent], child)
        del installed[module]
