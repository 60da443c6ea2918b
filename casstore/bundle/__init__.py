"""Run bundles: a scored run kept as a directory that stands on its own (README, "Bundles").

A bundle holds ``samples.jsonl`` (one object per attempt: :mod:`casstore.bundle.samples`; written by
:mod:`casstore.bundle.lines`, read back into the table by :mod:`casstore.bundle.table`),
``summary.json`` (the rescore report, the scoring definition and provenance:
:mod:`casstore.bundle.summary`), copies of the ``metric.py`` scripts it was scored with, and
``manifest.json`` (every file with its SHA-256: :mod:`casstore.bundle.files`). It is written
atomically (:mod:`casstore.bundle.write`), checked and read back into the reward table it came
from (:mod:`casstore.bundle.read`: ``casstore rescore DIR`` scores a bundle as any SOURCE), and
exported for GAGE (:mod:`casstore.bundle.gage`).

Layer: below :mod:`casstore.sources` (which reads bundles as sources); it uses base,
archive, table, trials and scoring.
"""

from casstore.bundle.files import Manifest, check_destination, verify_files
from casstore.bundle.read import Bundle, is_bundle, open_bundle
from casstore.bundle.samples import Details, Sample
from casstore.bundle.summary import Scoring, taskset_pins
from casstore.bundle.table import canonical
from casstore.bundle.write import write_bundle

__all__ = [
    "Bundle",
    "Details",
    "Manifest",
    "Sample",
    "Scoring",
    "canonical",
    "check_destination",
    "is_bundle",
    "open_bundle",
    "taskset_pins",
    "verify_files",
    "write_bundle",
]
