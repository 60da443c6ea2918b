"""The reward table: the contract between the import (:mod:`casstore.trials`) and the scoring
engine (:mod:`scoring`), below both.

One row per attempt, NumPy columns (:mod:`~casstore.table.columns`), its file format
(:mod:`~casstore.table.npz`), the failure codes a row may carry (:mod:`~casstore.table.codes`),
label renumbering (:mod:`~casstore.table.labels`) and concatenation
(:mod:`~casstore.table.concat`).
"""
