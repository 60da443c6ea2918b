"""``casstore demo``: the whole data path on an embedded example, start to finish.

In ``--dir`` (default ``casstore-demo``) it writes an example suite (a multi-step task,
executable scripts, an in-tree symlink, an empty directory), packs and verifies one archive by
hand, publishes the suite into the store ``<dir>/store``, pins a taskset, checks it out and
validates every task with Harbor's own ``Task``, imports a Harbor job tree (written with
Harbor's own models, or ``--job DIR``), and rescores it. Re-running reuses what is stored.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from casstore.errors import CheckError, UsageError, blocking_file
from cli.options import JsonOption
from cli.output import emit_json, out_console, print_table
from cli.rescore import print_report

if TYPE_CHECKING:
    from casstore.store import Store

__all__ = ["register"]

TASKSET = "demo-suite"


def demo(
    directory: Annotated[
        Path, typer.Option("--dir", help="Working folder for the demo (created if needed).")
    ] = Path("casstore-demo"),
    job: Annotated[
        Path | None,
        typer.Option("--job", help="A real Harbor job directory to import instead of the example."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Run the whole data path on an example suite: pack, publish, checkout, import, rescore."""
    # every layer, imported here for start-up time (README, "Start-up")
    from casstore.archive.discover import discover
    from casstore.examples.job import write_example_job
    from casstore.examples.suite import EXAMPLE_TASKS, write_example_suite
    from casstore.sources import check_taskset
    from casstore.store import Store
    from casstore.trials import Jobs
    from scoring import score

    if (blocker := blocking_file(directory)) is not None:
        what = "not a directory (--dir names the demo's working folder)"
        raise UsageError(
            str(directory), what if blocker == directory else f"{blocker} is not a directory"
        )
    if job is not None and not job.is_dir():
        raise UsageError(str(job), "--job must be an existing Harbor job directory")
    started = time.perf_counter()
    suite = write_example_suite(directory / "suite")
    steps: list[tuple[str, str]] = [("write suite", f"{len(EXAMPLE_TASKS)} tasks in {suite}")]
    archive = _archive_round_trip(suite / next(iter(EXAMPLE_TASKS)), directory / "archives")
    steps.append(("pack/verify/extract", f"{archive['address']} ({archive['entries']} entries)"))
    with Store(directory / "store", create=True) as store:
        published = [store.publish(task) for task in discover(suite)]
        reused = sum(result.reused for result in published)
        steps.append(("publish", f"{len(published)} tasks ({reused} reused)"))
        pinned = store.tasksets.replace(TASKSET, [result.name for result in published])
        steps.append(("taskset", f"{pinned.ref}#{pinned.revision}"))
        checkout = _checkout(store, f"{pinned.ref}#{pinned.revision}", directory / "checkout")
        steps.append(("checkout", f"{len(checkout.tasks)} tasks → {checkout.dest}, Harbor OK"))
        job_dir = job or write_example_job(directory / "jobs", list(EXAMPLE_TASKS))
        (imported,) = Jobs(store).import_jobs([job_dir])
        steps.append(("import", f"{imported.trials} trials ({imported.imported} new)"))
        table = Jobs(store).reward_table(imported.job)
    if job is None:
        check_taskset(table, directory / "store", pinned.ref)
    report = score(table)
    recorded = _recorded_metrics(job_dir)
    steps.append(("rescore", _metrics_step(report.harbor_metrics, recorded)))
    seconds = round(time.perf_counter() - started, 2)
    if json:
        emit_json(_json(directory, archive, published, pinned, checkout, imported, report, seconds))
        return
    _print(steps, directory, seconds)
    print_report(report)


def _archive_round_trip(task: Path, archives: Path) -> dict[str, Any]:
    from casstore.archive.pack import pack_tree
    from casstore.archive.read import extract_archive, verify_archive

    archives.mkdir(parents=True, exist_ok=True)
    archive = archives / f"{task.name}.tar.gz"
    packed = pack_tree(task, archive)
    verified = verify_archive(archive, packed.address)
    extracted = archives / "extracted"
    shutil.rmtree(extracted, ignore_errors=True)
    extract_archive(archive, extracted, packed.address)
    if pack_tree(extracted / verified.top, None).address != packed.address:
        raise CheckError(str(extracted), "re-packing the extracted task changed its address")
    return packed.to_json() | {"archive": str(archive)}


def _checkout(store: Store, ref: str, dest: Path) -> Any:
    shutil.rmtree(dest, ignore_errors=True)
    return store.checkout(ref, dest)


def _recorded_metrics(job_dir: Path) -> list[Any] | None:
    """The metrics Harbor recorded in the job's own result.json (first evals entry)."""
    import orjson

    try:
        evals = orjson.loads((job_dir / "result.json").read_bytes())["stats"]["evals"]
        return next(iter(evals.values()))["metrics"]
    except (OSError, orjson.JSONDecodeError, KeyError, StopIteration, TypeError):
        return None


def _metrics_step(computed: list[Any] | None, recorded: list[Any] | None) -> str:
    """The rescore step: Harbor's metrics as computed, and whether they equal the recorded
    ones (``name value``, never Python reprs)."""

    def text(metrics: list[Any] | None) -> str:
        pairs = [
            f"{k} {v}"
            for entry in metrics or []
            if isinstance(entry, dict)
            for k, v in entry.items()
        ]
        return ", ".join(pairs) or "none"

    if recorded is None:
        return f"harbor metrics {text(computed)} (the job recorded none)"
    if computed == recorded:
        return f"harbor metrics {text(computed)}: as the job recorded"
    return f"harbor metrics {text(computed)}; the job recorded {text(recorded)}"


def _json(directory, archive, published, pinned, checkout, imported, report, seconds) -> dict:
    return {
        "store": str(directory / "store"),
        "archive": archive,
        "published": [result.to_json() for result in published],
        "taskset": {**pinned.to_json(), "reused": pinned.reused},
        "checkout": checkout.model_dump(),
        "import": imported.to_json(),
        "rescore": report.to_json(tasks=False),
        "seconds": seconds,
    }


def _print(steps: list[tuple[str, str]], directory: Path, seconds: float) -> None:
    title = f"casstore demo in {directory} ({seconds} s)"
    print_table(title, ("step", "result"), steps, left=2, fold=("result",))
    out_console.print(
        f"store: {directory / 'store'}  (casstore --store {directory / 'store'} ls tasks)"
    )


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command()(demo)
