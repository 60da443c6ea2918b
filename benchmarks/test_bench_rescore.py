"""Rescore benchmarks: the vectorised engine against Harbor's own metric code.

Trials: ``tasks × 10`` attempts with 3 reward keys (``reward`` binary with a per-task success
rate, ``style`` in [0, 1], ``fmt`` binary and missing on 5% of attempts), 3% of attempts with
an exception, 0.5% without a verifier result, 0.1% invalid, two models (two groups and two
Harbor evals keys). Full size (``--benchmark-enable``): 100,000 tasks = 1,000,000 trials; the
smoke run (pyproject's ``--benchmark-disable``): 100 tasks = 1,000 trials.

* ``engine``: :func:`scoring.score` (``harbor=False``) on the in-memory
  :class:`RewardTable` — per-attempt rules and diagnostics, partials, means and coverage with
  clustered errors for the 3 outputs, pass@k and pass^k for every k, per-task and per-group
  aggregates, failure rollup. Target: < 1 s at 1M trials, >= 20× Harbor.
* ``engine + harbor parity``: the same plus the bit-exact Harbor outputs (Mean over the run
  and per evals key, Harbor's pass@k: exact sums rounded once, see :mod:`scoring._exact_sum`),
  computed on a second thread while the engine runs.
* ``engine (store bytes)``: the store path — ``RewardTable.from_bytes`` (what
  ``Store.reward_table`` returns from the index) followed by the engine.
* ``full rescore``: what ``casstore rescore JOB`` computes by default — the stored table
  (``RewardTable.from_bytes``) scored with the default options, Harbor parity included
  (``metrics=("mean",)``, every group field). Target: < 1 s and >= 20× both Harbor baselines.
* ``harbor`` (baseline): Harbor 0.20's ``Mean().compute`` on the rewards extracted from
  already-built ``TrialResult`` objects, per evals key as ``Job`` does, plus
  ``compute_pass_at_k_by_evals`` on the same trials. Building a million pydantic objects is
  itself slow and not part of what is compared, so Harbor runs on a 100,000-trial subset
  (10,000 tasks) ten times per round: the timed work is 1,000,000 trials (linear scaling,
  recorded in ``extra_info``). On these 3-key trials Harbor's pass@k returns ``{}`` at the
  first trial (it needs one-key rewards), so a second baseline, ``harbor (1-key)``, runs the
  same code on one-key copies (primary only) where pass@k does its full work.

Target: the engine >= 20× faster than ``harbor``.
"""

from __future__ import annotations

import numpy as np
import pytest

from casstore.table.columns import Flag, Kind, RewardTable
from scoring import score

ATTEMPTS = 10
GROUP = "rescore"
HARBOR_SUBSET_TASKS = 10_000


def tasks_for(enabled: bool) -> int:
    return 100_000 if enabled else 100


def make_table(tasks: int, attempts: int = ATTEMPTS, seed: int = 0) -> RewardTable:
    """A generated RewardTable (vectorised); see the module docstring for its content."""
    rng = np.random.default_rng(seed)
    n = tasks * attempts
    task = np.repeat(np.arange(tasks, dtype=np.int32), attempts)
    difficulty = rng.random(tasks)
    primary = (rng.random(n) < difficulty[task]).astype(np.float64)
    u = rng.random(n)
    flags = np.zeros(n, np.uint8)
    flags[u < 0.03] |= np.uint8(Flag.EXCEPTION)
    flags[u < 0.005] |= np.uint8(Flag.NO_VERIFIER)
    flags[(u > 0.5) & (u < 0.501)] |= np.uint8(Flag.INVALID)
    none = (flags & (Flag.NO_VERIFIER | Flag.INVALID)) != 0
    primary[none] = np.nan
    values = np.empty((n, 2))
    values[:, 0] = np.round(rng.random(n), 3)
    values[:, 1] = (rng.random(n) < 0.8).astype(np.float64)
    kinds = np.full((n, 2), Kind.NUMBER, np.int8)
    kinds[rng.random(n) < 0.05, 1] = Kind.MISSING
    kinds[none] = Kind.MISSING
    values[kinds == Kind.MISSING] = np.nan
    return RewardTable(
        reward_key="reward",
        tasks=[f"task-{i:06d}" for i in range(tasks)],
        trials=[f"trial-{i:07d}" for i in range(n)],
        keys=["style", "fmt"],
        task=task,
        attempt=np.tile(np.arange(attempts, dtype=np.int32), tasks),
        flags=flags,
        primary=primary,
        primary_kind=np.where(none, Kind.MISSING, Kind.NUMBER).astype(np.int8),
        values=values,
        kinds=kinds,
        agent=np.zeros(n, np.int32),
        model=(task % 2).astype(np.int32),
        dataset=np.zeros(n, np.int32),
        exception=((flags & Flag.EXCEPTION) != 0).astype(np.int32),
        failure=np.zeros(n, np.int32),
        agents=["bench-agent@1.0"],
        models=["model-a", "model-b"],
        datasets=["bench"],
        exceptions=["", "AgentTimeoutError"],
        failures=[""],
        jobs=["bench"],
    )


def harbor_trials(table: RewardTable, rows: int, one_key: bool) -> list:
    """Harbor ``TrialResult`` objects for the first ``rows`` valid rows of ``table``."""
    from harbor.models.trial.result import AgentInfo, ModelInfo, TrialResult
    from harbor.models.verifier.result import VerifierResult

    agents = {
        m: AgentInfo.model_construct(
            name="bench-agent", version="1.0", model_info=ModelInfo.model_construct(name=name)
        )
        for m, name in enumerate(table.models)
    }
    keys = [table.reward_key] if one_key else [table.reward_key, *table.keys]
    matrix = np.column_stack([table.primary, table.values])[:, : len(keys)].tolist()
    kinds = np.column_stack([table.primary_kind, table.kinds])[:, : len(keys)].tolist()
    trials = []
    for row in range(rows):
        flags = int(table.flags[row])
        if flags & Flag.INVALID:
            continue
        verifier = None
        if not flags & Flag.NO_VERIFIER:
            rewards = {
                key: matrix[row][j] for j, key in enumerate(keys) if kinds[row][j] != Kind.MISSING
            }
            verifier = VerifierResult.model_construct(rewards=rewards)
        trials.append(
            TrialResult.model_construct(
                task_name=table.tasks[table.task[row]],
                trial_name=table.trials[row],
                source="bench",
                agent_info=agents[int(table.model[row])],
                verifier_result=verifier,
            )
        )
    return trials


def harbor_job_metrics(trials: list) -> tuple[dict, dict]:
    """What Harbor's ``Job`` computes at the end of a run: Mean per evals key, then pass@k."""
    from harbor.metrics.mean import Mean
    from harbor.models.job.result import JobStats
    from harbor.utils.pass_at_k import compute_pass_at_k_by_evals

    groups: dict[str, list] = {}
    for trial in trials:
        model = trial.agent_info.model_info.name if trial.agent_info.model_info else None
        key = JobStats.format_agent_evals_key(trial.agent_info.name, model, trial.source or "adhoc")
        groups.setdefault(key, []).append(
            trial.verifier_result.rewards if trial.verifier_result is not None else None
        )
    metrics = {key: [Mean().compute(rewards)] for key, rewards in groups.items()}
    return metrics, compute_pass_at_k_by_evals(trials)


@pytest.fixture(scope="module")
def table(enabled: bool) -> RewardTable:
    return make_table(tasks_for(enabled))


def _info(benchmark, label: str, trials: int, **extra) -> None:
    benchmark.group = GROUP
    benchmark.extra_info.update({"label": label, "trials": trials, **extra})


def test_rescore_engine(benchmark, table: RewardTable, enabled: bool) -> None:
    _info(benchmark, "engine", len(table), targets={"harbor": 20.0}, target_seconds=1.0)
    report = benchmark.pedantic(
        lambda: score(table, harbor=False), rounds=21 if enabled else 1, iterations=1
    )
    assert report.counts["attempts"] == len(table)
    assert report.pass_at_k[0].eligible_tasks == len(table.tasks)
    assert len(report.groups) == 2 and len(report.diagnostics) > 0


def test_rescore_engine_with_parity(benchmark, table: RewardTable, enabled: bool) -> None:
    _info(benchmark, "engine + harbor parity", len(table), target_seconds=1.0)
    report = benchmark.pedantic(score, args=(table,), rounds=15 if enabled else 1, iterations=1)
    assert report.harbor_metrics and report.harbor_evals and len(report.harbor_evals) == 2


def test_rescore_engine_store_bytes(benchmark, table: RewardTable, enabled: bool) -> None:
    data = table.to_bytes()
    _info(benchmark, "engine (store bytes)", len(table), bytes=len(data))
    report = benchmark.pedantic(
        lambda: score(RewardTable.from_bytes(data), harbor=False),
        rounds=15 if enabled else 1,
        iterations=1,
    )
    assert report.counts["attempts"] == len(table)


def test_rescore_full(benchmark, table: RewardTable, enabled: bool) -> None:
    data = table.to_bytes()
    _info(
        benchmark,
        "full rescore",
        len(table),
        bytes=len(data),
        targets={"harbor": 20.0, "harbor (1-key)": 20.0},
        target_seconds=1.0,
    )
    report = benchmark.pedantic(
        lambda: score(RewardTable.from_bytes(data)), rounds=21 if enabled else 1, iterations=1
    )
    assert report.counts["attempts"] == len(table)
    assert report.harbor_metrics and report.harbor_evals and len(report.harbor_evals) == 2


@pytest.mark.parametrize("one_key", [False, True], ids=["3-key", "1-key"])
def test_rescore_harbor_baseline(benchmark, table: RewardTable, enabled: bool, one_key) -> None:
    rows = min(len(table), HARBOR_SUBSET_TASKS * ATTEMPTS)
    repeats = max(1, len(table) // rows)
    trials = harbor_trials(table, rows, one_key)
    _info(
        benchmark,
        "harbor (1-key)" if one_key else "harbor",
        rows * repeats,
        baseline=True,
        note=f"Harbor on a {rows}-trial subset x{repeats} per round (linear scaling)",
        subset_trials=rows,
        repeats=repeats,
    )

    def run() -> tuple[dict, dict]:
        for _ in range(repeats):
            result = harbor_job_metrics(trials)
        return result

    metrics, pass_at_k = benchmark.pedantic(run, rounds=3 if enabled else 1, iterations=1)
    assert metrics
    if one_key:
        assert pass_at_k  # binary one-key rewards: Harbor computes pass@k
