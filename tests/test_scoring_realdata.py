"""Rescoring the real Terminal-Bench 2.0 job reproduces Harbor's recorded metrics."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from scoring import score
from tests.helpers import TB2_HAIKU_COUNTS

pytestmark = pytest.mark.realdata

JOB = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")


@pytest.fixture(scope="module")
def job(fixtures_dir: Path):
    from casstore.trials import read_job

    return read_job(fixtures_dir / JOB)


def test_harbor_metrics_equal_the_recorded_ones(job, fixtures_dir: Path) -> None:
    recorded = json.loads((fixtures_dir / JOB / "result.json").read_text())["stats"]["evals"]
    (entry,) = recorded.values()
    report = score(job.table)
    assert report.harbor_metrics == [{"mean": 0.4157303370786517}]
    assert report.harbor_metrics == entry["metrics"]
    assert report.harbor_pass_at_k == {} and entry["pass_at_k"] == {}
    (key,) = report.harbor_evals
    assert key == next(iter(recorded))


def test_rules_on_the_real_job(job) -> None:
    report = score(job.table)
    reward = report.outputs["reward"]
    assert Fraction(reward.mean).limit_denominator(1000) == Fraction(37, 89)
    assert reward.mean == 37 / 89
    assert (reward.measured, reward.attempts) == (89, 89)
    assert report.counts == TB2_HAIKU_COUNTS
    (diagnostic,) = report.diagnostic_dicts()
    assert diagnostic["code"] == "verifier_result_missing"
    assert diagnostic["output"] == "reward"
    assert report.failure_rollup["exceptions"] == {
        "AgentTimeoutError": 17,
        "NonZeroAgentExitCodeError": 4,
    }
    (at1,) = report.pass_at_k
    assert (at1.k, at1.eligible_tasks, at1.value) == (1, 89, 37 / 89)
    assert report.to_json()["groups"][0]["labels"]["dataset"] == "terminal-bench"
