"""``write_report(sources, out)``: the HTML report of one or more runs (``casstore report``).

Each SOURCE is one run, loaded through :mod:`casstore.sources` and scored with the engine
(groups by agent, model and dataset; every default k); with two or more, every later run is
compared with the first (:func:`casstore.comparison.api.compare_sides`). The page
(:mod:`casstore.report.page`) is written to a temporary file beside ``out``, fsync-ed and
renamed into place (:func:`casstore.archive.output.write_to_path`): a failure leaves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from casstore.archive.output import write_to_path
from casstore.comparison.api import compare_sides
from casstore.comparison.pairing import side_of
from casstore.errors import UsageError
from casstore.report.page import render
from casstore.report.payload import payload
from casstore.sources import StoreArgument, load_sources
from casstore.trials.saved import check_output
from scoring import DEFAULT_GROUP_BY, DEFAULT_METRIC_TIMEOUT, check_options

__all__ = ["ReportResult", "write_report"]


@dataclass(frozen=True, slots=True)
class ReportResult:
    """What ``write_report`` wrote: the file, its size, the runs and comparisons in it."""

    path: Path
    bytes: int
    runs: int
    comparisons: int
    tasks: list[int]

    def to_json(self) -> dict[str, object]:
        """``{"path", "bytes", "runs", "comparisons", "tasks"}``."""
        return {
            "path": str(self.path),
            "bytes": self.bytes,
            "runs": self.runs,
            "comparisons": self.comparisons,
            "tasks": self.tasks,
        }


def write_report(
    sources: Sequence[Path | str],
    out: Path | str,
    store: StoreArgument = ".casstore",
    *,
    reward_key: str | None = None,
    threshold: float = 1.0,
) -> ReportResult:
    """Write the report of the runs ``sources`` (each a SOURCE as ``rescore`` takes it) to
    the HTML file ``out``; UsageError for no source, or an ``out`` whose folder is missing or
    a file; the errors of :func:`casstore.sources.load_sources` and :func:`scoring.score`."""
    if not sources:
        raise UsageError("SOURCE", "give at least one run")
    check_options(ks=None, threshold=threshold, metrics=(), metric_timeout=DEFAULT_METRIC_TIMEOUT)
    path = check_output(out)
    sides = []
    for source in sources:
        table = load_sources([source], store, reward_key).table
        sides.append(side_of(table, threshold, reward_key, group_by=DEFAULT_GROUP_BY, ks=None))
    names = [str(source) for source in sources]
    comparisons = [
        compare_sides(sides[0], side, (names[0], names[i]), None, threshold)
        for i, side in enumerate(sides[1:], start=1)
    ]
    data = payload(list(zip(names, sides, strict=True)), comparisons)
    title = "casstore report: " + (names[0] if len(names) == 1 else " vs ".join(names))
    subtitle = f"reward key {sides[0].report.reward_key} · success: >= {threshold:g}"
    page = render(data, title, subtitle)
    write_to_path(path, lambda handle: handle.write(page))
    return ReportResult(
        path, len(page), len(sides), len(comparisons), [len(s.names) for s in sides]
    )
