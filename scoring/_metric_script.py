"""Custom ``metric.py`` scripts, run the way Harbor's ``UvScript`` metric runs them.

The rewards (one per attempt Harbor would hold, in trial order) are written to a temporary
``rewards.jsonl``: one JSON object per line, or ``null`` for an attempt without a verifier
result. The script is run as Harbor runs it, ``uv run SCRIPT -i rewards.jsonl -o metric.json``
(so PEP 723 ``# /// script`` dependencies resolve as under Harbor), when a ``uv`` is found
(:func:`find_uv`), otherwise as ``python SCRIPT -i … -o …`` with the current interpreter.
``uv`` runs with ``UV_PYTHON_DOWNLOADS=never`` and ``UV_NO_PROGRESS=1``. The script must exit 0
and leave a JSON object in ``metric.json``; its value is the metric (e.g.
``{"mean": 0.81, "pass_rate": 0.5}``).

Which ``uv`` (:func:`find_uv`), first match wins:

1. ``CASSTORE_UV`` when set: a path or a command name (an empty value means "never uv": use
   the current interpreter); naming nothing executable is a :class:`UsageError`;
2. ``uv`` on ``PATH``;
3. the project's bootstrap copy, ``<repo>/.tools/bin/uv`` next to the installed ``casstore``
   package, when it exists.

Differences from Harbor, on purpose: a timeout (default 60 s; the whole process group is killed)
and one-line errors: :class:`~scoring._errors.MetricScriptError` says
``<script>: metric script failed (exit N): <last non-empty stderr line>`` and keeps the
script's whole stderr in its ``stderr`` attribute.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from casstore.errors import UsageError
from scoring._defaults import DEFAULT_METRIC_TIMEOUT
from scoring._errors import MetricScriptError
from scoring._options import check_metric_script, check_metric_timeout

__all__ = ["DEFAULT_METRIC_TIMEOUT", "UV_ENV", "find_uv", "metric_command", "run_metric_script"]

UV_ENV = "CASSTORE_UV"
_UV_SETTINGS = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def _bootstrap_uv() -> Path:
    """``<repo>/.tools/bin/uv``: the repository holding the installed ``scoring`` package
    (beside ``casstore``)."""
    return Path(__file__).resolve().parent.parent / ".tools" / "bin" / "uv"


def find_uv() -> str | None:
    """The ``uv`` to run metric scripts with, or None (see the module docstring)."""
    override = os.environ.get(UV_ENV)
    if override is not None:
        if not override.strip():
            return None
        found = shutil.which(override)
        if found is None:
            raise UsageError(override, f"{UV_ENV} names no executable uv")
        return found
    found = shutil.which("uv")
    if found is not None:
        return found
    bootstrap = _bootstrap_uv()
    if bootstrap.is_file() and os.access(bootstrap, os.X_OK):
        return str(bootstrap)
    return None


def _command(
    script: Path, input_path: Path, output_path: Path
) -> tuple[list[str], dict[str, str] | None]:
    """``(argv, environment)``: uv gets :data:`_UV_SETTINGS`; the interpreter inherits ours."""
    tail = [str(script), "-i", str(input_path), "-o", str(output_path)]
    uv = find_uv()
    if uv is None:
        return [sys.executable, *tail], None
    return [uv, "run", *tail], {**os.environ, **_UV_SETTINGS}


def metric_command(script: Path, input_path: Path, output_path: Path) -> list[str]:
    """The command line: ``uv run`` when a uv is found (:func:`find_uv`), else the current
    interpreter."""
    return _command(script, input_path, output_path)[0]


def _last_line(text: str, limit: int = 500) -> str:
    """The last non-empty line of ``text`` (stripped, at most ``limit`` characters)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _failure(script: Path, what: str, stderr: str) -> MetricScriptError:
    """``<script>: <what>: <last stderr line>`` (no ``: …`` without stderr); ``.stderr`` holds
    the script's whole stderr."""
    last = _last_line(stderr)
    error = MetricScriptError(str(script), f"{what}: {last}" if last else what)
    error.stderr = stderr  # type: ignore[attr-defined]
    return error


def run_metric_script(
    script: Path | str,
    rewards: list[dict[str, Any] | None],
    timeout: float = DEFAULT_METRIC_TIMEOUT,
) -> dict[str, Any]:
    """Run ``script`` on ``rewards``; return the JSON object it wrote.

    Raises :class:`MetricScriptError` (one line naming the script and the last line of its
    stderr; the whole stderr in ``.stderr``) when the script exits non-zero, runs longer than
    ``timeout`` seconds, writes no JSON object or is missing; :class:`UsageError` when it is
    not a regular file (:func:`scoring._options.check_metric_script`) or when ``timeout`` is
    out of bounds (:func:`scoring._options.check_metric_timeout`).
    """
    script = Path(script)
    check_metric_timeout(timeout)
    if not os.path.lexists(script):
        raise MetricScriptError(str(script), "metric script not found")
    check_metric_script(script)
    with tempfile.TemporaryDirectory(prefix="casstore-metric-") as temp:
        input_path = Path(temp) / "rewards.jsonl"
        output_path = Path(temp) / "metric.json"
        with input_path.open("w") as handle:
            for reward in rewards:
                handle.write("null\n" if reward is None else json.dumps(reward) + "\n")
        command, environment = _command(script.resolve(), input_path, output_path)
        process = subprocess.Popen(
            command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            _, stderr = process.communicate()
            raise _failure(script, f"metric script timed out after {timeout:g} s", stderr) from None
        code = process.returncode
        if code != 0:
            status = f"killed by signal {-code}" if code < 0 else f"exit {code}"
            raise _failure(script, f"metric script failed ({status})", stderr)
        try:
            result = json.loads(output_path.read_text())
        except OSError:
            raise _failure(script, "metric script wrote nothing to -o", stderr) from None
        except ValueError as error:
            raise _failure(script, f"metric script wrote no JSON to -o ({error})", stderr) from None
    if not isinstance(result, dict):
        raise MetricScriptError(str(script), "metric script output is not a JSON object")
    return result
