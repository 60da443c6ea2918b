"""``casstore rescore``: score Harbor trials with the vectorised engine (:mod:`scoring`).

``casstore [--store DIR] rescore SOURCE... [--reward-key K] [--k 1,2,4] [--threshold 1.0]
[--metric mean|sum|min|max|PATH]... [--views FILE] [--group-by agent,model,dataset]
[--taskset REF] [--metric-timeout SECONDS] [--json]``

SOURCE is an existing directory (Harbor job directories in it, scored directly), a ``.jsonl``
file (saved trials) or the id/name of a job imported in the store; a SOURCE that looks like a
path (holds ``/`` or ends with ``.jsonl``) and does not exist is bad usage. Each trial (job id +
trial name) must be given once: the same job directory twice, or an imported job together with
its own job directory or exported trials.jsonl, is refused (exit 1) with a message naming the
repeated trial and both sources; casstore never silently counts a trial twice nor guesses
which copy to drop.

Options:

* ``--k 1,2,4``: comma-separated integers >= 1 (no empty item); default 1, 2, 4, … up to the
  attempts per task;
* ``--threshold T``: a finite number; an attempt succeeds when its primary reward >= T;
* ``--metric mean|sum|min|max|PATH`` (repeatable): Harbor's metrics, or a ``metric.py`` run as
  Harbor runs it (``uv run PATH -i rewards.jsonl -o metric.json``; uv from ``CASSTORE_UV``,
  ``PATH`` or ``<repo>/.tools/bin/uv``, else the current interpreter; see
  :mod:`scoring._metric_script`);
* ``--metric-timeout SECONDS``: how long each metric.py may run before its process group is
  killed (default 60; a number > 0);
* ``--group-by FIELDS``: comma-separated distinct fields among agent, model, dataset; ``""``
  means no groups;
* ``--taskset REF``: checks the trials against a stored taskset (unknown trial tasks and taskset
  tasks without trials are errors) and applies the views its task revisions declare;
* ``--views FILE``: a TOML or JSON view file (:mod:`scoring._views`);
* ``--json``: prints the object documented in :mod:`scoring.report`; otherwise a summary table.

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
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from casstore.errors import UsageError
from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, out_console
from scoring._defaults import DEFAULT_GROUP_BY, DEFAULT_METRIC_TIMEOUT, GROUP_FIELDS, STATUS_HELP

if TYPE_CHECKING:
    from rich.table import Table

    from scoring import ScoreReport

__all__ = ["counts_text", "print_report", "register"]


def _parse_ks(text: str | None) -> list[int] | None:
    """``--k`` text → integers (each >= 1 is :func:`scoring.check_options`'s rule)."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise UsageError("--k", f"empty item in {text!r}: give comma-separated integers >= 1")
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise UsageError("--k", f"not a comma-separated list of integers: {text!r}") from None


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


def print_report(report: ScoreReport) -> None:
    """The summary tables of a score report, on stdout."""
    out_console.print(
        f"[bold]reward key[/bold] {report.reward_key}   threshold {report.threshold:g}   "
        + counts_text(report.counts)
    )
    out_console.print(_outputs_table(report))
    if report.pass_at_k:
        out_console.print(_pass_at_k_table(report))
    if len(report.groups) > 1 or (report.groups and report.group_by):
        out_console.print(_groups_table(report))
    _print_notes(report)


def _outputs_table(report: ScoreReport) -> Table:
    """Mean, standard error, interval and coverage of every output."""
    from rich.table import Table

    table = Table(title="outputs", title_justify="left")
    for column in ("output", "mean", "± stderr", "95% CI", "measured", "coverage"):
        table.add_column(column, justify="left" if column == "output" else "right")
    for name, stats in report.outputs.items():
        interval = stats.to_json()["ci95"]
        table.add_row(
            name,
            _fmt(stats.mean),
            _fmt(stats.stderr),
            "—" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]",
            f"{stats.measured}/{stats.attempts}",
            _fmt(stats.coverage, 3),
        )
    return table


def _pass_at_k_table(report: ScoreReport) -> Table:
    """pass@k (with its standard error) and pass^k for every k."""
    from rich.table import Table

    table = Table(
        title=f"pass@k (success: {report.reward_key} >= {report.threshold:g})",
        title_justify="left",
    )
    for column in ("k", "pass@k", "± stderr", "pass^k", "eligible tasks"):
        table.add_column(column, justify="right")
    for at, hat in zip(report.pass_at_k, report.pass_hat_k, strict=True):
        table.add_row(
            str(at.k), _fmt(at.value), _fmt(at.stderr), _fmt(hat.value), str(at.eligible_tasks)
        )
    return table


def _groups_table(report: ScoreReport) -> Table:
    """Attempts, primary mean and pass@1 of every group."""
    from rich.table import Table

    table = Table(title="groups", title_justify="left")
    for field in report.group_by:
        table.add_column(field, overflow="fold")
    for column in ("attempts", f"mean {report.reward_key}", "± stderr", "pass@1"):
        table.add_column(column, justify="right")
    for group in report.groups:
        primary = group.outputs[report.reward_key]
        first = group.pass_at_k[0] if group.pass_at_k and group.pass_at_k[0].k == 1 else None
        table.add_row(
            *(group.labels[field] or "—" for field in report.group_by),
            str(group.counts["attempts"]),
            _fmt(primary.mean),
            _fmt(primary.stderr),
            _fmt(first.value if first else None),
        )
    return table


def _print_notes(report: ScoreReport) -> None:
    """One line each: Harbor's metrics and pass@k, every view, failures, diagnostics."""
    if report.harbor_metrics is not None:
        out_console.print(f"harbor metrics   {report.harbor_metrics}")
        out_console.print(f"harbor pass@k    {report.harbor_pass_at_k}")
    for name, view in report.views.items():
        out_console.print(f"view {name} ({view['reducer']})   {_fmt(view['value'])}")
    rollup = report.failure_rollup
    if rollup["exceptions"] or rollup["failure_codes"]:
        out_console.print(
            f"failures   exceptions {rollup['exceptions']}   codes {rollup['failure_codes']}"
        )
    if report.diagnostics is not None and len(report.diagnostics):
        out_console.print(f"diagnostics   {report.diagnostics.counts()}  (--json lists them)")


Sources = Annotated[
    list[str],
    typer.Argument(help="Job directories, trials.jsonl files or imported job ids/names."),
]
RewardKeyOption = Annotated[
    str | None, typer.Option("--reward-key", help="Primary reward key (default reward).")
]
KsOption = Annotated[
    str | None, typer.Option("--k", help="Comma-separated k values (default 1,2,4,…,5,10,…).")
]
ThresholdOption = Annotated[
    float, typer.Option("--threshold", help="Success: primary >= threshold (finite).")
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
        help="Distinct group fields among agent, model, dataset ('' for no groups).",
    ),
]
_DEFAULT_GROUP_BY = ",".join(DEFAULT_GROUP_BY)
TasksetOption = Annotated[
    str | None, typer.Option("--taskset", help="Check trials against this taskset.")
]
MetricTimeoutOption = Annotated[
    float,
    typer.Option(
        "--metric-timeout",
        help="Seconds each metric.py may run before it is killed (> 0).",
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
    """
    from casstore import api  # here: for start-up time (NumPy, scoring)
    from scoring import check_options

    options: GlobalOptions = ctx.obj
    ks = _parse_ks(k)
    metrics = metric or ["mean"]
    # the option values' rules (scoring's), checked before --group-by is parsed
    check_options(ks=ks, threshold=threshold, metrics=metrics, metric_timeout=metric_timeout)
    fields = _parse_group_by(group_by)
    report = api.rescore(
        sources,
        options.store,
        reward_key=reward_key,
        views=views,
        taskset=taskset,
        ks=ks,
        threshold=threshold,
        group_by=fields,
        metrics=metrics,
        metric_timeout=metric_timeout,
    )
    if json:
        emit_json(report.to_json())
    else:
        print_report(report)


rescore.__doc__ = f"{inspect.cleandoc(rescore.__doc__ or '')}\n\n{STATUS_HELP}"


def register(app: typer.Typer) -> None:
    """Add ``rescore`` to the ``casstore`` application."""
    app.command("rescore")(rescore)
