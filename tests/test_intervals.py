"""Bounded 95% intervals (issue 14, item 6; :mod:`scoring._interval`): Wilson for 0/1 values,
t clipped to [0, 1] and flagged for other values in [0, 1], t otherwise; and the special
functions behind them (:mod:`scoring._betainc`, :mod:`scoring._student_t`) against SciPy."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.special
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from scoring import Partials, apply_rules, score, summarize
from scoring._betainc import betainc
from scoring._interval import Scale, ci95, scale_of
from scoring._student_t import t_quantile, t_two_sided
from tests.scoring_helpers import make_table


def _rows(values: dict[str, list[float]], key: str = "reward") -> list[dict]:
    return [{"task": t, "rewards": {key: v}} for t, vs in values.items() for v in vs]


def _output(values: dict[str, list[float]]) -> dict:
    return score(make_table(_rows(values)), harbor=False).to_json()["outputs"]["reward"]


def test_a_two_task_mean_stays_in_the_unit_interval() -> None:
    """The case of the issue: a normal interval of a 2-task mean left [0, 1]."""
    output = _output({"a": [0.5, 1.0], "b": [1.0, 0.9]})
    low, high = output["ci95"]
    assert 0.0 <= low <= output["mean"] <= high <= 1.0
    assert output["ci95_method"] == "t_clipped" and high == 1.0
    z_half = 1.959963984540054 * output["stderr"]
    assert output["mean"] + z_half > 1.0  # the normal interval printed before left [0, 1]


def test_binary_single_attempts_are_statsmodels_wilson() -> None:
    values = {f"t{i}": [float(i % 3 == 0)] for i in range(89)}
    output = _output(values)
    successes = sum(v for vs in values.values() for v in vs)
    want = proportion_confint(successes, 89, alpha=0.05, method="wilson")
    assert output["ci95"] == pytest.approx(list(want), abs=1e-15)
    assert output["ci95_method"] == "wilson"


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_wilson_is_not_degenerate_at_zero_or_one(value: float) -> None:
    output = _output({f"t{i}": [value, value] for i in range(10)})
    assert output["stderr"] == 0.0
    want = proportion_confint(10 * value, 10, method="wilson")  # n_eff = G = 10 tasks
    assert output["ci95"] == pytest.approx(list(want), abs=1e-15)


def test_clustered_binary_uses_kish_effective_size() -> None:
    values = {"a": [1.0, 1.0, 1.0], "b": [0.0, 0.0], "c": [1.0, 0.0, 1.0, 1.0], "d": [0.0]}
    output = _output(values)
    flat = [v for vs in values.values() for v in vs]
    p, n, g = sum(flat) / len(flat), len(flat), len(values)
    residuals = [sum(v - p for v in vs) for vs in values.values()]
    n_eff = p * (1 - p) * n * n / sum(r * r for r in residuals)  # N / design effect
    assert g <= n_eff <= n
    want = proportion_confint(p * n_eff, n_eff, method="wilson")
    assert output["ci95"] == pytest.approx(list(want), abs=1e-14)


def test_unbounded_values_get_the_plain_t_interval() -> None:
    values = {"a": [2.0, 3.0], "b": [-1.0], "c": [0.5, 0.25, 4.0]}
    output = _output(values)
    want = scipy.stats.t.interval(0.95, 2, loc=output["mean"], scale=output["stderr"])
    assert output["ci95"] == pytest.approx(list(want), abs=1e-12)
    assert output["ci95_method"] == "t"


unit_values = st.dictionaries(
    st.sampled_from("abcdefgh"),
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    min_size=2,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(unit_values)
def test_every_interval_of_unit_values_stays_in_the_unit_interval(values) -> None:
    report = score(make_table(_rows(values)), harbor=False).to_json()
    intervals = [report["outputs"]["reward"]["ci95"]]
    intervals += [entry["ci95"] for entry in report["pass_at_k"].values()]
    intervals += [entry["ci95"] for entry in report["pass_hat_k"].values()]
    for interval in intervals:
        if interval is not None:
            assert 0.0 <= interval[0] <= interval[1] <= 1.0


def test_pass_at_k_binary_values_get_wilson_others_clipped_t() -> None:
    values = {"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [1.0, 1.0]}
    report = score(make_table(_rows(values)), harbor=False).to_json()
    two = report["pass_at_k"]["2"]  # one value per task, each 0 or 1 (k = n)
    assert two["value"] == pytest.approx(2 / 3)
    assert two["ci95"] == pytest.approx(list(proportion_confint(2, 3, method="wilson")), abs=1e-15)
    one = report["pass_at_k"]["1"]  # per-task values 0.5, 0, 1
    assert one["ci95_method"] == "t_clipped" and one["ci95"][0] == 0.0


def test_scales_merge_by_the_smaller() -> None:
    binary = make_table(_rows({"a": [1.0, 0.0]}))
    unit = make_table(_rows({"b": [0.5]}))
    both = Partials.from_table(binary, apply_rules(binary), 1.0) + Partials.from_table(
        unit, apply_rules(unit), 1.0
    )
    assert both.scales.tolist() == [Scale.UNIT]
    assert summarize(both).to_json()["outputs"]["reward"]["ci95_method"] != "wilson"
    assert scale_of(np.array([0.0, 1.0, 1.0])) is Scale.BINARY
    assert scale_of(np.array([0.0, 1.5])) is Scale.UNBOUNDED
    assert ci95(0.5, None, Scale.BINARY, 5, 5) is None and ci95(0.5, 0.1, Scale.UNIT, 1, 3) is None


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 19, 20, 21, 39, 40, 88, 500, 10_000, 99_999])
def test_student_t_matches_scipy(df: int) -> None:
    assert t_quantile(df) == pytest.approx(scipy.stats.t.ppf(0.975, df), abs=1e-12)
    for t in (0.0, 0.05, 0.7, 1.0, 1.96, 2.5, 4.0, 9.0, 60.0):
        assert t_two_sided(t, df) == pytest.approx(2 * scipy.stats.t.sf(t, df), abs=1e-12)
    assert t_two_sided(math.inf, df) == 0.0


def test_betainc_matches_scipy() -> None:
    rng = np.random.default_rng(14)
    a, b = np.exp(rng.uniform(-3.0, 11.0, (2, 2000)))
    x = rng.uniform(0.0, 1.0, 2000)
    ours = np.array(
        [betainc(*args) for args in zip(a.tolist(), b.tolist(), x.tolist(), strict=True)]
    )
    np.testing.assert_allclose(ours, scipy.special.betainc(a, b, x), rtol=0, atol=1e-12)


def test_rescore_text_marks_a_clipped_interval(tmp_path: Path, capsys) -> None:
    """Two tasks of rewards in [0, 1]: the t interval is cut at 1 and the table says so."""
    import msgspec

    from casstore.examples.job import write_example_job
    from casstore.trials import read_job, write_trials_jsonl
    from tests.helpers import run_cli

    job = write_example_job(tmp_path, ["a", "b"], attempts=2)
    values = iter([0.5, 1.0, 1.0, 0.9])
    records = [
        msgspec.structs.replace(
            r, rewards={"reward": next(values)}, kinds={"reward": 1}, exception_type=None
        )
        for r in read_job(job).trials
    ]
    write_trials_jsonl(records, tmp_path / "t.jsonl")
    code, out, _ = run_cli(capsys, "rescore", str(tmp_path / "t.jsonl"))
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("reward\t"))
    assert row.split("\t")[3].endswith("1.000] clipped")
