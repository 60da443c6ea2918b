"""Run bundle benchmarks: writing and reopening the bundle of 1,000,000 attempts.

Trials: :func:`benchmarks.test_bench_rescore.make_table` (100,000 tasks × 10 attempts, three
reward keys, exceptions, missing verifiers, invalid mappings; the smoke run: 100 tasks), with
the details of one :class:`~casstore.trials.TrialRecord` per attempt as an imported job gives
them (job, timings, tokens, cost, evidence reference, result path, an exception message on the
attempts with an exception).

* ``write``: what ``rescore --bundle`` adds to a rescore: the canonical table
  (:func:`casstore.bundle.canonical`) and :func:`casstore.bundle.write_bundle` of its report
  (samples.jsonl, summary.json, manifest.json, in a staging directory moved into place).
  Target: < 5 s.
* ``reopen``: what ``rescore DIR`` of the bundle does: every file checked against the
  manifest, the samples decoded into the reward table, then scored (Harbor parity included).
  Target: < 5 s.
* ``json lines`` (baseline): the standard library writing the same samples, one
  ``json.dumps`` per line, and reading them back with ``json.loads`` (no checks, no table):
  what a script keeping its results as JSON lines would do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from benchmarks.test_bench_rescore import make_table, tasks_for
from casstore.bundle import Scoring, canonical, open_bundle, write_bundle
from casstore.bundle.read import SAMPLES
from casstore.table.columns import Flag, RewardTable
from casstore.trials import TrialRecord
from scoring import score

GROUP = "bundle"


@pytest.fixture(scope="module")
def table(enabled: bool) -> RewardTable:
    return canonical(make_table(tasks_for(enabled)))


@pytest.fixture(scope="module")
def details(table: RewardTable) -> list[TrialRecord]:
    """One attempt's trial record per row (its details: timings, tokens, cost, references)."""
    errors = (table.flags & Flag.EXCEPTION) != 0
    return [
        TrialRecord(
            job_id="bench",
            trial_name=name,
            task_name="",
            exception_message="Agent timed out after 900.0 seconds" if error else None,
            started_at="2026-05-10T01:58:43.507399Z",
            finished_at="2026-05-10T02:12:17.238645Z",
            agent_execution=("2026-05-10T01:59:25.476122Z", "2026-05-10T02:11:45.725902Z"),
            verifier=("2026-05-10T02:11:45.847951Z", "2026-05-10T02:12:00.522420Z"),
            n_input_tokens=450_998 + row,
            n_output_tokens=25_019,
            cost_usd=1.12738,
            evidence=f"sha256:{row % 997:064x}#{row % 500}",
            result_path=f"/jobs/bench/{name}/result.json",
        )
        for row, (name, error) in enumerate(zip(table.trials, errors.tolist(), strict=True))
    ]


def _info(benchmark, label: str, trials: int, **extra) -> None:
    benchmark.group = GROUP
    benchmark.extra_info.update({"label": label, "trials": trials, **extra})


def test_bundle_write(benchmark, table, details, enabled: bool, tmp_path: Path) -> None:
    report = score(table)
    _info(benchmark, "write", len(table), target_seconds=5.0)
    out = tmp_path / "bundle"

    def write() -> None:
        shutil.rmtree(out, ignore_errors=True)
        canonical(table)
        write_bundle(out, report, Scoring("reward"), details=details)

    benchmark.pedantic(write, rounds=3 if enabled else 1)
    size = (out / SAMPLES).stat().st_size
    benchmark.extra_info["output_bytes"] = size
    assert sum(1 for _ in (out / SAMPLES).open("rb")) == len(table)


def test_bundle_reopen(benchmark, table, details, enabled: bool, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_bundle(out, score(table), Scoring("reward"), details=details)
    _info(benchmark, "reopen", len(table), target_seconds=5.0,
          bytes=(out / SAMPLES).stat().st_size)  # fmt: skip

    def reopen():
        return score(open_bundle(out, details=False).table)

    report = benchmark.pedantic(reopen, rounds=3 if enabled else 1)
    assert report.to_json() == score(table).to_json()


def test_bundle_json_lines_baseline(benchmark, table, details, enabled: bool, tmp_path) -> None:
    out = tmp_path / "bundle"
    write_bundle(out, score(table), Scoring("reward"), details=details)
    samples = [msgspec.to_builtins(s) for s in msgspec.json.Decoder().decode_lines(
        (out / SAMPLES).read_bytes())]  # fmt: skip
    _info(benchmark, "json lines", len(table), baseline=True)
    target = tmp_path / "plain.jsonl"

    def plain() -> int:
        with target.open("w") as handle:
            for sample in samples:
                handle.write(json.dumps(sample) + "\n")
        with target.open() as handle:
            return sum(1 for line in handle if json.loads(line))

    assert benchmark.pedantic(plain, rounds=3 if enabled else 1) == len(table)
