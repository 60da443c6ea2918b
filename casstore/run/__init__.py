"""``casstore run``: a taskset through Harbor into the store, every attempt run once.

Modules: :mod:`~casstore.run.credentials` (the agent configuration checks),
:mod:`~casstore.run.config` (the options and Harbor's JobConfig), :mod:`~casstore.run.source`
(SOURCE → tasks with content digests), :mod:`~casstore.run.identity` (the options, agent and
task digests; the stamp), :mod:`~casstore.run.plan` (the job directory's cache state, Harbor's
resume), :mod:`~casstore.run.cache` (the trial cache in the store), :mod:`~casstore.run.lock`
(one run per job name), :mod:`~casstore.run.launcher` and :mod:`~casstore.run.child` (Harbor in
its own process group), :mod:`~casstore.run.api` (:func:`~casstore.run.api.run`).
"""

__all__: list[str] = []
