"""A Harbor environment without Docker: each trial in a bubblewrap sandbox on this host.

Use it through Harbor's import path, ``casstore.sandbox:HostEnvironment`` (``harbor run -e
casstore.sandbox:HostEnvironment``, or ``EnvironmentConfig(import_path=...)`` in a
``JobConfig``). Importing this package imports Harbor: nothing on the CLI's start-up path
imports it. Modules: ``environment`` (the class), ``namespaces`` (bwrap and nsenter),
``commands`` (running one command), ``dockerfile`` (what of a Dockerfile is honoured),
``accounts`` (the sandbox's users).
"""

from __future__ import annotations

from casstore.sandbox.environment import HostEnvironment

__all__ = ["HostEnvironment"]
