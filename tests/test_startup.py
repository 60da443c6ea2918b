"""Start-up: each command loads only what it uses (README, "Start-up"), and the shortcuts that
make it so (cli.help, cli.coerce, the lazy scoring package) change no output.

Loaded modules are read in a fresh interpreter after the command ran; no time is measured
here (benchmarks/test_bench_cli.py measures the whole processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer._click import Context
from typer._coercion import build_runtime_param

from casstore.archive.pack import pack_tree
from cli.coerce import LightParam, light_coercion, parameters
from cli.main import app
from tests.helpers import make_task, python, run_fresh, without_bytecode

HEAVY = {"numpy", "scoring._engine", "harbor", "pydantic", "lmdb", "msgspec", "casstore.store"}
HELP_ONLY = {"rich.markdown", "rich.traceback", "markdown_it", "pygments"}


def loaded(tmp_path: Path, *argv: str) -> tuple[int, str, set[str]]:
    """``casstore argv`` in a fresh interpreter: exit status, stdout, the modules loaded."""
    code, out, err, modules = run_fresh(tmp_path, *argv)
    assert code in (0, 2), err  # 2: help for no command at all
    return code, out, modules


def top_level(modules: set[str], names: set[str]) -> set[str]:
    """The modules of ``names`` (packages with their submodules) found in ``modules``."""
    return {m for m in modules for n in names if m == n or m.startswith(n + ".")}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small task's archive, packed once: the session cache then knows its task.toml."""
    base = tmp_path_factory.mktemp("startup")
    out = base / "task.tar.gz"
    pack_tree(make_task(base, files={"tests/test.sh": "echo 1\n"}), out)
    return out


def test_help_loads_no_work_and_no_unused_rich_module(tmp_path: Path) -> None:
    for argv in (["--help"], ["pack", "--help"], []):
        _, out, modules = loaded(tmp_path, *argv)
        assert "Usage: casstore" in out
        assert not top_level(modules, HEAVY | HELP_ONLY | {"casstore.archive.compress"})


@pytest.mark.parametrize(
    "argv",
    [
        ["pack", "TASK", "-o", "OUT"],
        ["pack", "TASK", "-o", "OUT_ZST", "--json", "-c", "zstd"],
        ["verify", "ARCHIVE"],
        ["verify", "ARCHIVE", "--json"],
        ["extract", "ARCHIVE", "DEST"],
    ],
)
def test_archive_commands_load_no_store_numpy_harbor_pydantic_or_rich(
    argv: list[str], archive: Path, tmp_path: Path
) -> None:
    names = {
        "TASK": str(make_task(tmp_path, files={"tests/test.sh": "echo 1\n"})),
        "OUT": str(tmp_path / "out.tgz"),
        "OUT_ZST": str(tmp_path / "out.tar.zst"),  # (a .tgz name refuses -c zstd)
        "ARCHIVE": str(archive),
        "DEST": str(tmp_path / "dest"),
    }
    code, _, modules = loaded(tmp_path, *[names.get(a, a) for a in argv])
    assert code == 0
    assert not top_level(modules, HEAVY | HELP_ONLY | {"rich"})  # plain lines need no rich


@pytest.mark.parametrize("argv", [["pack", "TASK", "-o", "OUT"], ["verify", "ARCHIVE"]])
def test_gzip_commands_load_no_zstandard_or_thread_pool(
    argv: list[str], archive: Path, tmp_path: Path
) -> None:
    """zstd's module is loaded for a zstd stream only; the gzip encoder's threads need no
    concurrent.futures (which imports logging), the archive's temporary file no tempfile
    (random and its extension modules): start-up of the commonest commands."""
    names = {
        "TASK": str(make_task(tmp_path, files={"tests/test.sh": "echo 1\n"})),
        "OUT": str(tmp_path / "out.tgz"),
        "ARCHIVE": str(archive),
    }
    code, _, modules = loaded(tmp_path, *[names.get(a, a) for a in argv])
    assert code == 0
    assert "casstore.archive.compress" in modules
    assert not top_level(modules, {"zstandard", "concurrent.futures", "logging"})
    assert argv[0] != "pack" or "tempfile" not in modules  # the archive's temporary: os.open


def test_ls_loads_no_numpy_scoring_harbor_pydantic_rich_or_packer(
    tmp_path: Path, archive: Path
) -> None:
    """The store's records are msgspec Structs: ``ls`` reads them without pydantic."""
    store = tmp_path / "store"
    task = make_task(tmp_path)
    loaded(tmp_path, "--store", str(store), "publish", str(task))
    code, out, modules = loaded(tmp_path, "--store", str(store), "ls", "tasks")
    assert code == 0
    assert out.startswith("default/task#sha256:")
    assert not top_level(modules, {"numpy", "scoring._engine", "harbor", "rich", "pydantic"})
    assert "casstore.store.records" in modules and "msgspec" in modules  # (rich: plain lines)
    packer_and_reader = {"casstore.archive.pack", "casstore.archive.read", "zstandard", "isal"}
    assert not top_level(modules, packer_and_reader | {"casstore.store.checkout"})


@pytest.mark.parametrize(
    "argv", [["--help"], ["pack", "--help"], ["taskset", "--help"], ["verifier"], []]
)
def test_help_is_the_same_as_with_the_real_rich_modules(argv: list[str]) -> None:
    """cli.help's stand-ins change no byte of the help (compared with a run that imported
    rich.markdown and rich.traceback first, so that no stand-in is used)."""
    env = os.environ | {"COLUMNS": "100", "TERM": "dumb"}
    real = "import rich.markdown, rich.traceback, sys; from cli.main import run; run(sys.argv[1:])"
    light = "import sys; from cli.main import run; run(sys.argv[1:])"
    outputs = [python(code, *argv, env=env) for code in (light, real)]
    assert "Usage: casstore" in outputs[0]
    assert outputs[0] == outputs[1]


def test_the_stand_ins_are_gone_after_help() -> None:
    script = (
        "import sys; from cli.main import run; run(['--help']); "
        "assert 'rich.markdown' not in sys.modules and 'rich.traceback' not in sys.modules; "
        "import typer.rich_utils as u, rich.markdown, rich.traceback; "
        "assert hasattr(rich.markdown, 'Heading') and hasattr(rich.traceback, 'Frame'); "
        "assert isinstance(u.Markdown('# x'), rich.markdown.Markdown)"
    )
    python(script)


# --- cli.output: a plain line printed without rich, as rich prints it (made printable) ------

LINES = [
    "ok sha256:ab  /tmp/archive.tar.gz",
    "x" * 300 + " long, beyond any terminal width ",
    "trailing spaces   ",
    "",
    "  leading",
    "→ é 漢字 🙂 e\u0301 \u200b",
    ":cd: :100: emoji codes",
    "a [bold]b[/bold] [link=x]c[/link] [not markup",
    "\\[escaped] back\\slash\\",
    "tab\there",
    "two\nlines",
    "carriage\rreturn \x07 bell \x1b[31mred\x1b[0m \x7f \x85",
    "surrogate \udcff",
]


@pytest.mark.parametrize("stderr", [False, True])
def test_a_plain_line_prints_as_rich_prints_it(
    stderr: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    from casstore.errors import printable
    from cli.output import _LazyConsole

    options: dict[str, Any] = dict(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)
    plain, real = _LazyConsole(**options), Console(**options)
    direct = 0
    for line in LINES:
        outputs = []
        for console, text in ((plain, line), (real, printable(line))):  # controls escaped
            error = None
            try:
                console.print(text)
            except UnicodeEncodeError as raised:  # the lone surrogate: the same error
                error = str(raised)
            captured = capsys.readouterr()
            outputs.append((error, captured.out, captured.err))
        assert outputs[0] == outputs[1], line
        direct += "_console" not in vars(plain)
    assert direct == 7  # the lines before the first that needs rich were written directly


# --- cli.coerce: typer's answers without pydantic ------------------------------------------


def _outcome(convert: Any, value: Any, param: Any, ctx: Context) -> tuple[Any, ...]:
    try:
        return ("ok", convert(value, param=param, ctx=ctx))
    except Exception as error:  # typer's BadParameter, or anything else: compared as text
        return ("error", type(error).__name__, str(error))


def _samples(annotation: Any, tmp_path: Path) -> list[Any]:
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir(exist_ok=True)
    texts = ["", "a b", "x\udcff", "-", "0", "1.5", "inf", "~/x", "gzip", "GZIP", "zstd"]
    texts += ["lzma", "tasks", "Tasks", "bogus", str(tmp_path), str(unreadable), "/no/such"]
    return [*texts, None, True, 3, 2.5, Path("p"), (), ("a", "b"), ["x", str(tmp_path)]]


def test_light_coercion_gives_typers_answers(tmp_path: Path) -> None:
    command = typer.main.get_command(app)
    params = list(parameters(command))
    assert light_coercion(command) == len(params) > 60  # every parameter, help options too
    ctx = Context(command)
    compared = 0
    for param in params:
        light = param._runtime_param
        assert isinstance(light, LightParam)
        real = build_runtime_param(param.type_descriptor)
        for value in _samples(param.type_descriptor.annotation, tmp_path):
            got = _outcome(light._coerce_value, value, param, ctx)
            want = _outcome(real._coerce_value, value, param, ctx)
            assert got == want, (param.name, value)
            compared += 1
    assert compared > 1000


# --- the scoring package loads NumPy with the first name that needs it ---------------------


def test_scoring_defaults_load_no_numpy_and_every_name_resolves() -> None:
    script = (
        "import sys, scoring, scoring._defaults; assert 'numpy' not in sys.modules; "
        "names = [getattr(scoring, n) for n in scoring.__all__]; "
        "assert 'numpy' in sys.modules and scoring.BUILTIN_METRIC_NAMES == tuple("
        "scoring.BUILTIN_METRICS); print(len(names))"
    )
    printed = python(script)
    import scoring

    assert int(printed) == len(scoring.__all__) and sorted(dir(scoring)) == sorted(scoring.__all__)


def test_every_name_of_the_store_package_resolves() -> None:
    script = (
        "import sys, casstore.store as s; assert 'casstore.store.core' not in sys.modules; "
        "names = [getattr(s, n) for n in s.__all__]; "
        "assert s.Store.publish.__module__ == 'casstore.store.publish'; print(len(names))"
    )
    printed = python(script)
    import casstore.store

    assert int(printed) == len(casstore.store.__all__)
    assert sorted(dir(casstore.store)) == sorted(casstore.store.__all__)


# --- bytecode: the .venv runs compiled, as a pip install does (Makefile) --------------------

COMPILED = [
    "typer",
    "typer.main",
    "msgspec",
    "cli.main",
    "casstore.store.records",
    "scoring",
    "harbor.models.task.config",
    "numpy",
    "rich.table",
    "rich._emoji_codes",  # loaded by --help only
]


def test_the_venv_holds_current_bytecode_of_its_packages_and_the_projects() -> None:
    """``make`` compiles casstore, cli and scoring and the third-party modules their commands
    load (scripts/compile-bytecode, rerun when a source changes), so even under
    PYTHONDONTWRITEBYTECODE=1 no import of a command compiles its source."""
    assert without_bytecode(Path(sys.executable), COMPILED) == []


def test_a_changed_source_reads_as_stale(tmp_path: Path) -> None:
    """The check above tells a stale .pyc from a current one (as Python does, by the source's
    mtime and size): a module compiled, then edited, is stale until recompiled."""
    source = tmp_path / "mod.py"
    source.write_text("X = 1\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONPATH"] = str(tmp_path)
    python = Path(sys.executable)
    assert without_bytecode(python, ["mod"], env) == ["mod no .pyc"]
    subprocess.run([python, "-m", "py_compile", source], env=env, check=True)
    assert without_bytecode(python, ["mod"], env) == []
    source.write_text("X = 22\n")
    assert without_bytecode(python, ["mod"], env) == ["mod stale .pyc"]
