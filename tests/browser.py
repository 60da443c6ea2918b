"""Headless Chromium for the report tests: the DOM after load, the console, a screenshot.

Chromium (Debian's ``chromium``, installed by ``.ci/run``) runs as root here, hence
``--no-sandbox``; each run gets its own profile folder. The console is read from Chromium's
own log (``--enable-logging=stderr --v=0``: one ``INFO:CONSOLE`` line per message, whatever
its level), the screenshot decoded by :func:`read_png` (zlib and struct: no imaging package).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

__all__ = ["chromium", "console_messages", "dump_dom", "read_png", "screenshot"]

_CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?[:\]].*?\"(.*)\", source:")


def chromium() -> str:
    """The Chromium binary; a failure (never a skip) when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed (apt-get install chromium; .ci/run does)")
    return found


def _run(url: str, profile: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *flags,
        url,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)


def dump_dom(page: Path, profile: Path) -> tuple[str, str]:
    """(the DOM after the page loaded, Chromium's log)."""
    done = _run(page.resolve().as_uri(), profile, "--dump-dom")
    return done.stdout, done.stderr


def screenshot(
    page: Path, out: Path, profile: Path, size: tuple[int, int] = (1000, 1600), hash: str = ""
) -> tuple[np.ndarray, str]:
    """(the screenshot as uint8[height, width, channels], Chromium's log)."""
    flags = (f"--window-size={size[0]},{size[1]}", f"--screenshot={out}")
    done = _run(page.resolve().as_uri() + hash, profile, *flags)
    return read_png(out.read_bytes()), done.stderr


def console_messages(log: str) -> list[str]:
    """The console messages in a Chromium log (errors, warnings and logs alike)."""
    return _CONSOLE.findall(log)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def read_png(data: bytes) -> np.ndarray:
    """Decode an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, [], b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    rows = raw.reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), dtype=np.uint8)
    previous = np.zeros(width * bpp, dtype=np.uint8)
    for y in range(height):
        kind, line = int(rows[y, 0]), rows[y, 1:]
        if kind == 0:
            current = line.copy()
        elif kind == 2:
            current = line + previous
        elif kind == 1:
            current = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.int64) % 256
            current = current.astype(np.uint8).reshape(-1)
        else:
            current = _unfilter_slow(kind, line, previous, bpp)
        out[y], previous = current, current
    return out.reshape(height, width, bpp)


def _unfilter_slow(kind: int, line: np.ndarray, up: np.ndarray, bpp: int) -> np.ndarray:
    """Average (3) and Paeth (4) rows, byte by byte."""
    filtered, above = line.tolist(), up.tolist()
    current = [0] * len(filtered)
    for i, value in enumerate(filtered):
        left = current[i - bpp] if i >= bpp else 0
        corner = above[i - bpp] if i >= bpp else 0
        predicted = (left + above[i]) // 2 if kind == 3 else _paeth(left, above[i], corner)
        current[i] = (value + predicted) & 0xFF
    return np.array(current, dtype=np.uint8)
