"""The reward table's file format: an uncompressed ``.npz`` whose members map without copying.

:func:`write_npz` writes every column as one ``.npy`` member starting 64-byte aligned, with fixed
timestamps (the same columns give the same bytes); :func:`read_npz` maps them back as read-only
views, each member's CRC-32 checked before use: at once, or for the name columns read lazily
(:class:`Strings`), when first used. Anything not in that form (another writer's ``.npz``) is
read with :func:`numpy.load`. No pickles, either way.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import numpy as np
from isal.isal_zlib import crc32  # ISA-L's CRC-32: zlib's result at ~6x zlib's speed
from numpy.lib import format as npy_format

__all__ = ["Strings", "as_str_array", "read_npz", "stored_members", "write_npz"]


class Strings(Sequence[str]):
    """A read-only list of names backed by a NumPy unicode array (a stored table's columns).

    Loading a table does not build a million Python strings: the list is made on first element
    access (``len`` and ``np.asarray`` never make it); ``==`` compares equal to the same
    ``list``. ``verify`` (optional) runs once before the array is first used (the CRC check of
    the stored column).
    """

    __slots__ = ("_array", "_items", "_verify")

    def __init__(self, array: np.ndarray, verify: Callable[[], None] | None = None) -> None:
        self._array = array
        self._items: list[str] | None = None
        self._verify = verify

    def array(self) -> np.ndarray:
        """The backing ``<U`` array (read-only)."""
        if self._verify is not None:
            self._verify()
            self._verify = None
        return self._array

    def items(self) -> list[str]:
        """The names as a Python list (built once)."""
        if self._items is None:
            self._items = self.array().tolist()
        return self._items

    def __len__(self) -> int:
        return int(self._array.shape[0])

    def __getitem__(self, index: Any) -> Any:
        return self.items()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self.items())

    def __contains__(self, value: object) -> bool:
        return value in self.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Strings):
            other = other.items()
        if isinstance(other, list):
            return self.items() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[str]) -> list[str]:
        return self.items() + list(other)

    def __radd__(self, other: Sequence[str]) -> list[str]:
        return list(other) + self.items()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.array()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self) -> str:
        return repr(self.items())


def as_str_array(names: Sequence[str]) -> np.ndarray:
    """``names`` as a ``<U`` array (no conversion for :class:`Strings`)."""
    if isinstance(names, Strings):
        return names.array()
    return np.array(list(names), dtype=np.str_) if len(names) else np.zeros(0, np.str_)


def stored_members(data: bytes) -> dict[str, tuple[memoryview, int]] | None:
    """``{name: (bytes, crc)}`` of an uncompressed ``.npz`` without copying, or None when the
    archive is not a plain stored zip (then :func:`numpy.load` reads it)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return None
    view = memoryview(data)
    members = {}
    for info in infos:
        start = info.header_offset
        header = data[start : start + 30]
        if (
            info.compress_type != zipfile.ZIP_STORED
            or info.flag_bits & 0x1
            or len(header) < 30
            or header[:4] != b"PK\x03\x04"
            or not info.filename.endswith(".npy")
        ):
            return None
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        begin = start + 30 + name_length + extra_length
        if begin + info.compress_size > len(data):
            return None
        members[info.filename[:-4]] = (view[begin : begin + info.compress_size], info.CRC)
    return members


def _member_array(body: memoryview, crc: int, name: str) -> tuple[np.ndarray, Callable[[], None]]:
    """The array stored in one ``.npy`` member, as a read-only view of ``body``, and the
    callable that checks the member's CRC (raises ``ValueError``); the caller runs it before
    any value is used."""

    def verify() -> None:
        if crc32(body) != crc:
            raise ValueError(f"column {name}: CRC-32 mismatch (corrupt reward table)")

    stream = io.BytesIO(body[: 65536 + 64])
    version = npy_format.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = npy_format.read_array_header_1_0(stream)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = npy_format.read_array_header_2_0(stream)
    else:  # pragma: no cover - numpy writes 1.0 (2.0 for huge headers)
        raise ValueError(f"column {name}: unsupported .npy version {version}")
    if dtype.hasobject:
        raise ValueError(f"column {name}: object arrays are not allowed")
    count = 1
    for size in shape:
        count *= size
    offset = stream.tell()
    if offset + count * dtype.itemsize > len(body):
        raise ValueError(f"column {name}: truncated")
    array = np.frombuffer(body, dtype=dtype, count=count, offset=offset)
    array = array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
    if dtype.kind != "U" and not array.flags.aligned:
        array = array.copy()  # NumPy computes on unaligned data much more slowly
    return array, verify


_ALIGN = 64
_PADDING_ID = 0xD935  # the extra-field id zipalign uses for alignment padding
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def write_npz(arrays: dict[str, np.ndarray]) -> bytes:
    """An uncompressed ``.npz`` of ``arrays`` that :func:`numpy.load` reads, with each member's
    ``.npy`` data starting at a multiple of 64 bytes: the local header carries a padding extra
    field and NumPy pads the ``.npy`` header to 64 bytes. Timestamps are fixed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            npy_format.write_array(member, np.asanyarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_TIME)
            start = buffer.tell() + 30 + len(info.filename.encode()) + 4
            padding = -start % _ALIGN
            info.extra = struct.pack("<HH", _PADDING_ID, padding) + bytes(padding)
            archive.writestr(info, member.getbuffer())
    return buffer.getvalue()


def read_npz(
    data: bytes,
    names: Collection[str],
    lazy: Collection[str],
    required: Collection[str],
    optional: Collection[str],
) -> dict[str, Any]:
    """The columns of ``data`` (written by :func:`write_npz`): ``names`` (list-of-strings
    columns) as ``list[str]``, those of them in ``lazy`` as :class:`Strings` whose CRC-32 is
    checked on first use, the others as read-only arrays (views of ``data`` where aligned).
    Every other CRC-32 is checked here. A file that is not a plain stored zip, or whose
    members are not all of ``required`` and some of ``optional``, is read with
    :func:`numpy.load`.
    Raises ``ValueError`` on malformed data or a CRC-32 mismatch."""
    members = stored_members(data)
    if members is None or not set(required) <= set(members) <= {*required, *optional}:
        with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in loaded.files}
        return {name: array.tolist() if name in names else array for name, array in arrays.items()}
    columns: dict[str, Any] = {}
    eager: list[Callable[[], None]] = []
    for name, (body, crc) in members.items():
        array, verify = _member_array(body, crc, name)
        if name not in lazy:
            eager.append(verify)
        if name in names:
            if array.dtype.kind != "U" or array.ndim != 1:
                raise ValueError(f"column {name} is not a list of strings")
            columns[name] = Strings(array, verify) if name in lazy else array
        else:
            columns[name] = array
    for verify in eager:
        verify()
    for name in names:
        if name in columns and not isinstance(columns[name], Strings):
            columns[name] = columns[name].tolist()
    return columns
