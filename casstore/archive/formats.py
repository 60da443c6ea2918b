"""The compressions an archive may have, and the file name of each (README, §2 Packager).

No codec is imported here: the command line reads these names when it starts (the codecs
are in :mod:`casstore.archive.compress`, loaded only by the commands that pack or read).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["COMPRESSIONS", "SUFFIXES", "Compression"]

Compression = Literal["gzip", "zstd", "none"]
COMPRESSIONS: tuple[Compression, ...] = ("gzip", "zstd", "none")
SUFFIXES: dict[Compression, str] = {"gzip": ".tar.gz", "zstd": ".tar.zst", "none": ".tar"}
"""The file name ending of an archive of each compression (``casstore pack DIR... -o OUTDIR``)."""
