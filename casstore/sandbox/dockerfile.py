"""Read a task's ``environment/Dockerfile`` into the few instructions the host sandbox honours.

The sandbox has no image: the host's ``/usr`` is the base, so ``FROM`` is read and ignored
(a second ``FROM``, a multi-stage build, is refused). Honoured, in file order: ``ARG`` and
``ENV`` (with ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and ``${VAR:+alt}`` substitution),
``WORKDIR``, ``USER``, ``COPY``/``ADD`` of build-context files (``--chown``, ``--chmod``),
``RUN`` (run in the sandbox as the current user, or skipped: see ``HostEnvironment``) and
``SHELL``, and ``ENTRYPOINT`` (started at the end, in the background, with ``sleep infinity``
as its arguments: Harbor's compose file replaces ``CMD`` with that command, so an entrypoint
that starts a service and then runs its arguments behaves as under Docker). ``CMD``,
``EXPOSE``, ``LABEL``, ``MAINTAINER``, ``VOLUME``, ``STOPSIGNAL``, ``HEALTHCHECK`` and
``ONBUILD`` are ignored. Anything else, ``COPY --from``,
``ADD`` of a URL or an archive, ``RUN --mount`` and heredocs are refused with a
``SandboxError`` naming the line.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from casstore.errors import SandboxError

__all__ = ["Recipe", "Step", "read_dockerfile"]

_IGNORED = {"CMD", "EXPOSE", "LABEL", "MAINTAINER", "VOLUME", "STOPSIGNAL"}
_IGNORED |= {"HEALTHCHECK", "ONBUILD"}
_VARIABLE = re.compile(r"\\\$|\$(\w+)|\$\{(\w+)(?::([-+])([^}]*))?\}")
_ARCHIVE = re.compile(r"\.(tar|tgz|tbz2?|txz|tar\.(gz|bz2|xz|zst))$")


@dataclass(frozen=True)
class Step:
    """One instruction to carry out at start, with the state in force at its line.

    ``kind`` is ``copy``, ``run`` or ``workdir``; ``args`` the sources and destination
    (copy), the shell argv (run) or the directory (workdir)."""

    kind: str
    args: tuple[str, ...]
    line: int
    workdir: str
    user: str | None
    env: dict[str, str]
    chown: str | None = None
    chmod: int | None = None


@dataclass
class Recipe:
    """What a Dockerfile asks of the sandbox: the steps in order and the final state."""

    steps: list[Step] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str | None = None
    shell: tuple[str, ...] = ("/bin/sh", "-c")
    entrypoint: Step | None = None


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, instruction text)``: comments dropped, continuations joined."""
    found: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        found.append((start, "".join(pending)))
        pending = []
    if pending:
        found.append((start, "".join(pending)))
    return found


def substitute(text: str, variables: dict[str, str]) -> str:
    """``text`` with Docker's variable forms replaced from ``variables`` (unset: empty)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "\\$":
            return "$"
        name = match.group(1) or match.group(2)
        value = variables.get(name, "")
        if match.group(3) == "-":
            return value or match.group(4)
        if match.group(3) == "+":
            return match.group(4) if value else ""
        return value

    return _VARIABLE.sub(replace, text)


def _words(rest: str, where: str) -> list[str]:
    """The arguments of an instruction: its JSON array form or shell words."""
    if rest.startswith("["):
        try:
            value = json.loads(rest)
        except ValueError:
            value = None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
    try:
        return shlex.split(rest)
    except ValueError as error:
        raise SandboxError(where, f"cannot split the arguments: {error}") from None


def _flags(rest: str, allowed: set[str], where: str) -> tuple[dict[str, str], str]:
    """Leading ``--name=value`` flags (only ``allowed`` ones) and the rest of the text."""
    flags: dict[str, str] = {}
    rest = rest.strip()
    while rest.startswith("--"):
        word, _, rest = rest.partition(" ")
        name, _, value = word[2:].partition("=")
        if name not in allowed:
            raise SandboxError(where, f"--{name} is not supported by the host sandbox")
        flags[name] = value
        rest = rest.strip()
    return flags, rest


class _Reader:
    """The state of a Dockerfile read top to bottom."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.recipe = Recipe()
        self.variables: dict[str, str] = {}
        self.froms = 0

    def where(self, line: int) -> str:
        return f"{self.path}:{line}"

    def step(self, kind: str, args: tuple[str, ...], line: int, **extra: object) -> Step:
        recipe = self.recipe
        return Step(kind, args, line, recipe.workdir, recipe.user, dict(recipe.env), **extra)  # type: ignore[arg-type]

    def read(self, line: int, text: str) -> None:
        keyword, _, rest = text.partition(" ")
        keyword, rest, where = keyword.upper(), rest.strip(), self.where(line)
        if "<<" in rest and keyword in {"RUN", "COPY", "ADD"}:
            raise SandboxError(where, "heredocs are not supported by the host sandbox")
        handler = getattr(self, f"_on_{keyword.lower()}", None)
        if handler is not None:
            handler(line, rest)
        elif keyword not in _IGNORED:
            raise SandboxError(where, f"unknown instruction {keyword}")

    def _on_from(self, line: int, rest: str) -> None:
        self.froms += 1
        if self.froms > 1:
            raise SandboxError(self.where(line), "multi-stage builds are not supported")

    def _on_arg(self, line: int, rest: str) -> None:
        for word in _words(rest, self.where(line)):
            name, has_default, default = word.partition("=")
            if name not in self.variables:
                self.variables[name] = substitute(default, self.variables) if has_default else ""

    def _on_env(self, line: int, rest: str) -> None:
        words = _words(rest, self.where(line))
        if words and "=" not in words[0]:
            pairs = [(words[0], rest.partition(" ")[2].strip())]
        else:
            pairs = [(word.partition("=")[0], word.partition("=")[2]) for word in words]
        for name, value in pairs:
            value = substitute(value, self.variables)
            self.recipe.env[name] = self.variables[name] = value

    def _on_workdir(self, line: int, rest: str) -> None:
        target = substitute(rest, self.variables)
        self.recipe.workdir = posixpath.normpath(posixpath.join(self.recipe.workdir, target))
        self.recipe.steps.append(self.step("workdir", (self.recipe.workdir,), line))

    def _on_user(self, line: int, rest: str) -> None:
        self.recipe.user = substitute(rest, self.variables).partition(":")[0] or None

    def _on_entrypoint(self, line: int, rest: str) -> None:
        words = _words(rest, self.where(line)) if rest.startswith("[") else None
        argv = tuple(words) if words is not None else (*self.recipe.shell, rest)
        self.recipe.entrypoint = self.step("entrypoint", argv, line) if argv else None

    def _on_shell(self, line: int, rest: str) -> None:
        self.recipe.shell = tuple(_words(rest, self.where(line)))

    def _on_run(self, line: int, rest: str) -> None:
        where = self.where(line)
        if rest.startswith("--"):
            raise SandboxError(where, "RUN flags (--mount, --network) are not supported")
        words = _words(rest, where) if rest.startswith("[") else None
        argv = tuple(words) if words is not None else (*self.recipe.shell, rest)
        self.recipe.steps.append(self.step("run", argv, line))

    def _on_copy(self, line: int, rest: str, add: bool = False) -> None:
        where = self.where(line)
        flags, rest = _flags(rest, {"chown", "chmod", "link"}, where)
        words = [substitute(word, self.variables) for word in _words(rest, where)]
        if len(words) < 2:
            raise SandboxError(where, "COPY needs a source and a destination")
        for source in words[:-1]:
            if add and ("://" in source or _ARCHIVE.search(source)):
                raise SandboxError(where, f"ADD of a URL or an archive ({source})")
        chmod = flags.get("chmod")
        if chmod is not None and not re.fullmatch(r"[0-7]{3,4}", chmod):
            raise SandboxError(where, f"--chmod={chmod}: only octal modes are supported")
        step = self.step(
            "copy",
            tuple(words),
            line,
            chown=flags.get("chown") or None,
            chmod=int(chmod, 8) if chmod else None,
        )
        self.recipe.steps.append(step)

    def _on_add(self, line: int, rest: str) -> None:
        self._on_copy(line, rest, add=True)


def read_dockerfile(path: Path) -> Recipe:
    """The recipe of the Dockerfile at ``path``; SandboxError (``path:line``) for an
    instruction the host sandbox cannot honour."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SandboxError(str(path), f"cannot read the Dockerfile: {error}") from None
    reader = _Reader(path)
    for line, instruction in _logical_lines(text):
        reader.read(line, instruction)
    return reader.recipe
