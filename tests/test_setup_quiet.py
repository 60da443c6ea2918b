"""``make demo`` sets up quietly: one line per set-up step, a step's own output (pip's and uv's
warnings, progress, the list of packages) shown only when it fails, and then in full."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT, without_bytecode
from tests.test_startup import COMPILED

SETUP_TARGETS = ("$(UV):", "$(VENV)/.runtime:", "$(VENV)/.synced:", "$(VENV)/.compiled:")
QUIET_COMMANDS = re.compile(r"^@(echo|printf|touch) |^@\$\(QUIETLY\) ")


def recipes() -> dict[str, list[str]]:
    """The Makefile's rules: target line → its recipe lines (tab-indented), unindented."""
    rules: dict[str, list[str]] = {}
    current = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("\t") and current is not None:
            rules[current].append(line[1:])
        elif line and not line.startswith(("#", " ")) and ":" in line and "=" not in line:
            current = line
            rules[current] = []
    return rules


def test_every_setup_command_is_silent_or_held_back() -> None:
    rules = recipes()
    steps = [target for target in rules if target.startswith(SETUP_TARGETS)]
    assert len(steps) == 4
    for target in steps:
        for line in rules[target]:
            assert QUIET_COMMANDS.match(line), f"{target} prints more than its step: {line}"
        said = [line for line in rules[target] if line.startswith(("@echo", "@printf"))]
        assert len(said) <= 2 and "casstore: " in said[0]
    assert rules["demo: $(VENV)/.runtime $(VENV)/.compiled"] == ["@$(VENV)/bin/casstore demo"]


def test_quietly_shows_nothing_on_success_everything_on_failure(tmp_path: Path) -> None:
    quietly = str(ROOT / "scripts/quietly")
    script = "echo WARNING: a pip warning; echo + 108 packages; echo noise >&2"
    env = dict(os.environ, TMPDIR=str(tmp_path))  # where the held-back output goes
    done = subprocess.run([quietly, "sh", "-c", script], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    failing = script + "; echo ERROR: no matching distribution >&2; exit 3"
    done = subprocess.run([quietly, "sh", "-c", failing], capture_output=True, text=True, env=env)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "",
        "WARNING: a pip warning",
        "+ 108 packages",
        "noise",
        "ERROR: no matching distribution",
        f"casstore: set-up step failed (exit 3): sh -c {failing}",
    ]
    assert not list(tmp_path.iterdir())  # nothing left behind


@pytest.mark.slow
def test_make_demo_in_a_fresh_copy(tmp_path: Path) -> None:
    """The real thing: a copy of the repository without .tools/ and .venv/, ``make demo``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    copy = tmp_path / "casstore"
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    # as a user's shell runs it: not inside ``make test`` (a parent make's MAKELEVEL/MAKEFLAGS
    # would make this one print "make[1]: Entering directory")
    inherited = ("VIRTUAL_ENV", "PYTHON", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    done = subprocess.run(
        ["make", "demo"], cwd=copy, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "casstore: bootstrapping uv into .tools/"
    assert re.fullmatch(
        r"casstore: building \.venv/ from uv\.lock \(runtime packages\) \.\.\. \d+ packages",
        lines[1],
    )
    assert lines[2] == "casstore: compiling the modules casstore loads to bytecode ... done"
    assert lines[3].startswith("casstore demo in casstore-demo (")
    # the runtime packages and the project's own run from bytecode (the Makefile's steps)
    assert without_bytecode(copy / ".venv/bin/python", COMPILED, env, copy) == []
    again = subprocess.run(["make", "demo"], cwd=copy, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.startswith("casstore demo in")
