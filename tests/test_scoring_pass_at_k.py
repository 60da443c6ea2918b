"""pass@k and pass^k: exact fractions, a brute-force math.comb reference, eligibility."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring import default_ks, pass_at_k, pass_hat_k
from scoring._pass_at_k import per_task_products


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def exact_pass_hat_k(n: int, c: int, k: int) -> Fraction:
    return Fraction(math.comb(c, k), math.comb(n, k))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [(10, 3, 5, Fraction(11, 12)), (16, 4, 8, Fraction(25, 26)), (200, 1, 100, Fraction(1, 2))],
)
def test_pass_at_k_exact_vectors(n: int, c: int, k: int, expected: Fraction) -> None:
    assert exact_pass_at_k(n, c, k) == expected  # the reference itself
    (result,) = pass_at_k([n], [c], [k])
    assert result.eligible_tasks == 1
    assert abs(Fraction(result.value) - expected) <= Fraction(1, 10**15)


def test_pass_hat_k_exact_vector() -> None:
    assert exact_pass_hat_k(10, 7, 3) == Fraction(7, 24)
    (result,) = pass_hat_k([10], [7], [3])
    assert abs(Fraction(result.value) - Fraction(7, 24)) <= Fraction(1, 10**15)


def test_exact_zero_and_one() -> None:
    # c = 0 → exactly 0; n − c < k → exactly 1; pass^k: c < k → 0, c = n → 1
    assert [r.value for r in pass_at_k([7, 7], [0, 0], [1, 3])] == [0.0, 0.0]
    assert [r.value for r in pass_at_k([7], [5], [3])] == [1.0]
    assert [r.value for r in pass_hat_k([7], [2], [3])] == [0.0]
    assert [r.value for r in pass_hat_k([7], [7], [1, 3, 7])] == [1.0, 1.0, 1.0]


def test_ineligible_tasks_are_left_out_not_counted_as_one() -> None:
    # task A: 2 attempts, both succeed; task B: 10 attempts, none succeed
    results = {r.k: r for r in pass_at_k([2, 10], [2, 0], [1, 2, 4])}
    assert results[1].eligible_tasks == 2 and results[1].value == 0.5
    assert results[2].eligible_tasks == 2 and results[2].value == 0.5
    assert results[4].eligible_tasks == 1 and results[4].value == 0.0
    assert pass_at_k([3], [3], [4])[0].value is None  # no eligible task: None, not 0 or 1
    assert pass_at_k([3], [3], [4])[0].eligible_tasks == 0


def test_default_ks() -> None:
    assert default_ks(0) == []
    assert default_ks(1) == [1]
    assert default_ks(10) == [1, 2, 4, 5, 8, 10]
    assert default_ks(20) == [1, 2, 4, 5, 8, 10, 15, 16, 20]


def test_stderr_is_clt_over_tasks() -> None:
    (result,) = pass_at_k([1, 1, 1, 1], [1, 0, 1, 0], [1])
    assert result.value == 0.5
    assert result.stderr == pytest.approx(np.std([1, 0, 1, 0], ddof=1) / 2)
    assert result.to_json()["ci95"][0] == 0.0 or result.to_json()["ci95"][0] > 0


tasks = st.lists(
    st.integers(min_value=1, max_value=60).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(min_value=0, max_value=n))
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(tasks=tasks, threshold_ks=st.lists(st.integers(1, 64), min_size=1, max_size=6))
def test_matches_math_comb_reference_on_ragged_attempts(
    tasks: list[tuple[int, int]], threshold_ks: list[int]
) -> None:
    n = [t[0] for t in tasks]
    c = [t[1] for t in tasks]
    ks = sorted(set(threshold_ks))
    for result, hat in zip(pass_at_k(n, c, ks), pass_hat_k(n, c, ks), strict=True):
        eligible = [(ni, ci) for ni, ci in tasks if ni >= result.k]
        assert result.eligible_tasks == hat.eligible_tasks == len(eligible)
        if not eligible:
            assert result.value is None and hat.value is None
            continue
        want = sum(exact_pass_at_k(ni, ci, result.k) for ni, ci in eligible) / len(eligible)
        want_hat = sum(exact_pass_hat_k(ni, ci, result.k) for ni, ci in eligible) / len(eligible)
        assert abs(Fraction(result.value) - want) <= Fraction(1, 10**12)
        assert abs(Fraction(hat.value) - want_hat) <= Fraction(1, 10**12)


@settings(max_examples=100, deadline=None)
@given(tasks=tasks)
def test_per_task_products_exact_at_the_edges(tasks: list[tuple[int, int]]) -> None:
    n = np.array([t[0] for t in tasks])
    c = np.array([t[1] for t in tasks])
    ks = list(range(1, int(n.max()) + 1))
    products = per_task_products(n, n - c, ks)
    order = np.argsort(-n, kind="stable")
    for k, values in products.items():
        eligible = order[: values.size]
        assert np.all(n[eligible] >= k)
        assert np.all(values[(n - c)[eligible] < k] == 0.0)  # pass@k exactly 1
        assert np.all(values[c[eligible] == 0] == 1.0)  # pass@k exactly 0


@settings(max_examples=100, deadline=None)
@given(tasks=tasks, threshold_ks=st.lists(st.integers(1, 64), min_size=1, max_size=6))
def test_pair_histogram_equals_per_task_mean_and_stderr(
    tasks: list[tuple[int, int]], threshold_ks: list[int]
) -> None:
    # the values are averaged once per distinct (n, c) with its task count: the same mean and
    # standard error as the per-task values themselves
    from scoring._pass_at_k import pass_at_k_and_hat

    n = np.array([t[0] for t in tasks])
    c = np.array([t[1] for t in tasks])
    ks = sorted(set(threshold_ks))
    at_k, hat_k = pass_at_k_and_hat(n, c, ks)
    for result, hat in zip(at_k, hat_k, strict=True):
        eligible = n >= result.k
        per_task = per_task_products(n[eligible], (n - c)[eligible], [result.k])[result.k]
        per_task_hat = per_task_products(n[eligible], c[eligible], [result.k])[result.k]
        for summary, values in ((result, 1.0 - per_task), (hat, per_task_hat)):
            assert summary.eligible_tasks == values.size
            if values.size:
                assert summary.value == pytest.approx(float(values.mean()), abs=1e-15)
            if values.size >= 2:
                want = float(np.std(values, ddof=1)) / np.sqrt(values.size)
                assert summary.stderr == pytest.approx(want, rel=1e-9, abs=1e-15)
            else:
                assert summary.stderr is None
