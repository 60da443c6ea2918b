"""Python verifiers for Harbor tasks.

A task author writes ``verify()`` in Python (``tests/verifier.py``) instead of a shell test
script; :func:`init_verifier` writes the ``tests/test.sh`` shim that Harbor runs and vendors
the standalone runner (``run_verifier.py``, standard library only) and the
``casstore_verify`` helpers under ``tests/.ng/``. See :mod:`casstore.verifier.run_verifier`
for the runner's contract (arguments, reward files, exit status).
"""

from __future__ import annotations

from casstore.verifier.init import (
    DEFAULT_VERIFIER,
    HELPERS_SOURCE,
    RUNNER_SOURCE,
    SHIM_MARKER,
    VENDOR_DIR,
    init_verifier,
    render_shim,
)

__all__ = [
    "DEFAULT_VERIFIER",
    "HELPERS_SOURCE",
    "RUNNER_SOURCE",
    "SHIM_MARKER",
    "VENDOR_DIR",
    "init_verifier",
    "render_shim",
]
