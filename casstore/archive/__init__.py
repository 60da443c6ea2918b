"""The archive layer: Harbor task directories to deterministic archives and back.

Discover tasks (:mod:`~casstore.archive.discover`), scan a tree (:mod:`~.scan`), pack it
(:mod:`~.pack`: tar format :mod:`~.tarformat`, compression :mod:`~.compress`), read, verify
and extract an archive (:mod:`~.read`, :mod:`~.tarstream`, :mod:`~.extract`), under the rules
of links (:mod:`~.links`), the task layout (:mod:`~.layout`) and limits (:mod:`~.limits`).
Below it: :mod:`casstore.errors`, :mod:`casstore.digest`, :mod:`casstore.names`.
"""
