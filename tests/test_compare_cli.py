"""``casstore compare`` on the command line: text, JSON, tasks left out, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from casstore.examples.job import write_example_job
from casstore.trials import read_job, write_trials_jsonl
from tests.helpers import run_cli


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    a = write_example_job(root / "a", ["alpha", "beta", "gamma"], attempts=4, seed=1)
    b = write_example_job(root / "b", ["alpha", "beta", "delta"], attempts=4, seed=2)
    return a, b


def test_text_and_json_name_the_tasks_left_out(runs, capsys) -> None:
    a, b = runs
    code, out, err = run_cli(capsys, "compare", str(a), str(b))
    assert code == 0
    assert f"left out: 1 task(s) only in A ({a}): gamma" in err
    assert f"left out: 1 task(s) only in B ({b}): delta" in err
    assert "difference (paired by task)" in out and "tasks 2" in out
    code, out, err = run_cli(capsys, "compare", str(a), str(b), "--json", "--k", "1,4")
    assert code == 0
    result = json.loads(out)
    assert result["schema"] == "casstore.compare/1"
    assert (result["only_in_a"], result["only_in_b"], result["tasks"]) == (["gamma"], ["delta"], 2)
    assert [row["task"] for row in result["per_task"]] == ["alpha", "beta"]
    assert set(result["pass_at_k"]) == {"1", "4"}
    assert result["pass_at_k"]["4"]["eligible_tasks"] == 2
    assert result["mcnemar"] is None  # four attempts per task


def test_a_run_against_itself_differs_by_nothing(runs, capsys) -> None:
    a, _ = runs
    code, out, err = run_cli(capsys, "compare", str(a), str(a), "--json")
    assert (code, err) == (0, "")
    diff = json.loads(out)["difference"]
    assert (diff["difference"], diff["stderr"], diff["tied"]) == (0.0, 0.0, 3)
    assert diff["p_value"] is None and diff["correlation"] == 1.0


def test_other_reward_keys_and_bad_sources_are_refused(runs, capsys, tmp_path: Path) -> None:
    a, b = runs
    key = tmp_path / "style.jsonl"
    write_trials_jsonl(read_job(b, "style").trials, key)
    code, _, err = run_cli(capsys, "compare", str(a), str(key))
    assert code == 1 and err.count("\n") == 1
    assert "reward key 'style', while" in err
    code, _, err = run_cli(capsys, "compare", str(a), str(tmp_path / "nothing/here"))
    assert code == 2 and "no such file or directory" in err
    lone = write_example_job(tmp_path / "lone", ["zeta"], attempts=2)
    code, _, err = run_cli(capsys, "compare", str(a), str(lone))
    assert code == 1 and "no task with a valid attempt in both runs (3 only in" in err
    code, _, err = run_cli(capsys, "compare", str(a), str(b), "--threshold", "nan")
    assert code == 2 and "--threshold" in err
