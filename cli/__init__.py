"""The ``casstore`` command line: one module per command, assembled in :mod:`cli.main`."""
