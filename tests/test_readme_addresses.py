"""The addresses the README prints are the ones a reader gets, under any umask.

The README's example commands run here as printed (in a scratch folder where ``casstore
demo`` wrote its suite, with ``casstore`` on ``PATH``), each in a shell under umask 022 and
then 077, and their output must be the README's, line by line: a line ``…`` stands for any
lines, a ``…`` inside a line for the rest of a digest. The store examples publish the real
fixtures with ``--modes git`` from a copy written as a checkout under that umask."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent
UMASKS = (0o022, 0o077)


def examples(section: str) -> list[tuple[str, list[str]]]:
    """The ``$ command`` lines of the README section whose heading starts with ``section``,
    each with the output lines printed under it (up to the next command or the block's end;
    ``$ echo $?`` is a command too)."""
    start = README.index("\n### " + section)
    text = README[start + 1 : README.find("\n### ", start + 1)]
    found: list[tuple[str, list[str]]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line.startswith("$ "):
            found.append((line[2:], []))
        elif inside and found and line:
            found[-1][1].append(line)
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``, a line ``…`` standing for any lines (none too) and a
    ``…`` inside a line for any hex digits."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "…":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    pattern = re.escape(head).replace("…", "[0-9a-f]*")
    return (
        bool(actual) and re.fullmatch(pattern, actual[0]) is not None and matches(rest, actual[1:])
    )


def shell(command: str, cwd: Path, umask: int) -> tuple[int, list[str]]:
    """``command`` in ``sh`` under ``umask`` in ``cwd``: its exit status and its lines,
    stderr's after stdout's."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", COLUMNS="100")
    done = subprocess.run(
        ["sh", "-c", f"umask {umask:03o}; {command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, [line for line in (done.stdout + done.stderr).splitlines() if line]


def run_examples(
    commands: list[tuple[str, list[str]]], cwd: Path, umask: int, rewrite: dict[str, str]
) -> None:
    """Run each command (``rewrite``'s paths replaced) and compare its output."""
    last = 0
    for command, expected in commands:
        if command == "echo $?":
            assert expected == [str(last)]
            continue
        for old, new in rewrite.items():
            command = command.replace(old, new)
        last, lines = shell(command, cwd, umask)
        assert matches(expected, lines), f"umask {umask:03o}: {command}\n" + "\n".join(lines)


@pytest.mark.parametrize("umask", UMASKS)
def test_demo_and_archive_examples(tmp_path: Path, umask: int) -> None:
    code, lines = shell("casstore demo --json", tmp_path, umask)
    demo = json.loads("\n".join(lines))
    table = README[README.index("$ casstore demo\n") : README.index("store: casstore-demo")]
    results = "".join(re.findall(r"│[^│\n]*│ ([^│\n]*?) *│", table))  # folded cells joined
    assert code == 0 and demo["archive"]["address"] in results
    assert f"{demo['taskset']['id']}#{demo['taskset']['revision']}" in results
    commands = [
        (command, expected)
        for section in ("`casstore pack", "`casstore verify", "`casstore extract")
        for command, expected in examples(section)
        if "|" not in command and "PIPESTATUS" not in command  # jq, on files not made here
    ]
    assert len(commands) >= 8
    run_examples(commands, tmp_path, umask, {})


_CHECKOUT = """
import os, stat, sys
umask, source, dest = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.umask(umask)
for here, dirs, files in os.walk(source):
    target = os.path.join(dest, os.path.relpath(here, source))
    os.makedirs(target, exist_ok=True)
    for name in dirs + files:
        path, new = os.path.join(here, name), os.path.join(target, name)
        if os.path.islink(path):
            os.symlink(os.readlink(path), new)
        elif os.path.isfile(path):
            with open(path, "rb") as src, open(new, "wb") as out:
                out.write(src.read())
            if os.stat(path).st_mode & stat.S_IXUSR:
                os.chmod(new, 0o777 & ~umask)
"""


def checkout(source: Path, dest: Path, umask: int) -> None:
    """A copy of ``source`` at ``dest`` written as git checks a tree out under ``umask``:
    new files and directories, the owner's execute bit the only mode carried over."""
    subprocess.run(
        [sys.executable, "-c", _CHECKOUT, str(umask), str(source), str(dest)], check=True
    )


@pytest.mark.realdata
@pytest.mark.parametrize("umask", UMASKS)
def test_store_examples_with_git_modes(tmp_path: Path, umask: int, fixtures_dir: Path) -> None:
    tasks = tmp_path / "shared/fixtures/tasks"
    checkout(fixtures_dir / "tasks", tasks, umask)
    cwd = tmp_path / "repo"
    cwd.mkdir()
    modes = {
        stat.S_IMODE(os.stat(tasks / "harbor-cookbook/simple-task" / p).st_mode)
        for p in ("", "task.toml")
    }
    assert modes == ({0o755, 0o644} if umask == 0o022 else {0o700, 0o600})
    publish = [
        (command, expected)
        for command, expected in examples("Store: publish")
        if "publish ../shared/fixtures" in command and expected[0].split()[0] != "repaired"
    ]  # a repair needs a damaged archive first
    assert len(publish) == 4
    run_examples(publish, cwd, umask, {"/tmp/readme-store": str(tmp_path / "store")})
