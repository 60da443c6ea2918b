"""An example Harbor task that casstore writes itself (for the demo and the tests).

The task exercises what real suites hold: executable scripts, a multi-step layout (optional),
an in-tree symbolic link, an empty directory and a dotfile. Every file and directory is given
its mode explicitly (files 0644 or 0755, directories 0755), so the archives, and the addresses
the README prints, are the same under any umask.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DIRECTORY_MODE", "EXAMPLE_TASKS", "write_example_suite", "write_example_task"]

DIRECTORY_MODE = 0o755
"""The mode of every directory of an example task (``mkdir`` alone would take the umask's)."""

EXAMPLE_TASKS: dict[str, str] = {
    "hello-greeter": "Write `/app/greet.sh` that prints `hello, <name>`.\n",
    "count-words": "Write `/app/count.sh` that prints how many words `/app/input.txt` holds.\n",
    "fix-permissions": "Make every script under `/app/bin` executable, and nothing else.\n",
}
"""The example suite: task name → instruction. The first one is a multi-step task."""

_TASK_TOML = """\
schema_version = "1.1"

[metadata]
difficulty = "easy"
category = "programming"
tags = ["casstore", "example"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 600.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
"""

_STEPS_TOML = """
[[steps]]
name = "scaffold"

[[steps]]
name = "implement"
"""

_FILES: dict[str, tuple[str, int]] = {
    "instruction.md": ("Write `/app/greet.sh` that prints `hello, <name>`.\n", 0o644),
    "environment/Dockerfile": ("FROM ubuntu:24.04\nWORKDIR /app\n", 0o644),
    "solution/solve.sh": (
        "#!/bin/bash\nprintf '#!/bin/sh\\necho \"hello, $1\"\\n' > /app/greet.sh\n"
        "chmod +x /app/greet.sh\n",
        0o755,
    ),
    "tests/test.sh": (
        '#!/bin/bash\nmkdir -p /logs/verifier\nif [ "$(/app/greet.sh casstore)" = '
        '"hello, casstore" ]; then echo 1 > /logs/verifier/reward.txt; '
        "else echo 0 > /logs/verifier/reward.txt; fi\n",
        0o755,
    ),
    "tests/.expected": ("hello, casstore\n", 0o644),
}


def write_example_task(
    dest: Path, name: str = "hello-greeter", steps: bool = False, instruction: str | None = None
) -> Path:
    """Write the example task as ``dest/name`` (replacing files of a previous run) and return
    its path. With ``steps``, the task has two steps under ``steps/<name>/``; ``instruction``
    replaces the default instruction.md text. Modes: each file's own, every directory
    :data:`DIRECTORY_MODE`, whatever the umask."""
    task = dest / name
    files = dict(_FILES)
    if instruction is not None:
        files["instruction.md"] = (instruction, 0o644)
    files["task.toml"] = (_TASK_TOML + (_STEPS_TOML if steps else ""), 0o644)
    if steps:
        for step in ("scaffold", "implement"):
            files[f"steps/{step}/instruction.md"] = (f"Step {step}: see the root task.\n", 0o644)
    for relative, (text, mode) in files.items():
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    (task / "tests/fixtures-empty").mkdir(exist_ok=True)
    link = task / "tests/expected-output"
    if not link.is_symlink():
        os.symlink(".expected", link)
    for directory, _, _ in os.walk(task):  # a walk never follows the link
        os.chmod(directory, DIRECTORY_MODE)
    return task


def write_example_suite(dest: Path) -> Path:
    """Write the example dataset ``dest`` (one directory per task of :data:`EXAMPLE_TASKS`,
    the first multi-step) and return it."""
    for index, (name, instruction) in enumerate(EXAMPLE_TASKS.items()):
        write_example_task(dest, name, steps=index == 0, instruction=instruction)
    return dest
