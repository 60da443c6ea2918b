"""Python verifiers for Harbor tasks.

A task author writes ``verify()`` in Python (``tests/verifier.py``) instead of a shell test
script; :func:`~casstore.verifier.init.init_verifier` writes the ``tests/test.sh`` shim that
Harbor runs and vendors the standalone runner (:mod:`~casstore.verifier.run_verifier`,
standard library only, whose docstring is the runner's contract: arguments, reward files,
exit status) and the ``casstore_verify`` helpers (:mod:`~casstore.verifier.helpers`) under
``tests/.ng/``.
"""
