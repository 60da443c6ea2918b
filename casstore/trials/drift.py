"""Harbor schema drift: Harbor's own models checked against a job's files.

A job whose ``config.json`` or whose trials' ``result.json`` (a sample of up to
:data:`DRIFT_SAMPLE`) Harbor's models reject in fields that do not matter for scoring gets one
``harbor_schema_drift`` diagnostic; its trials are imported anyway. Reward errors are not
drift: they make a trial INVALID.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from casstore.trials.files import read_bytes
from casstore.trials.records import Diagnostic
from casstore.trials.sample import sample

__all__ = ["DRIFT_SAMPLE", "drift"]

DRIFT_SAMPLE = 200
"""Trials (evenly spaced) whose result.json Harbor's ``TrialResult`` checks."""


def drift(path: Path, readable: list[str], config_bytes: bytes | None) -> dict[str, Any] | None:
    """The ``harbor_schema_drift`` diagnostic of the job at ``path`` (``readable``: its trial
    directories with a record; ``config_bytes``: its config.json or None), or None when
    Harbor's models accept what they were given."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Harbor's deprecation warnings on old fields
        fields: Counter[str] = Counter()
        job_files = _config_drift(config_bytes, fields)
        checked = sample(readable, DRIFT_SAMPLE)
        drifted = _trials_drift(path, checked, fields)
    if not fields:
        return None
    return {
        "code": Diagnostic.HARBOR_SCHEMA_DRIFT,
        "message": "Harbor's own models reject fields that do not matter for scoring; "
        "trials imported anyway",
        "count": drifted,
        "checked": len(checked),
        "trials": len(readable),
        "job_files": job_files,
        "fields": dict(sorted(fields.items())[:20]),
    }


def _config_drift(config_bytes: bytes | None, fields: Counter[str]) -> list[str]:
    """``["config.json"]`` when Harbor's ``JobConfig`` rejects it (its fields counted in
    ``fields``, prefixed ``config.json:``), else ``[]``."""
    from harbor.models.job.config import JobConfig
    from pydantic import ValidationError

    if config_bytes is None:
        return []
    try:
        JobConfig.model_validate_json(config_bytes)
    except ValidationError as error:
        for item in error.errors():
            fields["config.json:" + _loc(item["loc"])] += 1
        return ["config.json"]
    except ValueError:
        return ["config.json"]
    return []


def _trials_drift(path: Path, checked: list[str], fields: Counter[str]) -> int:
    """How many of the trial directories ``checked`` hold a result.json Harbor's
    ``TrialResult`` rejects outside the verifier result (the fields counted in ``fields``)."""
    from harbor.models.trial.result import TrialResult
    from pydantic import ValidationError

    drifted = 0
    for name in checked:
        data = read_bytes(path / name / "result.json")
        if data is None:
            continue
        try:
            TrialResult.model_validate_json(data)
        except ValidationError as error:
            locs = [_loc(item["loc"]) for item in error.errors() if not _is_reward_loc(item["loc"])]
            if locs:
                drifted += 1
                for loc in set(locs):
                    fields[loc] += 1
    return drifted


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _is_reward_loc(loc: tuple[Any, ...]) -> bool:
    parts = [str(p) for p in loc]
    return "verifier_result" in parts
