"""The validation cache: Harbor's verdict on task.toml bytes it accepted, kept on disk so that
a later process needs no Harbor import for the same bytes (README, "The validation cache").

Harbor's ``TaskConfig`` stays the judge (:func:`casstore.archive.layout.parse_task_config`),
but importing it costs about a quarter of a second; the task layout needs only two of its
answers (:class:`TaskFacts`). An entry is one small JSON file,
``<cache dir>/task-config/<key>.json``, its key the SHA-256 of the task.toml bytes and the
installed Harbor and pydantic versions (read from their ``.dist-info`` folders, without
importing either). Only an acceptance is stored, never a refusal. An entry is trusted only
when it is a regular file of this user, holds the very key it is filed under and its own
checksum matches: anything else (a damaged, truncated, foreign or planted file) is a miss,
and the next acceptance rewrites it. Writers write a temporary file and rename it, so
concurrent writers and readers only ever see whole entries. Any error of the cache itself is
silently a miss: the cache never makes a command fail.

The cache folder: ``$CASSTORE_CACHE_DIR`` when set (``""`` disables the cache), else
``$XDG_CACHE_HOME/casstore``, else ``~/.cache/casstore``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from casstore.inputs import read_if_regular

__all__ = [
    "CACHE_ENV",
    "TaskFacts",
    "cache_dir",
    "entry_path",
    "judge_versions",
    "lookup",
    "remember",
]

CACHE_ENV = "CASSTORE_CACHE_DIR"
FORMAT = 1
"""The entry format: a change of what an entry holds bumps it (older entries then miss)."""
_FOLDER = "task-config"
_MAX_ENTRY_BYTES = 4 << 20  # task.toml is at most max_config_bytes (1 MiB by default)


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What the task layout needs of Harbor's ``TaskConfig``: ``name`` (``config.task.name``,
    None when task.toml has no ``[task]``) and ``steps`` (``config.steps`` names, in order;
    empty for a one-step task)."""

    name: str | None
    steps: tuple[str, ...]


def cache_dir() -> Path | None:
    """The cache folder (module docstring); None when the cache is disabled or no home."""
    override = os.environ.get(CACHE_ENV)
    if override is not None:
        return Path(override) if override else None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG rule: a relative value is ignored
        return Path(xdg, "casstore")
    try:
        return Path.home() / ".cache" / "casstore"
    except RuntimeError:  # no HOME and no passwd entry
        return None


def judge_versions() -> str | None:
    """``harbor <version>; pydantic <version>``, the judge of task.toml as installed; None
    when either is not found as exactly one ``.dist-info`` beside its package (an editable or
    unusual install: then nothing is cached)."""
    global _VERSIONS
    if _VERSIONS is _UNKNOWN:
        versions = [_installed_version(name) for name in ("harbor", "pydantic")]
        _VERSIONS = None if None in versions else f"harbor {versions[0]}; pydantic {versions[1]}"
    return _VERSIONS


_UNKNOWN = "?"
_VERSIONS: str | None = _UNKNOWN


def _installed_version(package: str) -> str | None:
    """The ``Version`` of the one ``<package>-*.dist-info`` in the folder ``package`` is
    imported from (``importlib.metadata`` would cost more than the cache saves)."""
    import importlib.util  # light; only a cache lookup needs it

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.dirname(next(iter(spec.submodule_search_locations)))
    try:
        found = [
            name
            for name in os.listdir(folder)
            if name.startswith(f"{package}-") and name.endswith(".dist-info")
        ]
        if len(found) != 1:
            return None
        with open(os.path.join(folder, found[0], "METADATA"), "rb") as handle:
            head = handle.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return None
    fields = dict(line.partition(": ")[::2] for line in head.split("\n\n", 1)[0].splitlines())
    if fields.get("Name", "").lower() != package or not fields.get("Version"):
        return None
    return fields["Version"].strip()


def _key(text: bytes, versions: str) -> tuple[str, dict[str, object]]:
    """The file stem and the fields every entry for ``text`` under ``versions`` must hold."""
    toml = "sha256:" + hashlib.sha256(text).hexdigest()
    fields: dict[str, object] = {"format": FORMAT, "task_toml": toml, "versions": versions}
    stem = hashlib.sha256(_canonical(fields)).hexdigest()
    return stem, fields


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_path(text: bytes) -> Path | None:
    """Where the entry for task.toml bytes ``text`` is filed (None: cache disabled)."""
    folder, versions = cache_dir(), judge_versions()
    if folder is None or versions is None:
        return None
    return folder / _FOLDER / f"{_key(text, versions)[0]}.json"


def lookup(text: bytes) -> TaskFacts | None:
    """Harbor's accepted facts for task.toml bytes ``text``, or None (a miss: no entry, the
    cache disabled, or an entry that is not exactly right)."""
    path, versions = entry_path(text), judge_versions()
    if path is None or versions is None:
        return None
    try:
        data = read_if_regular(path, _trusted)
    except OSError:
        return None
    return None if data is None else _facts(data, _key(text, versions)[1])


def _trusted(info: os.stat_result) -> bool:
    """An entry is this user's file, of an entry's size."""
    return info.st_uid == os.geteuid() and info.st_size <= _MAX_ENTRY_BYTES


def _facts(data: bytes, expected: dict[str, object]) -> TaskFacts | None:
    """The facts of an entry's bytes when it holds ``expected`` and its checksum matches."""
    try:
        document = json.loads(data)
    except ValueError:
        return None
    if not isinstance(document, dict) or set(document) != {"check", "entry"}:
        return None
    entry = document["entry"]
    if not isinstance(entry, dict) or set(entry) != {*expected, "name", "steps"}:
        return None
    if any(entry[field] != value for field, value in expected.items()):
        return None  # filed under this key, but another task.toml's or judge's
    if document["check"] != hashlib.sha256(_canonical(entry)).hexdigest():
        return None
    name, steps = entry["name"], entry["steps"]
    if not (name is None or isinstance(name, str)) or not isinstance(steps, list):
        return None
    if not all(isinstance(step, str) for step in steps):
        return None
    return TaskFacts(name, tuple(steps))


def remember(text: bytes, facts: TaskFacts) -> None:
    """File Harbor's acceptance of ``text`` (call it only after Harbor accepted the bytes):
    a temporary file renamed over the entry; any failure leaves no temporary file and is
    ignored."""
    path, versions = entry_path(text), judge_versions()
    if path is None or versions is None:
        return
    entry = _key(text, versions)[1] | {"name": facts.name, "steps": list(facts.steps)}
    data = _canonical({"check": hashlib.sha256(_canonical(entry)).hexdigest(), "entry": entry})
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError:
        pass
    finally:
        if os.path.lexists(temporary):
            with contextlib.suppress(OSError):
                os.unlink(temporary)
