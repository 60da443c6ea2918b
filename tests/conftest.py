"""Shared fixtures. Real Harbor data lives in ../shared/fixtures (never copied here).

Tests that read it are marked ``realdata``. Without ../shared they are skipped with a reason;
with ``CASSTORE_REQUIRE_REALDATA=1`` (set by .ci/run) a missing fixtures folder or any skipped
realdata test is a failure instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
REQUIRED = os.environ.get("CASSTORE_REQUIRE_REALDATA") == "1"
_MISSING = f"real Harbor data not found at {FIXTURES} (a plain clone has no ../shared)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FIXTURES.is_dir():
        return
    if REQUIRED:
        raise pytest.UsageError(f"CASSTORE_REQUIRE_REALDATA=1 but {_MISSING}")
    for item in items:
        if "realdata" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=_MISSING))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if REQUIRED and report.skipped and "realdata" in item.keywords:
        report.outcome = "failed"
        report.longrepr = f"realdata test skipped under CASSTORE_REQUIRE_REALDATA=1: {item.nodeid}"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``../shared/fixtures`` (tests using it must be marked ``realdata``)."""
    return FIXTURES


def real_task_dirs() -> list[Path]:
    """Every task directory under ``fixtures/tasks/<suite>/<task>`` (empty without data)."""
    return sorted(p for p in FIXTURES.glob("tasks/*/*") if (p / "task.toml").is_file())
