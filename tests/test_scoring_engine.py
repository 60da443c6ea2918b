"""Engine-level behaviour: mergeable partials, metric.py scripts, views, table concatenation."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from casstore.table.concat import concat_tables
from scoring import (
    MetricScriptError,
    Partials,
    ScoringError,
    apply_rules,
    load_views,
    run_metric_script,
    score,
    summarize,
)
from tests.scoring_helpers import make_table

ROWS = [
    {"task": t, "rewards": r, "agent": a, "exception": e}
    for t, r, a, e in [
        ("a", {"reward": 1.0, "fmt": 0.5}, "x@1", None),
        ("a", {"reward": 0.0}, "x@1", "RuntimeError"),
        ("a", {"reward": 1.0, "fmt": 0.25}, "y@1", None),
        ("b", None, "x@1", "AgentTimeoutError"),
        ("b", {"reward": 1.0}, "x@1", None),
        ("b", "invalid", "y@1", None),
        ("c", {"reward": 0.75, "style": 1.0}, "x@1", None),
        ("c", {"reward": 1.0, "style": True}, "y@1", None),
        ("d", {"reward": 1.0}, "y@1", None),
        ("d", {"reward": 1.0}, "y@1", None),
    ]
]


def partials_of(rows) -> Partials:
    table = make_table(rows)
    return Partials.from_table(table, apply_rules(table), 1.0)


def assert_same_report(a, b) -> None:
    ja, jb = a.to_json(), b.to_json()
    for key in ("counts", "outputs", "pass_at_k", "pass_hat_k", "groups", "tasks", "ks"):
        assert ja[key] == jb[key], key
    assert ja["failure_rollup"] == jb["failure_rollup"]


@pytest.mark.parametrize("split", ["by_task", "by_row"])
def test_two_shards_merged_equal_the_whole(split: str) -> None:
    if split == "by_task":
        first = [r for r in ROWS if r["task"] in ("a", "c")]
        second = [r for r in ROWS if r["task"] not in ("a", "c")]
    else:  # a task's attempts split between shards (values are dyadic: exact sums)
        first, second = ROWS[::2], ROWS[1::2]
    merged = partials_of(first) + partials_of(second)
    whole = score(make_table(ROWS))
    for name in ("cell", "attempts", "successes", "status", "present", "measured", "sums"):
        assert np.array_equal(getattr(merged, name), getattr(whole.partials, name)), name
    assert merged.labels == whole.partials.labels
    assert merged.outputs == whole.partials.outputs
    assert_same_report(summarize(merged), whole)
    assert_same_report(summarize(partials_of(second) + partials_of(first)), whole)


def test_merge_refuses_different_reward_keys_or_thresholds() -> None:
    a = partials_of(ROWS)
    table = make_table([{"task": "z", "rewards": {"score": 1.0}}], reward_key="score")
    with pytest.raises(ScoringError, match="reward keys"):
        a + Partials.from_table(table, apply_rules(table), 1.0)
    table = make_table(ROWS)
    with pytest.raises(ScoringError, match="threshold"):
        a + Partials.from_table(table, apply_rules(table), 0.5)


# --- metric.py ------------------------------------------------------------------------------

TEMPLATE = textwrap.dedent(
    """
    # /// script
    # dependencies = []
    # ///
    import argparse
    import json
    from pathlib import Path


    def main(input_path, output_path):
        values = []
        for line in input_path.read_text().splitlines():
            reward = json.loads(line)
            if reward is None:
                values.append(0)
            elif len(reward) != 1:
                raise ValueError(f"expected one key per reward, got {len(reward)}")
            else:
                values.extend(reward.values())
        mean = sum(values) / len(values) if values else 0
        output_path.write_text(json.dumps({"mean": mean, "n": len(values)}))


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("-i", "--input-path", type=Path, required=True)
        parser.add_argument("-o", "--output-path", type=Path, required=True)
        arguments = parser.parse_args()
        main(arguments.input_path, arguments.output_path)
    """
)


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "metric.py"
    path.write_text(TEMPLATE)
    return path


@pytest.fixture(autouse=True)
def no_uv(monkeypatch) -> None:
    """Metric scripts run with this interpreter (``CASSTORE_UV=""``): ``uv run`` of a script
    without a PEP 723 header would sync the project the tests run in. Tests about uv set it."""
    monkeypatch.setenv("CASSTORE_UV", "")


def any_uv() -> str | None:
    """A uv for the tests that need one (PATH, then the project's bootstrap copy)."""
    import shutil

    from scoring._metric_script import _bootstrap_uv

    bootstrap = _bootstrap_uv()
    return shutil.which("uv") or (str(bootstrap) if bootstrap.is_file() else None)


def test_template_metric_script_like_harbor(template: Path) -> None:
    rows = [
        {"task": f"t{i}", "rewards": r}
        for i, r in enumerate([{"reward": 1}, None, "invalid", {"reward": 0.5}])
    ]
    report = score(make_table(rows), metrics=["mean", template])
    assert report.harbor_metrics == [{"mean": 0.5}, {"mean": 0.5, "n": 3}]
    assert run_metric_script(template, [None, {"reward": 1.0}]) == {"mean": 0.5, "n": 2}


def test_metric_script_input_lines(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text(
        "import sys, json, pathlib\n"
        "args = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
        "lines = pathlib.Path(args['-i']).read_text().splitlines()\n"
        "pathlib.Path(args['-o']).write_text(json.dumps({'lines': lines}))\n"
    )
    result = run_metric_script(script, [{"reward": 1.0, "x": 0.5}, None])
    assert result == {"lines": ['{"reward": 1.0, "x": 0.5}', "null"]}


def test_failing_metric_script_carries_stderr(template: Path) -> None:
    with pytest.raises(MetricScriptError, match="expected one key per reward") as caught:
        run_metric_script(template, [{"reward": 1.0, "style": 0.5}])
    assert "exit 1" in str(caught.value) and str(template) in str(caught.value)


def test_failing_metric_script_error_is_one_line(template: Path) -> None:
    with pytest.raises(MetricScriptError) as caught:
        run_metric_script(template, [{"reward": 1.0, "style": 0.5}])
    assert str(caught.value) == (
        f"{template}: metric script failed (exit 1): ValueError: expected one key per reward, got 2"
    )
    # the whole traceback stays on the error
    stderr = caught.value.stderr  # type: ignore[attr-defined]
    assert stderr.startswith("Traceback") and "line" in stderr and stderr.count("\n") > 3


def test_failing_metric_script_without_stderr(tmp_path: Path) -> None:
    script = tmp_path / "quiet.py"
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(MetricScriptError) as caught:
        run_metric_script(script, [None])
    assert str(caught.value) == f"{script}: metric script failed (exit 3)"


def test_hanging_metric_script_times_out(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(
        "import sys, time\nprint('still thinking', file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(MetricScriptError, match="timed out after 1 s: still thinking"):
        run_metric_script(script, [None], timeout=1.0)
    assert time.monotonic() - started < 10
    silent = tmp_path / "silent.py"
    silent.write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(MetricScriptError) as caught:
        run_metric_script(silent, [None], timeout=0.5)
    assert str(caught.value) == f"{silent}: metric script timed out after 0.5 s"


@pytest.mark.parametrize(
    ("timeout", "rule"),
    [
        (0, "must be > 0 and at most 86400 seconds (a day), not 0"),
        (-1, "must be > 0 and at most 86400 seconds (a day), not -1"),
        (float("nan"), "must be a finite number, not nan"),
        (float("inf"), "must be a finite number, not inf"),
    ],
)
def test_metric_timeout_must_be_positive(template: Path, timeout: float, rule: str) -> None:
    # the rule and message of casstore rescore --metric-timeout (scoring._options)
    from casstore.errors import UsageError

    with pytest.raises(UsageError) as raised:
        run_metric_script(template, [None], timeout=timeout)
    assert str(raised.value) == f"--metric-timeout: {rule}"


def test_metric_script_must_write_a_json_object(tmp_path: Path) -> None:
    script = tmp_path / "list.py"
    script.write_text("import sys, pathlib\npathlib.Path(sys.argv[4]).write_text('[1]')\n")
    with pytest.raises(MetricScriptError, match="not a JSON object"):
        run_metric_script(script, [None])
    with pytest.raises(MetricScriptError, match="not found"):
        run_metric_script(tmp_path / "missing.py", [None])


def test_metric_script_runs_with_this_interpreter_without_uv(monkeypatch, template) -> None:
    from scoring import _metric_script

    monkeypatch.delenv("CASSTORE_UV")
    monkeypatch.setattr(_metric_script.shutil, "which", lambda name: None)
    monkeypatch.setattr(_metric_script, "_bootstrap_uv", lambda: template.parent / "no-uv")
    command = _metric_script.metric_command(template, Path("i"), Path("o"))
    assert command == [sys.executable, str(template), "-i", "i", "-o", "o"]
    monkeypatch.setattr(_metric_script.shutil, "which", lambda name: "/usr/bin/uv")
    assert _metric_script.metric_command(template, Path("i"), Path("o"))[:2] == [
        "/usr/bin/uv",
        "run",
    ]


def test_find_uv_order(monkeypatch, tmp_path: Path) -> None:
    from casstore.errors import UsageError
    from scoring._metric_script import find_uv

    def fake(name: str) -> Path:
        path = tmp_path / name / "uv"
        path.parent.mkdir()
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path

    on_path, bootstrap, chosen = fake("path"), fake("bootstrap"), fake("chosen")
    monkeypatch.setattr("scoring._metric_script._bootstrap_uv", lambda: bootstrap)
    monkeypatch.delenv("CASSTORE_UV")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_uv() == str(bootstrap)  # not on PATH: the project's .tools/bin/uv
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_uv() == str(on_path)  # PATH first
    monkeypatch.setenv("CASSTORE_UV", str(chosen))
    assert find_uv() == str(chosen)  # CASSTORE_UV wins
    monkeypatch.setenv("CASSTORE_UV", "")
    assert find_uv() is None  # "": never uv
    monkeypatch.setenv("CASSTORE_UV", str(tmp_path / "nosuch"))
    with pytest.raises(UsageError, match="CASSTORE_UV names no executable uv"):
        find_uv()


PEP723 = textwrap.dedent(
    """
    # /// script
    # requires-python = ">=3.8"
    # dependencies = []
    # ///
    import json, os, sys
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    lines = open(args["-i"]).read().splitlines()
    settings = {k: os.environ.get(k) for k in ("UV_PYTHON_DOWNLOADS", "UV_NO_PROGRESS")}
    with open(args["-o"], "w") as out:
        json.dump({"n": len(lines), "python": sys.executable, "uv": settings}, out)
    """
)


def test_pep723_metric_script_with_uv_and_without(monkeypatch, tmp_path: Path) -> None:
    script = tmp_path / "metric.py"
    script.write_text(PEP723)
    monkeypatch.delenv("UV_PYTHON_DOWNLOADS", raising=False)
    monkeypatch.delenv("UV_NO_PROGRESS", raising=False)
    plain = run_metric_script(script, [None, {"reward": 1}])  # CASSTORE_UV="": this Python
    assert plain == {
        "n": 2,
        "python": sys.executable,
        "uv": {"UV_PYTHON_DOWNLOADS": None, "UV_NO_PROGRESS": None},
    }
    uv = any_uv()
    if uv is None:
        pytest.skip("no uv on PATH nor in .tools/bin")
    monkeypatch.setenv("CASSTORE_UV", uv)
    monkeypatch.setenv("UV_OFFLINE", "1")  # dependencies = []: nothing to fetch
    under_uv = run_metric_script(script, [None, {"reward": 1}])
    assert under_uv["n"] == 2
    assert under_uv["python"] != sys.executable  # uv's ephemeral environment for the script
    assert under_uv["uv"] == {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


# --- views ----------------------------------------------------------------------------------


def test_views_from_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "views.toml"
    toml.write_text(
        '[views.quality]\nreducer = "mean"\nsignals = [\n'
        '  { metric = "harbor_reward", output = "reward" },\n'
        '  { metric = "harbor_reward", output = "fmt" },\n]\n'
        '[views.best]\nreducer = "max"\nsignals = [{ metric = "mean", output = "fmt" },'
        ' { metric = "mean", output = "reward" }]\n'
    )
    report = score(make_table(ROWS), views=toml)
    reward, fmt = report.outputs["reward"].mean, report.outputs["fmt"].mean
    assert report.views["quality"]["value"] == (reward + fmt) / 2
    assert report.views["best"]["value"] == max(report.harbor_metrics[0].values())
    as_json = tmp_path / "views.json"
    as_json.write_text(
        json.dumps(
            {
                "views": [
                    {
                        "name": "low",
                        "reducer": "min",
                        "signals": [
                            {"metric": "harbor_reward", "output": "reward"},
                            {"metric": "harbor_reward", "output": "fmt"},
                        ],
                    }
                ]
            }
        )
    )
    assert score(make_table(ROWS), views=as_json).views["low"]["value"] == min(reward, fmt)
    assert [v.name for v in load_views(toml)] == ["quality", "best"]


def test_views_skip_unmeasured_and_reject_unknown_signals(tmp_path: Path) -> None:
    rows = [{"task": "a", "rewards": {"reward": 1.0, "fmt": True}}]
    from scoring import View
    from scoring._views import Signal

    view = View("v", "sum", (Signal("harbor_reward", "reward"), Signal("harbor_reward", "fmt")))
    assert score(make_table(rows), views=[view]).views["v"]["value"] == 1.0
    bad = View("v", "sum", (Signal("harbor_reward", "nope"),))
    with pytest.raises(ScoringError, match="nope"):
        score(make_table(rows), views=[bad])
    broken = tmp_path / "broken.toml"
    broken.write_text('[views.v]\nreducer = "median"\nsignals = []\n')
    with pytest.raises(ScoringError, match="unknown reducer"):
        load_views(broken)


def test_missing_view_file_is_bad_usage(tmp_path: Path) -> None:
    from casstore.errors import UsageError

    missing = tmp_path / "missing.toml"
    with pytest.raises(UsageError) as caught:
        load_views(missing)
    assert str(caught.value) == f"{missing}: cannot read views: No such file or directory"


# --- several sources ------------------------------------------------------------------------


def test_concat_tables_and_reward_key_agreement() -> None:
    first = make_table(ROWS[:5])
    second = make_table(ROWS[5:])
    merged = concat_tables([first, second])
    assert_same_report(score(merged), score(make_table(ROWS)))
    other = make_table([{"task": "a", "rewards": {"score": 1.0}}], reward_key="score")
    with pytest.raises(ScoringError, match="disagree on the primary reward key"):
        concat_tables([first, other])


def test_stored_table_columns_are_checked_and_names_lazy() -> None:
    from casstore.table.columns import RewardTable
    from casstore.table.npz import Strings, stored_members

    table = make_table([{"task": f"t{i % 3}", "rewards": {"reward": i % 2}} for i in range(9)])
    data = table.to_bytes()
    loaded = RewardTable.from_bytes(data)
    assert isinstance(loaded.trials, Strings) and loaded.trials == table.trials
    assert list(loaded.tasks) == table.tasks and len(loaded.tasks) == 3
    members = stored_members(data)
    assert members is not None
    for column, eager in (("trials", False), ("primary", True)):
        body, _ = members[column]
        offset = data.index(body.tobytes()) + len(body) - 1  # last byte of the column
        corrupt = bytearray(data)
        corrupt[offset] ^= 0x55
        if eager:
            with pytest.raises(ValueError, match="CRC"):
                RewardTable.from_bytes(bytes(corrupt))
        else:
            lazy = RewardTable.from_bytes(bytes(corrupt))
            with pytest.raises(ValueError, match="CRC"):
                list(lazy.trials)


def test_stored_table_columns_are_aligned_views_and_bytes_deterministic() -> None:
    import io

    from casstore.table.columns import RewardTable
    from casstore.table.npz import stored_members

    table = make_table([{"task": f"t{i % 3}", "rewards": {"reward": i % 2}} for i in range(9)])
    data = table.to_bytes()
    assert (
        data
        == make_table(
            [{"task": f"t{i % 3}", "rewards": {"reward": i % 2}} for i in range(9)]
        ).to_bytes()
    )
    members = stored_members(data)
    assert members is not None and len(members) == 22
    for name, (body, _) in members.items():
        start = data.index(body.tobytes())
        header = 10 + int.from_bytes(data[start + 8 : start + 10], "little")  # .npy 1.0
        assert (start + header) % 64 == 0, name
    loaded = RewardTable.from_bytes(data)
    for name in ("task", "primary", "values", "flags"):
        column = getattr(loaded, name)
        assert column.flags.aligned and not column.flags.owndata, name  # a view of data
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:  # still a plain .npz
        np.testing.assert_array_equal(archive["primary"], table.primary)


def test_tables_written_by_numpy_savez_still_load() -> None:
    # stores written before aligned members: plain np.savez bytes, unaligned columns copied
    import io

    from casstore.table.columns import RewardTable
    from casstore.table.npz import as_str_array

    table = make_table(
        [{"task": f"t{i % 2}", "rewards": {"reward": 0.5 * (i % 3)}} for i in range(7)]
    )
    buffer = io.BytesIO()
    arrays = {
        name: as_str_array(value) for name, value in vars(table).items() if isinstance(value, list)
    }
    arrays |= {name: value for name, value in vars(table).items() if isinstance(value, np.ndarray)}
    np.savez(buffer, reward_key=np.array(table.reward_key), **arrays)
    legacy = RewardTable.from_bytes(buffer.getvalue())
    assert_same_report(score(legacy), score(table))
    assert legacy.to_bytes() == table.to_bytes()


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("threshold", [1.0, 0.5, 0.0])
def test_packed_cell_counts_equal_row_by_row_counts(shuffled: bool, threshold: float) -> None:
    # many secondaries (several code chunks), big cells (several packed words), every kind
    from casstore.table.columns import Flag, Kind, RewardTable

    rng = np.random.default_rng(7)
    n, k, tasks = 3000, 5, 9
    task = np.sort(rng.integers(0, tasks, n)).astype(np.int32)
    order = rng.permutation(n) if shuffled else np.arange(n)
    kinds = rng.integers(0, 6, (n, k)).astype(np.int8)  # 4: INTEGER (a NUMBER), 5: unknown
    values = rng.choice([0.0, 1.0, 0.5, np.nan, np.inf], (n, k))
    table = RewardTable(
        reward_key="reward",
        tasks=[f"t{i}" for i in range(tasks)],
        trials=[f"x{i}" for i in range(n)],
        keys=["e", "d", "c", "b", "a"],
        task=task[order],
        attempt=np.zeros(n, np.int32),
        flags=rng.integers(0, 8, n).astype(np.uint8),
        primary=rng.choice([0.0, 1.0, 0.25, -1.0, np.nan, np.inf], n),
        primary_kind=rng.integers(0, 5, n).astype(np.int8),
        values=values,
        kinds=kinds,
        agent=np.zeros(n, np.int32),
        model=(task[order] % 2).astype(np.int32),  # grouped by cell unless shuffled
        dataset=np.zeros(n, np.int32),
        exception=np.zeros(n, np.int32),
        failure=np.zeros(n, np.int32),
        models=["m0", "m1"],
    )
    partials = Partials.from_table(table, apply_rules(table), threshold)
    flags = table.flags
    valid = (flags & Flag.INVALID) == 0
    verifier = (flags & Flag.NO_VERIFIER) == 0
    exception = (flags & Flag.EXCEPTION) != 0
    number = np.isin(table.primary_kind, [Kind.NUMBER, Kind.INTEGER])
    usable = valid & verifier & number & np.isfinite(table.primary)
    status = np.select([~valid, exception & usable, exception, ~verifier], [4, 1, 2, 3], default=0)
    cell = table.task.astype(np.int64) * 2 + table.model
    cells = np.unique(cell)
    index = np.searchsorted(cells, cell)

    def per_cell(mask: np.ndarray) -> np.ndarray:
        return np.bincount(index, weights=mask, minlength=cells.size).astype(np.int64)

    assert (partials.cell[:, 0] * 2 + partials.cell[:, 2] == cells).all()
    for s in range(5):
        assert (partials.status[:, s] == per_cell(status == s)).all()
    assert (partials.attempts == per_cell(valid)).all()
    success = valid & (np.where(usable, table.primary, 0.0) >= threshold)
    assert (partials.successes == per_cell(success)).all()
    assert (partials.present[:, 0] == per_cell(valid & (table.primary_kind != 0))).all()
    for out, name in enumerate(partials.secondaries, start=1):
        j = table.keys.index(name)
        present = valid & (kinds[:, j] != Kind.MISSING)
        number = np.isin(kinds[:, j], [Kind.NUMBER, Kind.INTEGER])
        emitted = present & verifier & number & np.isfinite(values[:, j])
        assert (partials.present[:, out] == per_cell(present)).all()
        assert (partials.measured[:, out] == per_cell(emitted)).all()
        value = np.where(emitted, values[:, j], 0.0)
        assert np.allclose(partials.sums[:, out], np.bincount(index, weights=value))


def test_huge_rewards_give_no_warnings_and_usage_errors_come_first(tmp_path: Path) -> None:
    # sums that overflow are inf (as Harbor's), not RuntimeWarnings; bad options are refused
    # before a metric script is started
    import warnings

    from casstore.errors import UsageError

    rows = [{"task": f"t{i}", "rewards": {"reward": v}} for i, v in enumerate([1e308, 1e308, 0.5])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = score(make_table(rows))
    assert report.harbor_metrics == [{"mean": float("inf")}]
    marker = tmp_path / "started"
    script = tmp_path / "metric.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(60)\n")
    with pytest.raises(UsageError, match="--k: every k must be an integer from 1 to 2147483648"):
        score(make_table(rows), ks=[0], metrics=[script], metric_timeout=30)
    with pytest.raises(ScoringError, match="cannot group by"):
        score(make_table(rows), group_by=["bogus"], metrics=[script], metric_timeout=30)
    assert not marker.exists()  # refused before the script was started


def test_per_task_json_leaves_out_outputs_a_task_never_held() -> None:
    """The ``tasks`` of the report, built column by column: NaN (one attempt's stderr) as
    null, an output none of a task's attempts holds left out of that task."""
    table = make_table(
        [
            {"task": "a", "rewards": {"reward": 1.0, "style": 0.5}},
            {"task": "a", "rewards": {"reward": 0.0, "style": 1.5}},
            {"task": "b", "rewards": {"reward": 1.0}},
        ]
    )
    counts = {"scored": 2, "partial": 0, "errored": 0, "no_verifier": 0, "invalid": 0}
    assert score(table).to_json()["tasks"] == [
        {
            "task": "a",
            "attempts": 2,
            "successes": 1,
            "counts": {"attempts": 2, **counts, "harbor_errors": 0},
            "outputs": {
                "reward": {"mean": 0.5, "measured": 2, "attempts": 2, "stderr": 0.5},
                "style": {"mean": 1.0, "measured": 2, "attempts": 2, "stderr": 0.5},
            },
        },
        {
            "task": "b",
            "attempts": 1,
            "successes": 1,
            "counts": {"attempts": 1, **counts, "scored": 1, "harbor_errors": 0},
            "outputs": {"reward": {"mean": 1.0, "measured": 1, "attempts": 1, "stderr": None}},
        },
    ]
