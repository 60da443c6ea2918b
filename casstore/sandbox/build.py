"""Carry out a Dockerfile's steps in a started sandbox (``casstore.sandbox.dockerfile`` reads
them): ``WORKDIR`` directories, ``COPY``/``ADD`` of build-context files (with ``--chown`` and
``--chmod``), ``RUN`` as the user and in the directory and environment of its line, then the
``ENTRYPOINT`` in the background (with ``sleep infinity`` as its arguments).

Files are copied with the sandbox's own upload (resolved inside the sandbox); a source must
stay inside the build context, a destination outside the read-only host trees. A failing
step raises SandboxError naming ``Dockerfile:<line>``.
"""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path
from typing import Protocol

from harbor.environments.base import ExecResult

from casstore.errors import SandboxError
from casstore.sandbox.accounts import Account
from casstore.sandbox.dockerfile import Recipe, Step
from casstore.sandbox.root import READ_ONLY, inside

__all__ = ["Builder", "follow_recipe"]


class Builder(Protocol):
    """What following a recipe needs of the environment."""

    async def upload_file(self, source_path: Path | str, target_path: str) -> None: ...

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None: ...

    async def account(self, user: str | int | None) -> Account: ...

    async def as_root(self, command: str, where: str) -> ExecResult: ...

    async def run_step(self, step: Step) -> ExecResult: ...


async def follow_recipe(
    builder: Builder, recipe: Recipe, dockerfile: Path, *, run: bool, binds: list[str]
) -> list[str]:
    """Carry out ``recipe`` (from ``dockerfile``); RUN steps only when ``run``. A WORKDIR
    is made here only inside a read-only tree or one of the ``binds`` (the others were made
    with the root). Returns the ``Dockerfile:<line>`` of each RUN skipped."""
    skipped = []
    for step in recipe.steps:
        where = f"{dockerfile}:{step.line}"
        try:
            if step.kind == "workdir":
                if inside(step.args[0], READ_ONLY) or inside(step.args[0], binds):
                    await builder.as_root(f"mkdir -p -- {shlex.quote(step.args[0])}", where)
            elif step.kind == "copy":
                await _copy(builder, step, dockerfile.parent, where)
            elif run:
                result = await builder.run_step(step)
                if result.return_code != 0:
                    tail = (result.stdout or "").strip()[-400:]
                    rule = f"RUN exited with {result.return_code}: {tail}"
                    raise SandboxError(where, rule + " (dockerfile_run='skip' skips RUN)")
            else:
                skipped.append(where)
        except SandboxError as error:
            if error.path == where:
                raise
            raise SandboxError(where, str(error)) from None
    if recipe.entrypoint is not None:
        await builder.run_step(_background(recipe.entrypoint))
    return skipped


def _background(step: Step) -> Step:
    """The ENTRYPOINT run detached with ``sleep infinity`` as its arguments, its output in
    ``/tmp/entrypoint.log``."""
    command = shlex.join([*step.args, "sleep", "infinity"])
    line = f"setsid {command} > /tmp/entrypoint.log 2>&1 < /dev/null &"
    return Step("run", ("/bin/sh", "-c", line), step.line, step.workdir, step.user, step.env)


def _sources(context: Path, patterns: list[str], where: str) -> list[Path]:
    """The build-context paths the COPY sources name (globs allowed)."""
    sources: list[Path] = []
    for pattern in patterns:
        relative = pattern.lstrip("/")
        matches = sorted(context.glob(relative)) if relative.strip("./") else [context]
        if not matches:
            raise SandboxError(where, f"COPY source {pattern} not found in the build context")
        for match in matches:
            if not match.resolve().is_relative_to(context):
                raise SandboxError(where, f"COPY source {pattern} leaves the build context")
        sources += matches
    return sources


async def _copy(builder: Builder, step: Step, context: Path, where: str) -> None:
    *patterns, dest = step.args
    sources = _sources(context.resolve(), patterns, where)
    into_dir = dest.endswith("/") or len(sources) > 1
    dest = posixpath.normpath(posixpath.join(step.workdir, dest))
    if inside(dest, READ_ONLY):
        raise SandboxError(where, f"COPY into {dest}, inside a read-only host tree")
    for source in sources:
        if source.is_dir():
            target = dest
            await builder.upload_dir(source, target)
        else:
            target = posixpath.join(dest, source.name) if into_dir else dest
            await builder.upload_file(source, target)
        await _own(builder, step, target, where)


async def _own(builder: Builder, step: Step, target: str, where: str) -> None:
    quoted = shlex.quote(target)
    if step.chown:
        user, _, group = step.chown.partition(":")
        account = await builder.account(user)
        gid = (await builder.account(group)).gid if group else account.gid
        await builder.as_root(f"chown -R {account.uid}:{gid} -- {quoted}", where)
    if step.chmod is not None:
        await builder.as_root(f"chmod -R {step.chmod:o} -- {quoted}", where)
