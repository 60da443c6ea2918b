"""The public Python API (``casstore.__all__``): exact names, lazy loading, and the README's
example run on real Harbor data."""

from __future__ import annotations

import ast
import inspect
import json
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import pytest

import casstore
from tests.conftest import FIXTURES
from tests.helpers import make_task, store_cli

ROOT = Path(__file__).resolve().parents[1]
JOB = FIXTURES / "jobs" / "tb2-haiku" / "jobs" / "2026-05-10__01-23-57"
SIMPLE = FIXTURES / "tasks" / "harbor-cookbook" / "simple-task"

API = [
    "Bundle",
    "CasstoreError",
    "CheckoutResult",
    "Comparison",
    "DiscoveredTask",
    "FsckReport",
    "GcReport",
    "ImportReport",
    "JobRecord",
    "Jobs",
    "Limits",
    "NameLog",
    "Outcome",
    "PackResult",
    "Progress",
    "PublishResult",
    "PullReport",
    "PushReport",
    "Registration",
    "Remote",
    "RemoteFsckReport",
    "ReportResult",
    "RewardTable",
    "RunOptions",
    "RunResult",
    "ScoreReport",
    "Store",
    "TaskCollection",
    "TasksetResult",
    "TrialRecord",
    "VerifyResult",
    "View",
    "add_remote",
    "check_run_options",
    "checkout",
    "checkout_remote",
    "compare",
    "create_taskset",
    "discover_tasks",
    "export_gage",
    "extract",
    "fsck",
    "fsck_remote",
    "gc",
    "import_jobs",
    "list_remotes",
    "log",
    "ls_remote",
    "open_bundle",
    "open_store",
    "pack",
    "pack_into",
    "publish",
    "pull",
    "push",
    "remove_remote",
    "rename",
    "replace_taskset",
    "rescore",
    "rescore_remote",
    "rm",
    "run_job",
    "score_run",
    "verify",
    "verify_bundle",
    "verify_each",
    "write_bundle",
    "write_report",
]


def _python(script: str) -> str:
    """The stdout of ``python -c script`` run in a fresh interpreter from the repository."""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_all_is_exactly_the_api() -> None:
    assert casstore.__all__ == API
    for name in API:
        assert getattr(casstore, name) is not None
        assert name in dir(casstore)
    with pytest.raises(AttributeError, match="no attribute 'pack_tree'"):
        _ = casstore.pack_tree


def test_dir_lists_the_public_names_and_the_base_modules() -> None:
    assert dir(casstore) == sorted([*API, "digest", "errors", "names"])
    script = (
        "import casstore; "
        "print(casstore.names.default_name('org/task'), casstore.errors.UsageError.kind, "
        "casstore.digest.Digest.__name__)"
    )
    assert _python(script) == "org-task usage Digest\n"


def test_signatures_read_as_written() -> None:
    signature = inspect.signature(casstore.checkout)
    assert repr(signature.parameters["progress"].default) == "NO_PROGRESS"
    shown = pydoc.render_doc(casstore, renderer=pydoc.plaintext)
    assert "_NoProgress object" not in shown and "progress: 'Progress' = NO_PROGRESS" in shown


def test_gc_is_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``casstore.gc`` removes what ``casstore gc`` removes (the command calls it)."""
    root = tmp_path / "store"
    task = make_task(tmp_path)
    with casstore.open_store(root) as store:
        casstore.publish(store, task)
        orphan = casstore.publish(store, task, "orphan", compression="zstd")[0]
        store.index.write(lambda txn: txn.delete("tasks", "default/orphan"))
        store.index.write(lambda txn: txn.delete("revisions", orphan.revision))
        listed = casstore.gc(store, dry_run=True, min_age=0)
        assert isinstance(listed, casstore.GcReport) and listed.removed == [orphan.archive_ref]
        with pytest.raises(casstore.errors.UsageError, match="min_age: expected a number"):
            casstore.gc(store, min_age="0")
    code, shown, _ = store_cli(capsys, root, "gc", "--dry-run", "--min-age", "0", "--json")
    assert (code, shown) == (0, listed.model_dump())
    with casstore.open_store(root) as store:
        assert casstore.gc(store, min_age=0).removed == [orphan.archive_ref]
        assert casstore.gc(store, min_age=0).removed == []


def test_type_imports_name_the_same_homes() -> None:
    """The ``TYPE_CHECKING`` imports (what type checkers see) and the lazy table agree."""
    tree = ast.parse((ROOT / "casstore" / "__init__.py").read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If)]
    seen = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == casstore._HOMES
    for name, home in seen.items():
        assert getattr(casstore, name) is getattr(__import__(home, fromlist=[name]), name)


def test_import_casstore_loads_nothing_heavy() -> None:
    script = (
        "import sys, casstore, casstore.errors; "
        "print(sorted(m for m in ('numpy', 'harbor', 'lmdb', 'pydantic', 'scoring') "
        "if m in sys.modules))"
    )
    assert _python(script).strip() == "[]"


@pytest.mark.realdata
def test_readme_example_on_real_data(tmp_path: Path) -> None:
    """Discover, publish, pin, check out, import and rescore through the API only; the
    figures are Harbor's own (the job's recorded mean) and the CLI's (the same address)."""
    packed = casstore.pack(SIMPLE, tmp_path / "simple.tar.gz")
    assert casstore.verify(tmp_path / "simple.tar.gz", str(packed.address)).entries == 11
    extracted = casstore.extract(tmp_path / "simple.tar.gz", tmp_path / "out")
    assert extracted.content_digest == packed.content_digest
    assert (tmp_path / "out" / "simple-task" / "task.toml").is_file()

    tasks = casstore.discover_tasks(FIXTURES / "tasks" / "harbor-workshop")
    assert [t.id for t in tasks] == [
        "cipher",
        "example-task",
        "example-task-airgapped",
        "three-body-problem",
    ]
    root = tmp_path / "store"
    with casstore.open_store(root) as store:
        results = [store.tasks.replace(t.id.replace("/", "-"), t) for t in tasks]
        assert [r.reused for r in results] == [False] * 4
        again = casstore.publish(store, FIXTURES / "tasks" / "harbor-workshop")
        assert [r.revision for r in again] == [r.revision for r in results]
        assert all(r.reused for r in again)
        pinned = casstore.create_taskset(store, "suite", [r.name for r in results])
        done = casstore.checkout(store, "default/suite", tmp_path / "dataset")
        assert [row["revision"] for row in done.tasks] == [p["revision"] for p in pinned.tasks]
        (report,) = casstore.import_jobs(store, [JOB])
        assert (report.trials, report.imported) == (89, 89)
        assert casstore.fsck(store).ok
    with casstore.open_store(root, create=False) as store:
        assert casstore.fsck(store).count("trials") == 89
    scored = casstore.rescore([JOB.name], store=root).to_json()
    assert scored["resolve_rate"] == 0.4157303370786517
    recorded = json.loads((JOB / "result.json").read_bytes())
    (evals,) = recorded["stats"]["evals"].values()
    assert scored["harbor_metrics"] == evals["metrics"]


def _readme_api() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Python API") : text.index("## Limits")]


def test_readme_documents_every_name() -> None:
    section = _readme_api()
    missing = [name for name in casstore.__all__ if f"`{name}" not in section]
    assert missing == []


@pytest.mark.realdata
def test_readme_example_runs(tmp_path: Path) -> None:
    """The README's example, run as a user would (its paths made absolute), prints Harbor's
    recorded mean."""
    section = _readme_api()
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace("../shared/fixtures", str(FIXTURES))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout == "0.4157303370786517\n"
    assert sorted(p.name for p in (tmp_path / "dataset").iterdir()) == [
        "cipher",
        "example-task",
        "example-task-airgapped",
        "three-body-problem",
    ]


def test_docstrings_and_readme_say_what_store_members_are() -> None:
    """A ``:meth:`` reference names a method, an ``:attr:`` one an attribute; ``Store.fsck``
    and the README say that it leaves the imported jobs to ``casstore.fsck``."""
    for name in casstore.__all__:
        doc = inspect.getdoc(getattr(casstore, name)) or ""
        for role, member in re.findall(r":(meth|attr):`Store\.(\w+)`", doc):
            is_method = inspect.isfunction(inspect.getattr_static(casstore.Store, member))
            assert is_method == (role == "meth"), f"{name}: :{role}:`Store.{member}`"
    assert "casstore.fsck(store)" in (casstore.Store.fsck.__doc__ or "")
    (row,) = [line for line in _readme_api().splitlines() if line.startswith("| `open_store(")]
    assert "`fsck` of the archives and references only" in row
