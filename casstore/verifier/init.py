"""``casstore verifier init``: give a Harbor task a ``tests/test.sh`` that runs a Python verifier.

Layout written into the task (``tests/`` is the folder Harbor uploads to ``/tests``)::

    tests/test.sh                                   the shim Harbor runs (mode 0755)
    tests/.ng/run_verifier.py                       the runner (standard library only)
    tests/.ng/helpers/casstore_verify/__init__.py   helpers ``verify()`` may import

The shim clears any reward file, runs the runner with the task's verifier on the agent's
workspace, and leaves ``reward.txt`` or ``reward.json`` in ``/logs/verifier`` as Harbor reads
them. Every file is written with a fixed mode, so packing the task stays deterministic.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
from pathlib import Path, PurePosixPath

from casstore.errors import TaskFormatError, UsageError
from casstore.inputs import file_kind, open_binary, read_regular

__all__ = [
    "DEFAULT_VERIFIER",
    "HELPERS_SOURCE",
    "RUNNER_SOURCE",
    "SHIM_MARKER",
    "VENDOR_DIR",
    "init_verifier",
    "render_shim",
]

DEFAULT_VERIFIER = "tests/verifier.py"
VENDOR_DIR = ".ng"
SHIM_MARKER = "# casstore-verifier-shim"
RUNNER_SOURCE = Path(__file__).resolve().parent / "run_verifier.py"
HELPERS_SOURCE = Path(__file__).resolve().parent / "helpers"

_TESTS = "tests"
_FILE_MODE = 0o644
_DIR_MODE = 0o755
_SCRIPT_MODE = 0o755

_SHIM = """\
#!/bin/sh
{marker} 1
# Written by `casstore verifier init`: regenerate it rather than editing it.
# Runs the Python verifier tests/{verifier} with the runner vendored in tests/{vendor}/
# and leaves Harbor's reward file (reward.txt or reward.json) in the reward folder.
#   CASSTORE_REWARD_DIR  the reward folder (default /logs/verifier)
#   CASSTORE_WORKSPACE   the agent's workspace (default: the folder this script starts in)
#   CASSTORE_PYTHON      the interpreter, Python >= 3.10 (default python3)
# tests/task_data.json, when present, is passed to verify() as task_data.
set -u
tests_dir=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd -P) || exit 2
reward_dir=${{CASSTORE_REWARD_DIR:-/logs/verifier}}
workspace=${{CASSTORE_WORKSPACE:-$(pwd -P)}}
python=${{CASSTORE_PYTHON:-python3}}

clear_rewards() {{
    rm -rf -- "$reward_dir/reward.json" "$reward_dir/reward.txt"
}}

mkdir -p -- "$reward_dir" || exit 2
clear_rewards
if ! command -v "$python" >/dev/null 2>&1; then
    echo "test.sh: $python not found; the Python verifier needs Python >= 3.10" >&2
    exit 2
fi
set -- --verifier "$tests_dir"/{verifier_quoted} --workspace "$workspace" \\
    --reward-dir "$reward_dir" --tests-dir "$tests_dir"
if [ -f "$tests_dir/task_data.json" ]; then
    set -- "$@" --task-data "$tests_dir/task_data.json"
fi
"$python" "$tests_dir/{vendor}/run_verifier.py" "$@"
status=$?
[ "$status" -eq 0 ] || clear_rewards
exit "$status"
"""


def render_shim(verifier_in_tests: str) -> str:
    """The text of ``tests/test.sh`` for a verifier at ``tests/<verifier_in_tests>``.

    ``verifier_in_tests`` is a POSIX path relative to ``tests/`` (e.g. ``"verifier.py"``);
    it is shell-quoted into the script.
    """
    return _SHIM.format(
        marker=SHIM_MARKER,
        vendor=VENDOR_DIR,
        verifier=verifier_in_tests,
        verifier_quoted=shlex.quote(verifier_in_tests),
    )


def init_verifier(
    task_dir: str | Path, verifier: str = DEFAULT_VERIFIER, *, force: bool = False
) -> list[Path]:
    """Write the Python-verifier shim and vendor the runner and helpers into a Harbor task.

    ``verifier`` is the verifier module's path relative to ``task_dir``, inside ``tests/``.
    An existing ``tests/.ng/`` is replaced; an existing ``tests/test.sh`` is replaced only
    when this function wrote it, or when ``force`` is set.

    Returns the files written, ``tests/test.sh`` first, as paths under ``task_dir``.

    Raises ``UsageError`` for a missing task directory, a verifier path outside ``tests/``,
    not a ``.py`` file, missing, not valid Python or without a top-level ``verify``, a Windows
    task, or a ``tests/test.sh`` not written here (without ``force``); ``TaskFormatError``
    when ``task_dir`` is not a Harbor task (no or invalid ``task.toml``).
    """
    task = Path(task_dir)
    if not task.is_dir():
        try:
            kind = file_kind(task.stat().st_mode)
        except OSError:
            raise UsageError(str(task), "task directory does not exist") from None
        raise UsageError(
            str(task), f"not a directory but {kind} (a Harbor task directory is expected)"
        )
    check_task(task)
    verifier_in_tests = verifier_location(verifier)
    check_verifier_module(task / _TESTS / verifier_in_tests)
    shim = task / _TESTS / "test.sh"
    check_replaceable(shim, force)
    vendored = vendor(task / _TESTS / VENDOR_DIR)
    shim.unlink(missing_ok=True)
    shim.write_text(render_shim(verifier_in_tests), encoding="utf-8")
    shim.chmod(_SCRIPT_MODE)
    return [shim, *vendored]


def check_task(task: Path) -> None:
    """Raise unless ``task`` holds a ``task.toml`` Harbor accepts for a Linux task.

    ``TaskFormatError`` for a missing or invalid ``task.toml``; ``UsageError`` for a Windows
    task (Harbor runs ``test.bat`` there, not the POSIX shim).
    """
    from casstore.archive.layout import parse_task_config  # here: for the CLI's start-up time

    config_path = task / "task.toml"
    if not config_path.is_file():
        raise TaskFormatError(str(task), "not a Harbor task: no task.toml")
    config = parse_task_config(str(config_path), read_regular(config_path))
    if config.environment.os.value == "windows":
        raise UsageError(
            str(config_path), "a Windows task runs tests/test.bat; the verifier shim is POSIX sh"
        )


def verifier_location(verifier: str) -> str:
    """The verifier's POSIX path relative to ``tests/``, from its path relative to the task.

    Raises ``UsageError`` unless ``verifier`` is a relative ``.py`` path inside ``tests/``
    (the only folder Harbor uploads to the verifier sandbox) and outside ``tests/.ng/``.
    """
    path = PurePosixPath(verifier.replace("\\", "/"))
    parts = path.parts
    if path.is_absolute() or ".." in parts or len(parts) < 2 or parts[0] != _TESTS:
        raise UsageError(verifier, "the verifier must be a relative path inside tests/")
    if parts[1] == VENDOR_DIR:
        raise UsageError(verifier, f"tests/{VENDOR_DIR}/ is rewritten by verifier init")
    if path.suffix != ".py":
        raise UsageError(verifier, "the verifier must be a Python module (.py)")
    return PurePosixPath(*parts[1:]).as_posix()


def check_verifier_module(path: Path) -> None:
    """Raise ``UsageError`` unless ``path`` is a Python file with a top-level ``verify``.

    A ``def``/``async def``, an assignment or an import binding the name counts.
    """
    if not os.path.lexists(path):
        raise UsageError(str(path), "verifier file does not exist")
    try:
        tree = ast.parse(read_regular(path), filename=str(path))
    except (SyntaxError, ValueError) as error:
        raise UsageError(str(path), f"the verifier is not valid Python: {error}") from None
    if "verify" not in _top_level_names(tree):
        raise UsageError(str(path), "the verifier defines no top-level verify")


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level by def, class, assignment or import."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def check_replaceable(shim: Path, force: bool) -> None:
    """Raise ``UsageError`` unless ``tests/test.sh`` may be (re)written.

    It may when it is absent, was written by :func:`init_verifier`, or ``force`` is set; a
    folder at that name is never replaced.
    """
    if shim.is_dir() and not shim.is_symlink():
        raise UsageError(str(shim), "is a folder, not a test script")
    if force or not (shim.exists() or shim.is_symlink()):
        return
    if shim.is_symlink() or SHIM_MARKER not in _head(shim):
        raise UsageError(
            str(shim), "exists and was not written by verifier init; pass --force to replace it"
        )


def _head(path: Path) -> str:
    """The first lines of ``path`` as text (undecodable bytes replaced)."""
    with open_binary(path) as stream:  # a FIFO there is refused, never waited on
        return stream.read(512).decode("utf-8", errors="replace")


def vendor(target: Path) -> list[Path]:
    """Replace ``target`` (``tests/.ng``) with the runner and the helpers' ``.py`` files.

    Folders get mode 0755 and files 0644 whatever the umask; caches are not copied. Returns
    the files written, runner first, then helpers in sorted order.
    """
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    sources = [(RUNNER_SOURCE, target / RUNNER_SOURCE.name)]
    for source in sorted(HELPERS_SOURCE.rglob("*.py")):
        if "__pycache__" not in source.relative_to(HELPERS_SOURCE).parts:
            sources.append((source, target / "helpers" / source.relative_to(HELPERS_SOURCE)))
    for source, destination in sources:
        _make_dirs(destination.parent, stop=target.parent)
        destination.write_bytes(source.read_bytes())
        destination.chmod(_FILE_MODE)
    return [destination for _, destination in sources]


def _make_dirs(folder: Path, stop: Path) -> None:
    """Create ``folder`` and its missing parents below ``stop``, each with mode 0755."""
    missing = []
    while folder != stop and not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        created.mkdir()
        created.chmod(_DIR_MODE)
