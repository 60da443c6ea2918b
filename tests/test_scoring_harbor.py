"""Harbor parity: our harbor_metrics / harbor_pass_at_k against Harbor 0.20's own functions.

Harbor runs on ``TrialResult`` objects whose ``verifier_result`` went through Harbor's own
pydantic model (so Booleans and numeric strings are coerced by Harbor itself); comparisons are
``==`` on floats (bit for bit).
"""

from __future__ import annotations

import pytest
from harbor.metrics.max import Max
from harbor.metrics.mean import Mean
from harbor.metrics.min import Min
from harbor.metrics.sum import Sum
from harbor.models.trial.result import TrialResult
from harbor.utils.pass_at_k import compute_pass_at_k_by_evals
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.errors import UsageError
from scoring import score
from tests.scoring_helpers import harbor_groups, harbor_rewards, harbor_trials, make_table

HARBOR = {"mean": Mean(), "sum": Sum(), "min": Min(), "max": Max()}
NAMES = list(HARBOR)


def check_parity(rows, reward_key: str = "reward") -> None:
    mappings = [row["rewards"] for row in rows if isinstance(row["rewards"], dict)]
    if not any(reward_key in m for m in mappings) and any(mappings):
        # no attempt holds the reward key, some hold another: refused (issue 18, item 1)
        with pytest.raises(UsageError, match="no attempt holds the reward key"):
            score(make_table(rows, reward_key), metrics=NAMES)
        return
    report = score(make_table(rows, reward_key), metrics=NAMES)
    trials = harbor_trials(rows)
    rewards = harbor_rewards(trials)
    if rewards:
        want = [HARBOR[name].compute(rewards) for name in NAMES]
        assert report.harbor_metrics == want
        assert repr(report.harbor_metrics) == repr(want)  # ints stay ints, -0.0 stays -0.0
    else:
        assert report.harbor_metrics == []
    assert report.harbor_pass_at_k == compute_pass_at_k_by_evals(trials)
    # per evals key, as Harbor's job computes stats.evals[key].metrics
    groups = harbor_groups(trials)
    assert report.harbor_evals is not None
    assert set(report.harbor_evals) == set(groups)
    for key, members in groups.items():
        want = [HARBOR[name].compute(harbor_rewards(members)) for name in NAMES]
        assert report.harbor_evals[key]["metrics"] == want
        assert repr(report.harbor_evals[key]["metrics"]) == repr(want)


def test_seed_examples() -> None:
    single = [{"reward": 1}, {"reward": 0}, None, {"reward": 0}]
    rows = [{"task": f"t{i}", "rewards": r} for i, r in enumerate(single)]
    assert score(make_table(rows)).harbor_metrics == [{"mean": 0.25}]
    check_parity(rows)
    multi = [
        {"correctness": 1, "style": 0.5},
        {"correctness": 0, "style": 1},
        None,
        {"correctness": 1, "style": 0.5},
    ]
    rows = [{"task": f"t{i}", "rewards": r} for i, r in enumerate(multi)]
    assert score(make_table(rows, "correctness")).harbor_metrics == [
        {"correctness": 0.5, "style": 0.5}
    ]
    check_parity(rows, "correctness")
    sparse = [{"correctness": 1}, {"style": 1}, {}, None]
    rows = [{"task": f"t{i}", "rewards": r} for i, r in enumerate(sparse)]
    assert score(make_table(rows, "correctness")).harbor_metrics == [
        {"correctness": 0.25, "style": 0.25}
    ]
    check_parity(rows, "correctness")


def test_invalid_attempts_left_out_as_harbor_does() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 0.1}},
        {"task": "b", "rewards": "invalid"},
        {"task": "c", "rewards": {"reward": 0.7}},
    ]
    assert score(make_table(rows)).harbor_metrics == [
        Mean().compute([{"reward": 0.1}, {"reward": 0.7}])
    ]
    check_parity(rows)


def test_booleans_and_numeric_strings_as_harbor_coerces_them() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": True}},
        {"task": "b", "rewards": {"reward": "0.25"}},
        {"task": "c", "rewards": {"reward": False}},
    ]
    check_parity(rows)
    assert score(make_table(rows)).harbor_metrics == [{"mean": 1.25 / 3}]


def test_pass_at_k_parity_and_its_rules() -> None:
    rows = []
    for task, outcomes in {"a": [1, 0, 1, 1], "b": [0, 0, 0, 0], "c": [1, 1, 0, 1, 1]}.items():
        rows += [{"task": task, "rewards": {"reward": float(o)}} for o in outcomes]
    rows.append({"task": "b", "rewards": None})  # no verifier: counts as 0
    report = score(make_table(rows))
    assert report.harbor_pass_at_k == compute_pass_at_k_by_evals(harbor_trials(rows))
    assert set(report.harbor_pass_at_k["agent__adhoc"]) == {2, 4}  # k up to the smallest n
    check_parity(rows)
    # a value outside {0, 1} or a second key empties Harbor's pass@k for the group
    check_parity([*rows, {"task": "a", "rewards": {"reward": 0.5}}])
    assert (
        score(make_table([*rows, {"task": "a", "rewards": {"reward": 0.5}}])).harbor_pass_at_k == {}
    )
    check_parity([*rows, {"task": "a", "rewards": {"reward": 1.0, "x": 1.0}}])
    check_parity([*rows, {"task": "a", "rewards": {}}])


value = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 3.0, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 0.7, 1e-9, 12.5, -0.4]),
    st.booleans(),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(-3, 3),  # JSON integers: Harbor keeps ints (exact sums, int results)
    st.integers(-(2**53), 2**53),
)
rewards = st.one_of(
    st.none(),
    st.just("invalid"),
    st.dictionaries(st.sampled_from(["reward", "style", "fmt"]), value, max_size=3),
)
row = st.fixed_dictionaries(
    {
        "task": st.sampled_from(["a", "b", "c", "d"]),
        "rewards": rewards,
        "agent": st.sampled_from(["x@1", "y@2", "x@2@rc"]),  # a version may hold "@"
        "model": st.sampled_from(["", "m"]),
        "dataset": st.sampled_from(["", "ds"]),
    }
)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(row, max_size=40))
def test_metrics_parity_on_random_trials(rows) -> None:
    check_parity(rows)


binary_row = st.fixed_dictionaries(
    {
        "task": st.sampled_from(["a", "b", "c"]),
        "rewards": st.one_of(
            st.none(),
            st.fixed_dictionaries({"reward": st.sampled_from([0.0, 1.0, True, False, 0, 1])}),
        ),
        "agent": st.sampled_from(["x@1", "y@2"]),
    }
)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(binary_row, min_size=1, max_size=60))
def test_pass_at_k_parity_on_random_binary_trials(rows) -> None:
    report = score(make_table(rows))
    assert report.harbor_pass_at_k == compute_pass_at_k_by_evals(harbor_trials(rows))


@pytest.mark.parametrize("name", NAMES)
def test_integer_rewards_equal_harbor(name: str) -> None:
    # reward.json-style 0/1 integers: Harbor keeps ints, so Sum/Min/Max are ints
    rows = [{"task": f"t{i}", "rewards": {"reward": i % 2}} for i in range(7)]
    report = score(make_table(rows), metrics=[name])
    want = [HARBOR[name].compute(harbor_rewards(harbor_trials(rows)))]
    assert repr(report.harbor_metrics) == repr(want)
    check_parity(rows)


def test_integer_rewards_types_and_mixed_sums() -> None:
    rows = [{"task": "t", "rewards": {"reward": v}} for v in (1, 0.1, 0.1)]
    report = score(make_table(rows), metrics=NAMES)
    # CPython adds the int prefix without compensation: not the float sum's 0.39999999999999997
    assert report.harbor_metrics == [
        {"mean": 0.4000000000000001},
        {"sum": 1.2000000000000002},
        {"min": 0.1},
        {"max": 1},
    ]
    assert type(report.harbor_metrics[3]["max"]) is int
    check_parity(rows)
    ints = [
        {"task": f"t{i}", "rewards": {"reward": v, "n": 2**52 + i}} for i, v in enumerate((3, 4))
    ]
    report = score(make_table(ints), metrics=["sum", "mean"])
    assert report.harbor_metrics == [
        {"n": 2**53 + 1, "reward": 7},
        {"n": 2**52 + 0.5, "reward": 3.5},
    ]
    assert type(report.harbor_metrics[0]["n"]) is int
    check_parity(ints)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
            st.sampled_from([0.0, -0.0, 0.1, 1e16, -1e16, 2.0**53, 1e308, -1e308, 5e-324]),
        ),
        max_size=80,
    )
)
def test_float_sum_is_cpython_sum_bit_for_bit(values) -> None:
    import math

    import numpy as np

    from scoring._exact_sum import float_sum

    got, want = float_sum(np.array(values, dtype=np.float64)), sum(values)
    assert got == want or (math.isnan(got) and math.isnan(want))
    assert math.copysign(1.0, got) == math.copysign(1.0, want)


def test_float_sum_near_overflow() -> None:
    # n · max|x| overflows: not the dyadic shortcut (it summed 1 + 1e308 − 1e308 + 1 to 1.0)
    import numpy as np

    from scoring._exact_sum import float_sum

    for values in ([1.0, 1e308, -1e308, 1.0], [0.5, 1e308, -1e308, 0.25]):
        assert float_sum(np.array(values)) == sum(values)


def _decimal_or_dyadic(scale: int) -> st.SearchStrategy[float]:
    """Rewards as graders write them: k / 10**d or k / 2**d, possibly scaled and negative."""
    return st.builds(
        lambda k, d, dyadic, sign: sign * k / (2**d if dyadic else 10**d) * scale,
        st.integers(0, 10**6),
        st.integers(0, 12),
        st.booleans(),
        st.sampled_from([1.0, -1.0]),
    )


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.one_of(_decimal_or_dyadic(1), _decimal_or_dyadic(1000), st.just(0.0)),
        max_size=120,
    ),
    tail=st.sampled_from([[], [1e-300], [2.0**-60], [0.1, 1e6]]),
)
def test_float_sum_exact_shortcuts_are_cpython_sum(values, tail) -> None:
    # the exactness shortcuts of _vector_sum (dyadic totals, error terms summed by np.sum)
    # apply to most of these lists; each must still give CPython's bits
    import math

    import numpy as np

    from scoring._exact_sum import float_sum

    values = values + tail
    got, want = float_sum(np.array(values, dtype=np.float64)), sum(values)
    assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


def bin_sums(part, bins, nbins):
    """Reference per-bin sums (exact for the integer limbs they get)."""
    return [sum(part[bins == b].tolist()) for b in range(nbins)]


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(_decimal_or_dyadic(1), _decimal_or_dyadic(1000), st.just(0.0)),
            st.integers(0, 2),
        ),
        max_size=120,
    ),
    tail=st.sampled_from([[], [(1e-300, 0)], [(2.0**-60, 1)], [(0.1, 2), (1e6, 0)]]),
)
def test_exact_bin_sums_round_to_cpython_sum_per_bin(rows, tail) -> None:
    # per evals key in one pass: each bin's exact total, rounded once, is CPython's sum of the
    # bin's values in order (and so is the total of all bins), whenever the form applies
    import numpy as np

    from scoring._exact_sum import exact_bin_sums

    rows = rows + tail
    values = np.array([value for value, _ in rows], dtype=np.float64)
    bins = np.array([b for _, b in rows], dtype=np.int64)
    low, high = (float(values.min()), float(values.max())) if rows else (0.0, 0.0)
    exact = exact_bin_sums(values, low, high, lambda part: bin_sums(part, bins, 3))
    if exact is None:  # not provable here (zero, or too wide a range): callers fall back
        return
    for b in range(3):
        want = sum(value for value, g in rows if g == b)
        assert exact.rounded(exact.totals[b]) == want
    assert exact.rounded(sum(exact.totals)) == sum(values.tolist())


@pytest.mark.parametrize("kind", ["decimal", "integer", "negative"])
def test_exact_bin_sums_on_long_columns(kind: str) -> None:
    import numpy as np

    from scoring._exact_sum import exact_bin_sums

    rng = np.random.default_rng(len(kind))
    n = 300_000
    if kind == "decimal":  # 3-decimal rewards in [0, 1]: q = -62, two limbs
        values = np.round(rng.random(n), 3)
    elif kind == "integer":
        values = rng.integers(0, 1000, n).astype(np.float64)
    else:
        values = np.round(rng.random(n), 2) * np.where(rng.random(n) < 0.3, -1, 1)
    values[rng.random(n) < 0.2] = 0.0
    bins = rng.integers(0, 4, n)
    exact = exact_bin_sums(
        values, float(values.min()), float(values.max()), lambda part: bin_sums(part, bins, 4)
    )
    assert exact is not None and len(exact.totals) == 4
    for b in range(4):
        assert exact.rounded(exact.totals[b]) == sum(values[bins == b].tolist())


def test_exact_bin_sums_refuses_what_it_cannot_prove() -> None:
    import numpy as np

    from scoring._exact_sum import exact_bin_sums

    wide = np.array([1e-30, 1e30, 0.5])  # range beyond 62 bits: CPython's rounding matters
    assert exact_bin_sums(wide, 0.0, 1e30) is None
    assert exact_bin_sums(np.zeros(4), 0.0, 0.0) is None
    huge = np.array([1.7976931348623157e308, 1.0])
    assert exact_bin_sums(huge, 1.0, huge[0]) is None


@pytest.mark.parametrize("kind", ["decimal", "dyadic", "mixed", "wide"])
def test_float_sum_long_lists_are_cpython_sum(kind: str) -> None:
    import numpy as np

    from scoring._exact_sum import float_sum

    rng = np.random.default_rng(len(kind))
    n = 200_000
    if kind == "decimal":  # the error terms' sum is exact: np.sum instead of a second cumsum
        values = np.round(rng.random(n), 3)
    elif kind == "dyadic":  # every partial sum exact: one np.sum
        values = rng.integers(0, 5, n) / 4.0
    elif kind == "mixed":
        values = np.round(rng.random(n) * 100, 2) * np.where(rng.random(n) < 0.3, -1, 1)
    else:  # tiny and huge values: neither shortcut applies
        values = rng.random(n) * 10.0 ** rng.integers(-30, 30, n)
    values[rng.random(n) < 0.2] = 0.0
    assert float_sum(values) == sum(values.tolist())


@pytest.mark.parametrize("binary", [False, True])
def test_parity_on_rows_grouped_by_task_with_interleaved_models(binary: bool) -> None:
    # the importer's layout (rows grouped by task), evals keys alternating by task
    rows = []
    for t in range(12):
        for a in range(3 + t % 3):
            value = float((t * 7 + a * 3) % 5 == 0) if binary else ((t * 13 + a * 7) % 10) / 7
            rewards = {"reward": value} if binary else {"reward": value, "style": value / 3}
            rows.append(
                {
                    "task": f"t{t:02d}",
                    "rewards": None if (t + a) % 11 == 0 else rewards,
                    "model": "m" if t % 2 else "",
                }
            )
    check_parity(rows)


def _three_sources(job, tmp_path) -> tuple:
    """The store ``job`` was imported into, and the three sources of the same trials: the job
    directory, the imported job's id and its exported trials.jsonl."""
    from casstore.store import Store
    from casstore.trials import Jobs, write_trials_jsonl

    store, saved = tmp_path / "store", tmp_path / "trials.jsonl"
    with Store(store) as opened:
        Jobs(opened).import_jobs([job])
        (record,) = Jobs(opened).list()
        write_trials_jsonl(Jobs(opened).trial_records(record.job_id), saved)
    return store, (str(job), record.job_id, str(saved))


def test_integer_rewards_end_to_end(capsys, tmp_path) -> None:
    """JSON integers in result.json keep Harbor's int results through a job directory, the
    store and a trials.jsonl round trip (Sum 2, Max 1: ints, as Harbor's own Sum/Max)."""
    import json

    from cli.main import run
    from tests.trials_builder import make_job, trial_json, trial_result

    values = {"a__1": 1, "a__2": 0, "b__1": 1, "b__2": 0.5}
    trials = {
        name: trial_json(trial_result(name[0], name, {"reward": v}, started=i))
        for i, (name, v) in enumerate(values.items())
    }
    job = make_job(tmp_path / "job", trials)
    parsed = [TrialResult.model_validate_json(text) for text in trials.values()]
    want = [HARBOR[m].compute(harbor_rewards(parsed)) for m in ("sum", "max", "min")]
    assert repr(want) == "[{'sum': 2.5}, {'max': 1}, {'min': 0}]"
    store, sources = _three_sources(job, tmp_path)
    for source in sources:
        capsys.readouterr()
        metrics = ["--metric", "sum", "--metric", "max", "--metric", "min"]
        code = run(["--store", str(store), "rescore", source, *metrics, "--json"])
        out = capsys.readouterr().out
        assert code == 0
        assert repr(json.loads(out)["harbor_metrics"]) == repr(want)  # JSON 1, not 1.0


def test_json_output_writes_integers_beyond_64_bits(capsys, tmp_path) -> None:
    """An exact Harbor Sum of int64 rewards can leave 64 bits: --json writes it exactly."""
    import json

    from cli.main import run
    from tests.trials_builder import make_job, trial_json, trial_result

    low = -(2**63)
    trials = {
        f"t__{i}": trial_json(trial_result("t", f"t__{i}", {"reward": low}, started=i))
        for i in range(2)
    }
    job = make_job(tmp_path / "job", trials)
    capsys.readouterr()
    assert run(["rescore", str(job), "--metric", "sum", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["harbor_metrics"] == [{"sum": 2 * low}]
    assert Sum().compute([{"reward": low}] * 2) == {"sum": 2 * low}


def test_evals_keys_are_harbors_for_odd_agents_and_models(capsys, tmp_path) -> None:
    """Harbor's evals key from agent_info.name (which may hold "@") and agent_info.model_info
    (never config.agent.model_name), through a job directory, the store and trials.jsonl."""
    import json

    from cli.main import run
    from tests.trials_builder import make_job, trial_json, trial_result

    specs = [  # (agent, version, model, reward)
        ("team@org/agent", "1.0", "claude-haiku", 1.0),
        ("team@org/agent", "1.0", "claude-haiku", 0.0),
        ("team", "org/agent@1.0", "claude-haiku", 1.0),
        ("oracle", "1.0", None, 0.0),  # config.agent.model_name set below, model_info null
        ("oracle", "1.0", "", 1.0),  # model_info.name "" (e.g. "-m anthropic/")
    ]
    trials = {}
    for i, (agent, version, model, reward) in enumerate(specs):
        result = trial_result(
            f"t{i}", f"t{i}__x", {"reward": reward}, agent=agent, version=version, model=model
        )
        data = json.loads(trial_json(result))
        if model is None:
            data["config"]["agent"]["model_name"] = "gpt-x"
        if model == "":
            data["agent_info"]["model_info"] = {"name": "", "provider": "anthropic"}
        trials[f"t{i}__x"] = json.dumps(data)
    job = make_job(tmp_path / "job", trials)
    parsed = [TrialResult.model_validate_json(text) for text in trials.values()]
    groups = harbor_groups(parsed)
    assert set(groups) == {
        "team@org/agent__claude-haiku__demo-ds",
        "team__claude-haiku__demo-ds",
        "oracle__demo-ds",
    }
    want = {key: [Mean().compute(harbor_rewards(members))] for key, members in groups.items()}
    store, sources = _three_sources(job, tmp_path)
    for source in sources:
        capsys.readouterr()
        assert run(["--store", str(store), "rescore", source, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        got = {key: value["metrics"] for key, value in out["harbor_evals"].items()}
        assert got == want, source
