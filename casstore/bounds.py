"""The checks shared by every bounded number casstore is given, and how a number is shown.

Each bound itself lives where its value is consumed (``scoring._options`` for rescore's
``--k``, ``--threshold`` and ``--metric-timeout``, :mod:`casstore.store.gc` for
``--min-age``, :class:`casstore.archive.limits.Limits` for ``--limit``); what they share is
here: a number must be finite (NaN, ±∞ and an integer beyond a float's range are not: a
``UsageError`` naming the option as the command spells it, for the Python API too), and a
refused value is shown in at most :data:`SHOWN_CHARACTERS` characters (``--k`` with 5,000
digits prints one short line).
"""

from __future__ import annotations

import math
import re

from casstore.errors import UsageError

__all__ = ["SHOWN_CHARACTERS", "decimal", "finite", "shown"]

SHOWN_CHARACTERS = 40
"""The most characters of a refused value a message shows (longer ones end with ``…``)."""


def shown(value: object) -> str:
    """``value`` as a message shows it: a float as ``%g`` (``3e+06``, ``nan``), anything else
    as ``str``, cut to :data:`SHOWN_CHARACTERS` characters."""
    try:
        text = f"{value:g}" if isinstance(value, float) else str(value)
    except ValueError:  # an int of more than 4,300 digits has no str
        text = "an integer of more than 4300 digits"
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return text[: SHOWN_CHARACTERS - 1] + "…"


def finite(option: str, value: float) -> float:
    """``value`` as a float; :class:`UsageError` ``<option>: must be a finite number, not
    <value>`` for NaN, ±∞ or an integer too large for a float."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise UsageError(option, f"must be a finite number, not {shown(value)}")
    return number


_DECIMAL = re.compile(
    r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I
)


def decimal(option: str, text: str | float) -> float:
    """``text`` (an option's value as typed) as a float, written as a decimal number in ASCII
    (``1.5``, ``2e3``; ``inf`` and ``nan`` too, for the caller's bound to refuse by name):
    UsageError naming ``option`` otherwise. ``float`` alone takes ``1_000`` and other scripts'
    digits (``٣``), which ``--k`` and ``--limit`` refuse: one syntax for every number. A
    number (an option's default) is taken as it is."""
    if isinstance(text, int | float):  # a default value, not typed
        return float(text)
    if not _DECIMAL.fullmatch(text.strip(" \t")):  # str.strip() takes U+00A0, U+3000 too
        raise UsageError(option, f"not a decimal number (ASCII digits): {shown(text)}")
    return float(text)
