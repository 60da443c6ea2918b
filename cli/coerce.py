"""typer's conversion of option and argument values, without pydantic for the plain cases
(README, "Start-up").

typer (>= 0.25) converts every value of the command being run through a pydantic
``TypeAdapter`` built for its parameter: importing pydantic and building the adapters costs
more than everything else ``casstore verify`` does on a small archive. For the values
casstore's commands take, the adapter's answer is known without it: a ``str`` stays itself,
a ``Path`` is ``Path(text)`` (then typer's own path checks, :func:`coerce_cli_path`), a
choice is typer's own :func:`coerce_cli_choice`, a list is its items converted one by one.
:func:`light_coercion` gives each parameter of a built command a converter that does exactly
that for those cases and hands every other value (a number, a bool given as text, a choice
that fails, any type it does not know) to typer's own pydantic converter, so that results and
error messages stay typer's (tests/test_startup.py compares both on every parameter). If typer
changes the internals this relies on, nothing is replaced and typer converts as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

try:  # the internals of typer's conversion (typer >= 0.25)
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path
    from typer.core import _TyperParameter
except ImportError:  # pragma: no cover - another typer: it converts as it always did
    RuntimeParam = None  # type: ignore[assignment,misc]

__all__ = ["LightParam", "light_coercion", "parameters"]

_UNCONVERTED = object()


def parameters(command: Any, parent: Any = None) -> Iterator[Any]:
    """Every parameter of ``command`` and of its subcommands, depth first, each command's
    ``--help`` option included (made now, as parsing would make it)."""
    from typer._click import Context

    ctx = Context(command, parent=parent, **(command.context_settings or {}))
    yield from command.get_params(ctx)
    for sub in getattr(command, "commands", {}).values():
        yield from parameters(sub, ctx)


def light_coercion(command: Any) -> int:
    """Give every parameter of ``command`` (a built typer group) the :class:`LightParam` of
    its type; returns how many (0 when typer's internals are not the expected ones)."""
    if RuntimeParam is None:
        return 0
    count = 0
    for param in parameters(command):
        descriptor = getattr(param, "type_descriptor", None)
        unset = getattr(param, "_runtime_param", _UNCONVERTED) is None
        if isinstance(param, _TyperParameter) and isinstance(descriptor, TypeDescriptor) and unset:
            param._runtime_param = LightParam(
                descriptor.parameter_info, descriptor.annotation, descriptor
            )
            count += 1
    return count


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class LightParam(RuntimeParam):
        """typer's converter for one parameter, without pydantic where the answer is
        known (module docstring); ``descriptor`` builds typer's own for the rest."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            converted = _convert(self.annotation, self.descriptor, value, param, ctx)
            if converted is _UNCONVERTED:
                real = build_runtime_param(self.descriptor)
                return real._coerce_value(value, param=param, ctx=ctx)
            return converted

    def _convert(annotation: Any, descriptor: Any, value: Any, param: Any, ctx: Any) -> Any:
        """``value`` converted as typer's adapter would, or ``_UNCONVERTED``."""
        info = descriptor.parameter_info
        if info.parser is not None or descriptor.file_annotation is not None:
            return _UNCONVERTED
        if get_origin(annotation) is list:
            (item_type,) = get_args(annotation) or (Any,)
            if not isinstance(value, list | tuple):
                return _UNCONVERTED
            items = [_convert(item_type, descriptor, item, param, ctx) for item in value]
            return _UNCONVERTED if _UNCONVERTED in items else items
        if annotation is str:
            return value if type(value) is str else _UNCONVERTED
        if annotation is Path and info.path_type is None:
            if type(value) is str:
                value = Path(value)
            if not isinstance(value, Path):
                return _UNCONVERTED
            return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)
        choices = _choices(annotation)
        if choices is not None and isinstance(value, str | Enum):
            try:
                return coerce_cli_choice(
                    value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx
                )
            except ValueError:  # typer's message comes with typer's own converter
                return _UNCONVERTED
        return _UNCONVERTED

    def _choices(annotation: Any) -> tuple[Any, ...] | None:
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            return tuple(annotation)
        if get_origin(annotation) is Literal:
            return get_args(annotation)
        return None

else:  # pragma: no cover

    class LightParam:  # type: ignore[no-redef]
        """Unused: this typer has no pydantic converters to replace."""
