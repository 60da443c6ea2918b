"""Custom ``metric.py`` scripts, run the way Harbor's ``UvScript`` metric runs them.

The rewards (one per attempt Harbor would hold, in trial order) are written to a temporary
``rewards.jsonl``: one JSON object per line, or ``null`` for an attempt without a verifier
result. The script is run as ``uv run SCRIPT -i rewards.jsonl -o metric.json`` when ``uv`` is
on ``PATH`` (so PEP 723 ``# /// script`` dependencies resolve as under Harbor), otherwise as
``python SCRIPT -i … -o …`` with the current interpreter. It must exit 0 and leave a JSON
object in ``metric.json``; its value is the metric (e.g. ``{"mean": 0.81, "pass_rate": 0.5}``).

Differences from Harbor, on purpose: a timeout (default 60 s; the whole process group is killed)
and errors that carry the script's stderr, exit status and path in one
:class:`~scoring._errors.MetricScriptError`.
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

from scoring._errors import MetricScriptError

__all__ = ["DEFAULT_TIMEOUT", "metric_command", "run_metric_script"]

DEFAULT_TIMEOUT = 60.0


def metric_command(script: Path, input_path: Path, output_path: Path) -> list[str]:
    """The command line: ``uv run`` when uv exists, else the current interpreter."""
    tail = [str(script), "-i", str(input_path), "-o", str(output_path)]
    uv = shutil.which("uv")
    return [uv, "run", *tail] if uv else [sys.executable, *tail]


def _tail(text: str, limit: int = 2000) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def run_metric_script(
    script: Path | str,
    rewards: list[dict[str, Any] | None],
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Run ``script`` on ``rewards``; return the JSON object it wrote.

    Raises :class:`MetricScriptError` (naming the script, with its stderr) when the script is
    missing, exits non-zero, runs longer than ``timeout`` seconds or writes no JSON object.
    """
    script = Path(script)
    if not script.is_file():
        raise MetricScriptError(str(script), "metric script not found")
    with tempfile.TemporaryDirectory(prefix="casstore-metric-") as temp:
        input_path = Path(temp) / "rewards.jsonl"
        output_path = Path(temp) / "metric.json"
        with input_path.open("w") as handle:
            for reward in rewards:
                handle.write("null\n" if reward is None else json.dumps(reward) + "\n")
        process = subprocess.Popen(
            metric_command(script.resolve(), input_path, output_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            _, stderr = process.communicate()
            raise MetricScriptError(
                str(script), f"metric script timed out after {timeout:g} s: {_tail(stderr)}"
            ) from None
        if process.returncode != 0:
            raise MetricScriptError(
                str(script),
                f"metric script failed (exit {process.returncode}): {_tail(stderr)}",
            )
        try:
            result = json.loads(output_path.read_text())
        except (OSError, ValueError) as error:
            raise MetricScriptError(
                str(script), f"metric script wrote no JSON to -o: {error}"
            ) from None
    if not isinstance(result, dict):
        raise MetricScriptError(str(script), "metric script output is not a JSON object")
    return result
