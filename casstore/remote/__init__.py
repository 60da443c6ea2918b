"""Remote stores on S3-compatible object storage (README, "Remotes").

A remote holds a store's content-addressed objects (task archives at their archive
references, revision records, job snapshots and their values: the bytes the local store keeps
for each) and a few mutable refs (a name → its history, the last entry the latest revision),
laid out as :mod:`casstore.remote.objects` says. ``push`` puts the missing objects
create-only, then moves the refs by conditional writes (:mod:`casstore.remote.push`,
:mod:`casstore.remote.refs`); ``pull``, ``checkout NAME:REF``, ``rescore NAME:JOB``, ``ls
--remote`` and ``fsck --remote`` read every object checked before use. The client is
obstore's (:mod:`casstore.remote.client`); the functions of the commands are in
:mod:`casstore.remote.api`.
"""

__all__: list[str] = []
