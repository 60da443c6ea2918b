"""Trial parsing and job reading on generated Harbor job trees (no store).

Reward validity, values and Kinds must equal what Harbor 0.20's own ``TrialResult`` makes of
the same file; drift outside scoring fields never rejects a trial.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from harbor.models.agent.context import AgentContext
from harbor.models.trial.result import StepResult, TrialResult
from harbor.models.verifier.result import VerifierResult
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from casstore.errors import CheckError, UsageError
from casstore.table.columns import Flag, Kind, RewardTable
from casstore.trials import find_jobs, parse_result, read_job, table_from_records
from casstore.trials.result import ResultUnreadable
from tests.trials_builder import ABSENT, make_job, trial_json, trial_result

NAN = math.nan


def _parse(text: str, reward_key: str = "reward"):
    return parse_result(text.encode(), "job", reward_key)


def _same(a: float | int | None, b: float | int | None) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(b, int) and not -(2**63) <= b < 2**63:  # stored as the nearest float
        return a == float(b) if abs(b) < 2**1023 else a == math.copysign(math.inf, b)
    return a == b and type(a) is type(b)


# (raw verifier_result text, valid, has_verifier, rewards, kinds)
SHAPES = {
    "number": ('{"rewards": {"reward": 0.75}}', True, True, {"reward": 0.75}, {"reward": 1}),
    "integer": ('{"rewards": {"reward": 1}}', True, True, {"reward": 1}, {"reward": 1}),
    "bool_true": ('{"rewards": {"reward": true}}', True, True, {"reward": 1.0}, {"reward": 3}),
    "bool_false": ('{"rewards": {"reward": false}}', True, True, {"reward": 0.0}, {"reward": 3}),
    "numeric_string": (
        '{"rewards": {"reward": "0.5"}}',
        True,
        True,
        {"reward": 0.5},
        {"reward": 1},
    ),
    "nan_literal": ('{"rewards": {"reward": NaN}}', True, True, {"reward": NAN}, {"reward": 2}),
    "infinity_literal": (
        '{"rewards": {"reward": -Infinity, "x": Infinity}}',
        True,
        True,
        {"reward": -math.inf, "x": math.inf},
        {"reward": 2, "x": 2},
    ),
    "nan_string": ('{"rewards": {"reward": "nan"}}', True, True, {"reward": NAN}, {"reward": 2}),
    "duplicate_keys": (
        '{"rewards": {"reward": 0, "reward": 1.0}}',
        True,
        True,
        {"reward": 1.0},
        {"reward": 1},
    ),
    "missing_primary": ('{"rewards": {"acc": 0.5}}', True, True, {"acc": 0.5}, {"acc": 1}),
    "empty_mapping": ('{"rewards": {}}', True, True, {}, {}),
    "null_value": ('{"rewards": {"reward": null}}', False, True, None, {}),
    "text_value": ('{"rewards": {"reward": "passed"}}', False, True, None, {}),
    "list_value": ('{"rewards": {"reward": [1]}}', False, True, None, {}),
    "object_value": ('{"rewards": {"reward": {"a": 1}}}', False, True, None, {}),
    "rewards_list": ('{"rewards": [1, 2]}', False, True, None, {}),
    "rewards_null": ('{"rewards": null}', True, False, None, {}),
    "verifier_null": ("null", True, False, None, {}),
    "verifier_absent": (ABSENT, True, False, None, {}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_reward_shapes_follow_harbor(shape: str) -> None:
    raw, valid, has_verifier, rewards, kinds = SHAPES[shape]
    text = trial_json(trial_result("t", "t__1", {"reward": 1.0}), raw)
    record = _parse(text)
    assert record.valid is valid
    assert record.has_verifier is has_verifier
    assert record.kinds == kinds
    if rewards is None:
        assert record.rewards is None
    else:
        assert set(record.rewards) == set(rewards)
        assert all(_same(record.rewards[k], rewards[k]) for k in rewards)
    assert (record.reason is None) is valid
    # Harbor's own loader agrees on validity and values
    try:
        harbor = TrialResult.model_validate_json(text)
    except ValidationError:
        assert not valid
        return
    assert valid
    got = harbor.verifier_result.rewards if harbor.verifier_result else None
    assert (got is None) is (rewards is None)
    if got is not None:
        assert all(_same(record.rewards[k], v) for k, v in got.items())


def test_boolean_is_recorded_as_harbor_coerces_it() -> None:
    text = trial_json(trial_result("t", "t__1", {"reward": 1.0}), '{"rewards": {"reward": true}}')
    harbor = TrialResult.model_validate_json(text).verifier_result.rewards["reward"]
    record = _parse(text)
    assert harbor == 1.0 and type(harbor) is float
    assert record.rewards["reward"] == harbor and type(record.rewards["reward"]) is float
    assert record.kinds["reward"] == Kind.BOOLEAN


def test_errored_trial_keeps_its_reward() -> None:
    text = trial_json(trial_result("t", "t__1", {"reward": 1.0}, exception="AgentTimeoutError"))
    record = _parse(text)
    assert record.valid and record.rewards == {"reward": 1.0}
    assert record.exception_type == "AgentTimeoutError"
    assert record.exception_message == "AgentTimeoutError happened"
    assert record.failure == "trial_exception"


def test_failure_code_priority() -> None:
    invalid = trial_json(trial_result("t", "a", exception="E"), '{"rewards": {"reward": null}}')
    missing = trial_json(trial_result("t", "b", verifier=False, exception="E"))
    assert _parse(invalid).failure == "reward_mapping_invalid"
    assert _parse(missing).failure == "verifier_result_missing"
    assert _parse(trial_json(trial_result("t", "c", {"reward": 1}))).failure is None


def test_labels_timings_and_token_totals_match_harbor() -> None:
    result = trial_result("t", "t__1", {"reward": 1.0}, tokens=(100, None, 50, 0.25))
    record = _parse(trial_json(result))
    assert (record.agent_name, record.agent_version) == ("oracle", "1.0")
    assert record.agent_label == "oracle@1.0"
    assert record.model_name == "claude-haiku" and record.source == "demo-ds"
    totals = (record.n_input_tokens, record.n_cache_tokens, record.n_output_tokens, record.cost_usd)
    assert totals == result.compute_token_cost_totals()
    assert record.started_at.startswith("2026-01-01T00:00:00")
    assert record.agent_execution is not None and record.verifier is not None


def test_model_is_agent_info_model_name_as_harbor_takes_it() -> None:
    # Harbor's evals key uses agent_info.model_info.name only: config.agent.model_name is not
    # a fallback (a custom to_agent_info, or "-m anthropic/", leaves model_info empty)
    text = trial_json(trial_result("t", "t__1", {"reward": 1.0}, model=None))
    data = json.loads(text)
    data["config"]["agent"]["model_name"] = "gpt-x"
    assert _parse(json.dumps(data)).model_name is None
    data["agent_info"]["model_info"] = {"name": "", "provider": "anthropic"}
    assert _parse(json.dumps(data)).model_name == ""


def test_multi_step_trial() -> None:
    steps = [
        StepResult(
            step_name="one",
            agent_result=AgentContext(n_input_tokens=10, n_output_tokens=1, cost_usd=0.5),
            verifier_result=VerifierResult(rewards={"reward": 1.0}),
        ),
        StepResult(
            step_name="two",
            agent_result=AgentContext(n_input_tokens=5, n_cache_tokens=2),
            verifier_result=VerifierResult(rewards={"reward": 0.0}),
        ),
    ]
    result = trial_result("t", "t__1", {"reward": 0.5}, steps=steps)
    record = _parse(trial_json(result))
    assert [s.step_name for s in record.steps] == ["one", "two"]
    assert record.steps[0].rewards == {"reward": 1.0} and record.steps[1].valid
    totals = (record.n_input_tokens, record.n_cache_tokens, record.n_output_tokens, record.cost_usd)
    assert totals == result.compute_token_cost_totals() == (15, 2, 1, 0.5)
    # an invalid step mapping makes Harbor reject the trial: the attempt is invalid
    data = json.loads(trial_json(result))
    data["step_results"][1]["verifier_result"] = {"rewards": {"reward": None}}
    text = json.dumps(data)
    with pytest.raises(ValidationError):
        TrialResult.model_validate_json(text)
    bad = _parse(text)
    assert not bad.valid and bad.rewards is None and "step_results.1" in bad.reason


def test_drift_outside_scoring_never_rejects() -> None:
    data = json.loads(trial_json(trial_result("t", "t__1", {"reward": 1.0})))
    data["config"]["environment"]["mounts"] = ["/a:/b"]
    data["task_checksum"] = 12
    data["agent_result"]["n_input_tokens"] = 3.0  # float where msgspec wants an int
    text = json.dumps(data)
    with pytest.raises(ValidationError):
        TrialResult.model_validate_json(text)
    record = _parse(text)
    assert record.valid and record.rewards == {"reward": 1.0} and record.n_input_tokens == 3


# differential: every file Harbor can load -----------------------------------------------------

_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.booleans(),
    st.sampled_from(["0.5", "1", " 2 ", "1e3", "nan", "-inf", "x", "", "True", "1_0"]),
    st.none(),
    st.just([1]),
    st.just({"a": 1}),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rewards=st.dictionaries(st.sampled_from(["reward", "acc", "b", "ü"]), _values, max_size=4),
    exception=st.sampled_from([None, "AgentTimeoutError"]),
    verifier=st.sampled_from(["mapping", "null", "rewards_null"]),
)
def test_differential_against_harbor_loader(rewards, exception, verifier) -> None:
    base = trial_result("t", "t__1", {"reward": 1.0}, exception=exception)
    if verifier == "null":
        raw = "null"
    elif verifier == "rewards_null":
        raw = '{"rewards": null}'
    else:
        raw = json.dumps({"rewards": rewards}, allow_nan=True)
    text = trial_json(base, raw)
    record = _parse(text)
    try:
        harbor = TrialResult.model_validate_json(text)
    except ValidationError:
        assert not record.valid and record.rewards is None and record.reason
        return
    assert record.valid
    assert record.exception_type == (exception if exception else None)
    expected = harbor.verifier_result.rewards if harbor.verifier_result else None
    assert record.has_verifier is (expected is not None)
    if expected is None:
        assert record.rewards is None
        return
    assert set(record.rewards) == set(expected)
    for key, value in expected.items():
        assert _same(record.rewards[key], value), (key, record.rewards[key], value)
        written = rewards[key]
        if isinstance(written, bool):
            assert record.kinds[key] == Kind.BOOLEAN
        elif not math.isfinite(value):
            assert record.kinds[key] == Kind.NONFINITE
        else:
            assert record.kinds[key] == Kind.NUMBER


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["reward", "acc", "b"]),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(min_value=-(2**62), max_value=2**62),
            st.booleans(),
            st.sampled_from(["0.5", "7", "inf"]),
        ),
        max_size=3,
    )
)
def test_differential_files_written_by_harbor(rewards) -> None:
    """Files Harbor writes itself (its model coerces, ``model_dump_json`` writes NaN and
    infinity as null): our verdict and values equal Harbor's loader's."""
    text = trial_result("t", "t__1", rewards).model_dump_json(indent=4)
    record = _parse(text)
    try:
        harbor = TrialResult.model_validate_json(text)
    except ValidationError:
        assert not record.valid and record.rewards is None
        return
    assert record.valid
    expected = harbor.verifier_result.rewards
    assert set(record.rewards) == set(expected)
    assert all(_same(record.rewards[k], v) for k, v in expected.items())


# jobs -------------------------------------------------------------------------------------------


def _shape_job(tmp_path: Path) -> Path:
    trials = {}
    for i, name in enumerate(sorted(SHAPES)):
        raw = SHAPES[name][0]
        trials[f"{name}__x"] = trial_json(
            trial_result(name, f"{name}__x", {"reward": 1.0}, started=i), raw
        )
    trials["secondary__a"] = trial_json(
        trial_result("secondary", "secondary__a", {"reward": 1, "acc": 0.5}, started=1)
    )
    trials["secondary__b"] = trial_json(
        trial_result("secondary", "secondary__b", {"reward": 0}, started=2)
    )
    trials["errored__x"] = trial_json(
        trial_result("errored", "errored__x", {"reward": 1.0}, exception="AgentTimeoutError")
    )
    return make_job(tmp_path / "job", trials)


def test_read_job_table_flags_and_kinds(tmp_path: Path) -> None:
    job = read_job(_shape_job(tmp_path))
    table = job.table
    table.validate()
    assert len(table) == len(SHAPES) + 3 == len(job.trials)
    rows = {t: i for i, t in enumerate(table.trials)}

    def row(trial: str) -> tuple[int, float, int]:
        i = rows[trial]
        return int(table.flags[i]), float(table.primary[i]), int(table.primary_kind[i])

    assert row("bool_true__x") == (0, 1.0, Kind.BOOLEAN)
    assert row("numeric_string__x") == (0, 0.5, Kind.NUMBER)
    flags, value, kind = row("nan_literal__x")
    assert flags == 0 and math.isnan(value) and kind == Kind.NONFINITE
    for invalid in ("null_value__x", "text_value__x", "list_value__x", "object_value__x"):
        flags, value, kind = row(invalid)
        assert flags == Flag.INVALID and math.isnan(value) and kind == Kind.MISSING
    for missing in ("verifier_null__x", "verifier_absent__x", "rewards_null__x"):
        assert row(missing)[0] == Flag.NO_VERIFIER
    flags, value, kind = row("missing_primary__x")
    assert flags == 0 and math.isnan(value) and kind == Kind.MISSING
    assert row("errored__x") == (Flag.EXCEPTION, 1.0, Kind.NUMBER)
    # JSON integers: Harbor's model holds ints (its Sum/Min/Max then return ints)
    assert row("secondary__a") == (0, 1.0, Kind.INTEGER)
    assert row("secondary__b") == (0, 0.0, Kind.INTEGER)
    assert row("duplicate_keys__x")[1:] == (1.0, Kind.NUMBER)
    # secondaries: keys of valid mappings other than the primary, sorted
    assert table.keys == ["acc", "x"]
    acc = table.keys.index("acc")
    assert table.values[rows["secondary__a"], acc] == 0.5
    assert table.kinds[rows["secondary__a"], acc] == Kind.NUMBER
    assert math.isnan(table.values[rows["secondary__b"], acc])
    assert table.kinds[rows["secondary__b"], acc] == Kind.MISSING
    # labels
    assert table.agents == ["", "oracle@1.0"] and table.models == ["", "claude-haiku"]
    assert table.datasets == ["", "demo-ds"]
    assert table.exceptions[table.exception[rows["errored__x"]]] == "AgentTimeoutError"
    assert table.failures[table.failure[rows["null_value__x"]]] == "reward_mapping_invalid"
    assert job.failure_codes == {
        "reward_mapping_invalid": 5,
        "verifier_result_missing": 3,
        "trial_exception": 1,
    }
    assert RewardTable.from_bytes(table.to_bytes()).trials == table.trials


def test_attempts_sorted_by_start_then_name(tmp_path: Path) -> None:
    trials = {
        "t__c": trial_json(trial_result("t", "t__c", {"reward": 1}, started=5)),
        "t__b": trial_json(trial_result("t", "t__b", {"reward": 0}, started=1)),
        "t__a": trial_json(trial_result("t", "t__a", {"reward": 0}, started=5)),
        "u__z": trial_json(trial_result("u", "u__z", {"reward": 0}, started=0)),
    }
    job = read_job(make_job(tmp_path / "job", trials))
    attempts = {r.trial_name: r.attempt for r in job.trials}
    assert attempts == {"t__b": 0, "t__a": 1, "t__c": 2, "u__z": 0}
    assert job.table.trials == ["t__b", "t__a", "t__c", "u__z"]
    assert job.table.attempt.tolist() == [0, 1, 2, 0]


def test_unreadable_results_counted_without_rows(tmp_path: Path) -> None:
    trials = {
        "ok__1": trial_json(trial_result("ok", "ok__1", {"reward": 1})),
        "nofile__1": None,
        "garbage__1": "{not json",
        "empty__1": "",
        "array__1": "[1, 2]",
    }
    job = read_job(make_job(tmp_path / "job", trials))
    assert [r.trial_name for r in job.trials] == ["ok__1"]
    assert job.failure_codes == {"result_unreadable": 4}
    (diagnostic,) = [d for d in job.diagnostics if d["code"] == "result_unreadable"]
    reasons = {t["trial_dir"]: t["reason"] for t in diagnostic["trials"]}
    assert reasons["nofile__1"] == "result.json missing"
    assert "unparseable" in reasons["garbage__1"] and reasons["empty__1"] == "result.json empty"


# lone surrogates: unreadable, as for Harbor's loader -------------------------------------------

_SLOT = "__casstore_slot__"
LONE = "lone surrogate in a string (not valid Unicode)"


def _with_string(
    path: tuple[str | int, ...], json_text: str, *, exception: str | None = None, base: str = ""
) -> str:
    """A trial file (``base``, default Harbor's own dump of a new result) whose string at
    ``path`` is written as ``json_text`` (raw JSON, escapes as given)."""
    base = base or trial_json(trial_result("t", "t__1", {"reward": 1}, exception=exception))
    data = json.loads(base)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = _SLOT
    return json.dumps(data, indent=4).replace(f'"{_SLOT}"', json_text)


# (where, the JSON string as written): each holds a surrogate escape without its other half
LONE_SURROGATES = {
    "trial_name high": (("trial_name",), r'"t\ud800x"'),
    "trial_name high at the end, upper case": (("trial_name",), r'"t\uDBFF"'),
    "agent_info.name low": (("agent_info", "name"), r'"a\udc00"'),
    "exception_message": (("exception_info", "exception_message"), r'"boom \uDFFF!"'),
    "low before high": (("source",), r'"\ude00\ud83d"'),
    "high before a plain escape": (("source",), r'"\ud83d\u0041"'),
    "high before an escaped backslash": (("source",), r'"\ud83d\\ude00"'),
    "high then a high": (("source",), r'"\ud83d\ud83d\ude00"'),
    "after an escaped backslash": (("source",), r'"\\\ud800"'),
    "halves in two strings": (("config", "trial_name"), r'"\ud83d", "x": "\ude00"'),
    "field casstore ignores": (("task_checksum",), r'"\udabc"'),
}


@pytest.mark.parametrize("case", sorted(LONE_SURROGATES))
def test_lone_surrogate_is_unreadable_as_harbor_refuses_it(case: str) -> None:
    path, written = LONE_SURROGATES[case]
    text = _with_string(path, written, exception="AgentTimeoutError")
    with pytest.raises(ValidationError, match=r"surrogate|hex escape"):
        TrialResult.model_validate_json(text)
    with pytest.raises(ResultUnreadable) as caught:
        _parse(text)
    assert str(caught.value) == LONE


def test_lone_surrogate_in_a_reward_key_or_on_the_lenient_path() -> None:
    base = trial_result("t", "t__1", {"reward": 1})
    for verifier_text in (
        r'{"rewards": {"reward": 1, "acc\ud800": 0.5}}',
        r'{"rewards": {"reward": NaN, "acc\udc00": 0.5}}',  # NaN: the standard-library path
    ):
        text = trial_json(base, verifier_text)
        with pytest.raises(ResultUnreadable) as caught:
            _parse(text)
        assert str(caught.value) == LONE
    # a surrogate's UTF-8 bytes (msgspec refuses them, json.loads would keep them)
    data = trial_json(base).encode().replace(b'"t__1"', b'"t\xed\xa0\x80"', 1)
    assert b"\xed\xa0\x80" in data
    with pytest.raises(ValidationError):
        TrialResult.model_validate_json(data)
    with pytest.raises(ResultUnreadable) as caught:
        parse_result(data, "job")
    assert str(caught.value) == "a surrogate written as UTF-8 bytes (not valid UTF-8)"
    # UTF-16 (read by the standard-library path): its escapes are checked too
    data = _with_string(("trial_name",), r'"t\ud800"').encode("utf-16")
    with pytest.raises(ResultUnreadable) as caught:
        parse_result(data, "job")
    assert str(caught.value) == LONE


@pytest.mark.parametrize(
    ("written", "value"),
    [
        (r'"t\ud83d\ude00x"', "t\U0001f600x"),
        (r'"\uD83D\uDE00"', "\U0001f600"),
        (r'"\udbff\udfff"', "\U0010ffff"),
        (r'"t\\ud800"', "t\\ud800"),  # an escaped backslash, then text
        (r'"\\\\ud800 \u00e9 \uffff"', "\\\\ud800 \u00e9 \uffff"),
    ],
)
def test_surrogate_pairs_and_escaped_backslashes_parse_unchanged(written: str, value: str) -> None:
    base = trial_json(trial_result("t", "t__1", {"reward": 1}))
    escaped = _with_string(("trial_name",), written, base=base)
    plain = _with_string(("trial_name",), json.dumps(value, ensure_ascii=False), base=base)
    assert TrialResult.model_validate_json(escaped).trial_name == value
    record = _parse(escaped)
    assert record.trial_name == value and record == _parse(plain)
    # same on the standard-library path (a NaN reward)
    nan = escaped.replace('"reward": 1', '"reward": NaN', 1)
    assert _parse(nan).trial_name == value


_PIECES = ["a", "é", "\\\\", "\\n", '\\"', "\\u0041", "\\u00e9", "\\ud83d", "\\uD83D", "\\ude00"]
_PIECES += ["\\uDE00", "\\udbff", "\\udfff", "\\udc00", "\\ud7ff", "\\ue000", "u", "d800"]
_BASE = trial_json(trial_result("t", "t__1", {"reward": 1}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.lists(st.sampled_from(_PIECES), max_size=6),
    name=st.lists(st.sampled_from(_PIECES), max_size=6),
)
def test_lone_surrogate_check_agrees_with_harbor(source: list[str], name: list[str]) -> None:
    """Strings of escapes in a field casstore reads and in one it ignores: the file is
    unreadable exactly when Harbor's loader refuses it, which is exactly when the standard
    library decodes a string that cannot be encoded to UTF-8."""
    text = _with_string(("source",), f'"{"".join(source)}"', base=_BASE)
    text = _with_string(("config", "trial_name"), f'"{"".join(name)}"', base=text)
    try:
        TrialResult.model_validate_json(text)
        harbor_refuses = False
    except ValidationError:
        harbor_refuses = True
    data = json.loads(text)
    try:
        data["source"].encode(), data["config"]["trial_name"].encode()
        unencodable = False
    except UnicodeEncodeError:
        unencodable = True
    try:
        record = _parse(text)
    except ResultUnreadable as error:
        assert str(error) == LONE
        refused = True
    else:
        assert record.source == data["source"]
        refused = False
    assert refused == harbor_refuses == unencodable


def test_read_job_lists_lone_surrogates_as_unreadable(tmp_path: Path) -> None:
    trials = {
        "ok__1": trial_json(trial_result("ok", "ok__1", {"reward": 1})),
        "pair__1": trial_json(trial_result("pair", "pair__1", {"reward": 0})).replace(
            '"trial_name": "pair__1"', r'"trial_name": "pair__\ud83d\ude00"'
        ),
        "lone__1": trial_json(trial_result("lone", "lone__1", {"reward": 1})).replace(
            '"trial_name": "lone__1"', r'"trial_name": "lone\ud800"'
        ),
        "agent__1": _with_string(("agent_info", "name"), r'"a\udc00"'),
    }
    job = read_job(make_job(tmp_path / "job", trials))
    assert sorted(r.trial_name for r in job.trials) == ["ok__1", "pair__\U0001f600"]
    assert job.failure_codes == {"result_unreadable": 2}
    (diagnostic,) = [d for d in job.diagnostics if d["code"] == "result_unreadable"]
    assert diagnostic == {
        "code": "result_unreadable",
        "count": 2,
        "trials": [
            {"trial_dir": "agent__1", "reason": f"result.json unparseable: {LONE}"},
            {"trial_dir": "lone__1", "reason": f"result.json unparseable: {LONE}"},
        ],
    }


def test_job_result_missing_and_count_mismatch(tmp_path: Path) -> None:
    trials = {"t__1": trial_json(trial_result("t", "t__1", {"reward": 1}))}
    job_dir = make_job(tmp_path / "job", trials, job_id=None, expected=3)
    job = read_job(job_dir)
    assert job.failure_codes == {"job_result_missing_partial": 1, "trial_count_mismatch": 1}
    mismatch = next(d for d in job.diagnostics if d["code"] == "trial_count_mismatch")
    assert mismatch == {
        "code": "trial_count_mismatch",
        "expected": 3,
        "found": 1,
        "source": "lock.json",
    }
    # no job result.json: the job id is a stable digest of the name and config.json
    assert job.job_id.startswith("sha256:") and read_job(job_dir).job_id == job.job_id
    (job_dir / "result.json").write_text("{broken")
    assert read_job(job_dir).failure_codes["job_result_missing_partial"] == 1


def test_job_id_from_harbor_result(tmp_path: Path) -> None:
    trials = {"t__1": trial_json(trial_result("t", "t__1", {"reward": 1}))}
    job = read_job(make_job(tmp_path / "job", trials, job_id="abc-123"))
    assert job.job_id == "abc-123" == job.record.job_id == job.trials[0].job_id
    assert job.record.recorded_metrics == {"oracle__demo-ds": [{"mean": 0.5}]}
    assert job.record.harbor_version == "0.20.0" and job.record.expected_trials == 1


def test_nothing_readable_is_a_check_error(tmp_path: Path) -> None:
    job_dir = make_job(tmp_path / "job", {"t__1": "garbage"}, job_id=None)
    with pytest.raises(CheckError):
        read_job(job_dir)


def test_primary_key_choice(tmp_path: Path) -> None:
    trials = {"t__1": trial_json(trial_result("t", "t__1", {"reward": 1, "acc": 0.25}))}
    job = read_job(make_job(tmp_path / "job", trials), reward_key="acc")
    assert job.table.reward_key == "acc" and job.table.primary.tolist() == [0.25]
    assert job.table.keys == ["reward"]
    assert job.trials[0].reward_key == "acc"


def test_find_jobs(tmp_path: Path) -> None:
    one = make_job(tmp_path / "runs" / "a", {"t__1": trial_json(trial_result("t", "t__1"))})
    two = make_job(tmp_path / "runs" / "b", {"t__1": trial_json(trial_result("t", "t__1"))})
    assert find_jobs([one]) == [one]
    assert find_jobs([tmp_path / "runs"]) == [one, two]
    assert find_jobs([one, tmp_path / "runs"]) == [one, two]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="empty"):
        find_jobs([tmp_path / "empty"])
    with pytest.raises(UsageError, match="trial directory"):
        find_jobs([one / "t__1"])
    with pytest.raises(UsageError):
        find_jobs([tmp_path / "missing"])


def test_find_jobs_searches_no_deeper_than_a_jobs_folder(tmp_path: Path) -> None:
    """/tmp-like folders are refused, not searched: a job two levels down (tmp/x/y/demo-job)
    or a folder mixing job directories with other ones is not a source of jobs."""
    trial = {"t__1": trial_json(trial_result("t", "t__1"))}
    make_job(tmp_path / "x" / "y" / "demo-job", trial)
    message = f"{tmp_path}: not a Harbor job directory (nor a directory of job directories)"
    with pytest.raises(UsageError) as deep:
        find_jobs([tmp_path])
    assert str(deep.value) == message and deep.value.exit_code == 2
    with pytest.raises(UsageError, match="nor a directory of job directories"):
        find_jobs([tmp_path / "x"])  # the job is a grandchild
    assert find_jobs([tmp_path / "x" / "y"]) == [tmp_path / "x" / "y" / "demo-job"]
    runs = tmp_path / "runs"
    make_job(runs / "a", trial)
    (runs / "notes").mkdir()
    with pytest.raises(UsageError, match=r"; not job directories: notes$"):
        find_jobs([runs])


def test_copied_trials_without_job_files_are_a_job(tmp_path: Path) -> None:
    job_dir = tmp_path / "copied"
    (job_dir / "t__1").mkdir(parents=True)
    (job_dir / "t__1" / "result.json").write_text(trial_json(trial_result("t", "t__1")))
    assert find_jobs([job_dir]) == [job_dir]
    job = read_job(job_dir)
    assert len(job.trials) == 1 and job.failure_codes == {"job_result_missing_partial": 1}


def test_parallel_parse_equals_serial(tmp_path: Path) -> None:
    trials = {
        f"t{i}__x": trial_json(
            trial_result(f"t{i % 7}", f"t{i}__x", {"reward": i % 2}, started=i),
            '{"rewards": {"reward": NaN}}' if i % 11 == 0 else None,
        )
        for i in range(60)
    }
    job_dir = make_job(tmp_path / "job", trials)
    import casstore.trials.chunk as chunk

    old = chunk.TRIALS_PER_CHUNK
    chunk.TRIALS_PER_CHUNK = 8  # several chunks; evidence packs (and references) follow them
    try:
        serial = read_job(job_dir, workers=1)
        parallel = read_job(job_dir, workers=2)
    finally:
        chunk.TRIALS_PER_CHUNK = old
    assert [r.trial_name for r in parallel.trials] == [r.trial_name for r in serial.trials]
    strip = {"imported_at"}
    assert [
        {k: v for k, v in json.loads(_dump(r)).items() if k not in strip} for r in parallel.trials
    ] == [{k: v for k, v in json.loads(_dump(r)).items() if k not in strip} for r in serial.trials]
    assert parallel.evidence == serial.evidence
    assert serial.record.dictionary is not None  # 60 files: a trained dictionary


def _worker_trouble(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trouble) -> Path:
    """A job of 60 trials in chunks of 8, parsed by a worker where ``trouble()`` happens on
    its first chunk; the calling process parses only once the worker is in trouble."""
    import os
    import time

    import casstore.trials.chunk as chunk
    import casstore.trials.workers as workers

    trials = {f"t{i}__x": trial_json(trial_result(f"t{i % 7}", f"t{i}__x")) for i in range(60)}
    job_dir = make_job(tmp_path / "job", trials)
    monkeypatch.setattr(chunk, "TRIALS_PER_CHUNK", 8)
    marker = tmp_path / "worker-in-trouble"
    parent = os.getpid()
    original = workers.read_chunk

    def read_chunk(args, evidence):
        if os.getpid() != parent:
            marker.touch()
            trouble()
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return original(args, evidence)

    monkeypatch.setattr(workers, "read_chunk", read_chunk)
    return job_dir


def test_parallel_parse_raises_a_worker_error(tmp_path: Path, monkeypatch) -> None:
    def trouble():
        raise ValueError("worker broke")

    job_dir = _worker_trouble(tmp_path, monkeypatch, trouble)
    with pytest.raises(ValueError, match="worker broke"):
        read_job(job_dir, workers=2)


def test_parallel_parse_survives_a_dead_worker(tmp_path: Path, monkeypatch) -> None:
    """A chunk a worker took and never delivered (it died) is parsed by the calling process."""
    import os

    job_dir = _worker_trouble(tmp_path, monkeypatch, lambda: os._exit(3))
    parallel = read_job(job_dir, workers=2)
    serial = read_job(job_dir, workers=1)
    assert [r.trial_name for r in parallel.trials] == [r.trial_name for r in serial.trials]
    assert len(parallel.trials) == 60 and parallel.evidence == serial.evidence


def _dump(record) -> str:
    import msgspec

    return msgspec.json.encode(record).decode()


def test_table_from_records_of_several_jobs(tmp_path: Path) -> None:
    a = read_job(
        make_job(tmp_path / "a", {"t__1": trial_json(trial_result("t", "t__1"))}, job_id="A")
    )
    b = read_job(
        make_job(tmp_path / "b", {"t__2": trial_json(trial_result("t", "t__2"))}, job_id="B")
    )
    table = table_from_records(a.trials + b.trials, "reward")
    assert table.jobs == ["A", "B"] and len(table) == 2


@pytest.mark.parametrize("attempt", [0, 1, 127, 128, 255, 65536, 1 << 40])
@pytest.mark.parametrize("before", [0, 3, 300])
@pytest.mark.parametrize("fields", [0, 11, 12, 13, 14, 30])
@pytest.mark.parametrize("name", ["t__1", "ü" * 40, "x" * 300, "y" * 70000])
def test_attempt_patch_equals_encoding(attempt: int, before: int, fields: int, name: str) -> None:
    """A stored record (array form) with one attempt patched with another in the import's
    merge is byte for byte the record stored with the other (small and large attempts, long
    and non-ASCII names), and decodes to it."""
    import msgspec

    from casstore.trials.records import TrialRecord
    from casstore.trials.stored_form import decode_stored, encode_stored, stored_with_attempt

    extra = {
        "trial_id": "id",
        "source": "s",
        "agent_name": "a",
        "agent_version": "1",
        "model_name": "m",
        "model_provider": "p",
        "rewards": {"reward": 1.0},
        "kinds": {"reward": 1},
        "has_verifier": True,
        "valid": False,
        "reason": "r",
        "exception_type": "E",
        "exception_message": "msg",
        "exception_at": "t",
        "failure": "f",
        "started_at": "s",
        "finished_at": "f",
        "n_input_tokens": 1,
        "n_cache_tokens": 2,
        "n_output_tokens": 3,
        "cost_usd": 0.5,
        "evidence": "sha256:00",
        "evidence_bytes": 10,
        "evidence_dict": "sha256:11",
        "result_path": "/x",
        "metadata": {"k": "v"},
    }
    kwargs = dict(list(extra.items())[:fields])
    record = TrialRecord(
        job_id="j" * (fields + 1), trial_name=name, task_name=name[:5], attempt=before, **kwargs
    )
    data = encode_stored(record, "/jobs/j", "reward")
    with_attempt = msgspec.structs.replace(record, attempt=attempt)
    patched = stored_with_attempt(data, attempt)
    assert patched == encode_stored(with_attempt, "/jobs/j", "reward")
    decoded = decode_stored(patched, record.job_id, "/jobs/j", "reward")
    assert decoded == msgspec.structs.replace(
        with_attempt, metadata={**record.metadata, "harbor_primary_reward_key": "reward"}
    )
