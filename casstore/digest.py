"""Digests: typed ``sha256:<hex>`` / ``blake3:<hex>`` values and streaming hashers.

An archive's *address* is the SHA-256 of its compressed bytes; a task's *content digest* is
the BLAKE3 of its canonical uncompressed tar stream. Both are written ``<algorithm>:<64
lowercase hex digits>``; anything else is refused.

Where a command looks a stored digest up (a revision after ``NAME#``, ``show DIGEST``, a job
id), a unique prefix of it will do, as in git (:class:`DigestPrefix`): at least
:data:`MIN_PREFIX` hex digits, after ``sha256:``/``blake3:`` or bare where the algorithm is
known. Human output prints :func:`short` digests (:data:`SHORT_HEX` hex digits, a prefix
that can be typed back); ``--json`` and ``--long`` print them whole.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal, Protocol

import blake3

from casstore.errors import UsageError

__all__ = [
    "MIN_PREFIX",
    "PREFIX_RULE",
    "SHORT_HEX",
    "Algorithm",
    "Digest",
    "DigestPrefix",
    "Hasher",
    "new_hasher",
    "short",
]

Algorithm = Literal["sha256", "blake3"]
_FORM = re.compile(r"(sha256|blake3):([0-9a-f]{64})")
_HEX = re.compile(r"[0-9a-f]{64}")
_PREFIX_FORM = re.compile(r"(?:(sha256|blake3):)?([0-9a-f]*)")
_IN_TEXT = re.compile(r"\b((?:sha256|blake3):[0-9a-f]{%d})[0-9a-f]{%d}\b")
_HEX_IN_PATH = re.compile(r"(?<=/)([0-9a-f]{%d})[0-9a-f]{%d}(?=/)")

MIN_PREFIX = 8
"""The fewest hex digits a digest prefix may have (32 bits: git's default is 7)."""
SHORT_HEX = 12
"""Hex digits of a digest in human output (:func:`short`): 48 bits, so that two digests of
one store share them only past ~16 million revisions (birthday bound), and a line of ``ls``
or ``publish`` fits 100 columns."""
PREFIX_RULE = (
    f"a digest prefix is at least {MIN_PREFIX} lowercase hex digits, "
    "after an optional sha256: or blake3:"
)


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
        if match is None and _is_prefix(text):
            raise UsageError(
                None,
                f"{text!r} is a digest prefix; the full digest is needed here: "
                "sha256:<64 lowercase hex digits> or blake3:<64 lowercase hex digits>",
            )
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


@dataclass(frozen=True, slots=True)
class DigestPrefix:
    """A digest, or the start of one, as a user types it to look a stored digest up:
    ``algorithm`` (None: not given) and ``hex``, 8 to 64 lowercase hex digits."""

    algorithm: Algorithm | None
    hex: str

    @classmethod
    def parse(cls, text: str, algorithm: Algorithm | None = None) -> DigestPrefix:
        """Parse ``[sha256:|blake3:]<8 to 64 lowercase hex digits>``; ``algorithm``, when
        given, is the only one accepted, and a bare prefix is of it.

        Raises :class:`UsageError` (naming ``text``) for fewer than :data:`MIN_PREFIX` hex
        digits (saying :data:`PREFIX_RULE`), any other character, or another algorithm.
        """
        match = _PREFIX_FORM.fullmatch(text)
        if match is None or not 0 < len(match.group(2)) <= 64:
            raise UsageError(text, f"not a digest or digest prefix ({PREFIX_RULE})")
        given, digits = match.group(1), match.group(2)
        if len(digits) < MIN_PREFIX:
            raise UsageError(text, f"too short ({PREFIX_RULE})")
        if algorithm is not None and given not in (None, algorithm):
            raise UsageError(text, f"not a {algorithm}: digest")
        return cls(given or algorithm, digits)  # type: ignore[arg-type]

    @staticmethod
    def looks_like(text: str) -> bool:
        """Whether ``text`` is written as a digest prefix would be (an algorithm, or hex
        digits only), whatever its length: what :meth:`parse` should judge."""
        match = _PREFIX_FORM.fullmatch(text)
        return match is not None and bool(match.group(1) or match.group(2))

    @property
    def complete(self) -> bool:
        """Whether this is a whole digest (64 hex digits and an algorithm)."""
        return self.algorithm is not None and len(self.hex) == 64

    def keys(self) -> list[str]:
        """The starts of the keys it matches: ``<algorithm>:<hex>``, or both algorithms'
        when none was given."""
        algorithms = [self.algorithm] if self.algorithm else ["blake3", "sha256"]
        return [f"{algorithm}:{self.hex}" for algorithm in algorithms]

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}" if self.algorithm else self.hex


def _is_prefix(text: str) -> bool:
    """Whether ``text`` is ``<algorithm>:`` and 1 to 63 lowercase hex digits."""
    match = _PREFIX_FORM.fullmatch(text)
    return match is not None and bool(match.group(1)) and 0 < len(match.group(2)) < 64


def short(text: str | Digest, length: int = SHORT_HEX) -> str:
    """``text`` with every whole digest in it cut to ``length`` hex digits
    (``sha256:0d95ce9b87ae``: a prefix that can be typed back), and a 64-hex path component
    (an archive reference's ``…/<address hex>/task_archive``) to ``length`` followed by
    ``…`` (a path cut short is no path); anything else unchanged. The one form of human
    output (``--long`` and ``--json`` print digests whole)."""
    value = str(text)
    if "sha256:" not in value and "blake3:" not in value and "/" not in value:
        return value
    rest = 64 - length
    value = re.sub(_IN_TEXT.pattern % (length, rest), r"\1", value)
    return re.sub(_HEX_IN_PATH.pattern % (length, rest), "\\1…", value)


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
