"""The defaults of the scoring options, without NumPy: the command line reads them when it
starts (README, "Start-up"), before it knows whether scoring will run at all."""

from __future__ import annotations

__all__ = [
    "DEFAULT_GROUP_BY",
    "DEFAULT_METRIC_TIMEOUT",
    "GROUP_FIELDS",
    "ORIGIN_FIELDS",
    "STATUS_HELP",
    "STATUS_MEANINGS",
]

ORIGIN_FIELDS = ("job", "source")
"""The group fields a reward table's rows do not carry: where each trial came from, given
beside the table (:data:`scoring._cells.Origins`): ``job`` the job's name (an imported job's
registered name, a job directory's name; its id when two jobs share one), ``source`` the
SOURCE argument of ``rescore`` as given."""
GROUP_FIELDS = ("agent", "model", "dataset", *ORIGIN_FIELDS)
"""The fields trials can be grouped by."""
DEFAULT_GROUP_BY: tuple[str, ...] = ("agent", "model", "dataset")
DEFAULT_METRIC_TIMEOUT = 60.0
"""Seconds a metric.py may run before its process group is killed."""

STATUS_MEANINGS: dict[str, str] = {
    "scored": "no exception, a verifier result: its primary reward (0.0 and a diagnostic when "
    "missing, Boolean or not finite)",
    "partial": "an exception, but a usable primary reward: kept",
    "errored": "an exception and no usable primary reward: 0.0",
    "no_verifier": "no exception, no verifier result: 0.0",
    "invalid": "a reward mapping Harbor's model refuses: skipped",
    "harbor_errors": "attempts with an exception recorded (Harbor's n_errors), whatever their "
    "status: partial + errored + the invalid ones with an exception",
}
"""What each count of a breakdown (``rescore``'s and ``import``'s ``counts``) means: the
statuses, exclusive (:mod:`scoring._rules`), then ``harbor_errors``; ``--help`` and the README
say the same."""

STATUS_HELP = "Counts, one status per attempt (then Harbor's own count):\n\n" + "\n".join(
    f"{name}: {meaning}." for name, meaning in STATUS_MEANINGS.items()
)
"""The paragraph ``import --help`` and ``rescore --help`` end with."""
