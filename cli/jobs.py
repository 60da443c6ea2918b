"""``casstore import`` and ``casstore export``: Harbor job trees and saved trials.

``casstore [--store DIR] import PATH... [--name NAME] [--reward-key reward] [--json]`` imports
job directories, directories of job directories and ``*.jsonl`` saved-trials files. A PATH
is exactly a job directory (a job ``config.json``/``lock.json``, or trial directories) or a
directory whose direct children are all job directories (Harbor's ``jobs/`` folder); nothing
deeper is searched, anything else is bad usage. ``--name`` names a job on its first import; a
job keeps that name (re-importing it with another ``--name`` is refused). ``--json`` prints
one object per job (a list when several): ``job``, ``trials``, ``imported`` (trials new to the
store this run), ``counts``, ``failure_codes``, ``diagnostics``.

``counts`` is the breakdown ``casstore rescore`` prints of the same job, computed by the same
function (:func:`scoring.count_attempts`, from :func:`casstore.api.import_jobs`): ``attempts``,
one status per attempt (``scored``, ``partial``, ``errored``, ``no_verifier``, ``invalid``;
:data:`scoring._defaults.STATUS_MEANINGS`), and ``harbor_errors``, the attempts with an
exception recorded, Harbor's own ``n_errors``. The text output prints it as rescore does:
``attempts 89   scored 68   partial 20   errored 1   no_verifier 0   invalid 0
harbor_errors 21``.

``casstore export JOB -o FILE [--reward-key K]`` writes the saved trials (``trials.jsonl``) of
an imported job (id or name), or of a job directory read directly (no store involved), which
is the one command that rebuilds a saved-trials file: ``casstore export JOB_DIR -o FILE
--reward-key K``. FILE must name a file in an existing folder (else bad usage); it is written
atomically and no temporary file survives a failure. Trials' ``result_path`` and a job's
``path`` are absolute, the same whether exported from the store or from the job directory.

Exit status: 0 ok; 1 a check failed (an unusable job, a refused saved-trials file); 2 bad usage
(a path that is not a job directory, an unknown job).

The store and the trials layer are imported in the command bodies, for start-up time: every
command imports this module (README, "Start-up").
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from casstore.errors import UsageError
from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, empty_listing, out_console, progress_bar
from scoring._defaults import STATUS_HELP

if TYPE_CHECKING:
    from casstore.store import Store

__all__ = ["job_rows", "ls_jobs", "register"]

RewardKeyOption = Annotated[
    str, typer.Option("--reward-key", help="The primary reward key (default reward).")
]


def import_(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Harbor job directories, directories whose direct children are all job "
            "directories (a jobs/ folder), or trials .jsonl."
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Name of the job (a single job only; a job keeps the name of its first "
            "import: another one is refused).",
        ),
    ] = None,
    reward_key: RewardKeyOption = "reward",
    json: JsonOption = False,
) -> None:
    """Import Harbor job directories (or saved trials) into the store; re-import adds only
    new trials ("N new" counts them) and keeps the job's name (another --name is refused).

    Prints per job: trials, new ones, and the counts rescore prints of it."""
    from casstore import api  # here: for start-up time
    from casstore.store import Store
    from casstore.trials.find import not_a_job_file
    from cli.rescore import counts_text

    for path in paths:  # refused before the store is made
        if not path.exists():
            raise UsageError(str(path), "no such file or directory")
        if path.is_file() and not str(path).endswith(".jsonl"):
            raise not_a_job_file(path)
    options: GlobalOptions = ctx.obj
    with Store(options.store) as store, progress_bar("import", every=64) as bar:
        reports = api.import_jobs(store, paths, reward_key=reward_key, name=name, progress=bar)
    if json:
        items = [r.to_json() for r in reports]
        emit_json(items[0] if len(items) == 1 else items)
        return
    for r in reports:
        codes = ", ".join(f"{c}={n}" for c, n in r.failure_codes.items()) or "none"
        out_console.print(
            f"{r.name}  {r.job}: {r.trials} trials ({r.imported} new)   {counts_text(r.counts)}"
            f"   failures: {codes}"
        )
        for diagnostic in r.diagnostics:
            out_console.print(f"  {diagnostic['code']}: {_detail(diagnostic)}")


def _detail(diagnostic: dict) -> str:
    """One line about an import diagnostic: its message, its trial-count figures or count."""
    if diagnostic.get("message"):
        return str(diagnostic["message"])
    if "expected" in diagnostic:
        source = diagnostic.get("source")
        return (
            f"{diagnostic['expected']} trials expected{f' ({source})' if source else ''}, "
            f"{diagnostic.get('found')} found"
        )
    return str(diagnostic.get("count", ""))


def export(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="An imported job (id or name) or a job directory.")],
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="The trials.jsonl to write (--format gage: the folder)."
        ),
    ],
    reward_key: Annotated[
        str | None,
        typer.Option(
            "--reward-key",
            help="Primary reward key (default: the job's; required meaning for a directory: "
            "reward).",
        ),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="trials: saved trials (default); gage: a GAGE External Harness folder.",
        ),
    ] = "trials",
    json: JsonOption = False,
) -> None:
    """Write a job's saved trials (one JSON object per trial) to a file (in an existing
    folder), or with --format gage a GAGE External Harness folder (samples.jsonl,
    summary.json, external_harness/manifest.json)."""
    options: GlobalOptions = ctx.obj
    if format == "gage":
        return _export_gage(job, output, reward_key, options, json)
    if format != "trials":
        raise UsageError("--format", f"unknown format {format!r} (trials or gage)")
    from casstore.store import Store  # here: for start-up time
    from casstore.trials import Jobs, read_job, write_trials_jsonl
    from casstore.trials.records import record_reward_key
    from casstore.trials.saved import check_output
    from casstore.trials.table import assign_attempts

    check_output(output)
    path = Path(job)
    if path.is_dir():
        (job_dir,) = _single_job(path)
        parsed = read_job(job_dir, reward_key or "reward")
        records, job_id = parsed.trials, parsed.job_id
    else:
        with Store(options.store, create=False) as store:
            record = Jobs(store).get(job)
            records = Jobs(store).trial_records(record.job_id)
            job_id = record.job_id
        key = reward_key or record.reward_key
        record_reward_key(records, key)
        assign_attempts(records)
    written = write_trials_jsonl(records, output)
    if json:
        emit_json({"job": job_id, "trials": written, "output": str(output)})
        return
    out_console.print(f"{written} trials of {job_id} written to {output}")


def _export_gage(
    job: str, output: Path, reward_key: str | None, options: GlobalOptions, json: bool
) -> None:
    """``export --format gage``: the GAGE folder of one job (or bundle)."""
    from casstore import api  # here: for start-up time

    path = Path(job)
    if path.is_dir():
        from casstore.bundle import is_bundle

        if not is_bundle(path):
            _single_job(path)
    report = api.export_gage(job, output, options.store, reward_key)
    if json:
        emit_json({"jobs": report.jobs, "trials": report.counts["attempts"], "output": str(output)})
        return
    jobs = ", ".join(report.jobs)
    out_console.print(f"{report.counts['attempts']} trials of {jobs} written to {output} (GAGE)")


def _single_job(path: Path) -> list[Path]:
    from casstore.trials import find_jobs

    jobs = find_jobs([path])
    if len(jobs) != 1:
        raise UsageError(str(path), f"holds {len(jobs)} jobs; export one job directory")
    return jobs


def job_rows(store: Store) -> list[dict[str, Any]]:
    """``casstore ls jobs`` rows: job id, name, trials, reward key, failure codes, path."""
    from casstore.trials import Jobs

    return [
        {
            "job": record.job_id,
            "name": record.name,
            "trials": record.trials,
            "reward_key": record.reward_key,
            "failure_codes": record.failure_codes,
            "path": record.path,
        }
        for record in Jobs(store).list()
    ]


def ls_jobs(options: GlobalOptions, json: bool) -> None:
    """``casstore ls jobs [--json]``: the imported jobs of the store."""
    from casstore.store import Store

    with Store(options.store, create=False) as store:
        rows = job_rows(store)
    if json:
        emit_json(rows)
        return
    if not rows:
        return empty_listing("jobs", options)
    for row in rows:
        codes = ", ".join(f"{c}={n}" for c, n in row["failure_codes"].items()) or "-"
        out_console.print(f"{row['name']}  {row['job']}  {row['trials']} trials  {codes}")


import_.__doc__ = f"{inspect.cleandoc(import_.__doc__ or '')}\n\n{STATUS_HELP}"


def register(app: typer.Typer) -> None:
    """Add ``import`` and ``export`` to ``app``."""
    app.command("import")(import_)
    app.command()(export)
