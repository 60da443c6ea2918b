"""``casstore report SOURCE... -o report.html``: one self-contained HTML report.

``casstore [--store DIR] report SOURCE... -o FILE [--reward-key K] [--threshold 1.0] [--json]``

Each SOURCE is one run (an imported job's id or name, a job directory, a ``trials.jsonl``).
The file holds its data, CSS and JavaScript (no network, opens from disk): headline outputs
with 95% intervals, pass@k and pass^k curves, a task × attempt heatmap, the failure rollup,
per-group tables and, with two or more runs, each later run compared with the first
(:mod:`casstore.report`). Prints the file, its size, runs and tasks; ``--json`` as an object.
Exit status: 0 ok; 1 a run cannot be scored; 2 bad usage (no such source, an output folder
missing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, print_lines
from cli.rescore import RewardKeyOption, Sources, ThresholdOption

__all__ = ["register"]


def report(
    ctx: typer.Context,
    sources: Sources,
    out: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    reward_key: RewardKeyOption = None,
    threshold: ThresholdOption = 1.0,
    json: JsonOption = False,
) -> None:
    """Write one self-contained HTML report of one run, or compare runs with the first.

    The page embeds its data once and draws every chart itself (no CDN, no
    network): it opens from disk, offline.
    """
    from casstore import api  # here: for start-up time (NumPy, scoring)

    options: GlobalOptions = ctx.obj
    result = api.write_report(
        sources, out, options.store, reward_key=reward_key, threshold=threshold
    )
    if json:
        emit_json(result.to_json())
    else:
        tasks = ", ".join(str(count) for count in result.tasks)
        print_lines(
            [
                f"{result.path}  {result.bytes} bytes  {result.runs} run(s), tasks {tasks}"
                + (f", {result.comparisons} comparison(s)" if result.comparisons else "")
            ]
        )


def register(app: typer.Typer) -> None:
    """Add ``report`` to the ``casstore`` application."""
    app.command("report")(report)
