"""Paired comparison of two runs over the same tasks (``casstore compare A B``; issue 14).

:func:`casstore.comparison.api.compare` loads each side through :mod:`casstore.sources` (an
imported job, a job directory, a ``trials.jsonl``), scores it with :mod:`scoring` and pairs
the per-task means (:mod:`casstore.comparison.pairing`); the statistics are scoring's kernels
(:mod:`scoring._paired`, :mod:`scoring._mcnemar`, :mod:`scoring._bootstrap`).
"""

from __future__ import annotations

__all__: list[str] = []
