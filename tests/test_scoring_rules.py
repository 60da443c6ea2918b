"""Per-attempt rules of README, §6 Scoring, on generated tables: values, statuses, diagnostics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.proportion import proportion_confint

from casstore.errors import UsageError
from scoring import STATUS_NAMES, apply_rules, score
from tests.scoring_helpers import make_table


def statuses(rows):
    table = make_table(rows)
    return [STATUS_NAMES[s] for s in apply_rules(table).status]


def diagnostics(rows, **options):
    report = score(make_table(rows), **options)
    return [(d["code"], d["trial"], d["output"]) for d in report.diagnostic_dicts()]


def test_statuses() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0}},
        {"task": "a", "rewards": {"reward": 0.8}, "exception": "RuntimeError"},
        {"task": "a", "rewards": None, "exception": "AgentTimeoutError"},
        {"task": "a", "rewards": None},
        {"task": "a", "rewards": "invalid"},
        {"task": "a", "rewards": {"reward": True}, "exception": "RuntimeError"},
        {"task": "a", "rewards": {}},
    ]
    assert statuses(rows) == [
        "scored",
        "partial",
        "errored",
        "no_verifier",
        "invalid",
        "errored",
        "scored",
    ]


def test_invalid_attempt_skipped_whole() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0, "style": 0.5}},
        {"task": "a", "rewards": "invalid"},
    ]
    report = score(make_table(rows))
    assert report.counts["invalid"] == 1 and report.counts["attempts"] == 2
    reward = report.outputs["reward"]
    assert (reward.mean, reward.measured, reward.attempts) == (1.0, 1, 1)
    assert report.outputs["style"].attempts == 1
    assert diagnostics(rows) == [("reward_mapping_invalid", "a__1", None)]


def test_primary_by_key_never_by_order() -> None:
    rows = [{"task": "a", "rewards": {"aaa": 0.25, "reward": 0.75, "zzz": 0.5}}]
    report = score(make_table(rows))
    assert report.outputs["reward"].mean == 0.75
    assert list(report.outputs) == ["reward", "aaa", "zzz"]
    other = score(make_table(rows, reward_key="zzz"))
    assert other.outputs["zzz"].mean == 0.5


@pytest.mark.parametrize(
    ("rewards", "code"),
    [
        ({}, "primary_missing"),  # (only other keys in every attempt: refused, see below)
        ({"reward": True}, "primary_boolean"),
        ({"reward": False}, "primary_boolean"),
        ({"reward": math.inf}, "primary_nonfinite"),
        ({"reward": math.nan}, "primary_nonfinite"),
        (None, "verifier_result_missing"),
    ],
)
def test_unusable_primary_emits_zero_and_a_diagnostic(rewards, code) -> None:
    rows = [{"task": "a", "rewards": rewards}]
    report = score(make_table(rows))
    stats = report.outputs["reward"]
    assert (stats.mean, stats.measured, stats.attempts) == (0.0, 1, 1)
    assert (code, "a__0", "reward") in diagnostics(rows)


def test_a_reward_key_no_attempt_holds_is_refused_naming_the_others() -> None:
    """Issue 18, item 1: every attempt lacks the key but some hold others: UsageError (exit
    2) naming them, sorted as the table holds them; one attempt holding it: scored."""
    rows = [{"task": "a", "rewards": {"other": 1.0, "b": 0.5}}, {"task": "b", "rewards": None}]
    with pytest.raises(UsageError) as raised:
        score(make_table(rows))
    assert raised.value.exit_code == 2
    assert raised.value.rule.startswith(
        "no attempt holds the reward key 'reward'; the attempts hold 'b', 'other': "
    )
    rows.append({"task": "b", "rewards": {"reward": 0.0}})
    assert score(make_table(rows)).diagnostics.counts() == {
        "primary_missing": 1,
        "verifier_result_missing": 1,
    }


def test_finite_primary_emitted_unchanged_including_numeric_strings() -> None:
    rows = [{"task": "a", "rewards": {"reward": 0.3}}, {"task": "a", "rewards": {"reward": "0.7"}}]
    report = score(make_table(rows))
    assert report.outputs["reward"].mean == (0.3 + 0.7) / 2
    assert diagnostics(rows) == []


def test_secondaries_missing_boolean_nonfinite_omitted_siblings_kept() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0, "fmt": 1.0, "style": 0.5}},
        {"task": "a", "rewards": {"reward": 0.0, "style": 0.25}},
        {"task": "a", "rewards": {"reward": 0.0, "fmt": True, "style": math.inf}},
    ]
    report = score(make_table(rows))
    fmt, style = report.outputs["fmt"], report.outputs["style"]
    assert (fmt.mean, fmt.measured, fmt.attempts, fmt.coverage) == (1.0, 1, 3, 1 / 3)
    assert (style.mean, style.measured, style.attempts) == (0.375, 2, 3)
    assert sorted(diagnostics(rows)) == [
        ("secondary_boolean", "a__2", "fmt"),
        ("secondary_missing", "a__1", "fmt"),
        ("secondary_nonfinite", "a__2", "style"),
    ]


def test_secondary_keys_are_scoped_per_task() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0, "fmt": 1.0}},
        {"task": "b", "rewards": {"reward": 0.0}},
        {"task": "b", "rewards": {"reward": 1.0}},
    ]
    report = score(make_table(rows))
    fmt = report.outputs["fmt"]
    assert (fmt.measured, fmt.attempts, fmt.coverage) == (1, 1, 1.0)  # task b does not expect it
    assert diagnostics(rows) == []
    tasks = {t["task"]: t for t in report.to_json()["tasks"]}
    assert "fmt" not in tasks["b"]["outputs"]


def test_mean_is_none_when_nothing_measured() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0, "fmt": True}},
        {"task": "a", "rewards": {"reward": 1.0}},
    ]
    report = score(make_table(rows))
    fmt = report.outputs["fmt"]
    assert fmt.mean is None and fmt.measured == 0 and fmt.attempts == 2
    assert fmt.stderr is None and report.to_json()["outputs"]["fmt"]["ci95"] is None
    only_invalid = score(make_table([{"task": "a", "rewards": "invalid"}]))
    assert only_invalid.outputs["reward"].mean is None
    assert only_invalid.to_json()["outputs"]["reward"]["mean"] is None


def test_errored_attempt_with_valid_primary_keeps_reward_and_rolls_up() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0}},
        {"task": "a", "rewards": {"reward": 0.8}, "exception": "RuntimeError"},
    ]
    report = score(make_table(rows))
    assert report.outputs["reward"].mean == 0.9
    assert report.counts["partial"] == 1 and report.counts["scored"] == 1
    assert report.failure_rollup["exceptions"] == {"RuntimeError": 1}
    assert report.failure_rollup["errored_attempts"] == 1


def test_failure_codes_roll_up() -> None:
    rows = [
        {"task": "a", "rewards": None, "exception": "AgentTimeoutError", "failure": "timeout"},
        {"task": "b", "rewards": None, "exception": "AgentTimeoutError", "failure": "timeout"},
        {"task": "c", "rewards": "invalid", "failure": "reward_invalid"},
    ]
    rollup = score(make_table(rows)).failure_rollup
    assert rollup["exceptions"] == {"AgentTimeoutError": 2}
    assert rollup["failure_codes"] == {"reward_invalid": 1, "timeout": 2}


def test_threshold_decides_success() -> None:
    rows = [{"task": "a", "rewards": {"reward": v}} for v in (0.2, 0.6, 1.0)]
    table = make_table(rows)
    assert score(table).pass_at_k[0].value == pytest.approx(1 / 3)
    assert score(table, threshold=0.5).pass_at_k[0].value == pytest.approx(2 / 3)
    assert score(table, threshold=0.5).overall.resolve_rate == pytest.approx(2 / 3)


def test_reward_key_mismatch_is_an_error() -> None:
    from scoring import ScoringError

    with pytest.raises(ScoringError, match="reward key"):
        score(make_table([{"task": "a", "rewards": {"reward": 1}}]), reward_key="score")


def test_clustered_stderr_matches_formula() -> None:
    values = {"a": [1.0, 0.0, 1.0], "b": [0.0, 0.0], "c": [1.0, 1.0, 1.0, 0.5]}
    rows = [{"task": t, "rewards": {"reward": v}} for t, vs in values.items() for v in vs]
    stats = score(make_table(rows)).outputs["reward"]
    flat = [v for vs in values.values() for v in vs]
    mean = sum(flat) / len(flat)
    residuals = [sum(v - mean for v in vs) for vs in values.values()]
    g = len(values)
    want = math.sqrt(g / (g - 1) * sum(r * r for r in residuals) / len(flat) ** 2)
    assert stats.mean == pytest.approx(mean)
    assert stats.stderr == pytest.approx(want)
    # issue 14: values in [0, 1], not all 0/1: t(G − 1) interval, clipped to [0, 1]
    output = score(make_table(rows)).to_json()["outputs"]["reward"]
    half = scipy.stats.t.ppf(0.975, g - 1) * want
    assert mean - half < 0.0 and mean + half > 1.0  # 3 tasks: t(2) = 4.30
    assert output["ci95"] == [0.0, 1.0] and output["ci95_method"] == "t_clipped"
    single = [{"task": f"t{i}", "rewards": {"reward": v}} for i, v in enumerate([1, 0, 1, 0, 0])]
    binary = score(make_table(single)).to_json()["outputs"]["reward"]  # one 0/1 per task
    want_low, want_high = proportion_confint(2, 5, method="wilson")
    assert binary["ci95"] == pytest.approx([want_low, want_high], abs=1e-15)
    assert binary["ci95_method"] == "wilson"


def test_groups_by_agent_model_dataset() -> None:
    rows = [
        {"task": "a", "rewards": {"reward": 1.0}, "agent": "x@1", "model": "m1"},
        {"task": "a", "rewards": {"reward": 0.0}, "agent": "x@1", "model": "m2"},
        {"task": "b", "rewards": {"reward": 1.0}, "agent": "x@1", "model": "m2"},
        {"task": "b", "rewards": {"reward": 1.0}, "agent": "y@2", "model": "m2"},
    ]
    report = score(make_table(rows))
    by = {(g.labels["agent"], g.labels["model"]): g for g in report.groups}
    assert set(by) == {("x@1", "m1"), ("x@1", "m2"), ("y@2", "m2")}
    assert by["x@1", "m2"].outputs["reward"].mean == 0.5
    assert by["x@1", "m2"].counts["attempts"] == 2
    models = score(make_table(rows), group_by=["model"])
    assert [g.labels for g in models.groups] == [{"model": "m1"}, {"model": "m2"}]
    assert models.groups[1].pass_at_k[0].eligible_tasks == 2
    assert score(make_table(rows), group_by=[]).groups == []


def test_diagnostics_json_fields() -> None:
    report = score(make_table([{"task": "a", "rewards": {"reward": True}}]))
    (diagnostic,) = report.to_json()["diagnostics"]
    assert set(diagnostic) == {"code", "task", "trial", "output", "message"}
    assert report.to_json()["diagnostic_counts"] == {"primary_boolean": 1}


def test_empty_table() -> None:
    report = score(make_table([]))
    assert report.counts["attempts"] == 0
    assert report.outputs["reward"].mean is None
    assert report.pass_at_k == [] and report.harbor_metrics == []
    assert np.asarray(report.tasks.attempts).size == 0
