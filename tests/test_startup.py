"""Start-up: each command loads only what it uses (README, "Start-up").

Loaded modules are read in a fresh interpreter; no time is measured here."""

from __future__ import annotations

from tests.helpers import python

# --- the scoring package loads NumPy with the first name that needs it ---------------------


def test_scoring_defaults_load_no_numpy_and_every_name_resolves() -> None:
    script = (
        "import sys, scoring, scoring._defaults; assert 'numpy' not in sys.modules; "
        "names = [getattr(scoring, n) for n in scoring.__all__]; "
        "assert 'numpy' in sys.modules and scoring.BUILTIN_METRIC_NAMES == tuple("
        "scoring.BUILTIN_METRICS); print(len(names))"
    )
    printed = python(script)
    import scoring

    assert int(printed) == len(scoring.__all__) and sorted(dir(scoring)) == sorted(scoring.__all__)
