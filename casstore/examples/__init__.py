"""Example data written by casstore's own code: a small task suite and a Harbor job tree
(for ``casstore demo``, the tests and the benchmarks)."""
