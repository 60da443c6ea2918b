"""``casstore compare`` (issue 14, item 4): every statistic against SciPy / statsmodels on the
same data, within 1e-12, on a real job and a second run of its tasks made with casstore's own
code (``read_job`` → records with other rewards → ``write_trials_jsonl``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
from statsmodels.stats.contingency_tables import mcnemar

from casstore.comparison.api import compare
from casstore.trials import read_job
from scoring import Scale, mcnemar_exact, paired_difference, pass_at_k, pass_at_k_difference
from tests.second_run import TB2, primary, second_run

TOL = 1e-12


def _task_means(records) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for record in records:
        values.setdefault(record.task_name, []).append(primary(record))
    return {task: float(np.mean(v)) for task, v in values.items()}


@pytest.fixture(scope="module")
def real(fixtures_dir: Path):
    job = fixtures_dir / TB2
    return job, read_job(job).trials


@pytest.mark.realdata
def test_single_attempt_runs_match_scipy_and_statsmodels(real, tmp_path: Path) -> None:
    job, records = real
    made, dropped = second_run(records, tmp_path / "b.jsonl", seed=1)
    result = compare(job, tmp_path / "b.jsonl", store=tmp_path / "none")
    out = result.to_json()
    assert out["only_in_a"] == sorted(dropped) and out["only_in_b"] == []
    a_means, b_means = _task_means(records), _task_means(made)
    tasks = sorted(b_means)
    a = np.array([a_means[t] for t in tasks])
    b = np.array([b_means[t] for t in tasks])
    assert [row["task"] for row in out["per_task"]] == tasks and out["tasks"] == 86
    diff = out["difference"]
    ttest = scipy.stats.ttest_rel(a, b)
    assert diff["difference"] == pytest.approx(float(np.mean(a - b)), abs=TOL)
    assert diff["t"] == pytest.approx(float(ttest.statistic), abs=TOL)
    assert diff["p_value"] == pytest.approx(float(ttest.pvalue), abs=TOL)
    assert diff["df"] == int(ttest.df) == 85
    low, high = ttest.confidence_interval(0.95)
    assert diff["ci95"] == pytest.approx([low, high], abs=TOL) and diff["ci95_method"] == "t"
    assert diff["stderr"] == pytest.approx(scipy.stats.sem(a - b), abs=TOL)
    assert diff["correlation"] == pytest.approx(scipy.stats.pearsonr(a, b).statistic, abs=TOL)
    assert (diff["won"], diff["lost"], diff["tied"]) == (
        int(np.sum(a > b)),
        int(np.sum(a < b)),
        int(np.sum(a == b)),
    )
    table = [[np.sum((a == 1) & (b == 1)), np.sum((a == 1) & (b == 0))]]
    table.append([np.sum((a == 0) & (b == 1)), np.sum((a == 0) & (b == 0))])
    exact = mcnemar(np.array(table), exact=True)
    assert out["mcnemar"]["p_value"] == pytest.approx(float(exact.pvalue), abs=TOL)
    assert out["mcnemar"]["statistic"] == exact.statistic
    assert out["pass_at_k"]["1"]["difference"] == pytest.approx(float(np.mean(a - b)), abs=TOL)


@pytest.mark.realdata
def test_clustered_attempts_match_a_task_clustered_regression(real, tmp_path: Path) -> None:
    """Five attempts per task in B, rewards in [0, 1]: the standard error is the CR1
    task-clustered one of a weighted fit of attempts on the run (weights 1 / attempts)."""
    job, records = real
    made, _ = second_run(records, tmp_path / "b.jsonl", seed=2, attempts=5, binary=False)
    out = compare(job, tmp_path / "b.jsonl", store=tmp_path / "none").to_json()
    tasks = [row["task"] for row in out["per_task"]]
    index = {task: i for i, task in enumerate(tasks)}
    rows = [(r, 1.0) for r in records if r.task_name in index] + [(r, 0.0) for r in made]
    y = np.array([primary(r) for r, _ in rows])
    side = np.array([s for _, s in rows])
    group = np.array([index[r.task_name] for r, _ in rows])
    counts = {(g, s): 0 for g in range(len(tasks)) for s in (0.0, 1.0)}
    for g, s in zip(group.tolist(), side.tolist(), strict=True):
        counts[(g, s)] += 1
    weights = np.array([1.0 / counts[(g, s)] for g, s in zip(group, side, strict=True)])
    fit = sm.WLS(y, sm.add_constant(side), weights=weights).fit(
        cov_type="cluster", cov_kwds={"groups": group}
    )
    n, k = y.size, 2  # statsmodels' CR1 also has (N − 1)/(N − K); ours G/(G − 1) only
    diff = out["difference"]
    assert diff["difference"] == pytest.approx(float(fit.params[1]), abs=TOL)
    assert diff["stderr"] == pytest.approx(float(fit.bse[1]) * np.sqrt((n - k) / (n - 1)), abs=TOL)
    assert out["mcnemar"] is None  # several attempts, rewards not 0/1
    a = np.array([row["a"] for row in out["per_task"]])
    b = np.array([row["b"] for row in out["per_task"]])
    assert diff["p_value"] == pytest.approx(float(scipy.stats.ttest_rel(a, b).pvalue), abs=TOL)
    assert diff["correlation"] == pytest.approx(float(np.corrcoef(a, b)[0, 1]), abs=TOL)


def test_paired_kernels_on_random_data() -> None:
    rng = np.random.default_rng(14)
    for n in (2, 3, 10, 250, 5000):
        a, b = rng.uniform(size=n), rng.uniform(size=n) * 0.9
        result = paired_difference(a, b, Scale.UNBOUNDED)
        ttest = scipy.stats.ttest_rel(a, b)
        assert result.p_value == pytest.approx(float(ttest.pvalue), abs=TOL)
        assert result.interval is not None
        assert result.interval.bounds() == pytest.approx(list(ttest.confidence_interval()), abs=TOL)
        x, y = rng.random(n) < 0.5, rng.random(n) < 0.4
        table = [[np.sum(x & y), np.sum(x & ~y)], [np.sum(~x & y), np.sum(~x & ~y)]]
        want = mcnemar(np.array(table), exact=True).pvalue
        assert mcnemar_exact(x, y).p_value == pytest.approx(float(want), abs=TOL)


def test_differences_of_unit_rewards_stay_in_minus_one_one() -> None:
    result = paired_difference(np.array([1.0, 1.0, 0.9]), np.array([0.0, 0.1, 0.0]), Scale.UNIT)
    assert result.interval is not None and result.interval.high == 1.0
    assert result.interval.method == "t_clipped"
    same = paired_difference(np.array([0.5, 0.5]), np.array([0.5, 0.5]), Scale.UNIT)
    assert same.difference == 0.0 and same.p_value is None and same.tied == 2


def test_pass_at_k_difference_is_the_bootstrap_of_tasks() -> None:
    """The point estimate is scoring's pass@k over the tasks eligible in both; the profile
    draws are the same as resampling the tasks themselves."""
    rng = np.random.default_rng(5)
    n_a, n_b = rng.integers(1, 8, 300), rng.integers(2, 6, 300)
    c_a, c_b = rng.binomial(n_a, 0.4), rng.binomial(n_b, 0.5)
    (one, four) = pass_at_k_difference(n_a, c_a, n_b, c_b, [1, 4], replicates=400)
    both = (n_a >= 4) & (n_b >= 4)
    (at_a,) = pass_at_k(n_a[both], c_a[both], [4])
    (at_b,) = pass_at_k(n_b[both], c_b[both], [4])
    assert four.eligible_tasks == int(both.sum())
    assert four.difference == pytest.approx(at_a.value - at_b.value, abs=TOL)
    (all_a,), (all_b,) = pass_at_k(n_a, c_a, [1]), pass_at_k(n_b, c_b, [1])
    assert one.difference == pytest.approx(all_a.value - all_b.value, abs=TOL)
    again = pass_at_k_difference(n_a, c_a, n_b, c_b, [1, 4], replicates=400)
    assert again[1].ci95 == four.ci95  # fixed seed
    # drawing profile counts from Multinomial(T, w / T) is drawing T tasks with replacement:
    # the percentile interval's width is 2 · 1.96 plug-in standard errors of the mean
    ones, hits_a, hits_b = (
        np.ones(4000, int),
        rng.binomial(1, 0.3, 4000),
        rng.binomial(1, 0.6, 4000),
    )
    (many,) = pass_at_k_difference(ones, hits_a, ones, hits_b, [1])
    plug_in = float(np.std(hits_a - hits_b)) / np.sqrt(4000)
    assert many.ci95 is not None
    assert many.ci95[1] - many.ci95[0] == pytest.approx(2 * 1.959964 * plug_in, rel=0.06)
    per_task = c_a / n_a - c_b / n_b
    boot = scipy.stats.bootstrap(
        (per_task,), np.mean, n_resamples=2000, method="percentile", random_state=1
    )
    assert one.ci95 is not None
    assert one.ci95 == pytest.approx(
        [boot.confidence_interval.low, boot.confidence_interval.high], abs=0.01
    )
