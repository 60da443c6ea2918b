"""Many archives in one call: verify several files, pack several task directories into a folder.

Each input is handled as alone (:func:`~casstore.archive.read.verify_archive`,
:func:`~casstore.archive.pack.pack_tree`), in the order given; one that fails does not stop
the others: its :class:`Outcome` carries the error instead of a result. What can be refused
before any work is refused then (:func:`pack_into`: two task directories whose archives would
have the same name, an output folder that cannot be made), as a
:class:`~casstore.errors.UsageError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from casstore.archive.formats import SUFFIXES, Compression
from casstore.archive.limits import Limits
from casstore.archive.modes import Modes
from casstore.archive.pack import PackResult, pack_tree
from casstore.archive.read import VerifyResult, verify_archive
from casstore.errors import CasstoreError, UsageError, failed_os_call

__all__ = [
    "Outcome",
    "archive_name",
    "archive_paths",
    "pack_into",
    "verify_each",
]


@dataclass(frozen=True, slots=True)
class Outcome[R]:
    """What became of one input: ``source`` (as given), ``archive`` (the file verified or
    written), and either ``result`` or the ``error`` that stopped it."""

    source: Path
    archive: Path
    result: R | None = None
    error: CasstoreError | None = None

    @property
    def ok(self) -> bool:
        """Whether the input passed."""
        return self.error is None

    @property
    def exit_code(self) -> int:
        """The CLI's exit status for this input alone: 0 ok, 1 a check failed, 2 bad usage."""
        return 0 if self.error is None else self.error.exit_code

    def message(self) -> str:
        """The error's one line, naming the input first (an error about an entry inside the
        input names only the entry): ``"<source>: <entry>: <rule>"``; empty when ok."""
        return "" if self.error is None else self.error.naming(str(self.source))


def verify_each(
    archives: Sequence[Path], limits: Limits | None = None
) -> Iterator[Outcome[VerifyResult]]:
    """Verify each of ``archives`` in turn, as :func:`verify_archive` without an expected
    address; yields one :class:`Outcome` per archive, in order, as each is done."""
    for archive in archives:
        yield _attempt(archive, archive, partial(verify_archive, archive, None, limits))


def archive_name(source: Path, compression: Compression) -> str:
    """The file name of ``source``'s archive in a folder: the name of its top-level directory
    (the task directory's, links resolved) and the compression's suffix, e.g.
    ``simple-task.tar.gz``. UsageError when the path names no directory name (``/``)."""
    name = Path(os.path.abspath(source)).resolve().name
    if not name:
        raise UsageError(str(source), "has no name to give its archive; pack it with -o FILE")
    return name + SUFFIXES[compression]


def archive_paths(sources: Sequence[Path], out_dir: Path, compression: Compression) -> list[Path]:
    """Where each of ``sources`` is packed in ``out_dir`` (:func:`archive_name`).
    UsageError naming the later source when two would write the same file."""
    seen: dict[str, Path] = {}
    paths = []
    for source in sources:
        name = archive_name(source, compression)
        if name in seen:
            rule = f"its archive {name} would overwrite that of {seen[name]}; pack them apart"
            raise UsageError(str(source), rule)
        seen[name] = source
        paths.append(out_dir / name)
    return paths


def pack_into(
    sources: Sequence[Path],
    out_dir: Path,
    compression: Compression = "gzip",
    limits: Limits | None = None,
    modes: Modes = "keep",
) -> Iterator[Outcome[PackResult]]:
    """Pack each task directory of ``sources`` into ``out_dir`` as :func:`archive_paths` names them,
    its modes by ``modes`` (:mod:`casstore.archive.modes`); an existing file of that name is
    replaced, as :func:`pack_tree` does. The folder is made when missing (its parent must exist; it
    may not be inside a source). The names and the folder are checked, and the folder made, before
    this returns (UsageError); the packing is done as the iterator is consumed, one :class:`Outcome`
    per source, in order."""
    outputs = archive_paths(sources, out_dir, compression)
    folder = Path(os.path.abspath(out_dir)).resolve()
    for source in sources:
        if folder.is_relative_to(Path(os.path.abspath(source)).resolve()):
            raise UsageError(str(out_dir), f"the output folder is inside the task {source}")
    _make_folder(out_dir)
    pairs = list(zip(sources, outputs, strict=True))
    return _pack_each(
        pairs, partial(pack_tree, compression=compression, limits=limits, modes=modes)
    )


def _pack_each(
    pairs: list[tuple[Path, Path]], pack: Callable[[Path, Path], PackResult]
) -> Iterator[Outcome[PackResult]]:
    for source, output in pairs:
        yield _attempt(source, output, partial(pack, source, output))


def _make_folder(folder: Path) -> None:
    """Make ``folder`` unless it is a directory already; UsageError naming it otherwise."""
    try:
        folder.mkdir(exist_ok=True)
    except FileNotFoundError:
        raise UsageError(str(folder), "the output folder's parent does not exist") from None
    except FileExistsError:
        raise UsageError(str(folder), "the output folder exists and is not a directory") from None
    except OSError as error:
        raise UsageError(str(folder), f"cannot make the output folder: {error.strerror}") from None


def _attempt[R](source: Path, archive: Path, work: Callable[[], R]) -> Outcome[R]:
    """Run ``work`` for one input: its result, or the casstore error it raised (an OSError no
    check caught as the failed check it is, naming its file, or else the input)."""
    try:
        return Outcome(source, archive, result=work())
    except CasstoreError as error:
        return Outcome(source, archive, error=error)
    except OSError as error:
        return Outcome(source, archive, error=failed_os_call(error).located(str(source)))
