"""The compressions an archive may have, and the file name of each (README, §2 Packager).

No codec is imported here: the command line reads these names when it starts (the codecs
are in :mod:`casstore.archive.compress`, loaded only by the commands that pack or read).
"""

from __future__ import annotations

import os
from typing import Literal

from casstore.errors import UsageError

__all__ = [
    "COMPRESSIONS",
    "FOREIGN",
    "NAMED",
    "SUFFIXES",
    "Compression",
    "named_compression",
    "output_compression",
]

Compression = Literal["gzip", "zstd", "none"]
COMPRESSIONS: tuple[Compression, ...] = ("gzip", "zstd", "none")
SUFFIXES: dict[Compression, str] = {"gzip": ".tar.gz", "zstd": ".tar.zst", "none": ".tar"}
"""The file name ending of an archive of each compression (``casstore pack DIR... -o OUTDIR``)."""

NAMED: tuple[tuple[str, Compression], ...] = (
    (".tar.gz", "gzip"),
    (".tgz", "gzip"),
    (".tar.zst", "zstd"),
    (".tzst", "zstd"),
    (".tar", "none"),
    (".gz", "gzip"),
    (".zst", "zstd"),
)
"""The file name endings that say a compression (``casstore pack DIR -o FILE``), any case,
the first that matches deciding."""

FOREIGN: tuple[tuple[str, str], ...] = (
    (".xz", "xz"),
    (".txz", "xz"),
    (".bz2", "bzip2"),
    (".tbz", "bzip2"),
    (".tbz2", "bzip2"),
    (".lz4", "lz4"),
    (".lzma", "lzma"),
    (".lz", "lzip"),
    (".br", "brotli"),
    (".zip", "zip"),
    (".7z", "7z"),
)
"""File name endings that say a format casstore does not write: ``-o`` refuses them (gzip bytes
under an ``.xz`` name would be a name that lies about its bytes)."""


def named_compression(path: os.PathLike[str] | str) -> tuple[str, Compression] | None:
    """The ending of ``path``'s file name that says a compression (:data:`NAMED`) and that
    compression; None when the name says none."""
    name = os.path.basename(os.fspath(path)).lower()
    for suffix, compression in NAMED:
        if name.endswith(suffix) and len(name) > len(suffix):
            return suffix, compression
    return None


def output_compression(path: os.PathLike[str] | str, asked: Compression | None) -> Compression:
    """The compression of the archive file ``path``: ``asked`` when given, else the one its
    name says (:data:`NAMED`: ``.tar.gz``/``.tgz``/``.gz`` gzip, ``.tar.zst``/``.tzst``/``.zst``
    zstd, ``.tar`` none), else gzip (the store's ``task_archive`` files have no ending).
    UsageError naming both when ``asked`` contradicts the name (an archive never carries a name
    that lies about its bytes), and when the name says a format casstore does not write
    (:data:`FOREIGN`: ``.xz``, ``.bz2``, ``.zip``, ...); a name that says none takes any
    compression."""
    name = os.path.basename(os.fspath(path)).lower()
    for suffix, format_name in FOREIGN:
        if name.endswith(suffix) and len(name) > len(suffix):
            raise UsageError(
                os.fspath(path),
                f"the name ends in {suffix} ({format_name}): casstore writes gzip (.tar.gz), "
                "zstd (.tar.zst) or none (.tar)",
            )
    named = named_compression(path)
    if asked is None:
        return named[1] if named is not None else "gzip"
    if named is not None and named[1] != asked:
        suffix, compression = named
        raise UsageError(
            os.fspath(path),
            f"the name ends in {suffix} ({compression}) but -c asks for {asked}: name the file "
            f"{SUFFIXES[asked]} or drop -c",
        )
    return asked
