"""``casstore rescore``: score Harbor trials with the vectorised engine (:mod:`scoring`).

``casstore [--store DIR] rescore SOURCE... [--reward-key K] [--k 1,2,4] [--threshold 1.0]
[--metric mean|sum|min|max|PATH]... [--views FILE] [--group-by agent,model,dataset]
[--taskset REF] [--metric-timeout SECONDS] [--json]``

SOURCE is an existing directory (Harbor job directories in it, scored directly), a ``.jsonl``
file (saved trials) or the id/name of a job imported in the store. ``--taskset REF`` checks
the trials against a stored taskset (unknown trial tasks and taskset tasks without trials are
errors) and applies the views its task revisions declare. ``--json`` prints the object
documented in :mod:`scoring.report`; otherwise a summary table.

Exit status: 0 ok; 1 the trials cannot be scored (mixed reward keys, a taskset mismatch, a
failing metric script); 2 bad usage (an unknown job, a malformed option).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from casstore.errors import UsageError
from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, out_console
from scoring import BUILTIN_METRIC_NAMES, ScoreReport, load_views, score
from scoring._inputs import check_taskset, load_sources, taskset_views

__all__ = ["print_report", "register"]


def _parse_ks(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError("--k", f"not a comma-separated list of integers: {text!r}") from None
    if not ks or any(k < 1 for k in ks):
        raise UsageError("--k", "every k must be an integer >= 1")
    return ks


def _metric_specs(metrics: list[str] | None) -> list[str | Path]:
    specs: list[str | Path] = []
    for metric in metrics or ["mean"]:
        if metric in BUILTIN_METRIC_NAMES:
            specs.append(metric)
        elif Path(metric).is_file():
            specs.append(Path(metric))
        else:
            raise UsageError(metric, "--metric is mean, sum, min, max or a metric.py path")
    return specs


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def print_report(report: ScoreReport) -> None:
    """The summary tables of a score report, on stdout."""
    counts = report.counts
    out_console.print(
        f"[bold]reward key[/bold] {report.reward_key}   threshold {report.threshold:g}   "
        + "   ".join(f"{name} {value}" for name, value in counts.items())
    )
    outputs = Table(title="outputs", title_justify="left")
    for column in ("output", "mean", "± stderr", "95% CI", "measured", "coverage"):
        outputs.add_column(column, justify="left" if column == "output" else "right")
    for name, stats in report.outputs.items():
        interval = stats.to_json()["ci95"]
        outputs.add_row(
            name,
            _fmt(stats.mean),
            _fmt(stats.stderr),
            "—" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]",
            f"{stats.measured}/{stats.attempts}",
            _fmt(stats.coverage, 3),
        )
    out_console.print(outputs)
    if report.pass_at_k:
        ks = Table(
            title=f"pass@k (success: {report.reward_key} >= {report.threshold:g})",
            title_justify="left",
        )
        for column in ("k", "pass@k", "± stderr", "pass^k", "eligible tasks"):
            ks.add_column(column, justify="right")
        for at, hat in zip(report.pass_at_k, report.pass_hat_k, strict=True):
            ks.add_row(
                str(at.k), _fmt(at.value), _fmt(at.stderr), _fmt(hat.value), str(at.eligible_tasks)
            )
        out_console.print(ks)
    if len(report.groups) > 1 or (report.groups and report.group_by):
        groups = Table(title="groups", title_justify="left")
        for field in report.group_by:
            groups.add_column(field, overflow="fold")
        for column in ("attempts", f"mean {report.reward_key}", "± stderr", "pass@1"):
            groups.add_column(column, justify="right")
        for group in report.groups:
            primary = group.outputs[report.reward_key]
            first = group.pass_at_k[0] if group.pass_at_k and group.pass_at_k[0].k == 1 else None
            groups.add_row(
                *(group.labels[field] or "—" for field in report.group_by),
                str(group.counts["attempts"]),
                _fmt(primary.mean),
                _fmt(primary.stderr),
                _fmt(first.value if first else None),
            )
        out_console.print(groups)
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


def rescore(
    ctx: typer.Context,
    sources: Annotated[
        list[str],
        typer.Argument(help="Job directories, trials.jsonl files or imported job ids/names."),
    ],
    reward_key: Annotated[
        str | None, typer.Option("--reward-key", help="Primary reward key (default reward).")
    ] = None,
    k: Annotated[
        str | None, typer.Option("--k", help="Comma-separated k values (default 1,2,4,…,5,10,…).")
    ] = None,
    threshold: Annotated[
        float, typer.Option("--threshold", help="Success: primary >= threshold.")
    ] = 1.0,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="Harbor metric: mean, sum, min, max or a metric.py path."),
    ] = None,
    views: Annotated[Path | None, typer.Option("--views", help="View file (TOML or JSON).")] = None,
    group_by: Annotated[
        str, typer.Option("--group-by", help="Group fields among agent, model, dataset.")
    ] = "agent,model,dataset",
    taskset: Annotated[
        str | None, typer.Option("--taskset", help="Check trials against this taskset.")
    ] = None,
    metric_timeout: Annotated[
        float, typer.Option("--metric-timeout", help="Seconds before a metric.py is killed.")
    ] = 60.0,
    json: JsonOption = False,
) -> None:
    """Score Harbor trials: means, coverage, pass@k/pass^k, Harbor's own metrics, views."""
    options: GlobalOptions = ctx.obj
    ks = _parse_ks(k)
    metrics = _metric_specs(metric)
    fields = [part.strip() for part in group_by.split(",") if part.strip()]
    for field in fields:
        if field not in ("agent", "model", "dataset"):
            raise UsageError("--group-by", f"unknown field {field!r} (agent, model, dataset)")
    declared = load_views(views) if views is not None else []
    table = load_sources(sources, options.store, reward_key)
    if taskset is not None:
        names = {view.name for view in declared}
        items = check_taskset(table, options.store, taskset)
        declared += [view for view in taskset_views(items) if view.name not in names]
    report = score(
        table,
        reward_key=reward_key,
        ks=ks,
        threshold=threshold,
        group_by=fields,
        metrics=metrics,
        views=declared,
        metric_timeout=metric_timeout,
    )
    if json:
        emit_json(report.to_json())
    else:
        print_report(report)


def register(app: typer.Typer) -> None:
    """Add ``rescore`` to the ``casstore`` application."""
    app.command("rescore")(rescore)
