"""Small helpers for a task's Python ``verify()``, vendored beside the verifier runner.

Standard library only (Python >= 3.10): the ``tests/test.sh`` shim copies this package into
the verifier sandbox under ``tests/.ng/helpers/`` and the runner puts it first on
``sys.path``, so ``from casstore_verify import ...`` works in any image.

- :func:`workspace_file` / :func:`read_text` / :func:`read_json`: files the agent left in the
  workspace, refusing paths that leave it;
- :func:`normalize_output` / :func:`same_output`: compare program output the way people read
  it (line endings and trailing whitespace do not count);
- :func:`fraction_passed`: a partial-credit reward from a set of checks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "fraction_passed",
    "normalize_output",
    "read_json",
    "read_text",
    "same_output",
    "workspace_file",
]

_MISSING: Any = object()


def workspace_file(workspace: str | os.PathLike[str], relative: str | os.PathLike[str]) -> Path:
    """The path of ``relative`` inside ``workspace``, with links resolved.

    Raises ``ValueError`` when ``relative`` is absolute or resolves (through ``..`` or a
    symbolic link) outside the workspace. The file need not exist.
    """
    if os.path.isabs(relative):
        raise ValueError(f"{relative}: expected a path relative to the workspace")
    root = Path(workspace).resolve()
    path = (root / relative).resolve()
    if path != root and root not in path.parents:
        raise ValueError(f"{relative}: resolves outside the workspace {root}")
    return path


def read_text(
    workspace: str | os.PathLike[str], relative: str | os.PathLike[str], default: Any = _MISSING
) -> Any:
    """The UTF-8 text of ``relative`` inside ``workspace``.

    Returns ``default`` when the file does not exist and a default was given; otherwise raises
    ``FileNotFoundError``. Raises ``ValueError`` for a path outside the workspace (see
    :func:`workspace_file`) and ``UnicodeDecodeError`` for a file that is not UTF-8.
    """
    path = workspace_file(workspace, relative)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if default is _MISSING:
            raise
        return default


def read_json(
    workspace: str | os.PathLike[str], relative: str | os.PathLike[str], default: Any = _MISSING
) -> Any:
    """The JSON value in ``relative`` inside ``workspace``.

    Same rules as :func:`read_text`; a file that is not valid JSON raises ``ValueError``
    (``json.JSONDecodeError``), even when a default was given.
    """
    try:
        text = read_text(workspace, relative)
    except FileNotFoundError:
        if default is _MISSING:
            raise
        return default
    return json.loads(text)


def normalize_output(text: str, *, ignore_case: bool = False) -> str:
    """``text`` with CRLF/CR turned into LF, trailing spaces of each line and trailing blank
    lines removed (and lower-cased when ``ignore_case``)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    normalized = "\n".join(line.rstrip() for line in lines).rstrip("\n")
    return normalized.casefold() if ignore_case else normalized


def same_output(actual: str, expected: str, *, ignore_case: bool = False) -> bool:
    """Whether ``actual`` and ``expected`` are equal after :func:`normalize_output`."""
    return normalize_output(actual, ignore_case=ignore_case) == normalize_output(
        expected, ignore_case=ignore_case
    )


def fraction_passed(checks: Iterable[bool] | Mapping[str, bool]) -> float:
    """The share of checks that passed, in ``[0.0, 1.0]``: a partial-credit reward.

    ``checks`` is an iterable of truth values or a mapping of check names to them (its values
    count). Raises ``ValueError`` when there are no checks: no evidence is not a score.
    """
    values = list(checks.values() if isinstance(checks, Mapping) else checks)
    if not values:
        raise ValueError("no checks: a reward needs at least one")
    return sum(1 for value in values if value) / len(values)
