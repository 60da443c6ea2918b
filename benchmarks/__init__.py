"""Benchmark suites of casstore (pytest-benchmark); see conftest.py and report.py."""
