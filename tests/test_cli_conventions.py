"""The command line's conventions (issue 18, item 5): ``-h``, ``--version``, global options
on either side of the command, shell completion, help that reads well, progress on a
terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from casstore.examples.job import write_example_job
from casstore.examples.suite import EXAMPLE_TASKS
from tests.helpers import ROOT, make_task, run_cli
from tests.test_startup import HEAVY, loaded, top_level


def casstore(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``casstore`` (``cli.main.main``) in a fresh process."""
    script = "import sys; from cli.main import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=ROOT,
        env=os.environ | (env or {}),
        capture_output=True,
        text=True,
    )


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store holding one published task, ``default/task``."""
    root = tmp_path / "store"
    code, _, err = run_cli(capsys, "--store", str(root), "publish", str(make_task(tmp_path)))
    assert code == 0, err
    return root


@pytest.fixture(scope="module")
def example_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's Harbor job: 3 tasks, 5 attempts each."""
    return write_example_job(tmp_path_factory.mktemp("job") / "jobs", list(EXAMPLE_TASKS))


# --- item 5: conventions ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["-h"], ["rescore", "-h"], ["taskset", "create", "-h"], ["verifier", "init", "-h"]]
)
def test_h_is_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, err) == (0, "")
    assert f"Usage: casstore {' '.join(argv[:-1])}".rstrip() in out
    assert "-h" in out and "--help" in out


def test_version_names_casstore_harbor_and_python_and_loads_no_work(tmp_path: Path) -> None:
    code, out, modules = loaded(tmp_path, "--version")
    python = ".".join(map(str, sys.version_info[:3]))
    expected = f"casstore {version('casstore')} (Harbor {version('harbor')}, Python {python})\n"
    assert (code, out) == (0, expected)
    assert not top_level(modules, HEAVY | {"rich"})


def test_store_is_accepted_after_the_command(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = run_cli(capsys, "--store", str(store), "ls", "tasks")
    assert before[0] == 0 and before[1].startswith("default/task#sha256:")
    assert run_cli(capsys, "ls", "tasks", "--store", str(store)) == before
    assert run_cli(capsys, "ls", "--store", str(store), "tasks") == before
    assert run_cli(capsys, "ls", "tasks", f"--store={store}") == before
    code, out, _ = run_cli(capsys, "taskset", "create", "one", "task", "--store", str(store))
    assert code == 0 and out.startswith("new default/one#sha256:")
    # the last --store wins, as an option given twice does
    assert run_cli(capsys, "--store", "elsewhere", "ls", "tasks", "--store", str(store)) == before


def test_json_is_accepted_before_the_command(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "--json", "ls", "tasks", "--store", str(store))
    assert code == 0
    assert [row["ref"] for row in json.loads(out)] == ["default/task"]


def test_store_without_a_value_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "ls", "tasks", "--store")
    assert (code, out) == (2, "")
    assert err == "casstore: --store: needs a value (the store directory)\n"


def test_an_argument_after_double_dash_is_not_an_option(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "--store", str(store), "show", "--", "--store")
    assert code == 2 and "--store" in err and "needs a value" not in err


def test_shell_completion_completes_commands_and_options(tmp_path: Path) -> None:
    words = {"_CASSTORE_COMPLETE": "complete_bash", "COMP_CWORD": "1"}
    done = casstore(env=words | {"COMP_WORDS": "casstore resc"})
    assert (done.returncode, done.stdout.split()) == (0, ["rescore"])
    done = casstore(env=words | {"COMP_WORDS": "casstore rescore --group", "COMP_CWORD": "2"})
    assert done.stdout.split() == ["--group-by"]
    shown = casstore("--show-completion", "bash")
    assert shown.returncode == 0 and "_casstore_completion()" in shown.stdout
    installed = casstore("--install-completion", "bash", env={"HOME": str(tmp_path)})
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "casstore.sh"
    assert script.read_text().strip() == shown.stdout.strip()
    assert str(script) in (tmp_path / ".bashrc").read_text()


def test_help_keeps_sentences_whole_and_shows_no_type_for_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = run_cli(capsys, "rescore", "--help")
    # one paragraph of the docstring, on one line of a wide terminal
    assert "from two SOURCEs (a job directory twice; an imported job plus its job" in out
    assert "<bool>" not in out
    shown = {"--help": " DIR ", "pack": "<path>", "gc": "<float range> [x>=0]", "publish": "<str>"}
    for command, value in shown.items():
        _, out, _ = run_cli(capsys, *dict.fromkeys([command, "--help"]))
        assert "<bool>" not in out
        assert value in out  # an option taking a value shows its type


class Recorder:
    """A :class:`casstore.progress.Progress` that keeps what it was told."""

    def __init__(self) -> None:
        self.totals: list[int] = []
        self.labels: list[str] = []

    def start(self, total: int) -> None:
        self.totals.append(total)

    def advance(self, label: str) -> None:
        self.labels.append(label)


def test_rescore_reports_progress_per_trial_directory(example_job: Path, tmp_path: Path) -> None:
    import casstore

    recorder = Recorder()
    report = casstore.rescore([example_job], tmp_path / "no-store", progress=recorder)
    trial_dirs = sorted(p.name for p in example_job.iterdir() if p.is_dir())
    assert report.counts["attempts"] == len(trial_dirs) == 15
    assert recorder.totals == [15]
    assert sorted(recorder.labels) == trial_dirs


def on_a_terminal(*argv: str) -> tuple[int, bytes, bytes]:
    """``casstore argv`` with stderr on a terminal (a pty) and stdout a pipe: exit status,
    stdout, and what was drawn on the terminal."""
    import pty

    main, terminal = pty.openpty()
    script = "import sys; from cli.main import main; main(sys.argv[1:])"
    env = os.environ | {"COLUMNS": "100", "TERM": "xterm"}
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=terminal,
    )
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal's other end is closed: all was read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    return done.returncode, done.stdout, drawn


def test_rescore_draws_its_progress_on_a_terminal_only(example_job: Path) -> None:
    code, out, drawn = on_a_terminal("rescore", str(example_job), "--json")
    assert code == 0, drawn
    assert json.loads(out)["counts"]["attempts"] == 15  # stdout: the data only
    assert b"rescore" in drawn  # the bar, on the terminal (stderr)
    assert b"Traceback" not in drawn and b"object repr" not in drawn
    piped = casstore("rescore", str(example_job), "--json")
    assert (piped.returncode, piped.stderr) == (0, "")


def test_progress_bars_work_on_a_terminal(tmp_path: Path) -> None:
    """rich enters the console of a progress bar as a context manager: the lazy stand-in of
    cli.output made every bar (publish, checkout, fsck, import) fail on a terminal."""
    store = str(tmp_path / "store")
    code, out, drawn = on_a_terminal("--store", store, "publish", str(make_task(tmp_path)))
    assert code == 0, drawn
    assert out.startswith(b"new    default/task#sha256:")
    assert b"object repr" not in drawn
