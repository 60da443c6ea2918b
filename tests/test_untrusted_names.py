"""Text output escapes control characters of untrusted names (a task named with an ESC
sequence, a tab, a newline): one rule, :func:`casstore.errors.printable`, in the shared output
path (``cli.output``), so no table or line lets them reach the terminal; JSON keeps them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from casstore.errors import printable
from tests.helpers import run_cli

FULL = Path("jobs/full-trials")
COBOL = "cobol-modernization__j3gBmiz"
HOSTILE = "a\x1b[31mb\tc"
SHOWN = "a\\x1b[31mb\\tc"


def test_printable_escapes_controls_and_del_keeps_text() -> None:
    assert printable(HOSTILE) == SHOWN
    assert printable("x\ny\rz\x00\x7f\x85\x9b") == "x\\ny\\rz\\x00\\x7f\\x85\\x9b"
    assert printable("naïve — ok \udcff") == "naïve — ok \\udcff"
    assert printable("plain text") == "plain text"


def _hostile_job(fixtures: Path, dest: Path, task: str) -> Path:
    """The full-trials job with the cobol trial's task renamed ``task`` and an ESC sequence in
    its trajectory's first message."""
    shutil.copytree(fixtures / FULL, dest)
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    trial = dest / COBOL
    result = json.loads((trial / "result.json").read_text())
    result["task_name"] = task
    (trial / "result.json").write_text(json.dumps(result))
    trajectory = trial / "artifacts" / "trajectory.json"
    steps = json.loads(trajectory.read_text())
    steps["steps"][0]["message"] = "say \x1b]0;owned\x07 " + HOSTILE
    trajectory.write_text(json.dumps(steps))
    return dest


@pytest.fixture
def hostile(fixtures_dir: Path, tmp_path: Path) -> Path:
    return _hostile_job(fixtures_dir, tmp_path / "hostile", HOSTILE)


def _clean(text: str) -> None:
    assert not any((ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in text)


@pytest.mark.realdata
def test_rescore_tasks_escapes_a_task_name(capsys, hostile: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "none")
    code, out, err = run_cli(capsys, "--store", store, "rescore", str(hostile), "--tasks")
    assert code == 0, err
    _clean(out)
    rows = [line.split("\t") for line in out.splitlines()]
    header = rows.index(next(r for r in rows if r[0] == "task"))
    assert any(row[0] == SHOWN and len(row) == len(rows[header]) for row in rows), out


@pytest.mark.realdata
def test_compare_left_out_escapes_a_task_name(capsys, hostile: Path, fixtures_dir: Path) -> None:
    code, out, err = run_cli(capsys, "compare", str(hostile), str(fixtures_dir / FULL))
    assert code == 0, err
    _clean(out + err.replace("\n", ""))
    assert f"({hostile}): {SHOWN}" in err and HOSTILE not in err


@pytest.mark.realdata
def test_show_trace_escapes_the_trajectory_text(capsys, hostile: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    code, _, err = run_cli(capsys, "--store", store, "import", str(hostile), "--name", "h")
    assert code == 0, err
    code, out, err = run_cli(capsys, "--store", store, "show", f"h/{COBOL}", "--trace")
    assert code == 0, err
    _clean(out.replace("\n", ""))
    assert "say \\x1b]0;owned\\x07 a\\x1b[31mb c" in out.splitlines()[1]
    code, out, _ = run_cli(capsys, "--store", store, "show", f"h/{COBOL}", "--trace", "--json")
    assert json.loads(out)["steps"][0]["content"] == "say \x1b]0;owned\x07 " + HOSTILE
