"""The standalone verifier runner (``casstore/verifier/run_verifier.py``) and its helpers.

Unit tests call the runner's functions in-process; every behaviour of the script itself
(exit status, stderr, reward files, ``sys.path``) is checked by running it as a subprocess,
with this interpreter, under ``-I``, and with the system ``python3`` when there is one.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from casstore.verifier import run_verifier as rv
from casstore.verifier.helpers import casstore_verify as helpers
from casstore.verifier.init import HELPERS_SOURCE, RUNNER_SOURCE

W = Path("/work/space")
ALL = {"workspace": W, "task_data": {"t": 1}, "response": "r", "state": {"s": 2}}


# --- select_arguments -------------------------------------------------------------------


def _none() -> None: ...
def _workspace(workspace): ...
def _all_four(state, workspace, task_data, response): ...
def _positional_only(workspace, /): ...
def _positional_only_then_named(workspace, /, task_data): ...
def _gap_filled_with_default(extra=5, state=None, /): ...
def _unused_positional_only(extra=5, /, *, workspace): ...
def _var_keyword(**kwargs): ...
def _positional_only_and_var_keyword(workspace, /, **kwargs): ...
def _named_and_var_keyword(workspace, **kwargs): ...
def _var_positional(*args, workspace): ...
def _keyword_only(*, task_data, state): ...
def _unknown_with_default(other=1, workspace=None): ...


class _CallableVerifier:
    def __call__(self, workspace, response=None): ...


@pytest.mark.parametrize(
    ("verify", "expected"),
    [
        (_none, ([], {})),
        (_workspace, ([], {"workspace": W})),
        (_all_four, ([], ALL)),
        (_positional_only, ([W], {})),
        (_positional_only_then_named, ([W], {"task_data": {"t": 1}})),
        (_gap_filled_with_default, ([5, {"s": 2}], {})),
        (_unused_positional_only, ([], {"workspace": W})),
        (_var_keyword, ([], ALL)),
        (
            _positional_only_and_var_keyword,
            ([W], {k: v for k, v in ALL.items() if k != "workspace"}),
        ),
        (_named_and_var_keyword, ([], ALL)),
        (_var_positional, ([], {"workspace": W})),
        (_keyword_only, ([], {"task_data": {"t": 1}, "state": {"s": 2}})),
        (_unknown_with_default, ([], {"workspace": W})),
        (_CallableVerifier(), ([], {"workspace": W, "response": "r"})),
    ],
)
def test_select_arguments_passes_what_verify_declares(verify: Any, expected: Any) -> None:
    assert rv.select_arguments(verify, ALL) == expected


def test_select_arguments_leaves_an_unavailable_argument_to_its_default() -> None:
    def verify(workspace, response=None, state="none"): ...

    assert rv.select_arguments(verify, {"workspace": W}) == ([], {"workspace": W})


def test_select_arguments_var_keyword_gets_only_what_is_available() -> None:
    def verify(**kwargs): ...

    available = {"workspace": W, "task_data": [1]}
    assert rv.select_arguments(verify, available) == ([], available)


def test_select_arguments_required_unavailable_argument_is_a_contract_error() -> None:
    def verify(workspace, response): ...

    with pytest.raises(rv.ContractError) as caught:
        rv.select_arguments(verify, {"workspace": W, "state": 1})
    assert str(caught.value) == (
        "verify requires 'response', which this run does not provide "
        "(available: workspace, state); give it a default or pass --response"
    )


def test_select_arguments_required_positional_only_unavailable_is_a_contract_error() -> None:
    def verify(task_data, /): ...

    with pytest.raises(rv.ContractError, match=r"requires 'task_data'.*pass --task-data$"):
        rv.select_arguments(verify, {"workspace": W})


def test_select_arguments_required_unknown_argument_is_a_contract_error() -> None:
    def verify(workspace, answer): ...

    with pytest.raises(rv.ContractError) as caught:
        rv.select_arguments(verify, ALL)
    assert str(caught.value) == (
        "verify requires unknown argument 'answer'; it may declare only "
        "workspace, task_data, response, state (or give others a default)"
    )


def test_select_arguments_result_calls_verify_with_the_right_values() -> None:
    def verify(extra=7, task_data=None, /, *, workspace, **rest):
        return extra, task_data, workspace, rest

    positional, keywords = rv.select_arguments(verify, ALL)
    assert verify(*positional, **keywords) == (
        7,
        {"t": 1},
        W,
        {"response": "r", "state": {"s": 2}},
    )


# --- call_verify ------------------------------------------------------------------------


def test_call_verify_awaits_an_async_verify() -> None:
    async def verify(workspace):
        await asyncio.sleep(0)
        return {"workspace": str(workspace)}

    assert rv.call_verify(verify, [], {"workspace": W}) == {"workspace": "/work/space"}


def test_call_verify_awaits_an_awaitable_returned_by_a_sync_verify() -> None:
    async def later() -> float:
        return 0.5

    assert rv.call_verify(lambda: later(), [], {}) == 0.5


@pytest.mark.parametrize("error", [ValueError("bad"), SystemExit(0)])
def test_call_verify_wraps_what_verify_raised(error: BaseException) -> None:
    def verify():
        raise error

    with pytest.raises(rv.VerifyRaised) as caught:
        rv.call_verify(verify, [], {})
    assert caught.value.__cause__ is error


# --- reward_file ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (1, ("reward.txt", "1\n")),
        (0, ("reward.txt", "0\n")),
        (0.25, ("reward.txt", "0.25\n")),
        (-1.5, ("reward.txt", "-1.5\n")),
        (0.1, ("reward.txt", "0.1\n")),
        (Fraction(1, 4), ("reward.txt", "0.25\n")),
        ({"reward": 1}, ("reward.json", '{"reward": 1}\n')),
        (
            {"accuracy": 0.5, "speed": 2, "third": Fraction(3, 4)},
            ("reward.json", '{"accuracy": 0.5, "speed": 2, "third": 0.75}\n'),
        ),
    ],
)
def test_reward_file_for_a_number_or_a_dict_of_numbers(result: Any, expected: Any) -> None:
    assert rv.reward_file(result) == expected


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (None, "verify returned None (NoneType); expected a finite number"),
        (True, "verify returned True (bool); expected a finite number"),
        ("1", "verify returned '1' (str); expected a finite number"),
        (math.nan, "verify returned nan (float); expected a finite number"),
        (math.inf, "verify returned inf (float); expected a finite number"),
        (10**400, "(int); expected a finite number"),
        ([1.0], "verify returned [1.0] (list); expected a finite number"),
        ({}, "verify returned an empty dict; it needs at least one reward key"),
        ({"a": "x"}, "verify returned 'x' (str) for reward key 'a'; expected a finite number"),
        ({"a": False}, "verify returned False (bool) for reward key 'a'"),
        ({"a": None}, "verify returned None (NoneType) for reward key 'a'"),
        ({"a": math.nan}, "verify returned nan (float) for reward key 'a'"),
        ({1: 1.0}, "verify returned a dict with reward key 1; keys are strings"),
    ],
)
def test_reward_file_rejects_anything_else(result: Any, message: str) -> None:
    with pytest.raises(rv.ContractError) as caught:
        rv.reward_file(result)
    assert message in str(caught.value)


# --- clear_rewards ----------------------------------------------------------------------


def _plant(reward_dir: Path, name: str, kind: str, outside: Path) -> None:
    """Put a ``kind`` of entry at ``reward_dir/name``; links point into ``outside``."""
    path = reward_dir / name
    if kind == "file":
        path.write_text("1\n")
    elif kind == "link":
        (outside / "target.txt").write_text("1\n")
        path.symlink_to(outside / "target.txt")
    elif kind == "dangling link":
        path.symlink_to(outside / "nothing")
    elif kind == "folder":
        path.mkdir()
        (path / "inner").mkdir()
        (path / "inner" / "reward.txt").write_text("1\n")
    elif kind == "link to folder":
        (outside / "folder").mkdir()
        (outside / "folder" / "kept.txt").write_text("kept\n")
        path.symlink_to(outside / "folder")


KINDS = ["file", "link", "dangling link", "folder", "link to folder"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", rv.REWARD_FILES)
def test_clear_rewards_removes_any_entry_but_not_link_targets(
    tmp_path: Path, name: str, kind: str
) -> None:
    reward_dir, outside = tmp_path / "verifier", tmp_path / "outside"
    reward_dir.mkdir()
    outside.mkdir()
    (reward_dir / "test-stdout.txt").write_text("log\n")
    _plant(reward_dir, name, kind, outside)
    before_outside = sorted(p.relative_to(outside) for p in outside.rglob("*"))

    rv.clear_rewards(reward_dir)

    assert sorted(p.name for p in reward_dir.iterdir()) == ["test-stdout.txt"]
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before_outside


def test_clear_rewards_of_a_missing_folder_does_nothing(tmp_path: Path) -> None:
    rv.clear_rewards(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


# --- place_on_path ----------------------------------------------------------------------


def test_place_on_path_moves_present_entries_to_the_front_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = (tmp_path / name for name in "abc")
    for folder in (a, b, c):
        folder.mkdir()
    (tmp_path / "link-to-c").symlink_to(c)
    monkeypatch.chdir(a)
    monkeypatch.setattr(
        sys, "path", ["", "/x", str(c), "/y", str(tmp_path / "link-to-c"), str(b), "/z"]
    )

    rv.place_on_path([a, b, c, b])

    assert sys.path == [str(a), str(b), str(c), "/x", "/y", "/z"]


# --- the runner as a script -------------------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Python start-up variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**env, **extra}


class Sandbox:
    """A verifier sandbox: ``tests/`` with the verifier, a workspace and a reward folder."""

    def __init__(self, root: Path, source: str, verifier: str = "verifier.py") -> None:
        self.tests = root / "tests"
        self.verifier = self.tests / verifier
        self.workspace = root / "workspace"
        self.reward_dir = root / "logs" / "verifier"
        self.verifier.parent.mkdir(parents=True)
        self.workspace.mkdir()
        self.verifier.write_text(textwrap.dedent(source))

    def run(
        self, *extra: str, python: str = sys.executable, flags: tuple[str, ...] = (), **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run the runner script on this sandbox; ``extra`` are more runner options."""
        command = [
            python,
            *flags,
            str(RUNNER_SOURCE),
            "--verifier",
            str(self.verifier),
            "--workspace",
            str(self.workspace),
            "--reward-dir",
            str(self.reward_dir),
            "--tests-dir",
            str(self.tests),
            *extra,
        ]
        return subprocess.run(
            command, capture_output=True, text=True, env=_clean_env(**env), timeout=60
        )

    def rewards(self) -> dict[str, str]:
        """The reward files in the reward folder, by name, with their text."""
        if not self.reward_dir.exists():
            return {}
        return {
            path.name: path.read_text()
            for path in self.reward_dir.iterdir()
            if path.name in rv.REWARD_FILES
        }


def test_number_writes_reward_txt_and_exits_0(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify(workspace):\n    return 0.75\n")
    done = box.run()
    assert (done.returncode, box.rewards()) == (0, {"reward.txt": "0.75\n"})
    assert done.stderr == f"run_verifier: wrote {box.reward_dir / 'reward.txt'}\n"
    assert sorted(p.name for p in box.reward_dir.iterdir()) == ["reward.txt"]


def test_dict_writes_reward_json_and_exits_0(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify():\n    return {'reward': 1, 'partial': 0.5}\n")
    done = box.run()
    assert done.returncode == 0, done.stderr
    assert box.rewards() == {"reward.json": '{"reward": 1, "partial": 0.5}\n'}


def test_verify_reads_the_workspace_and_every_input_file(tmp_path: Path) -> None:
    box = Sandbox(
        tmp_path,
        """
        from pathlib import Path

        def verify(workspace, task_data, response, state):
            assert isinstance(workspace, Path) and workspace.is_absolute()
            answer = (workspace / "answer.txt").read_text().strip()
            return {
                "answer": float(answer == task_data["expected"]),
                "response": float(response == "forty-two\\n"),
                "steps": state["steps"],
            }
        """,
    )
    (box.workspace / "answer.txt").write_text("42\n")
    (tmp_path / "task.json").write_text('{"expected": "42"}')
    (tmp_path / "response.txt").write_text("forty-two\n")
    (tmp_path / "state.json").write_text('{"steps": 3}')
    done = box.run(
        "--task-data",
        str(tmp_path / "task.json"),
        "--response",
        str(tmp_path / "response.txt"),
        "--state",
        str(tmp_path / "state.json"),
    )
    assert done.returncode == 0, done.stderr
    assert box.rewards() == {"reward.json": '{"answer": 1.0, "response": 1.0, "steps": 3}\n'}


def test_async_verify_is_awaited(tmp_path: Path) -> None:
    box = Sandbox(
        tmp_path,
        """
        import asyncio

        async def verify(workspace, /):
            await asyncio.sleep(0.01)
            return {"listed": len(list(workspace.iterdir()))}
        """,
    )
    (box.workspace / "out.txt").write_text("x")
    done = box.run()
    assert (done.returncode, box.rewards()) == (0, {"reward.json": '{"listed": 1}\n'})


def test_reward_folder_is_created_when_missing(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify():\n    return 1\n")
    assert not box.reward_dir.exists()
    assert box.run().returncode == 0
    assert box.rewards() == {"reward.txt": "1\n"}


def _assert_failed(box: Sandbox, done: subprocess.CompletedProcess[str], status: int) -> None:
    assert done.returncode == status, done.stderr
    assert box.rewards() == {}
    assert done.stderr.endswith("run_verifier: no reward written\n")


def test_verify_raising_exits_1_with_its_traceback(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify():\n    raise ValueError('output.txt is empty')\n")
    done = box.run()
    _assert_failed(box, done, 1)
    assert done.stderr.startswith("run_verifier: verify raised:\nTraceback")
    assert "ValueError: output.txt is empty\n" in done.stderr


def test_async_verify_raising_exits_1(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "async def verify():\n    raise KeyError('score')\n")
    done = box.run()
    _assert_failed(box, done, 1)
    assert "KeyError: 'score'\n" in done.stderr


def test_verify_calling_sys_exit_0_exits_1_without_a_reward(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "import sys\n\ndef verify():\n    sys.exit(0)\n")
    done = box.run()
    _assert_failed(box, done, 1)
    assert "SystemExit: 0\n" in done.stderr


_WRITES_REWARD_JSON = """
def verify(workspace):
    import pathlib
    reward_dir = pathlib.Path(workspace).parent / "logs" / "verifier"
    (reward_dir / "reward.json").write_text('{"reward": 1}')
"""


def _run_writing_rewards(
    tmp_path: Path, *then: str
) -> tuple[Sandbox, subprocess.CompletedProcess[str]]:
    """Run a ``verify`` that writes ``reward.json`` itself, then runs the lines ``then``."""
    box = Sandbox(tmp_path, _WRITES_REWARD_JSON + "".join(f"    {line}\n" for line in then))
    box.reward_dir.mkdir(parents=True)
    return box, box.run()


def test_reward_files_verify_wrote_itself_are_removed_when_it_raises(tmp_path: Path) -> None:
    also = '(reward_dir / "reward.txt").write_text("1")'
    box, done = _run_writing_rewards(tmp_path, also, 'raise RuntimeError("late failure")')
    _assert_failed(box, done, 1)
    assert "RuntimeError: late failure\n" in done.stderr


def test_only_the_returned_reward_stands_when_verify_wrote_another(tmp_path: Path) -> None:
    box, done = _run_writing_rewards(tmp_path, "return 0.25")
    assert (done.returncode, box.rewards()) == (0, {"reward.txt": "0.25\n"})


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def verify():\n    return None\n", "verify returned None (NoneType)"),
        ("def verify():\n    return True\n", "verify returned True (bool)"),
        ("def verify():\n    return '1.0'\n", "verify returned '1.0' (str)"),
        ("def verify():\n    return float('nan')\n", "verify returned nan (float)"),
        ("def verify():\n    return {'a': 1, 'b': 'x'}\n", "'x' (str) for reward key 'b'"),
        ("VERIFY = 1\n", "defines no callable verify"),
        ("verify = 3\n", "defines no callable verify"),
        ("import not_a_module_anywhere\n", "ModuleNotFoundError: No module named"),
        ("def verify(workspace, response):\n    return 1\n", "verify requires 'response'"),
        ("def verify(answer):\n    return 1\n", "verify requires unknown argument 'answer'"),
    ],
)
def test_contract_problems_exit_2(tmp_path: Path, source: str, message: str) -> None:
    box = Sandbox(tmp_path, source)
    done = box.run()
    _assert_failed(box, done, 2)
    assert done.stderr.startswith("run_verifier: contract error: ")
    assert message in done.stderr


def test_import_error_message_names_the_module(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "raise RuntimeError('broken at import')\n")
    done = box.run()
    _assert_failed(box, done, 2)
    assert f"cannot import verifier module {box.verifier}:\nTraceback" in done.stderr
    assert "RuntimeError: broken at import\n" in done.stderr


def test_missing_verifier_file_exits_2(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify():\n    return 1\n")
    box.verifier.unlink()
    done = box.run()
    _assert_failed(box, done, 2)
    assert f"contract error: verifier file not found: {box.verifier}\n" in done.stderr


def test_missing_workspace_exits_2(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify():\n    return 1\n")
    box.workspace.rmdir()
    done = box.run()
    _assert_failed(box, done, 2)
    assert f"contract error: workspace is not a directory: {box.workspace}\n" in done.stderr


def test_unreadable_task_data_exits_2(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, "def verify(task_data):\n    return 1\n")
    (tmp_path / "task.json").write_text("{not json")
    done = box.run("--task-data", str(tmp_path / "task.json"))
    _assert_failed(box, done, 2)
    assert f"contract error: cannot read --task-data {tmp_path / 'task.json'}: " in done.stderr


def test_bad_command_line_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(RUNNER_SOURCE), "--verifier", "v.py"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert "the following arguments are required: --workspace" in done.stderr


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", rv.REWARD_FILES)
@pytest.mark.parametrize(
    ("source", "status", "expected"),
    [
        ("def verify():\n    return 0\n", 0, {"reward.txt": "0\n"}),
        ("def verify():\n    raise OSError('x')\n", 1, {}),
        ("def verify():\n    return 'pass'\n", 2, {}),
    ],
    ids=["reward", "raised", "contract"],
)
def test_planted_reward_entries_never_stand(
    tmp_path: Path, name: str, kind: str, source: str, status: int, expected: dict[str, str]
) -> None:
    box = Sandbox(tmp_path, source)
    box.reward_dir.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    _plant(box.reward_dir, name, kind, outside)
    done = box.run()
    assert done.returncode == status, done.stderr
    assert box.rewards() == expected
    assert sorted(p.name for p in box.reward_dir.iterdir()) == sorted(expected)


# --- sys.path order ---------------------------------------------------------------------

PATH_PROBE = """
import json
import sys

import casstore_verify
import beside_tests
import beside_verifier


def verify(workspace):
    record = {
        "front": sys.path[:3],
        "counts": [sys.path.count(entry) for entry in sys.path[:3]],
        "helpers": casstore_verify.__file__,
        "has_helper_api": hasattr(casstore_verify, "same_output"),
        "beside_tests": beside_tests.WHERE,
        "beside_verifier": beside_verifier.WHERE,
        "flags_isolated": sys.flags.isolated,
    }
    (workspace / "probe.json").write_text(json.dumps(record))
    return 1
"""


def _conflicting_package(folder: Path, where: str) -> None:
    """A ``casstore_verify`` package in ``folder`` that the verifier must not import."""
    (folder / "casstore_verify").mkdir(parents=True)
    (folder / "casstore_verify" / "__init__.py").write_text(f"WHERE = {where!r}\n")


def _path_sandbox(root: Path) -> tuple[Sandbox, Path]:
    """A verifier in ``tests/checks/`` with conflicting helpers in ``tests/`` and elsewhere."""
    box = Sandbox(root, PATH_PROBE, verifier="checks/verifier.py")
    (box.tests / "beside_tests.py").write_text("WHERE = 'tests'\n")
    (box.tests / "checks" / "beside_verifier.py").write_text("WHERE = 'checks'\n")
    _conflicting_package(box.tests, "tests folder")
    pythonpath = root / "pythonpath"
    _conflicting_package(pythonpath, "PYTHONPATH")
    return box, pythonpath


def _probe(box: Sandbox) -> dict[str, Any]:
    return json.loads((box.workspace / "probe.json").read_text())


def _expected_front(box: Sandbox) -> list[str]:
    return [
        os.path.realpath(HELPERS_SOURCE),
        os.path.realpath(box.tests / "checks"),
        os.path.realpath(box.tests),
    ]


def test_path_order_beats_pythonpath_and_the_tests_folder(tmp_path: Path) -> None:
    box, pythonpath = _path_sandbox(tmp_path)
    # Every one of the three folders is already on PYTHONPATH, in the wrong order, behind
    # the conflicting package.
    entries = [pythonpath, box.tests, box.tests / "checks", HELPERS_SOURCE]
    done = box.run(PYTHONPATH=os.pathsep.join(str(entry) for entry in entries))
    assert (done.returncode, box.rewards()) == (0, {"reward.txt": "1\n"}), done.stderr
    probe = _probe(box)
    assert probe["front"] == _expected_front(box)
    assert probe["counts"] == [1, 1, 1]
    assert probe["helpers"] == str(HELPERS_SOURCE / "casstore_verify" / "__init__.py")
    assert probe["has_helper_api"] is True
    assert (probe["beside_tests"], probe["beside_verifier"]) == ("tests", "checks")
    assert probe["flags_isolated"] == 0


def test_path_order_under_isolated_mode(tmp_path: Path) -> None:
    box, pythonpath = _path_sandbox(tmp_path)
    done = box.run(flags=("-I",), PYTHONPATH=str(pythonpath))
    assert (done.returncode, box.rewards()) == (0, {"reward.txt": "1\n"}), done.stderr
    probe = _probe(box)
    assert probe["flags_isolated"] == 1
    assert probe["front"] == _expected_front(box)
    assert probe["helpers"] == str(HELPERS_SOURCE / "casstore_verify" / "__init__.py")


def test_helpers_imported_early_from_elsewhere_are_replaced(tmp_path: Path) -> None:
    box, pythonpath = _path_sandbox(tmp_path)
    (pythonpath / "sitecustomize.py").write_text("import casstore_verify\n")
    done = box.run(PYTHONPATH=str(pythonpath))
    assert done.returncode == 0, done.stderr
    assert _probe(box)["helpers"] == str(HELPERS_SOURCE / "casstore_verify" / "__init__.py")


def _system_python() -> str | None:
    """A ``python3`` >= 3.10 that is not this interpreter (the bare system one), if any."""
    candidates = ["/usr/bin/python3", shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")]
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        if os.path.realpath(candidate) == os.path.realpath(sys.executable):
            continue
        version = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info >= (3, 10))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if version.stdout.strip() == "True":
            return candidate
    return None


@pytest.mark.parametrize("flags", [(), ("-I",)], ids=["plain", "isolated"])
def test_runs_on_the_system_python_with_the_standard_library_only(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    python = _system_python()
    if python is None:
        pytest.skip("no system python3 >= 3.10 besides this interpreter")
    box, pythonpath = _path_sandbox(tmp_path)
    done = box.run(python=python, flags=flags, PYTHONPATH=str(pythonpath))
    assert (done.returncode, box.rewards()) == (0, {"reward.txt": "1\n"}), done.stderr
    assert _probe(box)["front"] == _expected_front(box)
    failing = Sandbox(tmp_path / "failing", "async def verify():\n    raise ValueError('no')\n")
    _assert_failed(failing, failing.run(python=python, flags=flags), 1)


# --- the vendored helpers ---------------------------------------------------------------


def test_workspace_file_resolves_inside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert helpers.workspace_file(tmp_path, "out/../out/result.txt") == (
        tmp_path.resolve() / "out" / "result.txt"
    )


@pytest.mark.parametrize("relative", ["../secret", "/etc/passwd", "link/secret"])
def test_workspace_file_refuses_paths_leaving_the_workspace(tmp_path: Path, relative: str) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "link").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="workspace"):
        helpers.workspace_file(workspace, relative)


def test_read_text_and_read_json(tmp_path: Path) -> None:
    (tmp_path / "answer.txt").write_text("42\n")
    (tmp_path / "result.json").write_text('{"passed": 3}')
    assert helpers.read_text(tmp_path, "answer.txt") == "42\n"
    assert helpers.read_json(tmp_path, "result.json") == {"passed": 3}
    assert helpers.read_text(tmp_path, "missing.txt", default="") == ""
    assert helpers.read_json(tmp_path, "missing.json", default=None) is None
    with pytest.raises(FileNotFoundError):
        helpers.read_text(tmp_path, "missing.txt")
    with pytest.raises(FileNotFoundError):
        helpers.read_json(tmp_path, "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError):
        helpers.read_json(tmp_path, "bad.json", default={})


def test_normalize_and_compare_outputs() -> None:
    assert helpers.normalize_output("a  \r\nb\rc\t\n\n\n") == "a\nb\nc"
    assert helpers.normalize_output("Hello\n", ignore_case=True) == "hello"
    assert helpers.same_output("1 2 3 \n", "1 2 3")
    assert not helpers.same_output("1 2 3", "1  2 3")
    assert not helpers.same_output("Yes", "yes")
    assert helpers.same_output("Yes", "yes", ignore_case=True)
    assert not helpers.same_output("a\n\nb", "a\nb")


def test_fraction_passed() -> None:
    assert helpers.fraction_passed([True, False, True, True]) == 0.75
    assert helpers.fraction_passed({"compiles": True, "tests": False}) == 0.5
    assert helpers.fraction_passed(x > 0 for x in [1, 2]) == 1.0
    with pytest.raises(ValueError, match="no checks"):
        helpers.fraction_passed([])


def test_helpers_use_the_standard_library_only() -> None:
    python = _system_python() or sys.executable
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS_SOURCE)!r}); import casstore_verify; "
        "print(sorted(casstore_verify.__all__))"
    )
    done = subprocess.run(
        [python, "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted(helpers.__all__))
