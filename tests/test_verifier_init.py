"""``casstore verifier init``: the shim, the vendored runner, and the task Harbor runs.

End to end, the generated ``tests/test.sh`` is run on a task's verifier and the reward files
are read back with Harbor's own reward parsing, through Harbor's ``Verifier.verify`` on a
local stand-in for the container.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import TaskOS
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths
from harbor.verifier.verifier import RewardFileNotFoundError, Verifier

from casstore.errors import TaskFormatError, UsageError
from casstore.verifier.init import (
    HELPERS_SOURCE,
    RUNNER_SOURCE,
    SHIM_MARKER,
    init_verifier,
    render_shim,
)
from cli.main import run
from tests.conftest import real_task_dirs
from tests.helpers import make_task

VERIFIER_TASK_TOML = 'schema_version = "1.1"\n\n[verifier]\ntimeout_sec = 60.0\n'

VERIFIER = """
from casstore_verify import fraction_passed, read_text, same_output


def verify(workspace, task_data=None):
    expected = (task_data or {}).get("expected", "hello")
    output = read_text(workspace, "output.txt", default="")
    return fraction_passed([output != "", same_output(output, expected)])
"""

WRITTEN = [
    "tests/test.sh",
    "tests/.ng/run_verifier.py",
    "tests/.ng/helpers/casstore_verify/__init__.py",
]


def make_verifier_task(root: Path, verifier: str = VERIFIER, name: str = "greet") -> Path:
    """A minimal Harbor task with ``tests/verifier.py`` and no ``tests/test.sh`` yet."""
    files = {
        "task.toml": VERIFIER_TASK_TOML,
        "instruction.md": "Write hello to output.txt.\n",
        "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
        "tests/verifier.py": textwrap.dedent(verifier),
    }
    return make_task(root, name, files)


@pytest.fixture
def task(tmp_path: Path) -> Path:
    return make_verifier_task(tmp_path)


def _tree(folder: Path) -> dict[str, int]:
    """Every entry below ``folder`` with its permission bits."""
    return {
        path.relative_to(folder).as_posix(): stat.S_IMODE(path.lstat().st_mode)
        for path in sorted(folder.rglob("*"))
    }


# --- init_verifier ----------------------------------------------------------------------


def test_init_writes_the_shim_and_vendors_runner_and_helpers(task: Path) -> None:
    old_umask = os.umask(0o077)
    try:
        written = init_verifier(task)
    finally:
        os.umask(old_umask)

    assert [path.relative_to(task).as_posix() for path in written] == WRITTEN
    tree = _tree(task / "tests")
    tree.pop("verifier.py")
    assert tree == {
        ".ng": 0o755,
        ".ng/helpers": 0o755,
        ".ng/helpers/casstore_verify": 0o755,
        ".ng/helpers/casstore_verify/__init__.py": 0o644,
        ".ng/run_verifier.py": 0o644,
        "test.sh": 0o755,
    }
    assert (task / "tests/.ng/run_verifier.py").read_bytes() == RUNNER_SOURCE.read_bytes()
    assert (task / WRITTEN[2]).read_bytes() == (
        HELPERS_SOURCE / "casstore_verify" / "__init__.py"
    ).read_bytes()
    assert (task / "tests/test.sh").read_text() == render_shim("verifier.py")


def test_shim_text_names_the_verifier_and_the_reward_folder() -> None:
    shim = render_shim("checks/my verifier.py")
    assert shim.startswith(f"#!/bin/sh\n{SHIM_MARKER} 1\n")
    assert "--verifier \"$tests_dir\"/'checks/my verifier.py' --workspace" in shim
    assert "reward_dir=${CASSTORE_REWARD_DIR:-/logs/verifier}\n" in shim
    assert '"$python" "$tests_dir/.ng/run_verifier.py" "$@"\n' in shim


def test_init_again_gives_the_same_bytes_and_drops_stale_vendored_files(task: Path) -> None:
    init_verifier(task)
    first = {name: (task / name).read_bytes() for name in WRITTEN}
    (task / "tests/.ng/stale.py").write_text("old\n")
    (task / "tests/.ng/helpers/casstore_verify/__pycache__").mkdir()

    init_verifier(task)

    assert {name: (task / name).read_bytes() for name in WRITTEN} == first
    assert sorted(_tree(task / "tests/.ng")) == [
        "helpers",
        "helpers/casstore_verify",
        "helpers/casstore_verify/__init__.py",
        "run_verifier.py",
    ]


def test_init_with_a_verifier_in_a_subfolder(task: Path) -> None:
    (task / "tests/checks").mkdir()
    (task / "tests/verifier.py").rename(task / "tests/checks/grade.py")
    init_verifier(task, "tests/checks/grade.py")
    assert (task / "tests/test.sh").read_text() == render_shim("checks/grade.py")


def test_init_refuses_to_replace_a_test_script_it_did_not_write(task: Path) -> None:
    foreign = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
    (task / "tests/test.sh").write_text(foreign)
    with pytest.raises(UsageError) as caught:
        init_verifier(task)
    assert str(caught.value) == (
        f"{task / 'tests/test.sh'}: exists and was not written by verifier init; "
        "pass --force to replace it"
    )
    assert (task / "tests/test.sh").read_text() == foreign
    assert not (task / "tests/.ng").exists()

    init_verifier(task, force=True)
    assert (task / "tests/test.sh").read_text() == render_shim("verifier.py")


def test_init_refuses_a_folder_at_the_test_script(task: Path) -> None:
    (task / "tests/test.sh").mkdir()
    with pytest.raises(UsageError, match="is a folder, not a test script"):
        init_verifier(task, force=True)


@pytest.mark.parametrize(
    ("verifier", "rule"),
    [
        ("verifier.py", "the verifier must be a relative path inside tests/"),
        ("/abs/tests/verifier.py", "the verifier must be a relative path inside tests/"),
        ("tests/../verifier.py", "the verifier must be a relative path inside tests/"),
        ("solution/verifier.py", "the verifier must be a relative path inside tests/"),
        ("tests/.ng/verifier.py", "tests/.ng/ is rewritten by verifier init"),
        ("tests/verifier.txt", "the verifier must be a Python module (.py)"),
    ],
)
def test_init_rejects_verifier_paths(task: Path, verifier: str, rule: str) -> None:
    with pytest.raises(UsageError) as caught:
        init_verifier(task, verifier)
    assert str(caught.value) == f"{verifier}: {rule}"
    assert caught.value.exit_code == 2


def test_init_rejects_a_missing_verifier(task: Path) -> None:
    with pytest.raises(UsageError) as caught:
        init_verifier(task, "tests/other.py")
    assert str(caught.value) == f"{task / 'tests/other.py'}: verifier file does not exist"


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("def verify(:\n", "the verifier is not valid Python: "),
        ("def check():\n    return 1\n", "the verifier defines no top-level verify"),
        ("if True:\n    def verify():\n        return 1\n", "defines no top-level verify"),
    ],
)
def test_init_rejects_a_verifier_without_verify(tmp_path: Path, source: str, rule: str) -> None:
    task = make_verifier_task(tmp_path, source)
    with pytest.raises(UsageError, match=re.escape(rule)):
        init_verifier(task)


@pytest.mark.parametrize(
    "source",
    [
        "async def verify():\n    return 1\n",
        "from grading import check as verify\n",
        "def make():\n    return lambda: 1\n\nverify = make()\n",
        "verify: object = print\n",
    ],
)
def test_init_accepts_any_top_level_binding_of_verify(tmp_path: Path, source: str) -> None:
    assert len(init_verifier(make_verifier_task(tmp_path, source))) == 3


def test_init_rejects_a_missing_task_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        init_verifier(tmp_path / "absent")
    assert str(caught.value) == f"{tmp_path / 'absent'}: task directory does not exist"


def test_init_names_what_is_there_instead_of_a_task_directory(tmp_path: Path) -> None:
    """A FIFO (or a file) named as the task: what it is, not "does not exist"."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    for name, kind in (("fifo", "a FIFO"), ("file", "a regular file")):
        with pytest.raises(UsageError) as caught:
            init_verifier(tmp_path / name)
        rule = f"not a directory but {kind} (a Harbor task directory is expected)"
        assert str(caught.value) == f"{tmp_path / name}: {rule}"


def test_init_rejects_a_directory_that_is_not_a_task(task: Path) -> None:
    (task / "task.toml").unlink()
    with pytest.raises(TaskFormatError) as caught:
        init_verifier(task)
    assert str(caught.value) == f"{task}: not a Harbor task: no task.toml"
    assert caught.value.exit_code == 1


def test_init_rejects_an_invalid_task_toml(task: Path) -> None:
    (task / "task.toml").write_text("[verifier\n")
    with pytest.raises(TaskFormatError, match=r"task\.toml: task\.toml is not valid for Harbor: "):
        init_verifier(task)


def test_init_rejects_a_windows_task(task: Path) -> None:
    (task / "task.toml").write_text(VERIFIER_TASK_TOML + '\n[environment]\nos = "windows"\n')
    with pytest.raises(UsageError, match=r"Windows task runs tests/test\.bat"):
        init_verifier(task)


# --- Harbor accepts the task ------------------------------------------------------------


def test_harbor_loads_the_task_and_finds_the_shim(task: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Task(task)
    init_verifier(task)
    loaded = Task(task)
    assert loaded.name == "greet"
    assert loaded.paths.discovered_test_path_for(TaskOS.LINUX) == task.resolve() / "tests/test.sh"


def test_task_packs_and_verifies_after_init(tmp_path: Path) -> None:
    pack = pytest.importorskip("casstore.archive.pack")
    read = pytest.importorskip("casstore.archive.read")
    if not hasattr(pack, "pack_tree") or not hasattr(read, "verify_archive"):
        pytest.skip("the packager does not provide pack_tree / verify_archive yet")
    digests = []
    for name, umask in (("one", 0o022), ("two", 0o077)):
        task = make_verifier_task(tmp_path / name)
        old_umask = os.umask(umask)
        try:
            init_verifier(task)
        finally:
            os.umask(old_umask)
        (task / "tests/verifier.py").chmod(0o644)
        archive = tmp_path / f"{name}.tar.gz"
        packed = pack.pack_tree(task, archive)
        checked = read.verify_archive(archive, expect=packed.address)
        assert checked.address == packed.address
        assert checked.entries == packed.entries == 13
        digests.append(packed.content_digest)
    assert digests[0] == digests[1]


@pytest.mark.realdata
@pytest.mark.filterwarnings("ignore:The 'allow_internet' field is deprecated")
@pytest.mark.parametrize("source", real_task_dirs(), ids=lambda path: path.name)
def test_init_on_real_tasks_keeps_them_loadable_and_runnable(tmp_path: Path, source: Path) -> None:
    task = tmp_path / source.name
    shutil.copytree(source, task, symlinks=True)
    (task / "tests").mkdir(exist_ok=True)
    (task / "tests/verifier.py").write_text(
        "def verify(workspace):\n"
        "    return {'reward': 1, 'files': len(list(workspace.iterdir()))}\n"
    )
    init_verifier(task, force=True)
    loaded = Task(task)
    assert loaded.paths.discovered_test_path_for(loaded.config.environment.os) == (
        task.resolve() / "tests/test.sh"
    )
    box = Sandbox(tmp_path / "run", task)
    (box.workspace / "output.txt").write_text("x")
    done = box.run_shim()
    assert done.returncode == 0, done.stderr
    assert box.harbor_rewards() == {"reward": 1, "files": 1}


# --- end to end: tests/test.sh in a stand-in sandbox ------------------------------------


class Sandbox:
    """What Harbor's verifier container holds: ``/tests``, ``/logs/verifier``, a workspace."""

    def __init__(self, root: Path, task: Path) -> None:
        self.tests = root / "sandbox" / "tests"
        self.workspace = root / "sandbox" / "app"
        self.trial = TrialPaths(root / "trial")
        self.trial.mkdir()
        shutil.copytree(task / "tests", self.tests)
        self.workspace.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        """The verifier's environment: the reward folder mapped to the trial's."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return {
            **base,
            "CASSTORE_REWARD_DIR": str(self.trial.verifier_dir),
            "CASSTORE_PYTHON": sys.executable,
            **extra,
        }

    def run_shim(self, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run ``tests/test.sh`` as Harbor does: executed directly, from the workspace."""
        return subprocess.run(
            [str(self.tests / "test.sh")],
            cwd=self.workspace,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def harbor_rewards(self) -> dict[str, float | int]:
        """The rewards as Harbor's verifier parses them (reward.json first, then reward.txt)."""
        verifier = Verifier.__new__(Verifier)
        verifier.trial_paths = self.trial
        if self.trial.reward_json_path.exists():
            return verifier._parse_reward_json()
        if self.trial.reward_text_path.exists():
            return verifier._parse_reward_text()
        raise RewardFileNotFoundError(str(self.trial.verifier_dir))


@pytest.fixture
def sandbox(tmp_path: Path, task: Path) -> Sandbox:
    init_verifier(task)
    return Sandbox(tmp_path, task)


def test_shim_writes_reward_txt_harbor_reads(sandbox: Sandbox) -> None:
    (sandbox.workspace / "output.txt").write_text("hello \r\n")
    done = sandbox.run_shim()
    assert done.returncode == 0, done.stderr
    assert sandbox.trial.reward_text_path.read_text() == "1.0\n"
    assert not sandbox.trial.reward_json_path.exists()
    assert sandbox.harbor_rewards() == {"reward": 1.0}


def test_shim_partial_credit(sandbox: Sandbox) -> None:
    (sandbox.workspace / "output.txt").write_text("goodbye\n")
    assert sandbox.run_shim().returncode == 0
    assert sandbox.harbor_rewards() == {"reward": 0.5}


def test_shim_passes_task_data_json_and_writes_reward_json(tmp_path: Path) -> None:
    task = make_verifier_task(
        tmp_path,
        """
        from casstore_verify import read_text, same_output


        def verify(task_data, workspace):
            output = read_text(workspace, "output.txt")
            return {"exact": float(same_output(output, task_data["expected"])), "tries": 1}
        """,
    )
    (task / "tests/task_data.json").write_text('{"expected": "bonjour"}')
    init_verifier(task)
    box = Sandbox(tmp_path, task)
    (box.workspace / "output.txt").write_text("bonjour\n")
    done = box.run_shim()
    assert done.returncode == 0, done.stderr
    assert box.trial.reward_json_path.read_text() == '{"exact": 1.0, "tries": 1}\n'
    assert box.harbor_rewards() == {"exact": 1.0, "tries": 1}


def test_shim_removes_a_planted_reward_json_so_harbor_reads_the_real_reward(
    sandbox: Sandbox,
) -> None:
    sandbox.trial.reward_json_path.write_text('{"reward": 1.0}')
    (sandbox.workspace / "output.txt").write_text("")
    assert sandbox.run_shim().returncode == 0
    assert sandbox.harbor_rewards() == {"reward": 0.0}


@pytest.mark.parametrize(
    ("source", "status", "message"),
    [
        ("def verify(workspace):\n    raise RuntimeError('no output')\n", 1, "verify raised"),
        ("def verify(workspace):\n    return None\n", 2, "contract error: verify returned None"),
    ],
)
def test_shim_failure_leaves_no_reward_for_harbor(
    tmp_path: Path, source: str, status: int, message: str
) -> None:
    task = make_verifier_task(tmp_path, source)
    init_verifier(task)
    box = Sandbox(tmp_path, task)
    box.trial.reward_text_path.write_text("1")
    (box.trial.verifier_dir / "reward.json").mkdir()
    done = box.run_shim()
    assert done.returncode == status
    assert message in done.stderr
    assert sorted(p.name for p in box.trial.verifier_dir.iterdir()) == []
    with pytest.raises(RewardFileNotFoundError):
        box.harbor_rewards()


def test_shim_without_python_exits_2_and_leaves_no_reward(sandbox: Sandbox) -> None:
    sandbox.trial.reward_text_path.write_text("1")
    done = sandbox.run_shim(CASSTORE_PYTHON="/nonexistent/python3")
    assert done.returncode == 2
    assert done.stderr == (
        "test.sh: /nonexistent/python3 not found; the Python verifier needs Python >= 3.10\n"
    )
    assert not sandbox.trial.reward_text_path.exists()


def test_shim_clears_rewards_left_by_a_failing_interpreter(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    crashing = tmp_path / "crashing-python"
    crashing.write_text(
        '#!/bin/sh\necho 1 > "$CASSTORE_REWARD_DIR/reward.txt"\necho "$1" >&2\nexit 3\n'
    )
    crashing.chmod(0o755)
    done = sandbox.run_shim(CASSTORE_PYTHON=str(crashing))
    assert (done.returncode, done.stderr) == (3, f"{sandbox.tests}/.ng/run_verifier.py\n")
    assert not sandbox.trial.reward_text_path.exists()


def test_shim_uses_the_workspace_variable(sandbox: Sandbox, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "output.txt").write_text("hello")
    assert sandbox.run_shim(CASSTORE_WORKSPACE=str(elsewhere)).returncode == 0
    assert sandbox.harbor_rewards() == {"reward": 1.0}


def test_shim_runs_on_the_system_python(sandbox: Sandbox) -> None:
    python = "/usr/bin/python3"
    if not os.path.exists(python) or os.path.realpath(python) == os.path.realpath(sys.executable):
        pytest.skip("no system python3 besides this interpreter")
    (sandbox.workspace / "output.txt").write_text("hello")
    done = sandbox.run_shim(CASSTORE_PYTHON=python)
    assert done.returncode == 0, done.stderr
    assert sandbox.harbor_rewards() == {"reward": 1.0}


class LocalEnvironment:
    """The part of a Harbor environment its ``Verifier`` uses, on this machine.

    ``/tests`` and ``/logs/verifier`` in commands are mapped to the sandbox's folders; the
    reward folder is mounted (Harbor downloads nothing).
    """

    os = TaskOS.LINUX
    capabilities = EnvironmentCapabilities(mounted=True)

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.places = {"/tests": str(box.tests), "/logs/verifier": str(box.trial.verifier_dir)}

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self.places[target_dir], dirs_exist_ok=True)

    async def exec(self, command: str, env: dict[str, str] | None = None, **_: Any) -> None:
        mapped = re.sub(
            r"(?<![\w./-])(/tests|/logs/verifier)(?=/|\s|$)",
            lambda match: self.places[match.group(1)],
            command,
        )
        subprocess.run(
            ["sh", "-c", mapped],
            cwd=self.box.workspace,
            env={**self.box.env(), **(env or {})},
            check=False,
            timeout=60,
        )


def test_harbor_verifier_runs_the_shim_and_reads_the_reward(tmp_path: Path, task: Path) -> None:
    init_verifier(task)
    box = Sandbox(tmp_path, task)
    shutil.rmtree(box.tests)  # Harbor uploads tests/ itself
    (box.workspace / "output.txt").write_text("hello\n")
    verifier = Verifier(task=Task(task), trial_paths=box.trial, environment=LocalEnvironment(box))

    result = asyncio.run(verifier.verify())

    assert result.rewards == {"reward": 1.0}
    assert box.trial.test_stdout_path.read_text().endswith(
        f"run_verifier: wrote {box.trial.reward_text_path}\n"
    )


def test_harbor_verifier_finds_no_reward_when_verify_raised(tmp_path: Path) -> None:
    task = make_verifier_task(tmp_path, "def verify():\n    raise ValueError('boom')\n")
    init_verifier(task)
    box = Sandbox(tmp_path, task)
    verifier = Verifier(task=Task(task), trial_paths=box.trial, environment=LocalEnvironment(box))
    box.trial.reward_json_path.write_text('{"reward": 1}')

    with pytest.raises(RewardFileNotFoundError):
        asyncio.run(verifier.verify())
    assert "ValueError: boom" in box.trial.test_stdout_path.read_text()


# --- the CLI ----------------------------------------------------------------------------


def test_cli_init_lists_the_files_written(task: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["verifier", "init", str(task)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == WRITTEN
    assert captured.err == ""
    assert (task / "tests/test.sh").read_text() == render_shim("verifier.py")


def test_cli_init_json(task: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (task / "tests/grade.py").write_text("def verify():\n    return 1\n")
    assert run(["verifier", "init", str(task), "--verifier", "tests/grade.py", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "task_dir": str(task),
        "verifier": "tests/grade.py",
        "written": WRITTEN,
    }
    assert (task / "tests/test.sh").read_text() == render_shim("grade.py")


def test_cli_init_force(task: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (task / "tests/test.sh").write_text("#!/bin/sh\nexit 0\n")
    assert run(["verifier", "init", str(task)]) == 2
    assert capsys.readouterr().err == (
        f"casstore: {task / 'tests/test.sh'}: exists and was not written by verifier init; "
        "pass --force to replace it\n"
    )
    assert run(["verifier", "init", str(task), "--force"]) == 0
    assert (task / "tests/test.sh").read_text() == render_shim("verifier.py")


@pytest.mark.parametrize(
    ("arrange", "status", "message"),
    [
        (lambda task: shutil.rmtree(task), 2, "{task}: task directory does not exist"),
        (lambda task: (task / "task.toml").unlink(), 1, "{task}: not a Harbor task: no task.toml"),
        (
            lambda task: (task / "tests/verifier.py").unlink(),
            2,
            "{task}/tests/verifier.py: verifier file does not exist",
        ),
    ],
    ids=["missing task dir", "not a task", "missing verifier"],
)
def test_cli_init_errors(
    task: Path,
    capsys: pytest.CaptureFixture[str],
    arrange: Any,
    status: int,
    message: str,
) -> None:
    arrange(task)
    assert run(["verifier", "init", str(task)]) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"casstore: {message.format(task=task)}\n"
