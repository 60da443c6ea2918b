"""``casstore rescore``: score Harbor trials with the vectorised engine (:mod:`scoring`).

``casstore [--store DIR] rescore SOURCE... [--reward-key K] [--k 1,2,4] [--threshold 1.0]
[--metric mean|sum|min|max|PATH]... [--views FILE] [--group-by agent,model,dataset]
[--taskset REF] [--metric-timeout SECONDS] [--tasks] [--bundle DIR] [--json]``

SOURCE is an existing directory (Harbor job directories in it, scored directly; or a run
bundle, :mod:`casstore.bundle`: one bundle alone is scored as its summary says, see
:func:`cli.bundle.bundle_options`), a ``.jsonl`` file (saved trials) or the id/name of a job
imported in the store; a SOURCE that looks like a
path (holds ``/`` or ends with ``.jsonl``) and does not exist is bad usage. Each trial (job id +
trial name) must be given once: the same job directory twice, or an imported job together with
its own job directory or exported trials.jsonl, is refused (exit 1) with a message naming the
repeated trial and both sources; casstore never silently counts a trial twice nor guesses
which copy to drop.

Options:

* ``--k 1,2,4``: comma-separated integers from 1 to 2**31 (``scoring.MAX_K``, the most attempts
  a task can have; no empty item; a k beyond the run's attempts has no eligible task); default
  1, 2, 4, … up to the attempts per task;
* ``--threshold T``: a finite number; an attempt succeeds when its primary reward >= T;
* ``--metric mean|sum|min|max|PATH`` (repeatable): Harbor's metrics, or a ``metric.py`` run as
  Harbor runs it (``uv run PATH -i rewards.jsonl -o metric.json``; uv from ``CASSTORE_UV``,
  ``PATH`` or ``<repo>/.tools/bin/uv``, else the current interpreter; see
  :mod:`scoring._metric_script`);
* ``--metric-timeout SECONDS``: how long each metric.py may run before its process group is
  killed (default 60; a number > 0, at most 86400: a day);
* ``--group-by FIELDS``: comma-separated distinct fields among agent, model, dataset, job and
  source (where each trial came from: :mod:`casstore.sources`); ``""`` means no groups;
* ``--taskset REF``: checks the trials against a stored taskset (unknown trial tasks and taskset
  tasks without trials are errors) and applies the views its task revisions declare;
* ``--views FILE``: a TOML or JSON view file (:mod:`scoring._views`);
* ``--tasks``: the text output adds a table of every task;
* ``--bundle DIR``: also writes the run bundle (samples.jsonl, summary.json, manifest.json)
  there, atomically; DIR must not exist or be an empty directory (checked before any work);
* ``--json``: prints the object documented in :mod:`scoring.report`; otherwise summary tables
  (:func:`cli.output.print_table`: drawn on a terminal, tab-separated elsewhere), sections
  with nothing in them left out, a note naming each k no task has enough attempts for.

A progress bar on stderr (a terminal only) counts the trial directories of the job
directories read.

Exit status: 0 ok; 1 the trials cannot be scored (mixed reward keys, a trial given twice, a
taskset mismatch, a failing metric script: one line ``<script>: metric script failed (exit N):
<last stderr line>``); 2 bad usage (an unknown job, taskset or path, a missing metric script or
view file, a malformed option, a reward key no attempt holds while attempts hold others: the
message names those keys).

The engine (NumPy), the API and rich's tables are imported when the command runs, for
start-up time: every command imports this module (README, "Start-up").
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from casstore.errors import UsageError
from cli.options import GlobalOptions, JsonOption, decimal_option
from cli.output import emit_json, out_console, print_table, progress_bar
from scoring._defaults import DEFAULT_GROUP_BY, DEFAULT_METRIC_TIMEOUT, GROUP_FIELDS, STATUS_HELP

if TYPE_CHECKING:
    from scoring import ScoreReport

__all__ = ["counts_text", "parse_ks", "print_report", "register"]


_INTEGER = re.compile(r"[+-]?[0-9]+")
"""A k as ``--k`` takes it: ASCII digits only."""


def parse_ks(text: str | None) -> list[int] | None:
    """``--k`` text → integers (each >= 1 is :func:`scoring.check_options`'s rule)."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise UsageError("--k", f"empty item in {text!r}: give comma-separated integers >= 1")
    if not all(_INTEGER.fullmatch(part) for part in parts):  # int() takes "1_0" and "١"
        raise UsageError("--k", f"not a comma-separated list of integers: {text!r}")
    for part in parts:  # too many digits for int(): far beyond the bound
        if len(part) > 100:
            from scoring._options import k_refused  # here: for start-up time

            raise k_refused(part)
    return [int(part) for part in parts]


def _parse_group_by(text: str) -> list[str]:
    """``""`` (or blanks) means no groups; otherwise distinct known fields, no empty item."""
    if not text.strip():
        return []
    fields = [part.strip() for part in text.split(",")]
    seen: set[str] = set()
    for field in fields:
        if not field:
            raise UsageError("--group-by", f"empty item in {text!r} ('' alone means no groups)")
        if field not in GROUP_FIELDS:
            raise UsageError("--group-by", f"unknown field {field!r} ({', '.join(GROUP_FIELDS)})")
        if field in seen:
            raise UsageError("--group-by", f"field {field!r} repeated")
        seen.add(field)
    return fields


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def counts_text(counts: dict[str, int]) -> str:
    """A breakdown (``counts``: attempts, statuses, harbor_errors) as rescore and import print
    it: ``attempts 89   scored 68   …   harbor_errors 21``."""
    return "   ".join(f"{name} {value}" for name, value in counts.items())


def print_report(report: ScoreReport, tasks: bool = False) -> None:
    """The summary tables of a score report, on stdout (``tasks``: the per-task table too).
    A section with nothing in it is not printed."""
    out_console.print(
        f"[bold]reward key[/bold] {report.reward_key}   threshold {report.threshold:g}   "
        + counts_text(report.counts)
    )
    _outputs_table(report)
    if report.pass_at_k:
        _pass_at_k_table(report)
    if len(report.groups) > 1 or (report.groups and report.group_by):
        _groups_table(report)
    if tasks:
        _tasks_table(report)
    _print_notes(report)


def _outputs_table(report: ScoreReport) -> None:
    """Mean, standard error, interval and coverage of every output."""
    rows = []
    for name, stats in report.outputs.items():
        interval = stats.interval
        shown = "—" if interval is None else f"[{interval.low:.3f}, {interval.high:.3f}]"
        if interval is not None and interval.method == "t_clipped":
            shown += " clipped"  # the t interval left [0, 1] (scoring._interval)
        rows.append(
            (
                name,
                _fmt(stats.mean),
                _fmt(stats.stderr),
                shown,
                f"{stats.measured}/{stats.attempts}",
                _fmt(stats.coverage, 3),
            )
        )
    columns = ("output", "mean", "± stderr", "95% CI", "measured", "coverage")
    print_table("outputs", columns, rows)


def _pass_at_k_table(report: ScoreReport) -> None:
    """pass@k (with its standard error) and pass^k for every k; a line naming each k no
    task has enough attempts for."""
    rows = [
        (str(at.k), _fmt(at.value), _fmt(at.stderr), _fmt(hat.value), str(at.eligible_tasks))
        for at, hat in zip(report.pass_at_k, report.pass_hat_k, strict=True)
    ]
    title = f"pass@k (success: {report.reward_key} >= {report.threshold:g})"
    print_table(title, ("k", "pass@k", "± stderr", "pass^k", "eligible tasks"), rows, left=0)
    empty = [str(at.k) for at in report.pass_at_k if at.eligible_tasks == 0]
    if empty:
        most = int(report.tasks.attempts.max()) if len(report.tasks.names) else 0
        out_console.print(
            f"no eligible task for k = {', '.join(empty)}: no task has that many attempts "
            f"(tasks have at most {most})"
        )


def _groups_table(report: ScoreReport) -> None:
    """Attempts, primary mean and pass@1 of every group."""
    rows = []
    for group in report.groups:
        primary = group.outputs[report.reward_key]
        first = group.pass_at_k[0] if group.pass_at_k and group.pass_at_k[0].k == 1 else None
        rows.append(
            (
                *(group.labels[field] or "—" for field in report.group_by),
                str(group.counts["attempts"]),
                _fmt(primary.mean),
                _fmt(primary.stderr),
                _fmt(first.value if first else None),
            )
        )
    columns = (*report.group_by, "attempts", f"mean {report.reward_key}", "± stderr", "pass@1")
    print_table("groups", columns, rows, left=len(report.group_by), fold=report.group_by)


def _tasks_table(report: ScoreReport) -> None:
    """``--tasks``: attempts, successes, the primary mean and the statuses of every task."""
    rows = []
    for task in report.tasks.to_json():
        primary = task["outputs"].get(report.reward_key, {})
        statuses = ", ".join(
            f"{name} {count}"
            for name, count in task["counts"].items()
            if name != "attempts" and count
        )
        rows.append(
            (
                task["task"],
                str(task["attempts"]),
                str(task["successes"]),
                _fmt(primary.get("mean")),
                statuses or "—",
            )
        )
    columns = ("task", "attempts", "successes", f"mean {report.reward_key}", "statuses")
    print_table("tasks", columns, rows, fold=("task",))


def _print_notes(report: ScoreReport) -> None:
    """Harbor's metrics and pass@k as tables (when there are any), every view, failures and
    diagnostics on a line each, counts written ``name n``."""
    if report.harbor_metrics:
        rows = [
            (name, _number(value))
            for entry in report.harbor_metrics
            for name, value in entry.items()
        ]
        print_table("harbor metrics", ("metric", "value"), rows)
    if report.harbor_pass_at_k:
        pass_rows = [
            (key, str(k), _number(value))
            for key, values in report.harbor_pass_at_k.items()
            for k, value in values.items()
        ]
        print_table("harbor pass@k", ("evals key", "k", "pass@k"), pass_rows, fold=("evals key",))
    for name, view in report.views.items():
        out_console.print(f"view {name} ({view['reducer']})   {_fmt(view['value'])}")
    rollup = report.failure_rollup
    if rollup["exceptions"] or rollup["failure_codes"]:
        out_console.print(
            f"failures   exceptions {_counts(rollup['exceptions'])}   "
            f"codes {_counts(rollup['failure_codes'])}"
        )
    if report.diagnostics is not None and len(report.diagnostics):
        out_console.print(
            f"diagnostics   {_counts(report.diagnostics.counts())}  (--json lists them)"
        )


def _counts(counts: dict[str, int]) -> str:
    """``{"a": 1, "b": 2}`` as ``a 1, b 2`` (``none`` when empty)."""
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def _number(value: object) -> str:
    """A Harbor metric's value as Harbor computed it (every digit; ``—`` for None)."""
    return "—" if value is None else str(value)


Sources = Annotated[
    list[str],
    typer.Argument(
        help="Job directories, trials.jsonl files, run bundles or imported job ids/names."
    ),
]
RewardKeyOption = Annotated[
    str | None, typer.Option("--reward-key", help="Primary reward key (default reward).")
]
KsOption = Annotated[
    str | None,
    typer.Option("--k", help="Comma-separated k values, 1 to 2**31 (default 1,2,4,…,5,10,…)."),
]
ThresholdOption = Annotated[
    float, decimal_option("--threshold", "Success: primary >= threshold (finite).")
]
MetricOption = Annotated[
    list[str] | None,
    typer.Option("--metric", help="Harbor metric: mean, sum, min, max or a metric.py path."),
]
ViewsOption = Annotated[Path | None, typer.Option("--views", help="View file (TOML or JSON).")]
GroupByOption = Annotated[
    str,
    typer.Option(
        "--group-by",
        help="Distinct group fields among agent, model, dataset, job (its name) and source "
        "(the SOURCE as given); '' for no groups.",
    ),
]
_DEFAULT_GROUP_BY = ",".join(DEFAULT_GROUP_BY)
TasksetOption = Annotated[
    str | None, typer.Option("--taskset", help="Check trials against this taskset.")
]
MetricTimeoutOption = Annotated[
    float,
    decimal_option(
        "--metric-timeout",
        "Seconds each metric.py may run before it is killed (> 0, at most 86400).",
    ),
]


def rescore(
    ctx: typer.Context,
    sources: Sources,
    reward_key: RewardKeyOption = None,
    k: KsOption = None,
    threshold: ThresholdOption = 1.0,
    metric: MetricOption = None,
    views: ViewsOption = None,
    group_by: GroupByOption = _DEFAULT_GROUP_BY,
    taskset: TasksetOption = None,
    metric_timeout: MetricTimeoutOption = DEFAULT_METRIC_TIMEOUT,
    tasks: Annotated[
        bool, typer.Option("--tasks", help="Also print a table of every task (text output).")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="Also write the run bundle there (missing or empty)."),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Score Harbor trials: means, coverage, pass@k/pass^k, Harbor's own metrics, views.

    Give each trial once: the same trial (job id + trial name) from two SOURCEs
    (a job directory twice; an imported job plus its job directory or its
    exported trials.jsonl) is refused, naming the trial and both sources.

    A metric.py runs as Harbor runs it:
    uv run PATH -i rewards.jsonl -o metric.json
    (uv from CASSTORE_UV, PATH or <repo>/.tools/bin/uv; else this Python).
    --metric-timeout SECONDS (> 0, default 60) kills a metric.py running longer.

    --group-by "" means no groups.

    SOURCE may be a run bundle (--bundle wrote it): one bundle alone is scored
    as its summary.json says, each option not given taken from it.
    """
    from casstore import api  # here: for start-up time (NumPy, scoring)
    from cli.bundle import bundle_options
    from cli.remote import remote_jobs
    from scoring import check_options

    options: GlobalOptions = ctx.obj
    ks = parse_ks(k)
    metrics = metric or ["mean"]
    # the option values' rules (scoring's), checked before --group-by is parsed
    check_options(ks=ks, threshold=threshold, metrics=metrics, metric_timeout=metric_timeout)
    chosen = {
        "reward_key": reward_key,
        "views": views,
        "ks": ks,
        "threshold": threshold,
        "group_by": _parse_group_by(group_by),
        "metrics": metrics,
        "metric_timeout": metric_timeout,
    } | bundle_options(ctx, sources)
    with remote_jobs(options, sources) as (store, found), progress_bar("rescore", every=64) as bar:
        report = api.rescore(found, store, taskset=taskset, progress=bar, bundle=bundle, **chosen)
    if json:
        emit_json(report.to_json())
    else:
        print_report(report, tasks=tasks)


rescore.__doc__ = f"{inspect.cleandoc(rescore.__doc__ or '')}\n\n{STATUS_HELP}"


def register(app: typer.Typer) -> None:
    """Add ``rescore`` to the ``casstore`` application."""
    app.command("rescore")(rescore)
