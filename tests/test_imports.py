"""Every module of the project imports on its own, first (an import cycle shows only when
the cycle's other end has not been imported yet): one fresh interpreter imports each module
with every project module forgotten before it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("casstore", "scoring", "cli")

_SCRIPT = """
import importlib, sys, traceback
failed = []
for module in sys.argv[1:]:
    for name in [n for n in sys.modules if n.split(".")[0] in {packages!r}]:
        del sys.modules[name]
    try:
        importlib.import_module(module)
    except Exception as error:
        failed.append(f"{{module}}: {{type(error).__name__}}: {{error}}")
print("\\n".join(failed))
"""


def _modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


@pytest.mark.slow
def test_every_module_imports_first() -> None:
    modules = _modules()
    assert {"casstore.trials.importing", "casstore.trials.check", "cli.main"} <= set(modules)
    script = _SCRIPT.format(packages=set(PACKAGES))
    done = subprocess.run(
        [sys.executable, "-c", script, *modules], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
