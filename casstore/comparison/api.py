"""``compare(A, B)``: the paired comparison of two runs (schema ``casstore.compare/1``).

JSON (``casstore compare A B --json``; :meth:`Comparison.to_json`)::

    {
      "schema": "casstore.compare/1",
      "reward_key": "reward", "threshold": 1.0,
      "a": {"source": "...", "jobs": [...], "tasks": 89, "attempts": 89},
      "b": {...},
      "tasks": 89,                                  # compared: in both, a valid attempt in each
      "only_in_a": [names], "only_in_b": [names],   # left out, listed
      "no_valid_attempt": [names],                  # in both, no valid attempt in one: left out
      "difference": {"tasks", "mean_a", "mean_b", "difference", "stderr", "ci95",
                     "ci95_method", "t", "df", "p_value", "correlation", "won", "lost", "tied"},
      "mcnemar": {"a_only", "b_only", "statistic", "p_value"} | null,
      "pass_at_k": {"<k>": {"eligible_tasks", "a", "b", "difference", "ci95", "ci95_method"}},
      "per_task": [{"task", "a", "b", "attempts_a", "attempts_b"}]
    }

``difference`` is A − B of the per-task means (:mod:`scoring._paired`: Miller 2024, arXiv
2411.00640, paired differences, clustered by task); ``mcnemar`` is given for 0/1 rewards with
one attempt per task in both runs (:mod:`scoring._mcnemar`); ``pass_at_k`` is the difference
per k with a paired bootstrap interval, fixed seed (:mod:`scoring._bootstrap`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from casstore.comparison.pairing import Pairing, Side, pair, side_of
from casstore.errors import ScoringError
from casstore.sources import StoreArgument, load_sources
from scoring import (
    DEFAULT_METRIC_TIMEOUT,
    McNemar,
    PairedDifference,
    PassAtKDifference,
    Scale,
    check_options,
    default_ks,
    mcnemar_exact,
    paired_difference,
    pass_at_k_difference,
)

__all__ = ["SCHEMA", "Comparison", "compare", "compare_sides"]

SCHEMA = "casstore.compare/1"


@dataclass(eq=False)
class Comparison:
    """The comparison of run A with run B (see the module docstring)."""

    sources: tuple[str, str]
    a: Side
    b: Side
    pairing: Pairing
    threshold: float
    difference: PairedDifference
    mcnemar: McNemar | None
    pass_at_k: list[PassAtKDifference]

    def per_task(self) -> tuple[np.ndarray, np.ndarray]:
        """float64[T] per-task means of A and of B over the compared tasks."""
        return self.a.means[self.pairing.index_a], self.b.means[self.pairing.index_b]

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the module docstring."""
        mean_a, mean_b = (values.tolist() for values in self.per_task())
        attempts_a = self.a.attempts[self.pairing.index_a].tolist()
        attempts_b = self.b.attempts[self.pairing.index_b].tolist()
        return {
            "schema": SCHEMA,
            "reward_key": self.a.report.reward_key,
            "threshold": self.threshold,
            "a": _side_json(self.sources[0], self.a),
            "b": _side_json(self.sources[1], self.b),
            "tasks": len(self.pairing.names),
            "only_in_a": self.pairing.only_in_a,
            "only_in_b": self.pairing.only_in_b,
            "no_valid_attempt": self.pairing.no_valid_attempt,
            "difference": self.difference.to_json(),
            "mcnemar": None if self.mcnemar is None else self.mcnemar.to_json(),
            "pass_at_k": {str(item.k): item.to_json() for item in self.pass_at_k},
            "per_task": [
                {"task": name, "a": x, "b": y, "attempts_a": n, "attempts_b": m}
                for name, x, y, n, m in zip(
                    self.pairing.names, mean_a, mean_b, attempts_a, attempts_b, strict=True
                )
            ],
        }


def _side_json(source: str, side: Side) -> dict[str, Any]:
    return {
        "source": source,
        "jobs": list(side.report.jobs),
        "tasks": len(side.names),
        "attempts": int(side.attempts.sum()),
    }


def compare_sides(
    a: Side,
    b: Side,
    sources: tuple[str, str] = ("A", "B"),
    ks: Sequence[int] | None = None,
    threshold: float = 1.0,
) -> Comparison:
    """The comparison of two scored sides (:func:`casstore.comparison.pairing.side_of`)."""
    if a.report.reward_key != b.report.reward_key:
        raise ScoringError(
            sources[1],
            f"reward key {b.report.reward_key!r}, while {sources[0]} has "
            f"{a.report.reward_key!r}: compare runs of one reward key (--reward-key)",
        )
    pairing = pair(a, b)
    ia, ib = pairing.index_a, pairing.index_b
    scale = Scale(min(a.scale, b.scale))
    difference = paired_difference(a.means[ia], b.means[ib], scale)
    single = bool(ia.size) and bool(np.all(a.attempts[ia] == 1) & np.all(b.attempts[ib] == 1))
    mcnemar = None
    if single and scale is Scale.BINARY:
        mcnemar = mcnemar_exact(a.successes[ia] > 0, b.successes[ib] > 0)
    common_attempts = np.minimum(a.attempts[ia], b.attempts[ib])
    wanted = list(ks) if ks is not None else default_ks(int(common_attempts.max(initial=0)))
    at_k = pass_at_k_difference(
        a.attempts[ia], a.successes[ia], b.attempts[ib], b.successes[ib], wanted
    )
    return Comparison(sources, a, b, pairing, threshold, difference, mcnemar, at_k)


def compare(
    a: Path | str,
    b: Path | str,
    store: StoreArgument = ".casstore",
    *,
    reward_key: str | None = None,
    ks: Sequence[int] | None = None,
    threshold: float = 1.0,
) -> Comparison:
    """Compare run ``a`` with run ``b`` (each a SOURCE as ``rescore`` takes it: an imported
    job's id or name, a job directory, a ``trials.jsonl``), task by task; ``ks`` and
    ``threshold`` as :func:`scoring.score` checks them (UsageError), before any source is
    read. Raises ScoringError when the runs' reward keys differ, or when no task has a
    valid attempt in both (nothing to compare)."""
    check_options(ks=ks, threshold=threshold, metrics=(), metric_timeout=DEFAULT_METRIC_TIMEOUT)
    tables = [load_sources([source], store, reward_key).table for source in (a, b)]
    sides = [side_of(table, threshold, reward_key) for table in tables]
    result = compare_sides(sides[0], sides[1], (str(a), str(b)), ks, threshold)
    if not result.pairing.names:
        pairing = result.pairing
        raise ScoringError(
            str(b),
            f"no task with a valid attempt in both runs ({len(pairing.only_in_a)} only in "
            f"{a}, {len(pairing.only_in_b)} only here, {len(pairing.no_valid_attempt)} "
            "without a valid attempt in one): nothing to compare",
        )
    return result
