"""Compare and report benchmarks (issue 14).

* ``compare``: two generated runs of 100,000 tasks (smoke: 100), each scored by the engine
  (:func:`casstore.comparison.pairing.side_of`) and paired
  (:func:`casstore.comparison.api.compare_sides`): the paired difference, McNemar's exact
  test and the pass@k bootstrap (2,000 replicates). Run A has one attempt per task with 0/1
  rewards (McNemar applies), as run B; ``compare (5 attempts)`` gives each run five attempts
  per task (clustered; pass@1..5 bootstrapped). Target: < 1 s. Baseline: SciPy's
  ``ttest_rel`` plus statsmodels' exact ``mcnemar`` on the per-task means alone (no scoring,
  no pass@k), for scale (not a baseline: it does a small part of the work).
* ``report``: the page of two 10,000-task runs of five attempts (smoke: 100), written to a
  file (payload, rendering, the atomic write); then Chromium takes a screenshot of it with
  ``#measure`` and the page's paint timings are read from its console: ``first_paint_ms``
  and ``first_contentful_paint_ms`` in ``extra_info``, with ``bytes`` the file's size.
  Targets: file < 5 MB, first paint < 2 s.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.test_bench_rescore import make_table
from casstore.comparison.api import compare_sides
from casstore.comparison.pairing import side_of
from casstore.report.page import render
from casstore.report.payload import payload
from scoring import DEFAULT_GROUP_BY

GROUP = "compare"
_PAINT = re.compile(r"casstore-paint (first-paint|first-contentful-paint) ([0-9.]+)")


def _runs(tasks: int, attempts: int):
    return make_table(tasks, attempts, seed=1), make_table(tasks, attempts, seed=2)


@pytest.mark.parametrize("attempts", [1, 5], ids=["1 attempt", "5 attempts"])
def test_compare(benchmark, enabled: bool, attempts: int) -> None:
    a, b = _runs(100_000 if enabled else 100, attempts)
    label = "compare" if attempts == 1 else "compare (5 attempts)"
    benchmark.group = GROUP
    benchmark.extra_info.update({"label": label, "tasks": len(a.tasks), "target_seconds": 1.0})

    def run():
        return compare_sides(side_of(a), side_of(b), ks=None)

    result = benchmark.pedantic(run, rounds=7 if enabled else 1, iterations=1)
    assert result.difference.tasks + len(result.pairing.no_valid_attempt) == len(a.tasks)
    assert (result.mcnemar is not None) == (attempts == 1 and result.a.scale == 2)
    assert len(result.pass_at_k) == (1 if attempts == 1 else 4)  # k = 1 / 1, 2, 4, 5


def test_compare_scipy_baseline(benchmark, enabled: bool) -> None:
    import scipy.stats
    from statsmodels.stats.contingency_tables import mcnemar

    a, b = _runs(100_000 if enabled else 100, 1)
    x, y = side_of(a).means, side_of(b).means
    benchmark.group = GROUP
    benchmark.extra_info.update({"label": "scipy + statsmodels on the means alone (reference)"})

    def run():
        hit_a, hit_b = x == 1.0, y == 1.0
        table = [[np.sum(hit_a & hit_b), np.sum(hit_a & ~hit_b)]]
        table.append([np.sum(~hit_a & hit_b), np.sum(~hit_a & ~hit_b)])
        return scipy.stats.ttest_rel(x, y), mcnemar(np.array(table), exact=True)

    benchmark.pedantic(run, rounds=7 if enabled else 1, iterations=1)


def _first_paint(page: Path, profile: Path) -> dict[str, float]:
    """The page's paint timings in Chromium (ms), read from its ``#measure`` console lines."""
    from tests.browser import chromium

    argv = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,1600",
        f"--screenshot={profile / 'shot.png'}",
        page.resolve().as_uri() + "#measure",
    ]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    found = {name: float(ms) for name, ms in _PAINT.findall(done.stderr)}
    found["chromium_wall_ms"] = (time.perf_counter() - started) * 1000
    return found


def test_report(benchmark, enabled: bool, tmp_path: Path) -> None:
    tasks = 10_000 if enabled else 100
    a, b = _runs(tasks, 5)
    sides = [side_of(t, group_by=DEFAULT_GROUP_BY, ks=None) for t in (a, b)]
    out = tmp_path / "report.html"
    benchmark.group = "report"

    def run() -> int:
        cmp = compare_sides(sides[0], sides[1], ("A", "B"))
        page = render(payload([("A", sides[0]), ("B", sides[1])], [cmp]), "bench", "")
        out.write_bytes(page)
        return len(page)

    size = benchmark.pedantic(run, rounds=5 if enabled else 1, iterations=1)
    paints = [_first_paint(out, tmp_path / f"profile-{i}") for i in range(3 if enabled else 1)]
    first = sorted(p.get("first-contentful-paint", float("nan")) for p in paints)
    benchmark.extra_info.update(
        {
            "label": f"report page, 2 runs x {tasks} tasks x 5 attempts",
            "bytes": size,
            "size_limit_bytes": 5_000_000,
            "first_contentful_paint_ms": first,
            "first_paint_ms": sorted(p.get("first-paint", float("nan")) for p in paints),
            "chromium_wall_ms": sorted(p["chromium_wall_ms"] for p in paints),
        }
    )
    assert size < 5_000_000
    assert all(not np.isnan(ms) for ms in first)  # the page painted, and said when
