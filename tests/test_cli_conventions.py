"""The command line's conventions (issue 18, items 5 and 7): ``-h``, ``--version``, global
options on either side of the command, shell completion, help that reads well, and text
output that reads well (tables, empty sections, notes)."""

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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["ls", "bogus"],
            "Invalid value for 'what': 'bogus' is not one of 'tasks', 'tasksets', 'jobs'.",
        ),
        (
            ["pack", ".", "-o", "x.tar", "-c", "bz2"],
            "Invalid value for '--compression' / '-c': 'bz2' is not one of 'gzip', 'zstd', 'none'.",
        ),
        (
            ["log", "x", "--kind", "tasks"],
            "Invalid value for '--kind': 'tasks' is not one of 'task', 'taskset'.",
        ),
    ],
)
def test_a_bad_choice_is_one_line_without_pydantics_words(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """typer words a refused choice as pydantic does (`Value error, 'x' is not one of ...`)."""
    code, out, err = run_cli(capsys, *argv)
    assert (code, out, err) == (2, "", f"casstore: {message}\n")


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
    shown = {"--help": " DIR ", "pack": "<path>", "gc": "FLOAT", "publish": "<str>"}
    for command, value in shown.items():
        _, out, _ = run_cli(capsys, *dict.fromkeys([command, "--help"]))
        assert "<bool>" not in out
        assert value in out  # an option taking a value shows its type


# --- item 7: text output ------------------------------------------------------------------


def test_rescore_tables_are_tab_separated_when_piped(
    example_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "rescore", str(example_job))
    assert (code, err) == (0, "")
    assert "┃" not in out and "│" not in out
    assert (
        "outputs\n"
        "output\tmean\t± stderr\t95% CI\tmeasured\tcoverage\n"
        "reward\t0.6667\t0.2404\t[0.295, 0.905]\t15/15\t1.000\n"  # issue 14: Wilson
        "style\t0.6540\t—\t—\t5/5\t1.000\n"
    ) in out
    assert "k\tpass@k\t± stderr\tpass^k\teligible tasks\n1\t0.6667\t0.2404\t0.6667\t3\n" in out


def test_harbor_metrics_are_a_table_and_empty_sections_are_not_printed(
    example_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run_cli(capsys, "rescore", str(example_job))
    assert "harbor metrics\nmetric\tvalue\nreward\t0.6666666666666666\nstyle\t0.218\n" in out
    assert "harbor pass@k" not in out  # Harbor computed none for this job
    assert "{" not in out and "[{" not in out  # no Python repr anywhere
    assert "exceptions AgentTimeoutError 1, NonZeroAgentExitCodeError 1" in out
    assert "diagnostics   verifier_result_missing 1" in out


def test_rescore_tasks_prints_a_table_of_every_task(
    example_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run_cli(capsys, "rescore", str(example_job), "--tasks", "--json")
    tasks = json.loads(out)["tasks"]
    _, out, _ = run_cli(capsys, "rescore", str(example_job), "--tasks")
    lines = out.split("tasks\ntask\tattempts\tsuccesses\tmean reward\tstatuses\n")[1].splitlines()
    assert len(tasks) == 3
    for line, task in zip(lines, tasks, strict=False):
        name, attempts, successes, mean, _ = line.split("\t")
        assert (name, int(attempts), int(successes)) == (
            task["task"],
            task["attempts"],
            task["successes"],
        )
        assert mean == f"{task['outputs']['reward']['mean']:.4f}"
    _, plain, _ = run_cli(capsys, "rescore", str(example_job))
    assert "\ntasks\n" not in plain


def test_a_k_without_eligible_task_is_named(
    example_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run_cli(capsys, "rescore", str(example_job), "--k", "1,5,6,50")
    assert "6\t—\t—\t—\t0\n50\t—\t—\t—\t0\n" in out
    note = "no eligible task for k = 6, 50: no task has that many attempts (tasks have at most 5)"
    assert f"\n{note}\n" in out
    assert "no eligible task" not in run_cli(capsys, "rescore", str(example_job))[1]


@pytest.mark.parametrize("what", ["tasks", "tasksets", "jobs"])
def test_ls_of_an_empty_store_says_so(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from casstore.store import Store

    Store(tmp_path / "store", create=True).close()
    code, out, err = run_cli(capsys, "--store", str(tmp_path / "store"), "ls", what)
    assert (code, out) == (0, "")
    assert err.startswith(f"no {what} in the store {tmp_path / 'store'} (")
    code, out, err = run_cli(capsys, "--store", str(tmp_path / "store"), "ls", what, "--json")
    assert (code, json.loads(out), err) == (0, [], "")


def test_demo_prints_harbor_metrics_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "demo", "--dir", str(tmp_path / "demo"))
    assert code == 0
    assert "step\tresult\n" in out
    line = "rescore\tharbor metrics reward 0.6666666666666666, style 0.218: as the job recorded\n"
    assert line in out


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


def test_harbor_pass_at_k_is_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.trials_builder import make_job, trial_json, trial_result

    trials = {
        f"{task}__{attempt}": trial_json(
            trial_result(task, f"{task}__{attempt}", {"reward": float(attempt < wins)})
        )
        for task, wins in (("a", 1), ("b", 2))
        for attempt in range(2)
    }
    job = make_job(tmp_path / "job", trials)
    _, out, _ = run_cli(capsys, "rescore", str(job), "--json")
    harbor = json.loads(out)["harbor_pass_at_k"]
    ((key, values),) = harbor.items()
    assert values == {"2": 1.0}
    _, out, _ = run_cli(capsys, "rescore", str(job))
    assert f"harbor pass@k\nevals key\tk\tpass@k\n{key}\t2\t1.0\n" in out
