"""Every numeric option is bounded (issue 17, item 4): a value out of bounds is a one-line usage
error (exit 2) naming the option and its bounds, the same from the CLI and the Python API,
never a traceback (``rescore --k 1e30`` was NumPy's "Maximum allowed size exceeded") and never
silently accepted (``gc --min-age inf``, ``--limit max_entries=<40 nines>``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import casstore
from casstore.archive.limits import MAX_LIMIT
from casstore.errors import UsageError
from casstore.examples.job import write_example_job
from scoring import MAX_K, MAX_METRIC_TIMEOUT
from tests.helpers import make_task, run_cli

NINES_30, NINES_40, NINES_5000 = "9" * 30, "9" * 40, "9" * 5000
K_RULE = f"--k: every k must be an integer from 1 to {MAX_K} (the most attempts a task can have)"
LIMIT_RULE = f"a limit is a whole number from 1 to {MAX_LIMIT} (bytes or entries)"
CUT = "9" * 39 + "…"  # a long number as messages show it: 40 characters


def test_the_bounds() -> None:
    assert MAX_K == 2**31  # attempt indexes are int32: a task has at most 2**31 attempts
    assert MAX_LIMIT == 2**63 - 1  # the largest file size or offset (off_t)
    assert MAX_METRIC_TIMEOUT == 86400.0  # a day


TIMEOUT_RULE = "--metric-timeout: must be > 0 and at most 86400 seconds (a day)"
BIG = "1" + "0" * 38 + "…"  # 10**400 as messages show it


@pytest.mark.parametrize(
    ("options", "cli", "api_rule", "cli_rule"),
    [
        ({"ks": [int(NINES_30)]}, ["--k", NINES_30], f"{K_RULE}, not {NINES_30}", None),
        ({"ks": [1, MAX_K + 1]}, ["--k", f"1,{MAX_K + 1}"], f"{K_RULE}, not {MAX_K + 1}", None),
        (
            {"ks": [int(NINES_40)]},
            ["--k", NINES_5000],
            f"{K_RULE}, not {NINES_40}",
            f"{K_RULE}, not {CUT}",
        ),
        ({"ks": [0]}, ["--k", "0"], f"{K_RULE}, not 0", None),
        ({"ks": [2, 1.5]}, ["--k", "2,-1"], f"{K_RULE}, not 1.5", f"{K_RULE}, not -1"),
        (
            {"metric_timeout": 3e6},
            ["--metric-timeout", "3000000"],
            f"{TIMEOUT_RULE}, not 3e+06",
            None,
        ),
        ({"metric_timeout": 0}, ["--metric-timeout", "0"], f"{TIMEOUT_RULE}, not 0", None),
        (
            {"metric_timeout": 10**400},
            ["--metric-timeout", "1e400"],
            f"--metric-timeout: must be a finite number, not {BIG}",
            "--metric-timeout: must be a finite number, not inf",
        ),
        (
            {"threshold": -(10**400)},
            ["--threshold", "-1e400"],
            f"--threshold: must be a finite number, not -{BIG[:-2]}…",
            "--threshold: must be a finite number, not -inf",
        ),
    ],
)
def test_rescore_bounds_from_the_cli_and_the_api(
    capsys, tmp_path, options, cli, api_rule, cli_rule
) -> None:
    """Checked before any source is read (the source here does not exist)."""
    missing = str(tmp_path / "no-such-job")
    with pytest.raises(UsageError) as raised:
        casstore.rescore([missing], **options)
    assert str(raised.value) == api_rule
    code, out, err = run_cli(capsys, "rescore", missing, *cli)
    assert (code, out, err) == (2, "", f"casstore: {cli_rule or api_rule}\n")


def test_the_largest_k_is_scored_without_memory_in_proportion(tmp_path: Path, capsys) -> None:
    """k up to MAX_K is accepted; a k beyond every task's attempts has no eligible task (the
    engine walks the attempts, not range(k): k = 2**31 used to ask NumPy for 16 GiB)."""
    job = write_example_job(tmp_path / "jobs", ["alpha", "beta"], attempts=3)
    report = casstore.rescore([job], ks=[1, MAX_K])
    at_1, at_max = report.pass_at_k
    assert (at_1.k, at_1.eligible_tasks) == (1, 2)
    assert (at_max.k, at_max.value, at_max.eligible_tasks) == (MAX_K, None, 0)
    code, out, _ = run_cli(capsys, "rescore", str(job), "--k", f"3,{MAX_K}", "--json")
    shown = json.loads(out)["pass_at_k"]
    assert code == 0 and shown[str(MAX_K)]["eligible_tasks"] == 0
    assert shown["3"]["eligible_tasks"] == 2


@pytest.mark.parametrize(
    ("cli", "api", "cli_rule", "api_rule"),
    [
        ("inf", math.inf, "must be a finite number, not inf", None),
        ("nan", math.nan, "must be a finite number, not nan", None),
        ("-5", -5.0, "must be >= 0 seconds, not -5", None),
        (
            "1e400",
            10**400,
            "must be a finite number, not inf",
            f"must be a finite number, not {BIG}",
        ),
    ],
)
def test_gc_min_age_is_a_finite_number_of_seconds(
    tmp_path, capsys, cli, api, cli_rule, api_rule
) -> None:
    root = tmp_path / "store"
    with casstore.open_store(root) as store:
        casstore.publish(store, make_task(tmp_path))
        with pytest.raises(UsageError) as raised:
            casstore.gc(store, min_age=api)
        assert str(raised.value) == f"--min-age: {api_rule or cli_rule}"
    code, out, err = run_cli(capsys, "--store", str(root), "gc", "--min-age", cli)
    assert (code, out, err) == (2, "", f"casstore: --min-age: {cli_rule}\n")


@pytest.mark.parametrize(
    ("given", "shown"),
    [(NINES_40, NINES_40), (str(MAX_LIMIT + 1), str(MAX_LIMIT + 1)), (NINES_5000, CUT), ("0", "0")],
)
def test_limits_are_bounded_from_the_cli_and_the_api(tmp_path, capsys, given, shown) -> None:
    task = make_task(tmp_path)
    out = tmp_path / "x.tgz"
    code, stdout, err = run_cli(
        capsys, "pack", str(task), "-o", str(out), "--limit", f"max_entries={given}"
    )
    named = f"max_entries={given if len(given) <= 40 else CUT}"  # the assignment given
    assert (code, stdout, err) == (2, "", f"casstore: {named}: {LIMIT_RULE}, not {shown}\n")
    assert not out.exists()
    if len(given) < 4300:  # a Python int
        with pytest.raises(UsageError) as raised:
            casstore.Limits(max_entries=int(given))
        assert str(raised.value) == f"max_entries: {LIMIT_RULE}, not {shown}"
    assert casstore.Limits(max_entries=MAX_LIMIT).max_entries == MAX_LIMIT
    assert casstore.Limits().with_overrides([f"file_bytes={MAX_LIMIT}"]).max_file_bytes == MAX_LIMIT


@pytest.mark.parametrize("given", ["1_0", "\u0661", "1,\u0662", "0x10", "1e3"])
def test_a_k_is_written_in_ascii_digits(capsys, tmp_path, given) -> None:
    """int() would take "1_0" as 10 and an Arabic-Indic digit as 1: --k takes 0-9 only."""
    code, out, err = run_cli(capsys, "rescore", str(tmp_path / "no-such-job"), "--k", given)
    rule = f"--k: not a comma-separated list of integers: {given!r}"
    assert (code, out, err) == (2, "", f"casstore: {rule}\n")


@pytest.mark.parametrize("given", ["\u0663", "1_000", "\uff11KiB"])
def test_a_limit_is_written_in_ascii_digits(tmp_path, capsys, given) -> None:
    task = make_task(tmp_path)
    argv = ["pack", str(task), "-o", str(tmp_path / "x.tgz"), "--limit", f"max_entries={given}"]
    code, out, err = run_cli(capsys, *argv)
    rule = "a size is a whole number with an optional unit (KiB, MiB, GiB, k, M, G)"
    assert (code, out, err) == (2, "", f"casstore: max_entries={given}: {rule}\n")
    with pytest.raises(UsageError) as raised:
        casstore.Limits().with_overrides([f"entries={given}"])
    assert str(raised.value) == f"entries={given}: {rule}"


@pytest.mark.parametrize(
    "given", ["1_000", "\u0663", "\uff15", "0x10", "1,5", "\u00a00", "0\u3000"]
)
@pytest.mark.parametrize(
    "argv",
    [["rescore", "J", "--threshold"], ["rescore", "J", "--metric-timeout"], ["gc", "--min-age"]],
)
def test_a_decimal_option_is_written_in_ascii(tmp_path, capsys, argv, given) -> None:
    """float() takes "1_000" and other scripts' digits: the float options take what --k and
    --limit take, ASCII digits (a fresh tester's finding)."""
    argv = [str(tmp_path / "no-such-job") if part == "J" else part for part in argv]
    code, out, err = run_cli(capsys, "--store", str(tmp_path / "store"), *argv, given)
    rule = f"not a decimal number (ASCII digits): {given}"
    assert (code, out, err) == (2, "", f"casstore: {argv[-1]}: {rule}\n")


@pytest.mark.parametrize("given", ["1.5", "2e3", ".5", "+7", "-0"])
def test_a_decimal_in_ascii_is_taken(given) -> None:
    from casstore.bounds import decimal

    assert decimal("--threshold", given) == float(given)
