"""Digests: typed ``sha256:<hex>`` / ``blake3:<hex>`` values and streaming hashers.

An archive's *address* is the SHA-256 of its compressed bytes; a task's *content digest* is
the BLAKE3 of its canonical uncompressed tar stream. Both are written ``<algorithm>:<64
lowercase hex digits>``; anything else is refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal, Protocol

import blake3

from casstore.errors import UsageError

__all__ = ["Algorithm", "Digest", "Hasher", "new_hasher"]

Algorithm = Literal["sha256", "blake3"]
_FORM = re.compile(r"(sha256|blake3):([0-9a-f]{64})")
_HEX = re.compile(r"[0-9a-f]{64}")


class Hasher(Protocol):
    """What :func:`new_hasher` returns: ``update(bytes-like)`` then ``digest()``."""

    def update(self, data: bytes | bytearray | memoryview, /) -> object: ...

    def digest(self) -> Digest: ...


@dataclass(frozen=True, slots=True)
class Digest:
    """One digest: ``algorithm`` (``"sha256"`` or ``"blake3"``) and 64 lowercase hex ``hex``."""

    algorithm: Algorithm
    hex: str

    def __post_init__(self) -> None:
        if not _FORM.fullmatch(f"{self.algorithm}:{self.hex}"):
            raise UsageError(None, f"{self.algorithm}:{self.hex!r} is not a sha256:/blake3: digest")

    @classmethod
    def parse(cls, text: str, algorithm: Algorithm | None = None) -> Digest:
        """Parse ``"sha256:<64 hex>"`` or ``"blake3:<64 hex>"``.

        Raises :class:`UsageError` for any other form (upper-case hex, wrong length, unknown
        algorithm) or when ``algorithm`` is given and differs.
        """
        match = _FORM.fullmatch(text)
        if match is None:
            raise UsageError(
                None,
                f"{text!r} is not a digest: expected sha256:<64 lowercase hex digits> "
                "or blake3:<64 lowercase hex digits>",
            )
        if algorithm is not None and match.group(1) != algorithm:
            raise UsageError(None, f"{text!r} is not a {algorithm}: digest")
        return cls(match.group(1), match.group(2))  # type: ignore[arg-type]

    @classmethod
    def of(cls, data: bytes | bytearray | memoryview, algorithm: Algorithm = "sha256") -> Digest:
        """The digest of ``data`` (bytes-like) with ``algorithm``."""
        hasher = new_hasher(algorithm)
        hasher.update(data)
        return hasher.digest()

    @staticmethod
    def is_hex(text: str) -> bool:
        """Whether ``text`` is a digest's hex part: 64 lowercase hex digits."""
        return _HEX.fullmatch(text) is not None

    @staticmethod
    def is_digest(text: str, algorithm: Algorithm = "sha256") -> bool:
        """Whether ``text`` is ``<algorithm>:<64 lowercase hex digits>`` (what :meth:`parse`
        accepts, without building a :class:`Digest`: cheap enough for a check per trial)."""
        prefix = algorithm + ":"
        return text.startswith(prefix) and _HEX.fullmatch(text, len(prefix)) is not None

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}"


class _Hasher:
    __slots__ = ("_algorithm", "_state")

    def __init__(self, algorithm: Algorithm) -> None:
        self._algorithm = algorithm
        self._state = hashlib.sha256() if algorithm == "sha256" else blake3.blake3()

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._state.update(data)

    def digest(self) -> Digest:
        return Digest(self._algorithm, self._state.hexdigest())


def new_hasher(algorithm: Algorithm) -> Hasher:
    """A streaming hasher for ``algorithm``; ``digest()`` gives a :class:`Digest`."""
    return _Hasher(algorithm)
