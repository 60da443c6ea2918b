"""Indented JSON text of a payload, the one form casstore writes for people and files
(``--json`` on stdout, a bundle's ``summary.json``, the GAGE summary).

:func:`json_text` writes with orjson; NaN and infinity become ``null`` (as orjson writes
them), and an integer beyond 64 bits (an exact Harbor Sum of huge integer rewards), which
orjson refuses, is written exactly by the standard library instead.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["json_text"]


def json_text(payload: Any) -> bytes:
    """``payload`` as indented JSON (UTF-8), ending with a newline (see the module
    docstring)."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError:
        return json.dumps(_finite(payload), indent=2, ensure_ascii=False).encode() + b"\n"


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (as orjson writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
