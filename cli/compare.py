"""``casstore compare A B``: the paired comparison of two runs over the same tasks.

``casstore [--store DIR] compare A B [--reward-key K] [--k 1,2,4] [--threshold 1.0] [--json]``

A and B are SOURCEs as ``rescore`` takes them (an imported job's id or name, a job directory,
a ``trials.jsonl``, a run bundle). Per task the mean of its attempts in each run; then the
mean difference A − B with its paired standard error, 95% interval, p-value, the correlation
of the runs, tasks won / lost / tied; McNemar's exact test for 0/1 rewards with one attempt
per task; pass@k differences with a bootstrap interval (:mod:`casstore.comparison.api`
documents the JSON). Tasks of one run only are named on stderr and left out. Exit status: 0
ok; 1 the runs cannot be compared (different reward keys, a damaged store); 2 bad usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, err_console, out_console, print_table
from cli.rescore import KsOption, RewardKeyOption, ThresholdOption, parse_ks

if TYPE_CHECKING:
    from casstore.comparison.api import Comparison

__all__ = ["print_comparison", "register"]


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _interval(bounds: list[float] | None) -> str:
    return "—" if bounds is None else f"[{bounds[0]:.3f}, {bounds[1]:.3f}]"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def print_comparison(result: Comparison) -> None:
    """The comparison as text: the difference table, McNemar's line, the pass@k table."""
    out = result.to_json()
    diff = out["difference"]
    out_console.print(
        f"A {out['a']['source']}   B {out['b']['source']}   reward key {out['reward_key']}   "
        f"tasks {out['tasks']}   won {diff['won']}   lost {diff['lost']}   tied {diff['tied']}"
    )
    row = (
        _fmt(diff["mean_a"]),
        _fmt(diff["mean_b"]),
        _fmt(diff["difference"]),
        _fmt(diff["stderr"]),
        _interval(diff["ci95"]) + (" (clipped)" if diff["ci95_method"] == "t_clipped" else ""),
        _p(diff["p_value"]),
        _fmt(diff["correlation"], 3),
    )
    names = ("mean A", "mean B", "A − B", "± stderr", "95% CI", "p", "correlation")
    print_table("difference (paired by task)", names, [row], left=0)
    if out["mcnemar"] is not None:
        test = out["mcnemar"]
        out_console.print(
            f"McNemar exact   A only {test['a_only']}   B only {test['b_only']}   "
            f"p {_p(test['p_value'])}"
        )
    rows = [
        (k, str(v["eligible_tasks"]), _fmt(v["a"]), _fmt(v["b"]), _fmt(v["difference"]), ci)
        for k, v in out["pass_at_k"].items()
        for ci in [_interval(v["ci95"])]
    ]
    if rows:
        columns = ("k", "eligible tasks", "pass@k A", "pass@k B", "A − B", "95% CI (bootstrap)")
        print_table("pass@k", columns, rows, left=0)


def _note_left_out(result: Comparison) -> None:
    """One line on stderr per kind of task left out (never silently)."""
    pairing = result.pairing
    for label, names in (
        (f"only in A ({result.sources[0]})", pairing.only_in_a),
        (f"only in B ({result.sources[1]})", pairing.only_in_b),
        ("without a valid attempt in A or B", pairing.no_valid_attempt),
    ):
        if names:
            shown = ", ".join(names[:10]) + (" …" if len(names) > 10 else "")
            err_console.print(f"left out: {len(names)} task(s) {label}: {shown}", markup=False)


def compare(
    ctx: typer.Context,
    a: Annotated[
        str,
        typer.Argument(
            metavar="A", help="Run A: an imported job, job directory, .jsonl or run bundle."
        ),
    ],
    b: Annotated[str, typer.Argument(metavar="B", help="Run B, over the same tasks.")],
    reward_key: RewardKeyOption = None,
    k: KsOption = None,
    threshold: ThresholdOption = 1.0,
    json: JsonOption = False,
) -> None:
    """Compare run A with run B task by task: A − B with a paired 95% interval.

    Method: Miller 2024, "Adding Error Bars to Evals" (arXiv 2411.00640), paired
    differences of per-task means, clustered by task. Tasks of one run only are
    listed on stderr and left out.
    """
    from casstore import api  # here: for start-up time (NumPy, scoring)

    options: GlobalOptions = ctx.obj
    result = api.compare(
        a, b, options.store, reward_key=reward_key, ks=parse_ks(k), threshold=threshold
    )
    _note_left_out(result)
    if json:
        emit_json(result.to_json())
    else:
        print_comparison(result)


def register(app: typer.Typer) -> None:
    """Add ``compare`` to the ``casstore`` application."""
    app.command("compare")(compare)
